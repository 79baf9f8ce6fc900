//! `bulkmem bench dispatch`: what reaching a kernel costs. For each size,
//! hot buffers copied (or cleared) by the kernel `auto` runs there, called
//! through its handle; by `auto` (`bulkmem::copy`); by that kernel's
//! checked twin, through its handle; by `copy_checked`; and, where the C
//! library (`libbulkmem.so`) is found beside this command, by `bm_copy`
//! and `bm_copy_checked`. Rounds of the cells alternate, so the ratios
//! (auto over its kernel, checked over its twin and over auto, the C
//! interface over the Rust calls) are of one run, under the same spells
//! of a shared machine.

use std::ffi::{c_int, c_void, CStr};
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use bulkmem::{CheckedClearKernel, CheckedCopyKernel, ClearKernel, CopyKernel};
use bulkmem::{Hint, Op, Options, Strategy};
use bulkmem_policy::auto::Request;

use crate::arena;
use crate::cli::{check_outputs, publish, usage, with_progress, Failure, Output};
use crate::harness::{fill_pattern, interleave, Rounds};
use crate::results::Row;
use crate::size;
use bulkmem_machine::units::format_bytes;
use bulkmem_report::table::Table;

#[derive(Args)]
pub struct DispatchArgs {
    /// copy or clear.
    #[arg(long, default_value = "copy", value_parser = ["copy", "clear"])]
    op: String,
    /// Call sizes (K, M, G are powers of two).
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, default_value = "64,512,4K,64K")]
    sizes: Vec<usize>,
    /// Timed rounds per cell (the table shows medians).
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    #[command(flatten)]
    out: Output,
}

/// The cells, in the order the table shows them.
const CELLS: [&str; 6] = [
    "kernel",
    "auto",
    "checked-twin",
    "checked",
    "c-auto",
    "c-checked",
];

/// Bytes each cell moves per round: enough calls to take about a
/// millisecond at tens of GB/s.
const ROUND_BYTES: usize = 64 << 20;

type CCopy = unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> c_int;
type CClear = unsafe extern "C" fn(*mut c_void, usize) -> c_int;
type CCopyChecked = unsafe extern "C" fn(*mut c_void, *const c_void, usize, *mut c_void) -> c_int;
type CClearChecked = unsafe extern "C" fn(*mut c_void, usize, *mut c_void) -> c_int;

/// The C library's plain and checked calls, if `libbulkmem.so` is found.
struct CLibrary {
    copy: CCopy,
    clear: CClear,
    copy_checked: CCopyChecked,
    clear_checked: CClearChecked,
    path: PathBuf,
}

/// `libbulkmem.so.0` or `libbulkmem.so` beside this command (cargo puts
/// the C library there), opened; `None` if neither is.
fn c_library() -> Option<CLibrary> {
    let exe = std::env::current_exe().ok()?;
    let path = ["libbulkmem.so.0", "libbulkmem.so"]
        .iter()
        .map(|n| exe.with_file_name(n))
        .find(|p| p.is_file())?;
    let name = std::ffi::CString::new(path.to_str()?).ok()?;
    // SAFETY: a NUL-terminated path; the library's constructors are
    // bulkmem's own. Never closed: its functions are kept.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return None;
    }
    let sym = |s: &CStr| {
        // SAFETY: a handle dlopen returned and a NUL-terminated name.
        let p = unsafe { libc::dlsym(h, s.as_ptr()) };
        (!p.is_null()).then_some(p)
    };
    // SAFETY: bulkmem.h's signatures for these names.
    unsafe {
        Some(CLibrary {
            copy: std::mem::transmute::<*mut c_void, CCopy>(sym(c"bm_copy")?),
            clear: std::mem::transmute::<*mut c_void, CClear>(sym(c"bm_clear")?),
            copy_checked: std::mem::transmute::<*mut c_void, CCopyChecked>(sym(
                c"bm_copy_checked",
            )?),
            clear_checked: std::mem::transmute::<*mut c_void, CClearChecked>(sym(
                c"bm_clear_checked",
            )?),
            path,
        })
    }
}

/// One size's routines, resolved once.
struct Routines {
    kernel: Strategy,
    copy: CopyKernel,
    clear: ClearKernel,
    checked_copy: CheckedCopyKernel,
    checked_clear: CheckedClearKernel,
}

