//! `bulkmem migrate`: move a range of a process's pages to a node with
//! move_pages(2), or `--self-test`: move a region of this process to a
//! node and back with both of bulkmem's paths, checking every page.

use std::fmt::Write as _;
use std::time::Instant;

use bulkmem::numa::{self, CopyOptions, MigrateOptions, MigrateReport};

use bulkmem::topology::Nodes;

use bulkmem_bench::arena::{self as regions, PageKind};
use bulkmem_bench::cli::{check_memory, runtime, twice_the_largest, usage, Failure};
use bulkmem_bench::out;
use bulkmem_bench::size;
use bulkmem_machine::units::format_bytes;
use clap::Args;

/// The most address space one `migrate --range` covers: 1 TiB (2^28
/// pages). move_pages(2) is asked about every 4 KiB page of the range,
/// mapped or not, so a larger range is far more likely a mistake (the whole
/// address space, `1000-7ffffffff000`, is 2^35 pages) than a mapping to
/// move; a real one is moved a mapping, or a TiB, at a time.
pub const MAX_RANGE: usize = 1 << 40;

/// Address space per call of [`numa::migrate`]: its report holds a status
/// per page (and an entry per failed page), so the range is walked in
/// windows of 1 GiB (262144 pages, about 2 MiB of report at a time) and
/// only the totals are kept.
const WINDOW: usize = 1 << 30;

/// `ADDR-ADDR` in hex (`0x` optional), page-aligned, non-empty, at most
/// [`MAX_RANGE`].
pub fn parse_range(s: &str) -> Result<(usize, usize), String> {
    let (a, b) = s.split_once('-').ok_or_else(|| {
        format!("--range {s:?}: expected START-END in hex, e.g. 7f00c0000000-7f00c8000000")
    })?;
    let hex = |x: &str| {
        let x = x.trim();
        let x = x.strip_prefix("0x").unwrap_or(x);
        usize::from_str_radix(x, 16)
            .map_err(|_| format!("--range {s:?}: {x:?} is not a hex address"))
    };
    let (a, b) = (hex(a)?, hex(b)?);
    if b <= a {
        return Err(format!("--range {s:?}: the end must be above the start"));
    }
    if !a.is_multiple_of(4096) || !b.is_multiple_of(4096) {
        return Err(format!(
            "--range {s:?}: both ends must be page-aligned (multiples of 0x1000)"
        ));
    }
    if b - a > MAX_RANGE {
        return Err(format!(
            "--range {s:?} covers {} of address space; migrate takes at most {} \
             (it asks about every 4 KiB page): give the range of a mapping from /proc/PID/maps",
            bulkmem_bench::preflight::approx(b - a),
            bulkmem_bench::preflight::approx(MAX_RANGE)
        ));
    }
    Ok((a, b - a))
}

/// `--to`: one node, in numactl's syntax.
pub fn parse_target(s: &str, nodes: &Nodes) -> Result<usize, String> {
    let list = bulkmem_bench::cli::parse_node_flag("--to", s, nodes)?;
    match list.as_slice() {
        [one] => Ok(*one),
        _ => Err(format!("--to {s:?} names {} nodes; give one", list.len())),
    }
}

/// `--pid`: a process that exists (signal 0 only asks). A process that
/// exists but is not ours passes: move_pages then says what is refused.
pub fn check_pid(pid: i32) -> Result<(), String> {
    if pid <= 0 {
        return Err(format!("--pid {pid}: not a process id"));
    }
    // /proc lists every process, ours or not (kill(pid, 0) would need
    // unsafe code to say the same).
    if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        return Err(format!("--pid {pid}: no such process"));
    }
    Ok(())
}

/// The totals of one or more [`MigrateReport`]s over consecutive windows,
/// with the first failed pages (the report prints no more).
#[derive(Debug)]
pub struct Totals {
    to: usize,
    pages: usize,
    moved: usize,
    already: usize,
    not_present: usize,
    failed: usize,
    first_failed: Vec<(usize, i32)>,
    syscalls: usize,
    retries: usize,
    move_all: bool,
}

