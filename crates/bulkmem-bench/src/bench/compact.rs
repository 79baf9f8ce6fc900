//! `bulkmem bench compact`: a garbage collector's heap compacted while its
//! mutators run (`bulkmem::compact`), against the stop-the-world ways. Per
//! heap size, live share, mutator count and page kind, every strategy runs
//! on a fresh heap, the strategies taking turns run by run
//! ([`shape_rows`]):
//!
//! * `stop-the-world-mover`: in the pause, every page is built into a
//!   staging area, which `Mover` then moves into the emptied heap;
//! * `stop-the-world`: in the pause, `compact::stop_the_world` builds every
//!   page in place (the path without userfaultfd);
//! * `concurrent-copy`, `concurrent-move`, `concurrent-auto`: a session in
//!   each mode, the mutators faulting pages in while the collector thread
//!   builds the rest;
//! * `floor`: a session whose every page is zeros, faulted in by the
//!   mutators alone (the heap is not checked): what a fault costs here
//!   with nothing to build, the kernel's SIGBUS round trip and one
//!   `UFFDIO_COPY`.
//!
//! Each run first measures the mutators without a collection (150 ms), then
//! compacts; the heap is checked whole afterwards (every live object's id,
//! and the counters adding up to the mutators' increments).
//!
//! The mutators either read and count random live objects (`random`), or
//! allocate (`allocate`): they fill fresh 2 MiB buffers in the free space,
//! each made present with one `ensure` first, as a runtime's allocation
//! buffers are; the row then says the faults taken per MiB allocated.
//! `--cycles N` instead runs N sessions one after the other on one heap,
//! with a random mutator, and reports whether the pause, the mappings, the
//! descriptors or the huge-page backing grow from the first to the last.

mod cycles;
mod heap;
mod run;

pub use run::Workload;

use std::path::PathBuf;

use clap::Args;

use crate::cli::{
    check_memory, check_outputs, publish, usage, with_progress, Failure, Measure, Output, Style,
};
use crate::results::{CompactCell, Row};
use crate::size;
use bulkmem_machine::units::format_bytes;
use bulkmem_report::stats::Stats;
use bulkmem_report::table::{fixed, Table};

pub const STRATEGIES: &[&str] = &[
    "stop-the-world-mover",
    "stop-the-world",
    "concurrent-copy",
    "concurrent-move",
    "concurrent-auto",
    "floor",
];

#[derive(Args)]
pub struct CompactArgs {
    /// Heap sizes (multiples of 2M).
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, default_value = "1G,4G")]
    heaps: Vec<usize>,
    /// Percent of objects live.
    #[arg(long, value_delimiter = ',', default_value = "10,50,90", value_parser = clap::value_parser!(u32).range(1..=100))]
    live: Vec<u32>,
    /// Mutator threads.
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = clap::value_parser!(u32).range(1..=64))]
    mutators: Vec<u32>,
    /// Heap pages: off (4 KiB) or on (transparent huge pages advised).
    #[arg(long, value_delimiter = ',', default_value = "off,on")]
    thp: Vec<Toggle>,
    /// What the mutators do: random (read and count random live objects),
    /// allocate (fill 2 MiB buffers in the free space during the session).
    #[arg(long, value_delimiter = ',', value_enum, default_value = "random")]
    workloads: Vec<Workload>,
    /// Instead of one session per run: N sessions one after the other on
    /// one heap per heap size and live share (a random mutator, huge pages
    /// as --thp's first value), reporting pause p50/p99/max and the
    /// mappings, descriptors and huge pages after the first and the last.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=100000))]
    cycles: u32,
    /// Strategies to run.
    #[arg(long, value_delimiter = ',', default_values_t = STRATEGIES.iter().map(|s| s.to_string()).collect::<Vec<_>>())]
    strategies: Vec<String>,
    #[command(flatten)]
    measure: Measure,
    #[command(flatten)]
    out: Output,
    /// Compaction GB/s against heap size, a line per strategy (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Toggle {
    Off,
    On,
}

/// What one cell compacts and how.
#[derive(Clone, Copy)]
struct Shape {
    bytes: usize,
    live: u32,
    mutators: usize,
    thp: bool,
    workload: Workload,
}