impl Routines {
    fn new(op: Op, size: usize) -> Result<Routines, String> {
        let req = Request::single(op, size, Hint::Auto);
        let kernel =
            bulkmem_policy::auto::resolve(Options::default(), &req).map_err(|e| e.to_string())?;
        let twin = bulkmem_policy::auto::chosen_twin(&req).strategy();
        let named = |s| {
            bulkmem_policy::auto::resolve(Options::strategy(s), &req).map_err(|e| e.to_string())
        };
        let copy_k = if op == Op::Copy {
            kernel
        } else {
            named(Strategy::PerPage)?
        };
        let clear_k = if op == Op::Clear {
            kernel
        } else {
            named(Strategy::PerPage)?
        };
        let copy_t = if op == Op::Copy {
            twin
        } else {
            Strategy::PerPage
        };
        let clear_t = if op == Op::Clear {
            twin
        } else {
            Strategy::PerPage
        };
        Ok(Routines {
            kernel,
            copy: CopyKernel::new(copy_k).map_err(|e| e.to_string())?,
            clear: ClearKernel::new(clear_k).map_err(|e| e.to_string())?,
            checked_copy: CheckedCopyKernel::new(copy_t).map_err(|e| e.to_string())?,
            checked_clear: CheckedClearKernel::new(clear_t).map_err(|e| e.to_string())?,
        })
    }
}

/// `reps` calls of cell `cell` on `dst` (from `src`); an error if one
/// faults, fails or cannot run here (no C library).
fn run(
    op: Op,
    cell: usize,
    r: &Routines,
    c: Option<&CLibrary>,
    dst: &mut [u8],
    src: &[u8],
    reps: usize,
) -> Result<(), String> {
    let (d, s, n) = (
        dst.as_mut_ptr().cast::<c_void>(),
        src.as_ptr().cast::<c_void>(),
        dst.len(),
    );
    let fault = "a fault in a benchmark's own buffers";
    match (op, cell) {
        (Op::Copy, 0) => (0..reps).for_each(|_| r.copy.copy(dst, src)),
        (Op::Clear, 0) => (0..reps).for_each(|_| r.clear.clear(dst)),
        (Op::Copy, 1) => (0..reps).for_each(|_| bulkmem::copy(dst, src)),
        (Op::Clear, 1) => (0..reps).for_each(|_| bulkmem::clear(dst)),
        (Op::Copy, 2) => {
            for _ in 0..reps {
                r.checked_copy.copy(dst, src).map_err(|_| fault)?;
            }
        }
        (Op::Clear, 2) => {
            for _ in 0..reps {
                r.checked_clear.clear(dst).map_err(|_| fault)?;
            }
        }
        (Op::Copy, 3) => {
            for _ in 0..reps {
                bulkmem::fault::copy_checked(dst, src).map_err(|_| fault)?;
            }
        }
        (Op::Clear, 3) => {
            for _ in 0..reps {
                bulkmem::fault::clear_checked(dst).map_err(|_| fault)?;
            }
        }
        (_, 4 | 5) => {
            let c = c.ok_or("no C library")?;
            for _ in 0..reps {
                // SAFETY: bulkmem.h's contracts: valid, disjoint buffers of
                // `n` bytes; a NULL fault report is allowed.
                let rc = unsafe {
                    match (op, cell) {
                        (Op::Copy, 4) => (c.copy)(d, s, n),
                        (Op::Clear, 4) => (c.clear)(d, n),
                        (Op::Copy, _) => (c.copy_checked)(d, s, n, std::ptr::null_mut()),
                        (Op::Clear, _) => (c.clear_checked)(d, n, std::ptr::null_mut()),
                    }
                };
                if rc != 0 {
                    return Err(format!("the C library's {} returned {rc}", CELLS[cell]));
                }
            }
        }
        _ => unreachable!("cell {cell}"),
    }
    Ok(())
}

