//! `bulkmem bench copy|clear` (seeds 000 and 004: every strategy at every
//! size, cache-hot and cache-cold) and the default report that runs both.

use std::path::{Path, PathBuf};

use clap::Args;

use bulkmem::{Hint, Op};

use super::mem::plan::{Plan, Regime};
use super::mem::{self, parse_regimes, Regimes};
use crate::cli::{
    check_memory, check_outputs, measuring_cpus, parse_cpus, parse_hint, pick_strategies, publish,
    runtime, usage, warn_oversubscribed, with_progress, CpuList, Failure, Measure, Output, Style,
};
use crate::harness::Rounds;
use crate::out;
use crate::results::{self, Row};
use crate::size;
use bulkmem_machine::units::format_bytes;
use bulkmem_report::table;

#[derive(Args)]
pub struct MemArgs {
    /// Extent sizes (K, M, G are powers of two).
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, allow_hyphen_values = true, default_value = "4K,64K,2M,32M,256M")]
    sizes: Vec<usize>,
    /// hot: same buffers every call; cold: distinct extents over an arena
    /// much larger than the LLC, evicted before each run; consume: as hot,
    /// each call then a read of its destination, timed together; pipe: as
    /// hot, each call then write() of its destination into a pipe another
    /// thread drains. Comma-separated; both = hot,cold; all.
    #[arg(long, default_value = "both", value_parser = parse_regimes)]
    regime: Regimes,
    /// Comma-separated strategy names, or `all`: auto, per-page, rep-movsq,
    /// rep-movsb, rep-movsb-or-avx2 (copy), rep-stosq, rep-stosb (clear),
    /// libc, avx2, avx2-nt,
    /// avx512, avx512-nt, clzero (clear), portable. `bulkmem info` says which
    /// this CPU runs.
    #[arg(long, default_value = "all")]
    strategies: String,
    /// Threads measuring at once, each pinned to its own CPU. Cold cells
    /// with fewer extents than threads run on fewer (the tables say so).
    /// More threads than CPUs (usable, or --cpus) run with a warning:
    /// they share CPUs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: u32,
    /// What `auto` is told about the destination: auto, reuse or stream.
    #[arg(long, default_value = "auto", value_parser = parse_hint)]
    hint: Hint,
    /// Bytes per cold batch (at least the largest size; a run times two).
    #[arg(long, value_parser = size::parse_size, allow_hyphen_values = true, default_value = "256M")]
    total: usize,
    /// CPUs to pin the measuring threads to, numactl syntax (0-3,8); the
    /// first is the caller's [default: where it starts, then the others].
    #[arg(long, alias = "cpu", value_parser = parse_cpus)]
    cpus: Option<CpuList>,
    /// Put the sources on this NUMA node (move_pages after prefaulting):
    /// rows of copies between memory nodes (DRAM to DRAM, to CXL).
    #[arg(long)]
    src_node: Option<usize>,
    /// Put the destinations on this NUMA node.
    #[arg(long)]
    dst_node: Option<usize>,
    /// Do not ask for transparent huge pages on the benchmark arenas.
    #[arg(long)]
    no_thp: bool,
    #[command(flatten)]
    measure: Measure,
    #[command(flatten)]
    out: Output,
    /// Plot GB/s against size, a panel per regime, a line per strategy
    /// (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Also time another library's routine, as one more row in the same
    /// rounds: a shared library opened with RTLD_LOCAL (it cannot replace
    /// this process's memcpy) and its SYMBOL (default memcpy for copy,
    /// memset for clear). Repeat, or separate with commas. The row is named
    /// LABEL, else the file's stem and the symbol.
    #[arg(long, value_name = "[LABEL=]LIB[:SYMBOL]", value_delimiter = ',')]
    against: Vec<String>,
    /// The row every `x` divides by: the C library's routine (what a
    /// program calls today), `per-page` (one 4 KiB page at a time, as the
    /// Linux kernel copies pages), or any other row of the run [default:
    /// libc].
    #[arg(long, value_name = "ROW")]
    baseline: Option<String>,
    /// How cold runs reach each named strategy: `batch`, the run's
    /// extents in one batch call (`copy_batch`, as `auto` gets them), or
    /// `each`, a call per extent (as a loop over pages would). `auto` is
    /// always one batch call.
    #[arg(long, default_value = "batch", value_parser = ["batch", "each"])]
    cold_calls: String,
    /// Where `auto` measures below this fraction of the best other row,
    /// measure auto and the rows ahead of it (three at most) again, in
    /// rounds of their own, and show that figure (marked *): the run's
    /// best row is the best of several, picked by the noise it is
    /// measured with. 0: never.
    #[arg(long, value_name = "RATIO", default_value_t = REMEASURE_BELOW, value_parser = parse_fraction)]
    remeasure_below: f64,
    /// The shape every non-temporal copy takes in this run (its rows and
    /// `auto`'s): stream (one stream, prefetched), four-pages (four pages
    /// at once, each stored before the next is loaded), two-pages
    /// (glibc's large copy: two pages loaded, then stored) [default: this
    /// machine's, as `bulkmem info` says].
    #[arg(long, value_name = "SHAPE", value_parser = parse_nt_shape)]
    nt_shape: Option<bulkmem_machine::kernels::NtCopyShape>,
    /// Start each hot, consume and pipe source this many bytes past a page
    /// boundary (1-4095), the destination page-aligned unless --dst-offset
    /// moves it: copies between
    /// buffers that are not mutually aligned, as a program's often are
    /// (cold extents stay page-aligned). Copies only.
    #[arg(long, value_name = "BYTES", default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..4096))]
    src_offset: u16,
    /// The same for the destinations (the sources page-aligned unless
    /// --src-offset moves them too).
    #[arg(long, value_name = "BYTES", default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..4096))]
    dst_offset: u16,
}