/// Failed pages listed by [`describe`].
const LISTED: usize = 8;

impl Totals {
    fn new(to: usize) -> Totals {
        Totals {
            to,
            pages: 0,
            moved: 0,
            already: 0,
            not_present: 0,
            failed: 0,
            first_failed: Vec::new(),
            syscalls: 0,
            retries: 0,
            move_all: true,
        }
    }

    fn add(&mut self, r: &MigrateReport) {
        self.pages += r.status.len();
        self.moved += r.moved;
        self.already += r.already;
        self.not_present += r.not_present;
        self.failed += r.failed.len();
        let room = LISTED - self.first_failed.len();
        self.first_failed
            .extend(r.failed.iter().take(room).copied());
        self.syscalls += r.syscalls;
        self.retries += r.retries;
        self.move_all &= r.move_all;
    }

    pub fn is_complete(&self) -> bool {
        self.failed == 0
    }
}

impl From<&MigrateReport> for Totals {
    fn from(r: &MigrateReport) -> Totals {
        let mut t = Totals::new(r.to);
        t.add(r);
        t
    }
}

pub fn describe(r: &Totals) -> String {
    let mut out = format!(
        "{} pages: {} moved to node {}, {} already there, {} not present, {} failed ({} system calls, {} retry rounds{})\n",
        r.pages,
        r.moved,
        r.to,
        r.already,
        r.not_present,
        r.failed,
        r.syscalls,
        r.retries,
        if r.move_all { ", MPOL_MF_MOVE_ALL" } else { "" }
    );
    for (addr, errno) in &r.first_failed {
        let _ = writeln!(
            out,
            "  {addr:#x}: {}",
            std::io::Error::from_raw_os_error(*errno)
        );
    }
    if r.failed > r.first_failed.len() {
        let _ = writeln!(out, "  ... and {} more", r.failed - r.first_failed.len());
    }
    out
}

/// move_pages on process `pid`, [`WINDOW`] by window.
pub fn migrate_pid(pid: i32, addr: usize, len: usize, to: usize) -> Result<(String, bool), String> {
    let mut opts = MigrateOptions::default().pid(pid);
    let mut t = Totals::new(to);
    let mut off = 0;
    while off < len {
        let n = WINDOW.min(len - off);
        let r = numa::migrate(addr + off, n, to, opts).map_err(|e| {
            if off == 0 {
                e.to_string()
            } else {
                format!(
                    "{e}, at {:#x}; before it: {}",
                    addr + off,
                    describe(&t).trim_end()
                )
            }
        })?;
        // Without CAP_SYS_NICE the first window found out: not again.
        opts.move_all = r.move_all;
        t.add(&r);
        off += n;
    }
    Ok((describe(&t), t.is_complete()))
}