pub fn cmd(a: DispatchArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), None)?;
    let op = if a.op == "copy" { Op::Copy } else { Op::Clear };
    if let Some(&big) = a.sizes.iter().find(|&&s| s == 0 || s > 1 << 30) {
        return Err(usage(format!(
            "--sizes: {big} bytes is not between 1 and 1G"
        )));
    }
    let c = c_library();
    let cells = if c.is_some() { CELLS.len() } else { 4 };
    let rounds = Rounds {
        runs: a.runs as usize,
        warmup: 1,
    };
    let rows = with_progress(quiet, a.sizes.len(), |progress| {
        let mut rows = Vec::new();
        for (k, &size) in a.sizes.iter().enumerate() {
            progress(
                k,
                a.sizes.len(),
                &format!("{} {}", a.op, format_bytes(size)),
            );
            let r = Routines::new(op, size)?;
            let mut src = arena::prefaulted(size, false, 0).map_err(|e| e.to_string())?;
            fill_pattern(src.as_mut_slice());
            let mut dst = arena::prefaulted(size, false, 0xa5).map_err(|e| e.to_string())?;
            // `reps` calls of `cell`, checked: GB/s and the time taken.
            let mut measure = |cell: usize, reps: usize| {
                let t = Instant::now();
                run(
                    op,
                    cell,
                    &r,
                    c.as_ref(),
                    dst.as_mut_slice(),
                    src.as_slice(),
                    reps,
                )?;
                let took = t.elapsed();
                let ok = match op {
                    Op::Copy => dst.as_slice() == src.as_slice(),
                    Op::Clear => dst.as_slice().iter().all(|&b| b == 0),
                };
                if !ok {
                    return Err(format!("{} of {size} bytes: wrong result", CELLS[cell]));
                }
                let gbps = (reps * size) as f64 / took.as_secs_f64().max(1e-9) / 1e9;
                Ok((gbps, took))
            };
            // Each round of a cell lasts at least `MIN_RUN` (10 ms): a 64 B
            // cell's 1 M calls took 2 ms, and one timer tick or neighbour
            // in that moved auto/kernel between 0.82x and 1.00x.
            let mut reps = (ROUND_BYTES / size).max(1);
            let (_, probe) = measure(0, reps)?;
            reps = bulkmem_calibrate::toolkit::reps_lasting(
                reps,
                probe,
                bulkmem_calibrate::toolkit::MIN_RUN,
            );
            let stats = interleave(cells, rounds, |cell| measure(cell, reps).map(|m| m.0))?;
            for (cell, s) in stats.into_iter().enumerate() {
                rows.push(Row {
                    op: if op == Op::Copy { "copy" } else { "clear" },
                    strategy: CELLS[cell].to_string(),
                    chose: r.kernel.name().to_string(),
                    hint: None,
                    size,
                    total: size,
                    regime: "hot",
                    threads: 1,
                    runs: rounds.runs,
                    gbps: s,
                    ..Default::default()
                });
            }
        }
        progress(a.sizes.len(), a.sizes.len(), "done");
        crate::results::add_speedups_over(&mut rows, "kernel");
        Ok(rows)
    })?;
    let mut t = table(op, &a.sizes, &rows);
    match &c {
        Some(c) => t.notes.push(format!("C interface: {}", c.path.display())),
        None => t.notes.push(
            "no C interface rows: libbulkmem.so is not beside this command \
             (`cargo build --release -p bulkmem-capi` puts it there)"
                .into(),
        ),
    }
    publish(&a.out, &[t], &rows, None)
}

/// One line per size: the kernel auto runs there, GB/s of it and of auto
/// and checked, and the ratios of one run.
fn table(op: Op, sizes: &[usize], rows: &[Row]) -> Table {
    let name = if op == Op::Copy { "copy" } else { "clear" };
    let mut t = Table::new(
        format!(
            "dispatch, {name}, hot (same buffers every call; 1 thread): GB/s medians, and \
             the median of each round's ratio, rounds of every cell interleaved"
        ),
        [
            "size",
            "kernel",
            "GB/s",
            "auto",
            "auto/kernel",
            "checked",
            "checked/twin",
            "checked/auto",
            "C/auto",
            "C checked/checked",
        ]
        .map(String::from)
        .to_vec(),
    );
    for &size in sizes {
        let cell = |name: &str| rows.iter().find(|r| r.size == size && r.strategy == name);
        let med = |name: &str| cell(name).map(|r| r.gbps.median);
        // Paired by round: a slow spell slows both cells of a round alike.
        let ratio = |a: &str, b: &str| {
            match (cell(a), cell(b)) {
                (Some(a), Some(b)) => {
                    bulkmem_calibrate::toolkit::paired_ratio(&a.gbps.samples, &b.gbps.samples)
                }
                _ => None,
            }
            .map_or("-".to_string(), |x| format!("{x:.2}x"))
        };
        let gbps = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.1}"));
        let kernel = rows
            .iter()
            .find(|r| r.size == size)
            .map_or(String::new(), |r| r.chose.clone());
        t.row(vec![
            format_bytes(size),
            kernel,
            gbps(med("kernel")),
            gbps(med("auto")),
            ratio("auto", "kernel"),
            gbps(med("checked")),
            ratio("checked", "checked-twin"),
            ratio("checked", "auto"),
            ratio("c-auto", "auto"),
            ratio("c-checked", "checked"),
        ]);
    }
    t.notes.push(
        "kernel: the kernel auto runs at that size, called through its handle; checked/twin: \
         copy_checked over that kernel's checked twin called through its handle"
            .into(),
    );
    t
}
