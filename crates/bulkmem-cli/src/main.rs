//! The `bulkmem` command: which copy and clear primitive wins on this
//! machine, measured the way the seed patch threads measure it.

mod arena;
mod harness;
mod table;
mod bench_batch;
mod bench_fault;
mod bench_fill;
mod bench_mem;
mod bench_migrate;
mod bench_move;
mod chart;
mod compare;
mod info;
mod migrate_cmd;
mod preflight;
mod preload_cmd;
mod provenance;
mod report;
mod size;
mod stats;
mod tune;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use bench_mem::{Plan, Regime};
use bulkmem::{Hint, Op, Strategy};
use preflight::{eviction_bytes, times, Need};
use report::Row;
use size::fmt_size;

#[derive(Parser)]
#[command(
    name = "bulkmem",
    version,
    about = "Copy, clear and move large runs of memory pages at the speed of the hardware",
    long_about = "Without a command, prints the default report for this machine: the seed 000 copy \
                  table and the seed 004 clear table at 4K/2M/256M, cache-hot and cache-cold, and \
                  which primitive wins here."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// No progress output on stderr.
    #[arg(long, global = true)]
    quiet: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// CPU, features, caches, LLC domains, NUMA nodes, page sizes, strategies
    /// and what `auto` would choose.
    Info {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Measure primitives.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
    /// Move pages to a NUMA node: a range of a process with move_pages(2),
    /// or --self-test (both of bulkmem's paths, there and back, checked).
    Migrate(MigrateArgs),
    /// Measure every strategy here (single calls hot, batches of 4K and 2M
    /// extents cold, 64 B to past 4x the per-thread LLC share) and write the
    /// profile `auto` follows on this CPU from the next process on.
    Tune(TuneArgs),
    /// Run an unmodified program with its large memcpy/memmove/memset going
    /// through bulkmem (LD_PRELOAD of libbulkmem_preload.so; variables:
    /// BULKMEM_PRELOAD_MIN, _MT_MIN, _THREADS, _STATS, BULKMEM_PRELOAD=off).
    Run {
        /// Print calls and bytes per path when the program exits.
        #[arg(long)]
        stats: bool,
        /// The command and its arguments (after --).
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            required = true,
            value_name = "CMD"
        )]
        cmd: Vec<std::ffi::OsString>,
    },
    /// The child side of `bench preload` (not for direct use).
    #[command(hide = true)]
    PreloadWorkload {
        kind: String,
        #[arg(value_parser = size::parse_size)]
        size: Option<usize>,
    },
}

#[derive(Args)]
struct PreloadArgs {
    /// Bytes of the large-copy workloads.
    #[arg(long, value_parser = size::parse_size, default_value = "1G")]
    size: usize,
    /// Child processes per workload and setting (median).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Write the rows as JSON (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct TuneArgs {
    /// Where to write the profile [default: $BULKMEM_PROFILE, else
    /// $XDG_CACHE_HOME/bulkmem/profile-<cpu-id>.toml, else
    /// ~/.cache/bulkmem/profile-<cpu-id>.toml].
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Fewer sizes and runs (under 30 s on 2 cores); the profile says so.
    #[arg(long)]
    quick: bool,
    /// Runs per cell (median) [default: 7, or 3 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: Option<u32>,
}

