//! `bulkmem bench migrate`: seed 000's end-to-end move_pages(2) table and
//! seed 002's multi-threaded copy, from user space. For each size and page
//! kind, a region is moved from node A to node B and back:
//!
//! * `move_pages`: `bulkmem::numa::migrate` (the kernel unmaps, copies and
//!   remaps each folio);
//! * `copy-remap`: `bulkmem::numa::migrate_by_copy` with 1..N engine
//!   threads on the target node's CPUs, then mremap.
//!
//! The region is populated on A once (untimed); each timed move is checked
//! (every page on the target node, every page's stamp intact) before its
//! number counts.

use std::time::Instant;

use bulkmem::mapping::Mapping;
use bulkmem::numa::{self, CopyOptions, MigrateOptions, Nodes};

use crate::bench_move::{self, PageKind};
use crate::report::{MigrateCell, Row};
use crate::size::fmt_size;
use crate::stats::Stats;

#[derive(Clone, Debug)]
pub struct Plan {
    pub sizes: Vec<usize>,
    pub pages: Vec<PageKind>,
    pub threads: Vec<usize>,
    pub runs: usize,
    pub a: usize,
    pub b: usize,
}

impl Plan {
    pub fn groups(&self) -> usize {
        self.sizes.len() * self.pages.len()
    }
}

/// The default size: 1 GiB (seed 000's), scaled down so the region and
/// its copy fit comfortably on the smaller node (a small guest).
pub fn default_size(nodes: &Nodes, a: usize, b: usize) -> usize {
    let free = [a, b]
        .iter()
        .filter_map(|&n| nodes.get(n))
        .map(|n| n.mem_free as usize)
        .min()
        .unwrap_or(0);
    let cap = (free / 4) / (2 << 20) * (2 << 20);
    (1usize << 30).min(cap.max(2 << 20))
}

/// Where every page is, or the first one that is not on `node`.
fn check_on(map: &Mapping, node: usize) -> Result<(), String> {
    let where_ =
        numa::node_of_pages(0, map.as_ptr() as usize, map.len()).map_err(|e| e.to_string())?;
    match where_.iter().position(|&n| n != node as i32) {
        None => Ok(()),
        Some(i) => Err(format!(
            "page {i} is on node {} after migrating to node {node}: its number would be meaningless",
            where_[i]
        )),
    }
}

/// One timed move of the whole region to `to`: seconds, and for
/// copy-remap the threads that copied and the primitive they used (fewer
/// threads than asked when the target node has fewer CPUs).
fn one(map: &Mapping, cell: Cell, to: usize) -> Result<(f64, Option<(usize, String)>), String> {
    let t = Instant::now();
    let ran = match cell {
        Cell::MovePages => {
            let r = numa::migrate(
                map.as_ptr() as usize,
                map.len(),
                to,
                MigrateOptions::default(),
            )
            .map_err(|e| e.to_string())?;
            if !r.is_complete() {
                return Err(format!(
                    "move_pages left {} pages behind: {:?}",
                    r.failed.len(),
                    r.failed.first()
                ));
            }
            None
        }
        Cell::CopyRemap(threads) => {
            let opts = CopyOptions::default().threads(threads);
            // SAFETY: the benchmark owns the region and nothing else
            // touches it during the call.
            let r = unsafe { numa::migrate_by_copy(map.as_mut_ptr(), map.len(), to, opts) }
                .map_err(|e| e.to_string())?;
            Some((r.cpus.len(), r.strategy.to_string()))
        }
    };
    let secs = t.elapsed().as_secs_f64();
    check_on(map, to)?;
    bench_move::check(map).map_err(|p| format!("page {p} changed while migrating to node {to}"))?;
    Ok((secs, ran))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Cell {
    MovePages,
    CopyRemap(usize),
}

impl Cell {
    fn name(self) -> &'static str {
        match self {
            Cell::MovePages => "move_pages",
            Cell::CopyRemap(_) => "copy-remap",
        }
    }
}

