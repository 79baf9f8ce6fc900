//! Plumbing every subcommand shares: failures and exit codes, the flags
//! common to the benches, progress bars, CPU pinning, strategy lists, and
//! publishing a result (table, JSON, plot).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use bulkmem::{Hint, Op, Strategy};

use crate::harness::Rounds;
use crate::preflight::{self, times, Need};
use crate::progress::{self, with_time_left, Heartbeat};
use crate::results::{self, Row};
use bulkmem_machine::units::format_bytes;
use bulkmem_report::chart;
use bulkmem_report::table::{Format, Table};

/// How much a bench measures.
#[derive(Args, Clone, Copy, Debug)]
pub struct Measure {
    /// Timed runs per cell (the tables show median ± stdev over them).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub runs: u32,
    /// Untimed rounds over every cell before the timed ones (page faults,
    /// clock ramp-up, caches).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub warmup: u32,
}

impl Measure {
    pub fn rounds(&self) -> Rounds {
        Rounds {
            runs: self.runs as usize,
            warmup: self.warmup as usize,
        }
    }
}

/// Where and how a bench's results go.
#[derive(Args, Clone, Debug)]
pub struct Output {
    /// Write the results as JSON to FILE (`-` for stdout; the tables then go
    /// to stderr). Schema: docs/bench-schema.json (installed: PREFIX/share/doc/bulkmem/).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Table format: aligned text, Markdown, or CSV (one line per cell,
    /// numbers only, units in the column names).
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Cut text tables into blocks of columns at most this wide (80 for a
    /// plain-text email).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(40..))]
    pub width: u16,
}

pub use crate::failure::{runtime, usage, Failure};

/// `--json` and `--plot` of any subcommand, checked before it measures.
pub fn check_outputs(json: Option<&Path>, plot: Option<&Path>) -> Result<(), Failure> {
    preflight::check_outputs(json, plot).map_err(usage)
}

/// The memory a run needs against what is available (see
/// [`preflight::check_memory`] for the rule of each subcommand).
pub fn check_memory(needs: &[Need]) -> Result<(), Failure> {
    preflight::check_memory(needs).map_err(usage)
}

/// A region and its copy (or destination) of the largest of `sizes`.
pub fn twice_the_largest(flag: &str, sizes: &[usize], what: &str) -> Need {
    let max = sizes.iter().copied().max().unwrap_or(0);
    Need {
        bytes: times(2, max),
        flags: format!("{flag} {}", format_bytes(max)),
        what: what.to_string(),
    }
}

/// The strategies to run for `op`: (runnable, "name (needs x)" not runnable).
pub fn pick_strategies(op: Op, list: &str) -> Result<(Vec<Strategy>, Vec<String>), Failure> {
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

/// The CPUs measuring threads pin to: `named` in order, or the current
/// CPU then every other one this process may use (its affinity: taskset,
/// numactl, cpusets), as the engine's workers do. Pins the caller to the
/// first.
pub fn measuring_cpus(named: Option<&[usize]>) -> Result<Vec<usize>, Failure> {
    let online = &bulkmem::cpu::info().topology.online_cpus;
    let mut cpus = match named {
        Some(list) => list.to_vec(),
        None => vec![bulkmem_machine::machine::placement::current_cpu()],
    };
    if let Some(bad) = cpus.iter().find(|c| !online.contains(c)) {
        return Err(usage(format!(
            "--cpus: {bad} is not an online CPU (online: {})",
            bulkmem_machine::machine::topology::format_cpu_list(online)
        )));
    }
    let first = cpus[0];
    // Read before pinning: afterwards this thread's affinity is `first`
    // alone, and every other worker would share its CPU.
    let allowed = bulkmem::placement::allowed_cpus().unwrap_or_else(|| online.clone());
    bulkmem::placement::pin_to(first)
        .map_err(|e| runtime(format!("cannot pin to CPU {first}: {e}")))?;
    if named.is_none() {
        cpus.extend(
            online
                .iter()
                .copied()
                .filter(|&c| c != first && allowed.contains(&c)),
        );
    }
    Ok(cpus)
}

/// CPUs this process may run on (its affinity: taskset, numactl,
/// cpusets), else every online one.
pub fn usable_cpus() -> usize {
    bulkmem::placement::allowed_cpus()
        .unwrap_or_else(|| bulkmem::cpu::info().topology.online_cpus.clone())
        .len()
}

/// The one rule for `--threads` of every command: more threads than the
/// `cpus` they may run on are allowed, with this warning, and never
/// refused. Such a run measures something real (threads taking turns on
/// shared CPUs, as an oversubscribed program would), but its GB/s are
/// not the parallel bandwidth the tables are read for, so it is said
/// once, whatever `--quiet` (which silences progress only).
pub fn warn_oversubscribed(threads: usize, cpus: usize) {
    if threads > cpus {
        eprintln!(
            "bulkmem: warning: --threads {threads} is more than the {cpus} CPU(s) the threads may run on: \
             they share CPUs and take turns, so the figures measure that, not {threads} CPUs at once"
        );
    }
}

/// CPUs named on the command line, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// A CPU list in numactl/sysfs syntax: `0-3,8,10-11`.
pub fn parse_cpus(s: &str) -> Result<CpuList, String> {
    let cpus = bulkmem_machine::machine::topology::parse_cpu_list(s)?;
    if cpus.is_empty() {
        return Err("no CPUs named".into());
    }
    Ok(CpuList(cpus))
}

/// `copy` or `clear`.
pub fn parse_op(s: &str) -> Result<Op, String> {
    s.parse()
        .map_err(|e: bulkmem::ParseNameError| e.to_string())
}

pub fn progress_bar(quiet: bool, len: usize) -> ProgressBar {
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

/// Runs `work` under progress on stderr (`crate::progress`): a bar of
/// `groups` units with the time left on a terminal, a line every few
/// seconds elsewhere; nothing with `quiet`.
pub fn with_progress<T>(
    quiet: bool,
    groups: usize,
    work: impl FnOnce(&mut dyn FnMut(usize, usize, &str)) -> Result<T, String>,
) -> Result<T, Failure> {
    let pb = progress_bar(quiet, groups);
    // The bar redraws its clock while one long unit runs.
    pb.enable_steady_tick(std::time::Duration::from_secs(1));
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let beat = (!quiet && !tty).then(|| {
        Heartbeat::start(progress::EVERY, |line| {
            // Best effort, as the bar: a closed stderr must not end the run.
            let _ = writeln!(std::io::stderr(), "{line}");
        })
    });
    let start = std::time::Instant::now();
    let out = work(&mut |done, of, label| {
        pb.set_position(done as u64);
        pb.set_message(with_time_left(label, start.elapsed(), done, of));
        if let Some(b) = &beat {
            b.set(done, of, label);
        }
    });
    drop(beat);
    pb.finish_and_clear();
    out.map_err(runtime)
}

pub use bulkmem_report::chart::RowStyle as Style;

/// Prints the tables in `out`'s format (to stderr when the JSON goes to
/// stdout), writes the JSON, and plots GB/s against size: one line per
/// distinct style name, one panel per regime.
pub fn publish(
    out: &Output,
    tables: &[Table],
    rows: &[Row],
    plot: Option<(&Path, &str, &str, Style)>,
) -> Result<(), Failure> {
    let text: String = match out.format {
        // Numbers, one line per cell, rather than the tables' text.
        Format::Csv => bulkmem_report::row_csv::csv(rows),
        f => {
            let mut text: String = tables
                .iter()
                .map(|t| t.render(f, out.width.into()))
                .collect();
            text.push_str(&format!("\n{}\n", bulkmem_report::table::GB_NOTE));
            text
        }
    };
    if out.json.as_deref() == Some(Path::new("-")) {
        // The JSON owns stdout; the tables are a courtesy on stderr.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
    } else {
        crate::out::print(&text)?;
    }
    if let Some(path) = out.json.as_deref() {
        results::write_json(path, rows).map_err(runtime)?;
    }
    let Some((path, what, x_label, style)) = plot else {
        return Ok(());
    };
    let panels = chart::panels(rows, style, &|r| r.regime.to_string());
    plot_panels(path, what, x_label, &chart::merge_disjoint(panels))
}

/// Writes `panels` to `path`, titled with the benchmark and this CPU (for
/// benches whose panels are not regimes).
pub fn plot_panels(
    path: &Path,
    what: &str,
    x_label: &str,
    panels: &[chart::Panel],
) -> Result<(), Failure> {
    let title = format!("bulkmem {what}: {}", bulkmem::cpu::info().brand);
    chart::write(
        path,
        &chart::Chart {
            title: &title,
            x_label,
            y_label: "GB/s (median, min-max bars)",
            panels,
            log_x: true,
        },
    )
    .map_err(runtime)
}

pub fn parse_hint(s: &str) -> Result<Hint, String> {
    s.parse()
        .map_err(|e: bulkmem::ParseNameError| e.to_string())
}

pub fn parse_placement(s: &str) -> Result<bulkmem::placement::Placement, String> {
    s.parse()
        .map_err(|e: bulkmem::ParseNameError| e.to_string())
}

/// Node `id` as a place to put memory: refused, in the library's words
/// (`Error::NoSuchNode`, as a migration to it would be), unless it has
/// memory.
pub fn node_with_memory(nodes: &bulkmem::topology::Nodes, id: usize) -> Result<(), String> {
    if nodes.with_memory.contains(&id) {
        return Ok(());
    }
    let nodes = nodes.with_memory.clone();
    Err(bulkmem::Error::NoSuchNode { node: id, nodes }.to_string())
}

/// A node list flag (`--to`, `--nodes`) in numactl's syntax (`1`, `0,2`,
/// `0-3`, `all`: every node with memory), each node one with memory, its
/// errors naming the flag.
pub fn parse_node_flag(
    flag: &str,
    s: &str,
    nodes: &bulkmem::topology::Nodes,
) -> Result<Vec<usize>, String> {
    let list = if s.trim() == "all" {
        nodes.with_memory.clone()
    } else {
        bulkmem_machine::machine::topology::parse_cpu_list(s).map_err(|why| {
            format!("{flag}: {s:?} is not a node list ({why}; examples: 1, 0,2, 0-3, all)")
        })?
    };
    if list.is_empty() {
        return Err(format!(
            "{flag}: {s:?} is not a node list (it names no node)"
        ));
    }
    for &n in &list {
        node_with_memory(nodes, n).map_err(|e| format!("{flag} {s:?}: {e}"))?;
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lists_name_nodes_with_memory() {
        use bulkmem::topology::{Node, Nodes};
        let node = |id| Node {
            id,
            cpus: vec![],
            distances: vec![],
            mem_total: 1 << 30,
            mem_free: 1 << 30,
        };
        let nodes = Nodes {
            nodes: vec![node(0), node(1), node(2)],
            with_memory: vec![0, 1, 2],
        };
        let parse = |s| parse_node_flag("--to", s, &nodes);
        assert_eq!(parse("all").unwrap(), vec![0, 1, 2]);
        assert_eq!(parse("0,2").unwrap(), vec![0, 2]);
        assert_eq!(parse("1-2").unwrap(), vec![1, 2]);
        let e = parse("3").unwrap_err();
        assert!(e.contains("no NUMA node 3") && e.contains("0, 1, 2"), "{e}");
        let e = parse("x").unwrap_err();
        assert!(e.starts_with("--to: \"x\" is not a node list"), "{e}");
    }

    #[test]
    fn time_left_follows_the_pace_so_far() {
        let s = std::time::Duration::from_secs;
        assert_eq!(with_time_left("copy hot 4K", s(3), 0, 4), "copy hot 4K");
        assert_eq!(
            with_time_left("copy hot 2M", s(3), 1, 4),
            "copy hot 2M (about 9 s left)"
        );
        assert_eq!(with_time_left("done", s(12), 4, 4), "done");
    }

    /// Pinning the caller first made its affinity one CPU, and every other
    /// measuring thread then shared that CPU (`--threads 2` measured one).
    #[test]
    fn measuring_cpus_lists_every_allowed_cpu() {
        let online = bulkmem::cpu::info().topology.online_cpus.clone();
        let allowed = bulkmem::placement::allowed_cpus().unwrap_or_else(|| online.clone());
        let mut want: Vec<usize> = online
            .iter()
            .copied()
            .filter(|c| allowed.contains(c))
            .collect();
        // On a thread of its own: the pin stays there.
        let mut got = std::thread::spawn(|| measuring_cpus(None).ok().expect("online CPUs"))
            .join()
            .unwrap();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want);
    }
}