#[derive(Args)]
struct MigrateArgs {
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
    #[arg(long, value_parser = size::parse_size, default_value = "64M")]
    size: usize,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Unmodified workloads (a 1 GiB copy, a fresh 1 GiB copy, small
    /// copies, python3's bytes(bytearray)) without and with the preload.
    Preload(PreloadArgs),
    /// Copy throughput per strategy and size (seed 000).
    Copy(MemArgs),
    /// Clear throughput per strategy and size (seed 004).
    Clear(MemArgs),
    /// The multi-threaded batch engine: folio size x threads, folio count,
    /// placement (seed 002).
    Batch(BatchArgs),
    /// Template fill with a per-element patch, temporal and non-temporal
    /// (seed 001).
    Fill(FillArgs),
    /// Batched page moves with userfaultfd UFFDIO_MOVE against per-page
    /// ioctls and plain copying (seed 003).
    Move(MoveArgs),
    /// What surviving a bad page costs: copy_checked against auto, then a
    /// copy over a poisoned page (seed 000's folio_mc_copy).
    Fault(FaultArgs),
    /// NUMA migration: move_pages(2) against copy-and-remap with 1..N
    /// threads, both directions (seeds 000, 002).
    Migrate(BenchMigrateArgs),
}

#[derive(Args)]
struct BenchMigrateArgs {
    /// Bytes per migration, multiples of 2M (default: 1G, scaled down to a
    /// quarter of the smaller node's free memory).
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size)]
    sizes: Vec<usize>,
    /// Pages of the region: 4K (no THP) or thp.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "4K,thp")]
    pages: Vec<PageArg>,
    /// Copy threads for copy-and-remap.
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: Vec<u32>,
    /// The two nodes to migrate between, A,B (default: the first two).
    #[arg(long)]
    nodes: Option<String>,
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10000))]
    runs: u32,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct FaultArgs {
    /// Extent sizes (K, M, G are powers of two).
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, default_value = "4K,2M,256M")]
    sizes: Vec<usize>,
    #[arg(long, value_enum, default_value = "both")]
    regime: RegimeArg,
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=10000))]
    runs: u32,
    /// Bytes per cold run (at least the largest size).
    #[arg(long, value_parser = size::parse_size, default_value = "256M")]
    total: usize,
    /// Source size of the poisoned-page demonstration.
    #[arg(long, value_parser = size::parse_size, default_value = "64M")]
    demo: usize,
    /// CPU to pin the measuring thread to (default: where it starts).
    #[arg(long)]
    cpu: Option<usize>,
    #[arg(long)]
    no_thp: bool,
    /// Write results as JSON to FILE (`-` for stdout; the table then goes to stderr).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PageArg {
    #[value(name = "4K", alias = "4k")]
    Small,
    Thp,
}

#[derive(Args)]
struct MoveArgs {
    /// Bytes moved per run (multiples of 2M).
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, default_value = "64M,1G")]
    sizes: Vec<usize>,
    /// Source pages: 4K (no THP) or thp.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "4K,thp")]
    pages: Vec<PageArg>,
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=10000))]
    runs: u32,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// GB/s against size, a line per strategy and page kind (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

#[derive(Args)]
struct FillArgs {
    /// Element (template) sizes in bytes.
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, default_value = "64,128,4096")]
    element: Vec<usize>,
    /// Region sizes; up to 1M they are measured hot, larger ones cold.
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, default_value = "64K,64M,1G")]
    sizes: Vec<usize>,
    /// Workers for the `engine` row.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: u32,
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=10000))]
    runs: u32,
    #[arg(long)]
    no_thp: bool,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// GB/s against region size, a line per strategy and element (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum OpArg {
    Copy,
    Clear,
}

#[derive(Args)]
struct BatchArgs {
    #[arg(long, value_enum, default_value = "copy")]
    op: OpArg,
    /// Folio sizes; each is measured at a constant total.
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, default_value = "4K,16K,64K,256K,2M")]
    folio: Vec<usize>,
    /// Worker counts (default: 1, 2, 4, ... up to the online CPUs).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: Vec<u32>,
    /// Bytes per batch.
    #[arg(long, value_parser = size::parse_size, default_value = "256M")]
    total: usize,
    /// Also measure these folio counts at 2M (seed 002 experiment 2).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    counts: Vec<u32>,
    /// spread: round-robin over LLC domains; fill: one domain first.
    #[arg(long, value_delimiter = ',', default_value = "spread", value_parser = parse_placement)]
    placement: Vec<bulkmem::Placement>,
    /// scattered: shuffled folios that do not coalesce; adjacent: in order.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "scattered")]
    layout: Vec<LayoutArg>,
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=10000))]
    runs: u32,
    /// CPU for the single-thread per-page baseline (default: where it starts).
    #[arg(long)]
    cpu: Option<usize>,
    #[arg(long)]
    no_thp: bool,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// GB/s against folio size, a line per thread count (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LayoutArg {
    Scattered,
    Adjacent,
}

fn parse_placement(s: &str) -> Result<bulkmem::Placement, String> {
    s.parse()
        .map_err(|e: bulkmem::ParseNameError| e.to_string())
}

#[derive(Clone, Copy, ValueEnum)]
enum RegimeArg {
    Hot,
    Cold,
    Both,
}