/// One cell's row from its runs' samples.
fn row(strategy: &str, c: Shape, samples: &[run::Sample]) -> Row {
    let Shape {
        bytes,
        live,
        mutators,
        thp,
        workload,
    } = c;
    let runs = samples.len();
    let of = |f: &dyn Fn(&run::Sample) -> f64| {
        Stats::or_zero(&samples.iter().map(f).collect::<Vec<_>>())
    };
    let mut stalls: Vec<u64> = samples
        .iter()
        .flat_map(|s| s.stalls.iter().copied())
        .collect();
    stalls.sort_unstable();
    let q = |q: f64| -> f64 {
        if stalls.is_empty() {
            return 0.0;
        }
        let i = ((q * stalls.len() as f64).ceil() as usize).clamp(1, stalls.len()) - 1;
        stalls[i] as f64 / 1000.0
    };
    Row {
        op: "compact",
        strategy: strategy.to_string(),
        chose: strategy.to_string(),
        size: bytes,
        total: bytes,
        regime: "cold",
        threads: mutators,
        runs,
        gbps: of(&|s| bytes as f64 / s.total.as_secs_f64() / 1e9),
        compacted: Some(CompactCell {
            live,
            mutators,
            thp,
            pause_us: of(&|s| s.pause.as_secs_f64() * 1e6),
            stall_us: [q(0.5), q(0.99), q(0.999), q(1.0)],
            handler_us: [
                of(&|s| s.handler.0.as_secs_f64() * 1e6).median,
                of(&|s| s.handler.1.as_secs_f64() * 1e6).median,
            ],
            faults_per_mutator: of(&|s| s.faults_per_mutator).median,
            mutator_share: of(&|s| s.share).median,
            total_ms: of(&|s| s.total.as_secs_f64() * 1e3),
            rss_extra: of(&|s| s.rss_extra).median,
            workload: workload.name().into(),
            faults_per_mib: of(&|s| s.faults_per_mib).median,
            cycles: None,
        }),
        ..Default::default()
    }
}

