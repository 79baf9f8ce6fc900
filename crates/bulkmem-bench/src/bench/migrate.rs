//! `bulkmem bench migrate`: the kernel's batched folio-copy patches' end-to-end move_pages(2) table and
//! the kernel's multi-threaded migration patches' multi-threaded copy, from user space. For each size and page
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
use bulkmem::numa::{self, CopyOptions, MigrateOptions};
use bulkmem::topology::Nodes;

use crate::arena::{self as regions, PageKind};
use crate::harness::{interleave_in, Order, Rounds};
use crate::results::{pivot, MigrateCell, Pivot, Row};
use bulkmem_machine::units::format_bytes;
use bulkmem_report::stats::Stats;
use bulkmem_report::table::Table;

use crate::size;
use std::path::PathBuf;

use clap::Args;

use crate::cli::{
    check_memory, check_outputs, publish, twice_the_largest, usage, with_progress, Failure, Output,
    Style,
};

#[derive(Clone, Debug)]
pub struct Plan {
    pub sizes: Vec<usize>,
    pub pages: Vec<PageKind>,
    pub threads: Vec<usize>,
    pub rounds: Rounds,
    pub a: usize,
    pub b: usize,
}

impl Plan {
    pub fn groups(&self) -> usize {
        self.sizes.len() * self.pages.len()
    }
}

/// The default size: 1 GiB (the kernel's batched folio-copy patches'), scaled down so the region and
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
    regions::check(map).map_err(|p| format!("page {p} changed while migrating to node {to}"))?;
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
                "bulkmem: warning: --threads {t}: node {n} has {cpus} CPU(s): copy-remap into it runs at most {cpus} thread(s) (the rows give the threads that ran)"
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
                &format!("{} {}", kind.name(), format_bytes(size)),
            );
            n += 1;
            if !size.is_multiple_of(2 << 20) {
                return Err(format!(
                    "--sizes {} is not a multiple of 2M",
                    format_bytes(size)
                ));
            }
            let mut map = regions::region(size, kind)?;
            regions::populate(&mut map);
            numa::migrate(
                map.as_ptr() as usize,
                size,
                plan.a,
                MigrateOptions::default(),
            )
            .map_err(|e| e.to_string())?;
            // Cell 2k + d: strategy k in direction d (there, then back, so
            // the region is home again before the next cell): the order
            // is fixed.
            let mut ran = vec![[None, None]; cells.len()];
            let secs = interleave_in(Order::Fixed, cells.len() * 2, plan.rounds, |i| {
                let (k, d) = (i / 2, i % 2);
                let (s, r) = one(&map, cells[k], [plan.b, plan.a][d])?;
                ran[k][d] = r;
                Ok(s)
            })?;
            for (k, &cell) in cells.iter().enumerate() {
                for (d, (from, to)) in [(plan.a, plan.b), (plan.b, plan.a)].into_iter().enumerate()
                {
                    let gbps: Vec<f64> = secs[2 * k + d]
                        .samples
                        .iter()
                        .map(|s| size as f64 / s / 1e9)
                        .collect();
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
                        runs: plan.rounds.runs,
                        gbps: Stats::or_zero(&gbps),
                        migrated: Some(MigrateCell {
                            from,
                            to,
                            page: kind.name(),
                        }),
                        ..Default::default()
                    });
                }
            }
        }
    }
    progress(n, plan.groups(), "done");
    crate::results::add_speedups_over(&mut rows, "move_pages");
    Ok(rows)
}