#[derive(Args)]
struct MemArgs {
    /// Extent sizes (K, M, G are powers of two).
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, default_value = "4K,64K,2M,32M,256M")]
    sizes: Vec<usize>,
    /// hot: same buffers every call; cold: distinct extents over an arena
    /// much larger than the LLC, evicted before each run.
    #[arg(long, value_enum, default_value = "both")]
    regime: RegimeArg,
    /// Comma-separated strategy names (and `auto`), or `all`.
    #[arg(long, default_value = "all")]
    strategies: String,
    /// Threads measuring at once, each pinned to its own CPU.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: u32,
    /// Timed runs per cell; the table shows the median.
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=10000))]
    runs: u32,
    /// What `auto` is told about the destination: auto, reuse or stream.
    #[arg(long, default_value = "auto", value_parser = parse_hint)]
    hint: Hint,
    /// Bytes per cold run (at least the largest size).
    #[arg(long, value_parser = size::parse_size, default_value = "256M")]
    total: usize,
    /// CPU to pin the measuring thread to (default: where it starts).
    #[arg(long)]
    cpu: Option<usize>,
    /// Do not ask for transparent huge pages on the benchmark arenas.
    #[arg(long)]
    no_thp: bool,
    /// Write results as JSON to FILE (`-` for stdout; the table then goes to stderr).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Plot GB/s against size, one line per strategy (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

fn parse_hint(s: &str) -> Result<Hint, String> {
    s.parse()
        .map_err(|e: bulkmem::ParseNameError| e.to_string())
}

/// A failure, with the exit code it deserves (2: bad usage).
struct Failure {
    code: u8,
    msg: String,
}

fn usage(msg: impl Into<String>) -> Failure {
    Failure {
        code: 2,
        msg: msg.into(),
    }
}

fn runtime(msg: impl Into<String>) -> Failure {
    Failure {
        code: 1,
        msg: msg.into(),
    }
}

/// `--json` and `--plot` of any subcommand, checked before it measures.
fn check_outputs(json: Option<&Path>, plot: Option<&Path>) -> Result<(), Failure> {
    preflight::check_outputs(json, plot).map_err(usage)
}

/// The memory a run needs against what is available (see
/// [`preflight::check_memory`] for the rule of each subcommand).
fn check_memory(needs: &[Need]) -> Result<(), Failure> {
    preflight::check_memory(needs).map_err(usage)
}

/// What `bench copy|clear|fault` hold at once: hot, a source and a
/// destination of the largest size per thread; cold, two arenas of
/// `--total` (at least the largest size) and the eviction buffer.
fn bench_mem_needs(sizes: &[usize], regimes: &[Regime], threads: usize, total: usize) -> Vec<Need> {
    let max = sizes.iter().copied().max().unwrap_or(0);
    let mut needs = Vec::new();
    if regimes.contains(&Regime::Hot) {
        needs.push(Need {
            bytes: times(times(2, max), threads),
            flags: if threads > 1 {
                format!("--sizes {} --threads {threads}", fmt_size(max))
            } else {
                format!("--sizes {}", fmt_size(max))
            },
            what: format!(
                "hot: a source and a destination of {} per thread",
                fmt_size(max)
            ),
        });
    }
    if regimes.contains(&Regime::Cold) {
        let arena = max.max(total);
        needs.push(Need {
            bytes: times(2, arena).saturating_add(eviction_bytes()),
            flags: if total >= max {
                format!("--total {}", fmt_size(total))
            } else {
                format!("--sizes {}", fmt_size(max))
            },
            what: format!(
                "cold: two arenas of {} and the {} eviction buffer",
                fmt_size(arena),
                preflight::approx(eviction_bytes())
            ),
        });
    }
    needs
}