pub fn run(
    a: &CompactArgs,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<Row>, String> {
    if a.cycles > 0 {
        return cycles::run(a, progress);
    }
    let mut rows = Vec::new();
    let groups = groups(a);
    let mut n = 0;
    for &bytes in &a.heaps {
        for &live in &a.live {
            for &m in &a.mutators {
                for &thp in &a.thp {
                    for &workload in &a.workloads {
                        let shape = Shape {
                            bytes,
                            live,
                            mutators: m as usize,
                            thp: thp == Toggle::On,
                            workload,
                        };
                        rows.extend(shape_rows(a, shape, progress, &mut n)?);
                    }
                }
            }
        }
    }
    progress(n, groups, "done");
    Ok(rows)
}

/// One shape's rows, a row per strategy. Run by run, every strategy in
/// turn: the host's slow spells then fall on every row alike, and the
/// floor row stays the yardstick of the others. Each run starts one
/// strategy later, so each follows every other as often (one that frees
/// gigabytes slows the run after it). `n` counts the runs done.
fn shape_rows(
    a: &CompactArgs,
    c: Shape,
    progress: &mut dyn FnMut(usize, usize, &str),
    n: &mut usize,
) -> Result<Vec<Row>, String> {
    let (runs, k) = (a.measure.rounds().runs, a.strategies.len());
    let mut samples: Vec<Vec<run::Sample>> = (0..k).map(|_| Vec::with_capacity(runs)).collect();
    for r in 0..runs {
        for i in (0..k).map(|i| (i + r) % k) {
            let s = &a.strategies[i];
            let what = format!(
                "{} {}% {} {} {s}, run {}/{runs}",
                format_bytes(c.bytes),
                c.live,
                c.mutators,
                c.workload.name(),
                r + 1
            );
            progress(*n, groups(a), &what);
            samples[i].push(
                run::one(s, c.bytes, c.live, c.mutators, c.thp, c.workload)
                    .map_err(|e| format!("{s}: {e}"))?,
            );
            *n += 1;
        }
    }
    Ok(a.strategies
        .iter()
        .zip(&samples)
        .map(|(s, samples)| row(s, c, samples))
        .collect())
}

fn groups(a: &CompactArgs) -> usize {
    if a.cycles > 0 {
        return a.heaps.len() * a.live.len();
    }
    a.heaps.len()
        * a.live.len()
        * a.mutators.len()
        * a.thp.len()
        * a.workloads.len()
        * a.strategies.len()
        * a.measure.rounds().runs
}

/// One row per cell: every column the issue of a collector asks about.
pub fn table(rows: &[Row]) -> Vec<Table> {
    let mut t = Table::new(
        format!(
            "compact: a heap of 64-byte objects compacted while mutators run; medians of {} runs; stalls over all runs (µs); share = mutator ops/s during compaction over none",
            rows.first().map_or(0, |r| r.runs)
        ),
        ["heap", "live", "mut", "thp", "work", "strategy", "pause µs", "stall p50", "p99", "p99.9", "max", "in handler p50", "p99", "faults/mut", "faults/MiB", "share", "GB/s", "total ms", "RSS+ MiB"]
            .map(String::from)
            .to_vec(),
    );
    if rows
        .iter()
        .any(|r| r.compacted.as_ref().is_some_and(|c| c.cycles.is_some()))
    {
        return cycles::table(rows);
    }
    for r in rows {
        let Some(c) = &r.compacted else { continue };
        t.row(vec![
            format_bytes(r.size),
            format!("{}%", c.live),
            c.mutators.to_string(),
            if c.thp { "on" } else { "off" }.into(),
            c.workload.clone(),
            r.strategy.clone(),
            fixed(c.pause_us.median),
            fixed(c.stall_us[0]),
            fixed(c.stall_us[1]),
            fixed(c.stall_us[2]),
            fixed(c.stall_us[3]),
            fixed(c.handler_us[0]),
            fixed(c.handler_us[1]),
            fixed(c.faults_per_mutator),
            if c.workload == "allocate" {
                format!("{:.2}", c.faults_per_mib)
            } else {
                "-".into()
            },
            format!("{:.2}", c.mutator_share),
            format!("{:.2}", r.gbps.median),
            fixed(c.total_ms.median),
            format!("{:.0}", c.rss_extra / (1 << 20) as f64),
        ]);
    }
    vec![t]
}

pub fn cmd(a: CompactArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), a.plot.as_deref())?;
    if let Some(&s) = a.heaps.iter().find(|&&s| s == 0 || s % (2 << 20) != 0) {
        return Err(usage(format!(
            "--heaps {} is not a non-zero multiple of 2M",
            format_bytes(s)
        )));
    }
    if let Some(s) = a
        .strategies
        .iter()
        .find(|s| !STRATEGIES.contains(&s.as_str()))
    {
        return Err(usage(format!(
            "--strategies: unknown {s:?} (one of {})",
            STRATEGIES.join(", ")
        )));
    }
    if let Err(e) = bulkmem::compact::support() {
        if a.strategies.iter().any(|s| s.starts_with("concurrent")) {
            return Err(usage(format!(
                "concurrent compaction is not available here: {e}; run --strategies stop-the-world"
            )));
        }
    }
    // The heap, its staging copy (stop-the-world-mover) and the live list.
    let max = a.heaps.iter().copied().max().unwrap_or(0);
    check_memory(&[crate::cli::twice_the_largest(
        "--heaps",
        &[max],
        "a heap and a staged copy of it",
    )])?;
    let rows = with_progress(quiet, groups(&a), |p| run(&a, p))?;
    let style = |r: &Row| {
        let c = r.compacted.as_ref()?;
        let color = STRATEGIES
            .iter()
            .position(|s| *s == r.strategy)
            .unwrap_or(0);
        Some((
            format!("{} {}% {}m", r.strategy, c.live, c.mutators),
            color,
            c.thp,
        ))
    };
    publish(
        &a.out,
        &table(&rows),
        &rows,
        a.plot
            .as_deref()
            .map(|p| (p, "compact", "heap", &style as Style)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command's arguments as a user would give them.
    fn args(line: &str) -> CompactArgs {
        #[derive(clap::Parser)]
        struct Line {
            #[command(flatten)]
            a: CompactArgs,
        }
        let words = std::iter::once("compact").chain(line.split_whitespace());
        <Line as clap::Parser>::try_parse_from(words).unwrap().a
    }

    #[test]
    fn every_strategy_compacts_a_small_heap_and_checks_it() {
        if let Err(e) = bulkmem::compact::support() {
            eprintln!("skipping: {e}");
            return;
        }
        let a = args("--heaps 8M --live 50 --mutators 1 --thp off --runs 2");
        let mut seen = Vec::new();
        let rows = run(&a, &mut |n, all, what| {
            seen.push((n, all, what.to_string()))
        })
        .unwrap();
        // A row per strategy, in the order asked, each from its own runs
        // although the runs took turns: only a session has mutator faults.
        assert_eq!(
            rows.iter().map(|r| r.strategy.as_str()).collect::<Vec<_>>(),
            STRATEGIES
        );
        for r in &rows {
            let c = r.compacted.as_ref().unwrap();
            assert_eq!(r.runs, 2, "{r:?}");
            assert!(r.gbps.median > 0.0 && c.pause_us.median > 0.0, "{r:?}");
            let session = r.strategy.starts_with("concurrent") || r.strategy == "floor";
            assert_eq!(c.faults_per_mutator > 0.0, session, "{r:?}");
            if r.strategy.starts_with("concurrent") {
                assert!(c.mutator_share > 0.0, "{r:?}");
            }
        }
        // Every run counted, and the second run started one strategy on.
        let all = 2 * STRATEGIES.len();
        assert_eq!(seen.last().map(|s| (s.0, s.1)), Some((all, all)));
        assert!(
            seen[0].2.ends_with(&format!("{}, run 1/2", STRATEGIES[0])),
            "{seen:?}"
        );
        let second = &seen[STRATEGIES.len()].2;
        assert!(
            second.ends_with(&format!("{}, run 2/2", STRATEGIES[1])),
            "{seen:?}"
        );
    }
}
