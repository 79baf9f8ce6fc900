//! `bulkmem run -- CMD` (an unmodified program under the preload library)
//! and `bulkmem bench preload` (the same workloads with and without it,
//! each in a child process).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use crate::harness::{interleave, Rounds};
use crate::results::{pivot, Pivot, Row};
use bulkmem_report::stats::Stats;
use bulkmem_report::table::Table;

/// Where `libbulkmem_preload.so` is: `$BULKMEM_PRELOAD_LIB`, else beside the
/// `bulkmem` binary (cargo puts both in target/release), else where
/// scripts/install puts it relative to the binary (BINDIR/../LIBDIR/bulkmem,
/// for the usual LIBDIRs; nothing records where it went).
pub fn library() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("BULKMEM_PRELOAD_LIB") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("BULKMEM_PRELOAD_LIB={} is not a file", p.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let name = "libbulkmem_preload.so";
    let mut tried = vec![exe.with_file_name(name)];
    if let Some(prefix) = exe.parent().and_then(|bin| bin.parent()) {
        let multiarch = format!("lib/{}-linux-gnu", std::env::consts::ARCH);
        for lib in ["lib", "lib64", &multiarch] {
            tried.push(prefix.join(lib).join("bulkmem").join(name));
        }
    }
    if let Some(p) = tried.iter().find(|p| p.is_file()) {
        return Ok(p.clone());
    }
    let list: Vec<String> = tried.iter().map(|p| format!("  {}", p.display())).collect();
    Err(format!(
        "cannot find {name}; looked in:\n{}\n\
         install it beside this command with scripts/install --prefix DIR from a bulkmem \
         checkout (cargo install installs the command alone), build it there with \
         `cargo build --release`, or set BULKMEM_PRELOAD_LIB=/path/to/{name}",
        list.join("\n")
    ))
}

/// `LD_PRELOAD` with the library in front of what is already there.
pub fn ld_preload(lib: &std::path::Path) -> OsString {
    let mut v = OsString::from(lib);
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        v.push(":");
        v.push(old);
    }
    v
}

type MemcpyFn =
    unsafe extern "C" fn(*mut libc::c_void, *const libc::c_void, usize) -> *mut libc::c_void;
type MemsetFn = unsafe extern "C" fn(*mut libc::c_void, libc::c_int, usize) -> *mut libc::c_void;

/// The C library's own definition of `name` (not an interposer's), if the
/// C library is `libc.so.6`.
fn c_library_fn(name: &std::ffi::CStr) -> Option<*mut libc::c_void> {
    // SAFETY: NUL-terminated names; RTLD_NOLOAD only looks for a library
    // already loaded, and the handle is only used for dlsym.
    let p = unsafe {
        let h = libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        if h.is_null() {
            return None;
        }
        libc::dlsym(h, name.as_ptr())
    };
    (!p.is_null()).then_some(p)
}

/// The child side of `bench preload`: runs one workload through the C
/// library's `memcpy` (interposed when preloaded) and prints `seconds
/// bytes`; the small ones then the same for the C library's own function,
/// in alternating rounds.
pub fn workload(kind: &str, size: usize) -> Result<(), String> {
    // A call through a pointer the compiler cannot see through: a real
    // call of the (possibly interposed) C function, never inlined.
    let memcpy: MemcpyFn = std::hint::black_box(libc::memcpy);
    if let Some(w) = SMALL.iter().find(|w| w.name == kind) {
        return small(w);
    }
    match kind {
        "copy" | "fresh" => {
            let src = vec![0x5au8; size];
            let mut dst = if kind == "copy" {
                vec![0xa5u8; size]
            } else {
                Vec::with_capacity(size)
            };
            let t = Instant::now();
            // SAFETY: both buffers hold `size` bytes (dst's capacity for
            // "fresh": the copy initialises it), and they are distinct.
            unsafe {
                memcpy(dst.as_mut_ptr().cast(), src.as_ptr().cast(), size);
                dst.set_len(size);
            }
            let dt = t.elapsed().as_secs_f64();
            if dst[size / 2] != 0x5a || dst[size - 1] != 0x5a {
                return Err("the copy is wrong".into());
            }
            crate::out::print(&format!("{dt} {size}\n")).map_err(|f| f.msg)?;
        }
        _ => return Err(format!("unknown workload {kind}")),
    }
    Ok(())
}