/// A region and its copy (or destination) of the largest of `sizes`.
fn twice_the_largest(flag: &str, sizes: &[usize], what: &str) -> Need {
    let max = sizes.iter().copied().max().unwrap_or(0);
    Need {
        bytes: times(2, max),
        flags: format!("{flag} {}", fmt_size(max)),
        what: what.to_string(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        None => default_report(cli.quiet),
        Some(Cmd::Info { json }) => {
            print!(
                "{}",
                if json {
                    info::json() + "\n"
                } else {
                    info::text()
                }
            );
            Ok(())
        }
        Some(Cmd::Bench { what }) => match what {
            BenchCmd::Copy(a) => bench(Op::Copy, a, cli.quiet),
            BenchCmd::Clear(a) => bench(Op::Clear, a, cli.quiet),
            BenchCmd::Batch(a) => bench_batch(a, cli.quiet),
            BenchCmd::Fill(a) => bench_fill(a, cli.quiet),
            BenchCmd::Move(a) => bench_move(a, cli.quiet),
            BenchCmd::Fault(a) => bench_fault(a, cli.quiet),
            BenchCmd::Migrate(a) => bench_migrate(a, cli.quiet),
            BenchCmd::Preload(a) => bench_preload(a, cli.quiet),
        },
        Some(Cmd::Migrate(a)) => migrate(a),
        Some(Cmd::Tune(a)) => tune_cmd(a, cli.quiet),
        Some(Cmd::Run { stats, cmd }) => match preload_cmd::run(&cmd, stats) {
            Ok(never) => match never {},
            Err((code, msg)) => Err(Failure { code, msg }),
        },
        Some(Cmd::PreloadWorkload { kind, size }) => {
            preload_cmd::workload(&kind, size.unwrap_or(0)).map_err(runtime)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("bulkmem: error: {}", f.msg);
            ExitCode::from(f.code)
        }
    }
}

/// The strategies to run for `op`: (runnable, "name (needs x)" not runnable).
fn pick_strategies(op: Op, list: &str) -> Result<(Vec<Strategy>, Vec<String>), Failure> {
    let features = &bulkmem::cpu::info().features;
    let named: Vec<Strategy> = if list.trim() == "all" {
        let mut v = Strategy::for_op(op).to_vec();
        v.push(Strategy::Auto);
        v
    } else {
        let mut v = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let s: Strategy = name
                .parse()
                .map_err(|e: bulkmem::ParseNameError| usage(e.to_string()))?;
            if !s.supports(op) {
                let valid: Vec<&str> = Strategy::for_op(op).iter().map(|s| s.name()).collect();
                return Err(usage(format!(
                    "strategy '{s}' cannot {op}; {op} strategies are: auto, {}",
                    valid.join(", ")
                )));
            }
            if !v.contains(&s) {
                v.push(s);
            }
        }
        v
    };
    if named.is_empty() {
        return Err(usage("--strategies names no strategy"));
    }
    let mut run = Vec::new();
    let mut skipped = Vec::new();
    for s in named {
        match s.missing_feature(features) {
            None => run.push(s),
            Some(needs) => skipped.push(format!("{s} (needs {needs})")),
        }
    }
    if run.is_empty() {
        return Err(usage(format!(
            "none of the strategies can run here: {}",
            skipped.join(", ")
        )));
    }
    Ok((run, skipped))
}

fn measuring_cpus(first: Option<usize>) -> Result<Vec<usize>, Failure> {
    let online = &bulkmem::cpu::info().topology.online_cpus;
    let first = first.unwrap_or_else(arena::current_cpu);
    if !online.contains(&first) {
        return Err(usage(format!(
            "--cpu {first} is not an online CPU (online: {})",
            info::cpu_list(online)
        )));
    }
    bulkmem::placement::pin_to(first)
        .map_err(|e| runtime(format!("cannot pin to CPU {first}: {e}")))?;
    let mut cpus = vec![first];
    cpus.extend(online.iter().copied().filter(|&c| c != first));
    Ok(cpus)
}

fn progress_bar(quiet: bool, len: usize) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(
        Some(len as u64),
        if quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        },
    );
    pb.set_style(
        ProgressStyle::with_template("{elapsed:>4} [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb
}

/// Runs `work` under a progress bar of `groups` units on stderr.
fn with_progress<T>(
    quiet: bool,
    groups: usize,
    work: impl FnOnce(&mut dyn FnMut(usize, usize, &str)) -> Result<T, String>,
) -> Result<T, Failure> {
    let pb = progress_bar(quiet, groups);
    let out = work(&mut |done, _, label| {
        pb.set_position(done as u64);
        pb.set_message(label.to_string());
    });
    pb.finish_and_clear();
    out.map_err(runtime)
}

/// How one row is drawn: its line's name, colour index and dash; `None`
/// leaves the row out of the plot.
type Style<'a> = &'a dyn Fn(&Row) -> Option<(String, usize, bool)>;

/// Prints the table (to stderr when the JSON goes to stdout), writes the
/// JSON, and plots GB/s against size, one line per distinct style name.
fn publish(
    table: &str,
    rows: &[Row],
    json: Option<&Path>,
    plot: Option<(&Path, &str, &str, Style)>,
) -> Result<(), Failure> {
    if json == Some(Path::new("-")) {
        eprint!("{table}");
    } else {
        print!("{table}");
    }
    if let Some(path) = json {
        report::write_json(path, rows).map_err(runtime)?;
    }
    let Some((path, what, x_label, style)) = plot else {
        return Ok(());
    };
    let mut series: Vec<chart::Series> = Vec::new();
    for r in rows {
        let Some((name, color, dashed)) = style(r) else {
            continue;
        };
        let point = (r.size as f64, r.gbps.median);
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push(point),
            None => series.push(chart::Series {
                name,
                points: vec![point],
                color,
                dashed,
            }),
        }
    }
    let title = format!("bulkmem {what}: {}", bulkmem::cpu::info().brand);
    chart::write(
        path,
        &chart::Chart {
            title: &title,
            x_label,
            y_label: "GB/s (median)",
            series: &series,
            log_x: true,
        },
    )
    .map_err(runtime)
}