/// A row per strategy (and thread count), a column per (pages, direction,
/// size); x over move_pages of the same column.
pub fn table(rows: &[Row]) -> Vec<Table> {
    let col = |r: &Row| {
        let m = r.migrated.as_ref().expect("migrate rows");
        format!("{} {}->{} {}", m.page, m.from, m.to, format_bytes(r.size))
    };
    let row = |r: &Row| {
        Some(match r.strategy.as_str() {
            "copy-remap" => format!("copy-remap {} thr", r.threads),
            s => s.to_string(),
        })
    };
    vec![pivot(
        rows,
        Pivot {
            title: format!(
                "migrate: GB/s median±stdev of {} runs; x = over move_pages (same size, pages, direction)",
                rows.first().map_or(0, |r| r.runs)
            ),
            corner: "strategy",
            row: &row,
            col: &col,
            baseline: "move_pages",
        },
    )]
}

#[derive(Args)]
pub struct BenchMigrateArgs {
    /// Bytes per migration, multiples of 2M (default: 1G, scaled down to a
    /// quarter of the smaller node's free memory).
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, allow_hyphen_values = true)]
    sizes: Vec<usize>,
    /// Pages of the region: 4K (no THP) or thp.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "4K,thp")]
    pages: Vec<PageKind>,
    /// Copy threads for copy-and-remap. Never more than the target node's
    /// CPUs run: a warning says so, and the rows give the threads that ran.
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: Vec<u32>,
    /// The two nodes to migrate between, A,B (default: the first two).
    #[arg(long)]
    nodes: Option<String>,
    /// Timed runs per cell (the tables show median ± stdev over them).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10000))]
    runs: u32,
    /// Untimed rounds over every cell before the timed ones.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    warmup: u32,
    #[command(flatten)]
    out: Output,
    /// GB/s against size, a line per strategy, pages and direction (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

/// The exit code of a bench that had nothing to measure here.
pub const SKIPPED: u8 = 77;

pub fn cmd(a: BenchMigrateArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), a.plot.as_deref())?;
    let nodes = bulkmem::topology::Nodes::detect();
    let pair = match a.nodes.as_deref() {
        Some(s) => crate::cli::parse_node_flag("--nodes", s, &nodes).map_err(usage)?,
        None => nodes.with_memory.iter().copied().take(2).collect(),
    };
    if pair.len() < 2 {
        // Exit 77 (the automake "skipped" code), so a script that asked for
        // JSON can tell a skip from a run; no JSON file is written.
        return Err(Failure {
            code: SKIPPED,
            msg: format!(
                "bench migrate skipped: this machine has one NUMA node ({}), there is nothing to migrate between; \
                 run it on a multi-node machine or in the project's two-node qemu guest \
                 (scripts/guest/bulkmem bench migrate, see docs/guide/numa.md)",
                pair.first().copied().unwrap_or(0)
            ),
        });
    }
    if pair.len() > 2 {
        return Err(usage("--nodes takes two nodes: A,B"));
    }
    let sizes = if a.sizes.is_empty() {
        vec![default_size(&nodes, pair[0], pair[1])]
    } else {
        a.sizes
    };
    check_memory(&[twice_the_largest(
        "--sizes",
        &sizes,
        "the region and its copy on the target node",
    )])?;
    let plan = Plan {
        sizes,
        pages: a.pages,
        threads: a.threads.iter().map(|&t| t as usize).collect(),
        rounds: Rounds {
            runs: a.runs as usize,
            warmup: a.warmup as usize,
        },
        a: pair[0],
        b: pair[1],
    };
    let rows = with_progress(quiet, plan.groups(), |p| run(&plan, p))?;
    let style = |r: &Row| {
        let m = r.migrated.as_ref()?;
        let name = match r.strategy.as_str() {
            "copy-remap" => format!(
                "copy-remap {} thr {} {}->{}",
                r.threads, m.page, m.from, m.to
            ),
            s => format!("{s} {} {}->{}", m.page, m.from, m.to),
        };
        let color = if r.strategy == "copy-remap" {
            r.threads
        } else {
            0
        };
        Some((name, color, m.page == "thp"))
    };
    publish(
        &a.out,
        &table(&rows),
        &rows,
        a.plot
            .as_deref()
            .map(|p| (p, "migrate", "bytes migrated", &style as Style)),
    )
}