/// One workload of many calls, paired with the C library's own function
/// in the same process: lengths uniform in `lo..=hi` (or, `octaves`, one
/// of the powers of two from `lo` to `hi`), `calls` of them in
/// [`SMALL_ROUNDS`] rounds (about 0.3 s in all), `memcpy` or `memset`,
/// under the preload settings `env`.
struct Small {
    name: &'static str,
    lo: usize,
    hi: usize,
    octaves: bool,
    calls: usize,
    set: bool,
    env: &'static [(&'static str, &'static str)],
}

const SMALL: [Small; 5] = [
    Small {
        name: "small-8-64",
        lo: 8,
        hi: 64,
        octaves: false,
        calls: 50_000_000,
        set: false,
        env: &[],
    },
    Small {
        name: "small-64-512",
        lo: 64,
        hi: 512,
        octaves: false,
        calls: 20_000_000,
        set: false,
        env: &[],
    },
    Small {
        name: "small-512-4K",
        lo: 512,
        hi: 4096,
        octaves: false,
        calls: 5_000_000,
        set: false,
        env: &[],
    },
    Small {
        name: "set-8-512",
        lo: 8,
        hi: 512,
        octaves: false,
        calls: 20_000_000,
        set: true,
        env: &[],
    },
    // A moving collector's relocations (ZGC's: 64 KiB pages and larger
    // objects), with the thresholds a user lowers to reach them: every
    // call through bulkmem, helpers allowed from 64 KiB.
    Small {
        name: "stream-64K-4M",
        lo: 64 << 10,
        hi: 4 << 20,
        octaves: true,
        calls: 2_500,
        set: false,
        env: &[
            ("BULKMEM_PRELOAD_MIN", "64K"),
            ("BULKMEM_PRELOAD_MT_MIN", "64K"),
        ],
    },
];

const SMALL_ROUNDS: usize = 5;

/// Runs `w`: rounds of the function as the program links it (the
/// preload's, when preloaded) alternate with rounds of the C library's
/// own, called directly, so the two are compared in the same process and
/// the same spells of a shared machine; prints the fastest round of each
/// (a spell of another process on this CPU lands in one round, not in the
/// result) as `seconds bytes seconds bytes`.
fn small(w: &Small) -> Result<(), String> {
    let room = w.hi + (64 << 10);
    let (src, mut dst) = (vec![1u8; room], vec![0u8; room]);
    let linked: [*mut libc::c_void; 2] = if w.set {
        [
            libc::memset as MemsetFn as *mut _,
            c_library_fn(c"memset").unwrap_or(libc::memset as MemsetFn as *mut _),
        ]
    } else {
        [
            libc::memcpy as MemcpyFn as *mut _,
            c_library_fn(c"memcpy").unwrap_or(libc::memcpy as MemcpyFn as *mut _),
        ]
    };
    let mut best = [f64::MAX; 2];
    let mut bytes = 0usize;
    for round in 0..2 * SMALL_ROUNDS {
        let f = std::hint::black_box(linked[round % 2]);
        // SAFETY: the C library's function (or its interposer) of the
        // signature `w.set` says.
        let (copy, set) = unsafe {
            (
                std::mem::transmute::<*mut libc::c_void, MemcpyFn>(f),
                std::mem::transmute::<*mut libc::c_void, MemsetFn>(f),
            )
        };
        let mut x: u32 = 0x9e37_79b9;
        bytes = 0;
        let t = Instant::now();
        for i in 0..w.calls / SMALL_ROUNDS {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let n = if w.octaves {
                let octaves = (w.hi / w.lo).ilog2() + 1;
                w.lo << (x % octaves)
            } else {
                w.lo + (x as usize % (w.hi - w.lo + 1))
            };
            // Every alignment modulo 64 in turn, as a program's copies of
            // fields and strings have.
            let off = (i * 67) % (60 << 10);
            let d = dst.as_mut_ptr().wrapping_add(off).cast();
            // SAFETY: off + n <= 60K + hi < room in both buffers; `copy`
            // and `set` are the same function, called by its signature.
            unsafe {
                if w.set {
                    set(d, 0x5a, n);
                } else {
                    copy(d, src.as_ptr().add(off).cast(), n);
                }
            }
            bytes += n;
        }
        let dt = t.elapsed().as_secs_f64();
        best[round % 2] = best[round % 2].min(dt);
    }
    std::hint::black_box(&dst);
    crate::out::print(&format!("{} {bytes} {} {bytes}\n", best[0], best[1])).map_err(|f| f.msg)
}

/// One workload of `bench preload`: how to start it, and its name.
struct Work {
    name: &'static str,
    cmd: Vec<OsString>,
    size: usize,
    /// Preload settings the workload runs under.
    env: &'static [(&'static str, &'static str)],
}