fn bench(op: Op, a: MemArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.json.as_deref(), a.plot.as_deref())?;
    let (strategies, skipped) = pick_strategies(op, &a.strategies)?;
    let threads = a.threads as usize;
    check_memory(&bench_mem_needs(
        &a.sizes,
        &regimes(a.regime),
        threads,
        a.total,
    ))?;
    let online = bulkmem::cpu::info().topology.online_cpus.len();
    if threads > online && !quiet {
        eprintln!("bulkmem: warning: {threads} threads on {online} online CPUs share CPUs");
    }
    let max_size = a.sizes.iter().copied().max().unwrap_or(0);
    if a.total < max_size {
        eprintln!(
            "bulkmem: note: --total {} is below the largest size; cold runs use {}",
            size::fmt_size(a.total),
            size::fmt_size(max_size)
        );
    }
    let plan = Plan {
        op,
        sizes: a.sizes,
        regimes: regimes(a.regime),
        strategies,
        hint: a.hint,
        threads,
        runs: a.runs as usize,
        total: a.total,
        cpus: measuring_cpus(a.cpu)?,
        thp: !a.no_thp,
        checked: false,
        named_batches: false,
    };
    let mut rows = with_progress(quiet, bench_mem::groups(&plan), |p| {
        bench_mem::run(&plan, p)
    })?;
    report::add_speedups(&mut rows);
    let multi = plan.regimes.len() > 1;
    let style = |r: &Row| {
        let name = if multi {
            format!("{} {}", r.strategy, r.regime)
        } else {
            r.strategy.clone()
        };
        let color = plan
            .strategies
            .iter()
            .position(|s| s.name() == r.strategy)
            .unwrap_or(0);
        Some((name, color, multi && r.regime == "cold"))
    };
    publish(
        &report::tables(&rows, &skipped),
        &rows,
        a.json.as_deref(),
        a.plot
            .as_deref()
            .map(|p| (p, op.name(), "extent size", &style as Style)),
    )
}

fn regimes(r: RegimeArg) -> Vec<Regime> {
    match r {
        RegimeArg::Hot => vec![Regime::Hot],
        RegimeArg::Cold => vec![Regime::Cold],
        RegimeArg::Both => vec![Regime::Hot, Regime::Cold],
    }
}

fn bench_fault(a: FaultArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.json.as_deref(), None)?;
    if a.demo < 64 << 10 {
        return Err(usage(
            "--demo must be at least 64K (16 extents of whole pages)",
        ));
    }
    let mut needs = bench_mem_needs(&a.sizes, &regimes(a.regime), 1, a.total);
    needs.push(twice_the_largest(
        "--demo",
        &[a.demo],
        "the demonstration's source and destination",
    ));
    check_memory(&needs)?;
    let plan = Plan {
        op: Op::Copy,
        sizes: a.sizes,
        regimes: regimes(a.regime),
        strategies: vec![Strategy::Auto],
        hint: Hint::Auto,
        threads: 1,
        runs: a.runs as usize,
        total: a.total,
        cpus: measuring_cpus(a.cpu)?,
        thp: !a.no_thp,
        checked: true,
        named_batches: false,
    };
    let mut rows = with_progress(quiet, bench_mem::groups(&plan), |p| {
        bench_mem::run(&plan, p)
    })?;
    report::add_speedups_over(&mut rows, "auto");
    publish(
        &report::tables_over(&rows, &[], "auto"),
        &rows,
        a.json.as_deref(),
        None,
    )?;
    // The demonstration needs UFFDIO_POISON; its absence is not a failure
    // of the benchmark, only of the demonstration.
    match bench_fault::demonstration(a.demo / 65536 * 65536) {
        // Beside the table: stderr when stdout carries the JSON.
        Ok(text) if a.json.as_deref() == Some(Path::new("-")) => eprint!("{text}"),
        Ok(text) => print!("{text}"),
        Err(e) => eprintln!("bulkmem: demonstration skipped: {e}"),
    }
    Ok(())
}

fn migrate(a: MigrateArgs) -> Result<(), Failure> {
    let nodes = bulkmem::numa::Nodes::detect();
    let to =
        a.to.as_deref()
            .map(|t| migrate_cmd::parse_target(t, &nodes))
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
        print!("{}", migrate_cmd::self_test(a.size, to).map_err(runtime)?);
        return Ok(());
    }
    let (Some(pid), Some(range)) = (a.pid, a.range.as_deref()) else {
        return Err(usage(
            "give --pid PID --range START-END --to NODE, or --self-test",
        ));
    };
    let to = to.ok_or_else(|| usage("--to NODE is required with --pid"))?;
    let (addr, len) = migrate_cmd::parse_range(range).map_err(usage)?;
    migrate_cmd::check_pid(pid).map_err(usage)?;
    let (text, complete) = migrate_cmd::migrate_pid(pid, addr, len, to).map_err(runtime)?;
    print!("{text}");
    if complete {
        Ok(())
    } else {
        Err(runtime("some pages were not moved (listed above)"))
    }
}

