//! `bench batch`'s flags and handler: the plan they describe, the memory
//! it will hold, and the published tables.

use std::path::PathBuf;

use clap::Args;

use bulkmem::Op;

use super::offload::{open_offload, parse_offload, OffloadSpec};
use super::{bound, run, tables, Layout, Plan, COUNT_FOLIO};
use crate::cli::{
    check_memory, check_outputs, publish, usage, warn_oversubscribed, with_progress, Failure,
    Measure, Output, Style,
};
use crate::failure::runtime;
use crate::preflight::{self, eviction_bytes, times, Need};
use crate::results::{self, Row};
use crate::size;
use bulkmem_machine::units::format_bytes;

#[derive(Args)]
pub struct BatchArgs {
    /// copy or clear.
    #[arg(long, default_value = "copy", value_parser = crate::cli::parse_op)]
    op: Op,
    /// Block ("folio") sizes; each size fills the same --total, in as
    /// many blocks as it takes.
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, allow_hyphen_values = true, default_value = "4K,16K,64K,256K,1M,2M")]
    folio: Vec<usize>,
    /// Worker counts (default: 1, 2, 4, ... up to the online CPUs). More
    /// workers than usable CPUs run with a warning: they share CPUs.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: Vec<u32>,
    /// Bytes per batch.
    #[arg(long, value_parser = size::parse_size, allow_hyphen_values = true, default_value = "256M")]
    total: usize,
    /// Also measure batches of this many 2M blocks (how the count of
    /// blocks changes the rate).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    counts: Vec<u32>,
    /// Copy channels beside the workers: gpu[:CHANNELS] (the CUDA driver's
    /// copy engines; the arenas are pinned once) or emulated[:CHANNELS]
    /// (CPU threads with a delay, to try the scheduling without a GPU).
    /// Adds `engine N + gpu` rows and a `gpu only` row (copies only).
    #[arg(long, value_name = "KIND[:CHANNELS]", value_parser = parse_offload)]
    offload: Option<OffloadSpec>,
    /// spread: round-robin over LLC domains; fill: one domain first.
    #[arg(long, value_delimiter = ',', default_value = "spread", value_parser = crate::cli::parse_placement)]
    placement: Vec<bulkmem::placement::Placement>,
    /// scattered: shuffled folios that do not coalesce; adjacent: in order.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "scattered")]
    layout: Vec<Layout>,
    #[command(flatten)]
    measure: Measure,
    /// CPU for the single-thread per-page baseline (default: where it starts).
    #[arg(long)]
    cpu: Option<usize>,
    /// Do not ask for transparent huge pages on the benchmark arenas.
    #[arg(long)]
    no_thp: bool,
    #[command(flatten)]
    out: Output,
    /// GB/s against folio size, a line per thread count (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Also measure each thread count's checked batches (`engine N
    /// checked`: the batches that survive a bad page), beside the engine's.
    #[arg(long)]
    checked: bool,
    /// Also measure each thread count's engine copying every extent on
    /// its own (`engine N single`), as before batches copied four
    /// same-size extents at once: what that gains, in the same run.
    #[arg(long)]
    single: bool,
    /// The memory bound each engine row's share is of, in GB/s, instead
    /// of measuring it (`bench limits`) at the start.
    #[arg(long, value_name = "GBPS", value_parser = parse_bound)]
    bound: Option<f64>,
}

fn parse_bound(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|g| g.is_finite() && *g > 0.0)
        .ok_or_else(|| format!("'{s}': expected GB/s above 0"))
}

pub fn cmd(a: BatchArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), a.plot.as_deref())?;
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
    warn_oversubscribed(
        threads.iter().copied().max().unwrap_or(1),
        crate::cli::usable_cpus(),
    );
    if let Some(&f) = a.folio.iter().find(|&&f| f > a.total) {
        return Err(usage(format!(
            "--folio {} is larger than --total {}",
            bulkmem_machine::units::format_bytes(f),
            bulkmem_machine::units::format_bytes(a.total)
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
    let mut needs = vec![arenas(
        a.total,
        format!("--total {}", format_bytes(a.total)),
    )];
    if let Some(&c) = a.counts.iter().max() {
        needs.push(arenas(
            times(c as usize, COUNT_FOLIO),
            format!("--counts {c}"),
        ));
    }
    check_memory(&needs)?;
    // Not pinned yet: an engine takes the CPUs its builder's thread may
    // use, so one built on a pinned caller would have one CPU for all its
    // workers. run() pins the caller for the per-page baseline once the
    // engines exist.
    let first = match a.cpu {
        Some(c) if bulkmem::cpu::info().topology.online_cpus.contains(&c) => c,
        Some(c) => return Err(usage(format!("--cpu: {c} is not an online CPU"))),
        None => bulkmem_machine::machine::placement::current_cpu(),
    };
    let plan = Plan {
        op: a.op,
        folios: a.folio,
        threads,
        placements: a.placement,
        layouts: a.layout,
        total: a.total,
        counts: a.counts.iter().map(|&c| c as usize).collect(),
        rounds: a.measure.rounds(),
        thp: !a.no_thp,
        offload: a.offload.map(open_offload).transpose()?,
        checked: a.checked,
        single: a.single,
    };
    let bounds =
        bound::bounds(plan.op, &plan.threads, &plan.folios, first, a.bound).map_err(runtime)?;
    let mut rows = with_progress(quiet, plan.groups(), |p| run(&plan, first, p))?;
    results::add_speedups(&mut rows);
    bound::attach(&mut rows, &bounds);
    let style = |r: &Row| tables::style(&plan, r);
    let what = format!("batch {}", plan.op);
    publish(
        &a.out,
        &tables(&rows),
        &rows,
        a.plot
            .as_deref()
            .map(|p| (p, what.as_str(), "folio size", &style as Style)),
    )
}