/// A python3 to measure `bytes(bytearray(N))` with, if there is one
/// (asked once: it starts a process).
fn python() -> Option<&'static PathBuf> {
    static PY: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    PY.get_or_init(|| {
        let o = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()?;
        let p = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        (o.status.success() && p.is_file()).then_some(p)
    })
    .as_ref()
}

/// Progress units of [`bench()`]: one child process each.
pub fn units(runs: usize) -> usize {
    (2 + SMALL.len() + usize::from(python().is_some())) * runs * 2
}

/// Runs each workload `runs` times without and with the preload,
/// interleaved, in child processes; rows `op: preload`, `strategy: off|on`,
/// `regime`: the workload, GB/s from the child's own timing.
pub fn bench(
    size: usize,
    rounds: Rounds,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<Row>, String> {
    let lib = library()?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let me = |kind: &str, n: usize| -> Vec<OsString> {
        vec![
            exe.clone().into(),
            "preload-workload".into(),
            kind.into(),
            n.to_string().into(),
        ]
    };
    let mut works = vec![
        Work {
            name: "copy",
            cmd: me("copy", size),
            size,
            env: &[],
        },
        Work {
            name: "fresh",
            cmd: me("fresh", size),
            size,
            env: &[],
        },
    ];
    works.extend(SMALL.iter().map(|w| Work {
        name: w.name,
        cmd: me(w.name, 64 << 10),
        size: 64 << 10,
        env: w.env,
    }));
    if let Some(py) = python() {
        let script = format!(
            "import time\nb = bytearray({size})\nb[::4096] = b'\\x01' * len(b[::4096])\n\
             t = time.perf_counter(); x = bytes(b); dt = time.perf_counter() - t\nprint(dt, {size})"
        );
        works.push(Work {
            name: "python-bytes",
            cmd: vec![py.into(), "-c".into(), script.into()],
            size,
            env: &[],
        });
    }
    let of = works.len() * (rounds.runs + rounds.warmup) * 2;
    let mut done = 0;
    let mut rows = Vec::new();
    for w in &works {
        // Per setting, each child's calls over the C library's own
        // (small workloads).
        let mut paired: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        // Cell 0 without the preload, cell 1 with it, interleaved.
        let stats = interleave(2, rounds, |i| {
            let on = i == 1;
            progress(
                done,
                of,
                &format!("preload {} {}", w.name, if on { "on" } else { "off" }),
            );
            let mut c = Command::new(&w.cmd[0]);
            c.args(&w.cmd[1..])
                .env_remove("BULKMEM_PRELOAD_STATS")
                .envs(w.env.iter().copied());
            if on {
                c.env("LD_PRELOAD", ld_preload(&lib));
            } else {
                c.env_remove("LD_PRELOAD");
            }
            let o = c
                .output()
                .map_err(|e| format!("cannot run the {} workload: {e}", w.name))?;
            let out = String::from_utf8_lossy(&o.stdout);
            if !o.status.success() {
                return Err(format!(
                    "the {} workload failed ({}): {}{}",
                    w.name,
                    o.status,
                    out,
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
            let f: Vec<f64> = out
                .split_whitespace()
                .map(|x| x.parse::<f64>())
                .collect::<Result<_, _>>()
                .map_err(|_| format!("the {} workload printed {out:?}", w.name))?;
            let gbps = |k: usize| f[k + 1] / f[k].max(1e-9) / 1e9;
            match f.len() {
                2 => {}
                4 => paired[i].push(gbps(0) / gbps(2)),
                _ => return Err(format!("the {} workload printed {out:?}", w.name)),
            }
            done += 1;
            Ok(gbps(0))
        })?;
        for (i, name) in ["off", "on"].into_iter().enumerate() {
            rows.push(Row {
                op: "preload",
                strategy: name.to_string(),
                chose: name.to_string(),
                hint: None,
                size: w.size,
                total: w.size,
                regime: w.name,
                threads: 1,
                runs: rounds.runs,
                gbps: stats[i].clone(),
                over_c_library: Stats::of(&paired[i]),
                ..Default::default()
            });
        }
    }
    progress(done, of, "done");
    crate::results::add_speedups_over(&mut rows, "off");
    Ok(rows)
}

/// The table: one line per workload, off and on side by side, and for
/// the small workloads the calls over the C library's own in the same
/// process.
pub fn table(rows: &[Row]) -> Vec<Table> {
    let mut t = pivot(
        rows,
        Pivot {
            title: "preload: unmodified workloads in child processes, without and with libbulkmem_preload.so: GB/s median±stdev; x = on over off".into(),
            corner: "workload",
            row: &|r| Some(r.regime.to_string()),
            col: &|r| r.strategy.clone(),
            baseline: "off",
        },
    );
    let paired: Vec<&Row> = rows
        .iter()
        .filter(|r| r.strategy == "on" && r.over_c_library.is_some())
        .collect();
    if paired.is_empty() {
        return vec![t];
    }
    t.notes.push(
        "small-*, set-*: each child alternates rounds of its memcpy (memset) calls with rounds \
         of the same calls to the C library's own function, and keeps the fastest round of each"
            .into(),
    );
    let mut same = Table::new(
        "preload, small calls: the preloaded program's memcpy (memset) over the C library's own, \
         in the same child process: median [min, max] over the children"
            .to_string(),
        vec!["workload".into(), "on / C library".into()],
    );
    for r in paired {
        let s = r.over_c_library.as_ref().expect("filtered above");
        same.row(vec![
            r.regime.to_string(),
            format!("{:.3}x [{:.3}, {:.3}]", s.median, s.min, s.max),
        ]);
    }
    vec![t, same]
}

/// A trivial program to time process start-up with: `/bin/true`, else
/// `true` as `PATH` finds it.
fn trivial_program() -> OsString {
    let p = std::path::Path::new("/bin/true");
    if p.is_file() {
        p.into()
    } else {
        "true".into()
    }
}

/// One start-up cell: median microseconds per exec off and on.
#[derive(Clone, Debug)]
pub struct Startup {
    /// What was started.
    pub what: String,
    /// Execs per setting.
    pub execs: usize,
    /// Microseconds per exec without the preload, and with it.
    pub off: Stats,
    pub on: Stats,
}

impl Startup {
    /// Median on over median off: what the preload adds to an exec.
    pub fn ratio(&self) -> f64 {
        self.on.median / self.off.median.max(1e-9)
    }
}

/// Starts `execs` processes of a trivial program without and with the
/// preload, interleaved (off, on, off, ...), each timed from spawn to
/// exit by the parent: what every program pays for the preload's
/// constructor before `main`.
pub fn startup(
    execs: usize,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Startup, String> {
    let lib = library()?;
    let prog = trivial_program();
    let rounds = Rounds {
        runs: execs,
        warmup: 2,
    };
    let of = 2 * (rounds.runs + rounds.warmup);
    let mut done = 0;
    let stats = interleave(2, rounds, |i| {
        let on = i == 1;
        progress(done, of, if on { "start-up on" } else { "start-up off" });
        let mut c = Command::new(&prog);
        c.env_remove("BULKMEM_PRELOAD_STATS")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        if on {
            c.env("LD_PRELOAD", ld_preload(&lib));
        } else {
            c.env_remove("LD_PRELOAD");
        }
        let t = Instant::now();
        let status = c
            .status()
            .map_err(|e| format!("cannot run {}: {e}", prog.to_string_lossy()))?;
        let us = t.elapsed().as_secs_f64() * 1e6;
        if !status.success() {
            return Err(format!("{} failed ({status})", prog.to_string_lossy()));
        }
        done += 1;
        Ok(us)
    })?;
    let [off, on]: [Stats; 2] = stats
        .try_into()
        .map_err(|_| "start-up: two cells expected".to_string())?;
    Ok(Startup {
        what: prog.to_string_lossy().into_owned(),
        execs,
        off,
        on,
    })
}

/// The start-up table: one line, off and on per exec and their ratio.
pub fn startup_table(s: &Startup) -> Table {
    let mut t = Table::new(
        format!(
            "preload start-up: {} execs of {} each without and with libbulkmem_preload.so, \
             interleaved: microseconds per exec, median±stdev; x = on over off",
            s.execs, s.what
        ),
        vec!["program".into(), "off".into(), "on".into(), "on/off".into()],
    );
    let us = |x: &Stats| format!("{:.0}±{:.0}", x.median, x.stdev);
    t.row(vec![
        s.what.clone(),
        us(&s.off),
        us(&s.on),
        format!("{:.2}x", s.ratio()),
    ]);
    t
}

#[derive(clap::Args)]
pub struct WorkloadArgs {
    /// copy, fresh, small-8-64, small-64-512, small-512-4K, set-8-512 or
    /// stream-64K-4M.
    kind: String,
    /// Bytes of the large-copy workloads.
    #[arg(value_parser = crate::size::parse_size)]
    size: Option<usize>,
}

pub fn workload_cmd(a: WorkloadArgs) -> Result<(), crate::cli::Failure> {
    workload(&a.kind, a.size.unwrap_or(0)).map_err(crate::cli::runtime)
}