fn bench_migrate(a: BenchMigrateArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.json.as_deref(), None)?;
    let nodes = bulkmem::numa::Nodes::detect();
    let pair = match a.nodes.as_deref() {
        Some(s) => migrate_cmd::parse_node_flag("--nodes", s, &nodes).map_err(usage)?,
        None => nodes.with_memory.iter().copied().take(2).collect(),
    };
    if pair.len() < 2 {
        println!(
            "bulkmem bench migrate: this machine has one NUMA node ({}): there is nothing to migrate between.",
            pair.first().copied().unwrap_or(0)
        );
        println!("Run it on a multi-node machine, or in the project's two-node qemu guest:");
        println!("  scripts/guest/bulkmem bench migrate      (see the README)");
        return Ok(());
    }
    if pair.len() > 2 {
        return Err(usage("--nodes takes two nodes: A,B"));
    }
    let sizes = if a.sizes.is_empty() {
        vec![bench_migrate::default_size(&nodes, pair[0], pair[1])]
    } else {
        a.sizes
    };
    check_memory(&[twice_the_largest(
        "--sizes",
        &sizes,
        "the region and its copy on the target node",
    )])?;
    let plan = bench_migrate::Plan {
        sizes,
        pages: a
            .pages
            .iter()
            .map(|p| match p {
                PageArg::Small => bench_move::PageKind::Small,
                PageArg::Thp => bench_move::PageKind::Thp,
            })
            .collect(),
        threads: a.threads.iter().map(|&t| t as usize).collect(),
        runs: a.runs as usize,
        a: pair[0],
        b: pair[1],
    };
    let rows = with_progress(quiet, plan.groups(), |p| bench_migrate::run(&plan, p))?;
    publish(&bench_migrate::table(&rows), &rows, a.json.as_deref(), None)
}

fn bench_batch(a: BatchArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.json.as_deref(), a.plot.as_deref())?;
    let online = bulkmem::cpu::info().topology.online_cpus.len();
    let threads: Vec<usize> = if a.threads.is_empty() {
        let mut v = vec![1];
        while v[v.len() - 1] * 2 <= online {
            v.push(v[v.len() - 1] * 2);
        }
        if *v.last().expect("non-empty") != online {
            v.push(online);
        }
        v
    } else {
        a.threads.iter().map(|&t| t as usize).collect()
    };
    if let Some(&f) = a.folio.iter().find(|&&f| f > a.total) {
        return Err(usage(format!(
            "--folio {} is larger than --total {}",
            size::fmt_size(f),
            size::fmt_size(a.total)
        )));
    }
    // A source and a destination arena of the largest batch (a folio
    // size's batch fills --total, a count's is that many 2M folios) and
    // the eviction buffer.
    let arenas = |bytes: usize, flags: String| Need {
        bytes: times(2, bytes).saturating_add(eviction_bytes()),
        flags,
        what: format!(
            "a source and a destination of {} and the {} eviction buffer",
            preflight::approx(bytes),
            preflight::approx(eviction_bytes())
        ),
    };
    let mut needs = vec![arenas(a.total, format!("--total {}", fmt_size(a.total)))];
    if let Some(&c) = a.counts.iter().max() {
        needs.push(arenas(
            times(c as usize, bench_batch::COUNT_FOLIO),
            format!("--counts {c}"),
        ));
    }
    check_memory(&needs)?;
    let first = measuring_cpus(a.cpu)?[0];
    let plan = bench_batch::Plan {
        op: match a.op {
            OpArg::Copy => Op::Copy,
            OpArg::Clear => Op::Clear,
        },
        folios: a.folio,
        threads,
        placements: a.placement,
        layouts: a
            .layout
            .iter()
            .map(|l| match l {
                LayoutArg::Scattered => bench_batch::Layout::Scattered,
                LayoutArg::Adjacent => bench_batch::Layout::Adjacent,
            })
            .collect(),
        total: a.total,
        counts: a.counts.iter().map(|&c| c as usize).collect(),
        runs: a.runs as usize,
        thp: !a.no_thp,
    };
    let mut rows = with_progress(quiet, plan.groups(), |p| bench_batch::run(&plan, first, p))?;
    report::add_speedups(&mut rows);
    let style = |r: &Row| {
        let b = r.batch.as_ref()?;
        // Experiment 1 only: the count experiment has its own axis.
        if b.count != (plan.total / r.size).max(1) || !plan.folios.contains(&r.size) {
            return None;
        }
        let mut name = if r.strategy == "engine" {
            format!("engine {}", r.threads)
        } else {
            "per-page 1".to_string()
        };
        if plan.placements.len() > 1 && r.strategy == "engine" {
            name = format!("{name} {}", b.placement);
        }
        if plan.layouts.len() > 1 {
            name = format!("{name} {}", b.layout);
        }
        let color = if r.strategy == "engine" { r.threads } else { 0 };
        Some((name, color, b.layout == "adjacent" || b.placement == "fill"))
    };
    let what = format!("batch {}", plan.op);
    publish(
        &bench_batch::tables(&rows),
        &rows,
        a.json.as_deref(),
        a.plot
            .as_deref()
            .map(|p| (p, what.as_str(), "folio size", &style as Style)),
    )
}