/// A `--nt-shape` name.
pub fn parse_nt_shape(s: &str) -> Result<bulkmem_machine::kernels::NtCopyShape, String> {
    bulkmem_machine::kernels::NtCopyShape::ALL
        .into_iter()
        .find(|x| x.name() == s)
        .ok_or_else(|| {
            let names: Vec<_> = bulkmem_machine::kernels::NtCopyShape::ALL
                .iter()
                .map(|x| x.name())
                .collect();
            format!("{s:?}: not a shape ({})", names.join(", "))
        })
}

/// `--remeasure-below`'s default: below what `auto/best` a cell is
/// measured again. A little above the 0.95x a tuned `auto` is held to
/// (docs/measurements.md, "auto/best"), as a figure there carries the same pick.
pub const REMEASURE_BELOW: f64 = 0.97;

/// A ratio from 0 up (`--remeasure-below`).
fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{s:?}: not a ratio of 0 or more (0.97, 1)")),
    }
}

/// What the tables' `x` divides by unless `--baseline` says otherwise: the
/// routine a program calls today.
pub const BASELINE: &str = "libc";

pub fn cmd(op: Op, a: MemArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), a.plot.as_deref())?;
    let (strategies, skipped) = pick_strategies(op, &a.strategies)?;
    if let Some(shape) = a.nt_shape {
        if op == Op::Clear {
            return Err(usage("--nt-shape: clears have one shape; it is for copies"));
        }
        bulkmem_machine::kernels::set_nt_copy_shape(Some(shape));
    }
    if a.src_offset > 0 && op == Op::Clear {
        return Err(usage(
            "--src-offset: a clear has no source; it is for copies",
        ));
    }
    if (a.src_offset > 0 || a.dst_offset > 0) && a.regime.0.contains(&Regime::Cold) {
        eprintln!(
            "bulkmem: note: --src-offset and --dst-offset apply to the hot regimes; cold extents stay page-aligned"
        );
    }
    let foreign = super::against::load(op, &a.against).map_err(usage)?;
    let nodes = bulkmem::topology::Nodes::detect();
    for (flag, node) in [("--src-node", a.src_node), ("--dst-node", a.dst_node)] {
        if let Some(n) = node {
            crate::cli::node_with_memory(&nodes, n).map_err(|e| usage(format!("{flag}: {e}")))?;
        }
    }
    let known = strategies.iter().map(|s| s.name().to_string());
    let rows_named: Vec<String> = known.chain(foreign.iter().map(|f| f.0.clone())).collect();
    if let Some(b) = a.baseline.as_ref().filter(|b| !rows_named.contains(b)) {
        return Err(usage(format!(
            "--baseline {b}: not a row of this run (rows: {})",
            rows_named.join(", ")
        )));
    }
    let baseline = a.baseline.as_deref().unwrap_or(BASELINE);
    let threads = a.threads as usize;
    let regimes = a.regime.0;
    check_memory(&mem::needs(&a.sizes, &regimes, threads, a.total))?;
    let cpus = measuring_cpus(a.cpus.as_ref().map(|c| c.0.as_slice()))?;
    warn_oversubscribed(threads, cpus.len());
    if a.src_node.is_some() || a.dst_node.is_some() {
        let on = |n: Option<usize>| n.map_or("any node".to_string(), |n| format!("node {n}"));
        eprintln!(
            "bulkmem: note: sources on {}, destinations on {} (every page moved there, or the run fails)",
            on(a.src_node),
            on(a.dst_node)
        );
    }
    let max_size = a.sizes.iter().copied().max().unwrap_or(0);
    if a.total < max_size {
        eprintln!(
            "bulkmem: note: --total {} is below the largest size; cold batches use {}",
            format_bytes(a.total),
            format_bytes(max_size)
        );
    }
    let plan = Plan {
        op,
        sizes: a.sizes,
        regimes,
        strategies,
        hint: a.hint,
        threads,
        rounds: a.measure.rounds(),
        total: a.total,
        src_node: a.src_node,
        dst_node: a.dst_node,
        cpus,
        thp: !a.no_thp,
        checked: false,
        named_batches: a.cold_calls == "batch",
        hot_bytes: mem::HOT_BYTES,
        min_run: bulkmem_calibrate::toolkit::MIN_RUN,
        foreign,
        src_offset: a.src_offset.into(),
        dst_offset: a.dst_offset.into(),
    };
    let mut rows = with_progress(quiet, mem::groups(&plan), |p| mem::run(&plan, p))?;
    let again = results::to_remeasure(&rows, a.remeasure_below);
    if !again.is_empty() {
        with_progress(quiet, again.len(), |p| {
            mem::remeasure(&plan, &mut rows, &again, p)
        })?;
    }
    results::add_speedups_over(&mut rows, baseline);
    let style = |r: &Row| {
        let color = plan
            .strategies
            .iter()
            .position(|s| s.name() == r.strategy)
            .unwrap_or(0);
        Some((r.strategy.clone(), color, false))
    };
    publish(
        &a.out,
        &results::tables_over(&rows, &skipped, baseline),
        &rows,
        a.plot
            .as_deref()
            .map(|p| (p, op.name(), "extent size", &style as Style)),
    )
}