/// Moves a `size` region of this process to `to` and back to where it
/// was, with both paths, checking placement and contents after every move.
pub fn self_test(size: usize, to: Option<usize>) -> Result<String, String> {
    let nodes = Nodes::detect();
    let mut out = String::new();
    let home = nodes.with_memory[0];
    let to = match to {
        Some(t) => t,
        None if nodes.with_memory.len() > 1 => nodes.with_memory[1],
        None => {
            let _ = writeln!(
                out,
                "this machine has one NUMA node ({home}): there is nowhere to migrate to. \
                 Running both paths against node {home} instead (pages stay where they are)."
            );
            home
        }
    };
    for kind in [PageKind::Small, PageKind::Thp] {
        let mut map = regions::region(size, kind)?;
        regions::populate(&mut map);
        numa::migrate(map.as_ptr() as usize, size, home, MigrateOptions::default())
            .map_err(|e| e.to_string())?;
        {
            for path in ["move_pages", "copy-remap"] {
                for dest in [to, home] {
                    let t = Instant::now();
                    let what = if path == "move_pages" {
                        let r = numa::migrate(
                            map.as_ptr() as usize,
                            size,
                            dest,
                            MigrateOptions::default(),
                        )
                        .map_err(|e| e.to_string())?;
                        if !r.is_complete() {
                            return Err(describe(&Totals::from(&r)));
                        }
                        format!("{} moved, {} already there", r.moved, r.already)
                    } else {
                        let opts = CopyOptions::default().threads(2);
                        let at = map.as_mut_ptr();
                        // SAFETY: our own region, untouched by anyone else.
                        let r = unsafe { numa::migrate_by_copy(at, size, dest, opts) }
                            .map_err(|e| e.to_string())?;
                        format!("copied on CPUs {:?} with {}", r.cpus, r.strategy)
                    };
                    let secs = t.elapsed().as_secs_f64();
                    let on = numa::node_of_pages(0, map.as_ptr() as usize, size)
                        .map_err(|e| e.to_string())?;
                    let right = on.iter().filter(|&&n| n == dest as i32).count();
                    regions::check(&map).map_err(|p| format!("{path}: page {p} changed"))?;
                    let _ = writeln!(
                        out,
                        "{:<4} {path:<10} -> node {dest}: {right}/{} pages there, contents intact, {:.3} GB/s ({what})",
                        kind.name(),
                        on.len(),
                        size as f64 / secs / 1e9
                    );
                    if right != on.len() {
                        return Err(format!(
                            "{out}{path}: only {right} of {} pages reached node {dest}",
                            on.len()
                        ));
                    }
                }
            }
        }
    }
    let _ = writeln!(out, "self-test passed ({} per move)", format_bytes(size));
    Ok(out)
}

#[derive(Args)]
pub struct MigrateArgs {
    /// Target node (numactl syntax, one node: 1).
    #[arg(long)]
    to: Option<String>,
    /// Process whose pages to move (with --range).
    #[arg(long, requires = "range", conflicts_with = "self_test")]
    pid: Option<i32>,
    /// START-END in hex, page-aligned (from /proc/PID/maps), at most 1 TiB
    /// (walked 1 GiB at a time).
    #[arg(long, requires = "pid")]
    range: Option<String>,
    /// Allocate a region, move it to --to (default: the second node) and
    /// back with move_pages and with copy-and-remap, verifying each move.
    #[arg(long)]
    self_test: bool,
    /// Region size of --self-test.
    #[arg(long, value_parser = size::parse_size, allow_hyphen_values = true, default_value = "64M")]
    size: usize,
}

pub fn cmd(a: MigrateArgs) -> Result<(), Failure> {
    let nodes = bulkmem::topology::Nodes::detect();
    let to =
        a.to.as_deref()
            .map(|t| parse_target(t, &nodes))
            .transpose()
            .map_err(usage)?;
    if a.self_test {
        if a.size == 0 || !a.size.is_multiple_of(2 << 20) {
            return Err(usage("--size must be a positive multiple of 2M"));
        }
        check_memory(&[twice_the_largest(
            "--size",
            &[a.size],
            "the region and its copy on the target node",
        )])?;
        return out::print(&self_test(a.size, to).map_err(runtime)?);
    }
    let (Some(pid), Some(range)) = (a.pid, a.range.as_deref()) else {
        return Err(usage(
            "give --pid PID --range START-END --to NODE, or --self-test",
        ));
    };
    let to = to.ok_or_else(|| usage("--to NODE is required with --pid"))?;
    let (addr, len) = parse_range(range).map_err(usage)?;
    check_pid(pid).map_err(usage)?;
    let (text, complete) = migrate_pid(pid, addr, len, to).map_err(runtime)?;
    out::print(&text)?;
    if complete {
        Ok(())
    } else {
        Err(runtime("some pages were not moved (listed above)"))
    }
}