fn bench_fill(a: FillArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.json.as_deref(), a.plot.as_deref())?;
    for &el in &a.element {
        if let Some(&s) = a.sizes.iter().find(|&&s| s % el != 0) {
            return Err(usage(format!(
                "--sizes {} is not a whole number of {el}-byte elements",
                size::fmt_size(s)
            )));
        }
    }
    let biggest = a.sizes.iter().copied().max().unwrap_or(0);
    check_memory(&[Need {
        bytes: biggest.saturating_add(eviction_bytes()),
        flags: format!("--sizes {}", fmt_size(biggest)),
        what: format!(
            "a region of {} and the {} eviction buffer",
            fmt_size(biggest),
            preflight::approx(eviction_bytes())
        ),
    }])?;
    let plan = bench_fill::Plan {
        elements: a.element,
        sizes: a.sizes,
        threads: a.threads as usize,
        runs: a.runs as usize,
        thp: !a.no_thp,
    };
    measuring_cpus(None)?;
    let mut rows = with_progress(quiet, plan.groups(), |p| bench_fill::run(&plan, p))?;
    bench_fill::add_speedups(&mut rows);
    let style = |r: &Row| {
        let el = r.fill.as_ref()?.element;
        let color = bench_fill::STRATEGIES
            .iter()
            .position(|s| *s == r.strategy)
            .unwrap_or(0);
        Some((
            format!("{} {el}B", r.strategy),
            color,
            plan.elements.first() != Some(&el),
        ))
    };
    publish(
        &bench_fill::table(&rows),
        &rows,
        a.json.as_deref(),
        a.plot
            .as_deref()
            .map(|p| (p, "fill", "region size", &style as Style)),
    )
}

fn bench_move(a: MoveArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.json.as_deref(), a.plot.as_deref())?;
    if let Some(&s) = a.sizes.iter().find(|&&s| s % (2 << 20) != 0) {
        return Err(usage(format!(
            "--sizes {} is not a multiple of 2M",
            size::fmt_size(s)
        )));
    }
    check_memory(&[twice_the_largest(
        "--sizes",
        &a.sizes,
        "a populated source and a destination that copy-auto faults in",
    )])?;
    let plan = bench_move::Plan {
        sizes: a.sizes,
        pages: a
            .pages
            .iter()
            .map(|p| match p {
                PageArg::Small => bench_move::PageKind::Small,
                PageArg::Thp => bench_move::PageKind::Thp,
            })
            .collect(),
        runs: a.runs as usize,
    };
    measuring_cpus(None)?;
    let rows = with_progress(quiet, plan.groups(), |p| bench_move::run(&plan, p))?;
    let style = |r: &Row| {
        let page = r.moved.as_ref()?.page;
        let color = bench_move::STRATEGIES
            .iter()
            .position(|s| *s == r.strategy)
            .unwrap_or(0);
        Some((format!("{} {page}", r.strategy), color, page == "thp"))
    };
    publish(
        &bench_move::table(&rows),
        &rows,
        a.json.as_deref(),
        a.plot
            .as_deref()
            .map(|p| (p, "move", "bytes moved", &style as Style)),
    )
}