/// `bulkmem` with no arguments: the copy table of the kernel's batched folio-copy patches and the
/// clear table at 4K/2M/64M, hot, consumed and cold, and what wins here.
/// The default report's large column, and the total of its cold runs:
/// past every cache a thread was measured to get (16-32 MiB on the Zen
/// VMs, 512 KiB for a copy on the Emerald Rapids VM), and small enough that
/// 7 runs of 10 strategies stay within seconds (`bulkmem tune` measures up
/// to 256 MiB and more).
const REPORT_LARGE: usize = 64 << 20;

/// What each hot run of the default report moves, and each cold run of
/// its smaller columns: the cold runs flush what they touched first
/// (`toolkit::Cooler`), so they need not be larger than the caches to be
/// cold, and 16 MiB keeps each run past a millisecond.
const REPORT_HOT: usize = 16 << 20;
const REPORT_COLD: usize = 16 << 20;

/// `json`: `--json FILE` of the default command, as every bench takes it
/// (the report's last line points there); `-` puts the JSON alone on
/// stdout and the report on stderr.
pub fn default_report(quiet: bool, json: Option<&Path>) -> Result<(), Failure> {
    check_outputs(json, None)?;
    let start = std::time::Instant::now();
    let to_stdout = json != Some(Path::new("-"));
    let print = |text: &str| {
        if to_stdout {
            out::print(text)
        } else {
            // The JSON owns stdout; the report is a courtesy on stderr.
            let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
            Ok(())
        }
    };
    let cpus = measuring_cpus(None)?;
    let i = bulkmem::cpu::info();
    print(&format!(
        "bulkmem {} on {} ({} CPUs, LLC {}, features: {})\nauto: {}\n",
        env!("CARGO_PKG_VERSION"),
        i.brand,
        i.topology.online_cpus.len(),
        format_bytes(i.llc_bytes()),
        i.features.names().join(" "),
        bulkmem_policy::auto::profile_status()
    ))?;
    let mut all = Vec::new();
    for op in [Op::Copy, Op::Clear] {
        let (strategies, skipped) = pick_strategies(op, "all")?;
        let plan = Plan {
            sizes: vec![4 << 10, 2 << 20, REPORT_LARGE],
            // Consume: what a program that reads what it copied pays (the
            // choice for single calls is made for that).
            regimes: vec![Regime::Hot, Regime::Consume, Regime::Cold],
            strategies,
            rounds: Rounds { runs: 7, warmup: 0 },
            total: REPORT_COLD,
            hot_bytes: REPORT_HOT,
            min_run: std::time::Duration::ZERO,
            ..Plan::new(op, cpus.clone())
        };
        let mut rows = with_progress(quiet, mem::groups(&plan), |p| mem::run(&plan, p))?;
        results::add_speedups_over(&mut rows, BASELINE);
        print(&table::text(&results::tables_over(
            &rows, &skipped, BASELINE,
        )))?;
        all.extend(rows);
    }
    let mut text = String::from("\n");
    for line in results::summary(&all) {
        text += &line;
        text.push('\n');
    }
    // The time is part of the report: the sample in docs/guide/command.md
    // carries it, and what the README says the report takes is checked
    // against it.
    text += &format!(
        "\n(measured in {:.1} s; more: `bulkmem info`, `bulkmem bench copy --help`; JSON with --json FILE)\n",
        start.elapsed().as_secs_f64()
    );
    print(&text)?;
    match json {
        Some(path) => results::write_json(path, &all).map_err(runtime),
        None => Ok(()),
    }
}
