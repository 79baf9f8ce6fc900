//! `bulkmem migrate`: move a range of a process's pages to a node with
//! move_pages(2), or `--self-test`: move a region of this process to a
//! node and back with both of bulkmem's paths, checking every page.

use std::fmt::Write as _;
use std::time::Instant;

use bulkmem::numa::{self, CopyOptions, MigrateOptions, MigrateReport, Nodes};

use crate::bench_move::{Map, PageKind};
use crate::size::fmt_size;

/// `ADDR-ADDR` in hex (`0x` optional), page-aligned, non-empty.
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
    Ok((a, b - a))
}

/// `--to`: one node, in numactl's syntax.
pub fn parse_target(s: &str, nodes: &Nodes) -> Result<usize, String> {
    let list = numa::parse_nodes(s, nodes).map_err(|e| e.to_string())?;
    match list.as_slice() {
        [one] => Ok(*one),
        _ => Err(format!("--to {s:?} names {} nodes; give one", list.len())),
    }
}

pub fn describe(r: &MigrateReport) -> String {
    let mut out = format!(
        "{} pages: {} moved to node {}, {} already there, {} not present, {} failed ({} system calls, {} retry rounds{})\n",
        r.status.len(),
        r.moved,
        r.to,
        r.already,
        r.not_present,
        r.failed.len(),
        r.syscalls,
        r.retries,
        if r.move_all { ", MPOL_MF_MOVE_ALL" } else { "" }
    );
    for (addr, errno) in r.failed.iter().take(8) {
        let _ = writeln!(
            out,
            "  {addr:#x}: {}",
            std::io::Error::from_raw_os_error(*errno)
        );
    }
    if r.failed.len() > 8 {
        let _ = writeln!(out, "  ... and {} more", r.failed.len() - 8);
    }
    out
}

/// move_pages on process `pid`.
pub fn migrate_pid(pid: i32, addr: usize, len: usize, to: usize) -> Result<(String, bool), String> {
    let opts = MigrateOptions {
        pid,
        ..Default::default()
    };
    let r = numa::migrate(addr, len, to, opts).map_err(|e| e.to_string())?;
    Ok((describe(&r), r.is_complete()))
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
        let map = Map::new(size, kind)?;
        map.populate();
        numa::migrate(map.base as usize, size, home, MigrateOptions::default())
            .map_err(|e| e.to_string())?;
        {
            for path in ["move_pages", "copy-remap"] {
                for dest in [to, home] {
                    let t = Instant::now();
                    let what = if path == "move_pages" {
                        let r =
                            numa::migrate(map.base as usize, size, dest, MigrateOptions::default())
                                .map_err(|e| e.to_string())?;
                        if !r.is_complete() {
                            return Err(describe(&r));
                        }
                        format!("{} moved, {} already there", r.moved, r.already)
                    } else {
                        let opts = CopyOptions {
                            threads: Some(2),
                            ..Default::default()
                        };
                        // SAFETY: our own region, untouched by anyone else.
                        let r = unsafe { numa::migrate_by_copy(map.base, size, dest, opts) }
                            .map_err(|e| e.to_string())?;
                        format!("copied on CPUs {:?} with {}", r.cpus, r.strategy)
                    };
                    let secs = t.elapsed().as_secs_f64();
                    let on = numa::node_of_pages(0, map.base as usize, size)
                        .map_err(|e| e.to_string())?;
                    let right = on.iter().filter(|&&n| n == dest as i32).count();
                    map.check()
                        .map_err(|p| format!("{path}: page {p} changed"))?;
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
    let _ = writeln!(out, "self-test passed ({} per move)", fmt_size(size));
    Ok(out)
}