/// `bulkmem` with no arguments: the seed 000 copy table and the seed 004
/// clear table at 4K/2M/256M, hot and cold, and what wins here.
fn default_report(quiet: bool) -> Result<(), Failure> {
    let cpus = measuring_cpus(None)?;
    let i = bulkmem::cpu::info();
    println!(
        "bulkmem {} on {} ({} CPUs, LLC {}, features: {})",
        env!("CARGO_PKG_VERSION"),
        i.brand,
        i.topology.online_cpus.len(),
        size::fmt_size(i.llc_bytes()),
        i.features.names().join(" ")
    );
    println!("auto: {}", bulkmem::auto::profile_status());
    let mut all = Vec::new();
    for op in [Op::Copy, Op::Clear] {
        let (strategies, skipped) = pick_strategies(op, "all")?;
        let plan = Plan {
            op,
            sizes: vec![4 << 10, 2 << 20, 256 << 20],
            regimes: vec![Regime::Hot, Regime::Cold],
            strategies,
            hint: Hint::Auto,
            threads: 1,
            runs: 7,
            total: 256 << 20,
            cpus: cpus.clone(),
            thp: true,
            checked: false,
            named_batches: false,
        };
        let mut rows = with_progress(quiet, bench_mem::groups(&plan), |p| {
            bench_mem::run(&plan, p)
        })?;
        report::add_speedups(&mut rows);
        print!("{}", report::tables(&rows, &skipped));
        all.extend(rows);
    }
    println!();
    for line in report::summary(&all) {
        println!("{line}");
    }
    println!("\n(more: `bulkmem info`, `bulkmem bench copy --help`; JSON with --json FILE)");
    Ok(())
}

/// `bulkmem tune`: checks the output path first (exit 2 at once if it
/// cannot be written), measures, then writes the profile atomically.
fn tune_cmd(a: TuneArgs, quiet: bool) -> Result<(), Failure> {
    use bulkmem::auto::{self, Identity};
    let id = Identity::this();
    let from_env = std::env::var_os("BULKMEM_PROFILE")
        .filter(|v| !v.is_empty() && v != "off" && v != "OFF")
        .map(PathBuf::from);
    let path = a
        .out
        .or(from_env)
        .or_else(|| auto::default_profile_path(&id))
        .ok_or_else(|| usage("no place for the profile: give --out FILE (HOME is not set)"))?;
    let tmp = path.with_extension("toml.tmp");
    let writable = || -> std::io::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&tmp, b"")?;
        std::fs::remove_file(&tmp)
    };
    writable().map_err(|e| usage(format!("cannot write the profile {}: {e}", path.display())))?;
    let share = bulkmem::Machine::this().llc_share();
    let mut ladder = tune::ladder(share, a.quick);
    if let Some(r) = a.runs {
        ladder.runs = r as usize;
    }
    let cpus = measuring_cpus(None)?;
    let started = std::time::Instant::now();
    let profile = with_progress(quiet, ladder.units(), |p| tune::measure(&ladder, &cpus, p))?;
    std::fs::write(&tmp, profile.to_toml())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| runtime(format!("cannot write the profile {}: {e}", path.display())))?;
    println!(
        "bulkmem tune: {} cells in {:.0} s ({} runs each{}) on {}",
        profile.cells.len(),
        started.elapsed().as_secs_f64(),
        ladder.runs,
        if a.quick { ", --quick" } else { "" },
        bulkmem::cpu::info().brand
    );
    println!("auto's choices, from each size up (margin over the runner-up):");
    for line in tune::summary(&profile) {
        println!("  {line}");
    }
    println!("wrote {}", path.display());
    let default = auto::default_profile_path(&id);
    match std::env::var_os("BULKMEM_PROFILE") {
        Some(v) if v == "off" || v == "OFF" => {
            println!("note: BULKMEM_PROFILE=off: auto ignores profiles until it is unset")
        }
        Some(v) if !v.is_empty() && Path::new(&v) != path => println!(
            "note: BULKMEM_PROFILE={} points elsewhere: auto reads that file",
            PathBuf::from(v).display()
        ),
        None if default.as_deref() != Some(path.as_path()) => println!(
            "note: auto reads this file only with BULKMEM_PROFILE={}",
            path.display()
        ),
        _ => println!("auto follows it from the next process on (`bulkmem info` shows it)"),
    }
    Ok(())
}

fn bench_preload(a: PreloadArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.json.as_deref(), None)?;
    check_memory(&[twice_the_largest(
        "--size",
        &[a.size],
        "each workload's source and destination",
    )])?;
    preload_cmd::library().map_err(usage)?;
    let runs = a.runs as usize;
    let units = preload_cmd::units(runs);
    let rows = with_progress(quiet, units, |p| preload_cmd::bench(a.size, runs, p))?;
    publish(&preload_cmd::table(&rows), &rows, a.json.as_deref(), None)
}