pub fn run(plan: &Plan, progress: &mut dyn FnMut(usize, usize, &str)) -> Result<Vec<Row>, String> {
    let nodes = Nodes::detect();
    for n in [plan.a, plan.b] {
        let cpus = nodes.get(n).map_or(0, |n| n.cpus.len());
        if let Some(&t) = plan.threads.iter().filter(|&&t| cpus > 0 && t > cpus).max() {
            eprintln!(
                "bench migrate: node {n} has {cpus} CPU(s): copy-remap into it runs at most {cpus} thread(s), not {t} (the rows give the threads that ran)"
            );
        }
    }
    let mut cells = vec![Cell::MovePages];
    cells.extend(plan.threads.iter().map(|&t| Cell::CopyRemap(t)));
    let mut rows = Vec::new();
    let mut n = 0;
    for &kind in &plan.pages {
        for &size in &plan.sizes {
            progress(
                n,
                plan.groups(),
                &format!("{} {}", kind.name(), fmt_size(size)),
            );
            n += 1;
            if !size.is_multiple_of(2 << 20) {
                return Err(format!(
                    "--sizes {} is not a multiple of 2M",
                    fmt_size(size)
                ));
            }
            let mut map = bench_move::region(size, kind)?;
            bench_move::populate(&mut map);
            numa::migrate(
                map.as_ptr() as usize,
                size,
                plan.a,
                MigrateOptions::default(),
            )
            .map_err(|e| e.to_string())?;
            // (cell, direction) -> seconds per run, and what copied
            let mut secs = vec![[Vec::new(), Vec::new()]; cells.len()];
            let mut ran = vec![[None, None]; cells.len()];
            for _ in 0..plan.runs {
                for (k, &cell) in cells.iter().enumerate() {
                    for (d, to) in [plan.b, plan.a].into_iter().enumerate() {
                        let (s, r) = one(&map, cell, to)?;
                        secs[k][d].push(s);
                        ran[k][d] = r;
                    }
                }
            }
            for (k, &cell) in cells.iter().enumerate() {
                for (d, (from, to)) in [(plan.a, plan.b), (plan.b, plan.a)].into_iter().enumerate()
                {
                    let gbps: Vec<f64> = secs[k][d].iter().map(|s| size as f64 / s / 1e9).collect();
                    // The rows say what ran, not what was asked for.
                    let (threads, chose) = ran[k][d]
                        .clone()
                        .unwrap_or_else(|| (1, "kernel".to_string()));
                    rows.push(Row {
                        op: "migrate",
                        strategy: cell.name().to_string(),
                        chose,
                        hint: None,
                        size,
                        total: size,
                        regime: "cold",
                        threads,
                        runs: plan.runs,
                        gbps: Stats::or_zero(&gbps),
                        speedup: None,
                        batch: None,
                        fill: None,
                        moved: None,
                        migrated: Some(MigrateCell {
                            from,
                            to,
                            page: kind.name(),
                        }),
                    });
                }
            }
        }
    }
    progress(n, plan.groups(), "done");
    add_speedups(&mut rows);
    Ok(rows)
}

/// `speedup`: over move_pages of the same size, pages and direction.
fn add_speedups(rows: &mut [Row]) {
    let key = |r: &Row| {
        let m = r.migrated.as_ref().expect("migrate rows");
        (r.size, m.page, m.from, m.to)
    };
    let base: Vec<_> = rows
        .iter()
        .filter(|r| r.strategy == "move_pages")
        .map(|r| (key(r), r.gbps.median))
        .collect();
    for r in rows.iter_mut() {
        let k = key(r);
        r.speedup = base
            .iter()
            .find(|b| b.0 == k && b.1 > 0.0)
            .map(|b| r.gbps.median / b.1);
    }
}

pub fn table(rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let runs = rows.first().map_or(0, |r| r.runs);
    let _ = writeln!(
        out,
        "\nmigrate: GB/s, median of {runs}; x = speed-up over move_pages (same size, pages, direction)"
    );
    let _ = writeln!(
        out,
        "{:<6} {:<8} {:>7}  {:<22} {:>9}",
        "pages", "from->to", "size", "strategy", "GB/s"
    );
    for r in rows {
        let m = r.migrated.as_ref().expect("migrate rows");
        let name = match r.strategy.as_str() {
            "copy-remap" => format!("copy-remap, {} thr", r.threads),
            s => s.to_string(),
        };
        let x = match (r.strategy.as_str(), r.speedup) {
            ("copy-remap", Some(x)) => format!(" {x:>5.2}x"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{:<6} {:<8} {:>7}  {:<22} {:>9.3}{x}",
            m.page,
            format!("{}->{}", m.from, m.to),
            fmt_size(r.size),
            name,
            r.gbps.median
        );
    }
    out
}
