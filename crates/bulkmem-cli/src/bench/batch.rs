//! `bulkmem bench batch`: the kernel's multi-threaded migration patches' experiments on the batch engine.
//!
//! 1. folio size x thread count at a constant total (default 256 MiB);
//! 2. folio count at 2 MiB (`--counts`);
//! 3. placement `spread` against `fill`.
//!
//! Cache-cold like the seeds: the folios are distinct extents over arenas of
//! the total, evicted before each run. Folios are `scattered` (shuffled, so
//! nothing coalesces, as real folios are) or `adjacent` (in order: the batch
//! becomes one run). The baseline row is the kernel's per-page loop on one
//! thread, folio by folio. Configurations take turns run by run.

use std::time::Instant;

use bulkmem::calibrate::toolkit::scattered_pairs;
use bulkmem::mapping::Mapping;
use bulkmem::offload::Offload;
use bulkmem::{Engine, Kernel, Op, Placement, Strategy};

use crate::arena;
use crate::cli::{
    check_memory, check_outputs, publish, usage, warn_oversubscribed, with_progress, Failure,
    Measure, Output, Style,
};
use crate::failure::runtime;
use crate::harness::{cpu_time, fill_pattern, gbps, interleave, Rounds, POISON};
use crate::preflight::{self, eviction_bytes, times, Need};
use crate::report;
use crate::report::{BatchCell, Row};
use crate::size::{self, fmt_size};
use crate::stats::Stats;
use clap::Args;
use std::path::PathBuf;

mod bound;
mod offload;
mod tables;

use offload::{open_offload, parse_offload, OffloadSpec, Registered};
pub use tables::tables;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    Scattered,
    Adjacent,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Scattered => "scattered",
            Layout::Adjacent => "adjacent",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub op: Op,
    pub folios: Vec<usize>,
    pub threads: Vec<usize>,
    pub placements: Vec<Placement>,
    pub layouts: Vec<Layout>,
    pub total: usize,
    /// Folio counts for experiment 2 (at `COUNT_FOLIO`); empty skips it.
    pub counts: Vec<usize>,
    pub rounds: Rounds,
    pub thp: bool,
    /// Copy channels beside the workers: adds `engine N + <kind>` rows and
    /// one `<kind> only` row (the sources and destinations are registered).
    pub offload: Option<(Offload, &'static str)>,
    /// Also measure each engine's checked batches (`engine N checked`):
    /// the same batch through `copy_batch_checked` / `clear_batch_checked`.
    pub checked: bool,
}

/// Folio size of the count experiment, as in the kernel's multi-threaded migration patches.
pub const COUNT_FOLIO: usize = 2 << 20;

/// One batch shape to measure: `count` folios of `size`.
#[derive(Clone, Copy)]
struct Shape {
    size: usize,
    count: usize,
    layout: Layout,
}

impl Plan {
    fn shapes(&self) -> Vec<Shape> {
        let mut v = Vec::new();
        for &layout in &self.layouts {
            for &size in &self.folios {
                v.push(Shape {
                    size,
                    count: (self.total / size).max(1),
                    layout,
                });
            }
            for &count in &self.counts {
                if !self.folios.contains(&COUNT_FOLIO) || count * COUNT_FOLIO != self.total {
                    v.push(Shape {
                        size: COUNT_FOLIO,
                        count,
                        layout,
                    });
                }
            }
        }
        v
    }

    /// Progress units [`run`] reports.
    pub fn groups(&self) -> usize {
        self.shapes().len()
    }

    fn arena_bytes(&self) -> usize {
        self.shapes()
            .iter()
            .map(|s| s.size * s.count)
            .max()
            .unwrap_or(0)
    }
}

/// Measures the plan; `progress(done, of, label)` after each shape.
pub fn run(
    plan: &Plan,
    pin_cpu: usize,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<Row>, String> {
    let mut engines = Vec::new();
    let offload = plan.offload.as_ref().filter(|_| plan.op == Op::Copy);
    for &p in &plan.placements {
        for &t in &plan.threads {
            let b = Engine::builder().threads(t).placement(p);
            let start = |b: bulkmem::EngineBuilder| {
                b.build()
                    .map_err(|e| format!("cannot start a {t}-thread engine: {e}"))
            };
            engines.push(Config {
                label: "engine".into(),
                placement: p,
                threads: t,
                engine: start(b.clone())?,
                checked: false,
            });
            if plan.checked {
                engines.push(Config {
                    label: "engine checked".into(),
                    placement: p,
                    threads: t,
                    engine: start(b.clone())?,
                    checked: true,
                });
            }
            if let Some((o, kind)) = offload {
                engines.push(Config {
                    label: format!("engine+{kind}"),
                    placement: p,
                    threads: t,
                    engine: start(b.offload(o.clone()))?,
                    checked: false,
                });
            }
        }
    }
    if let Some((o, kind)) = offload {
        engines.push(Config {
            label: format!("{kind} only"),
            placement: plan.placements[0],
            threads: o.channels(),
            engine: Engine::builder()
                .threads(1)
                .offload(o.clone())
                .offload_only(true)
                .build()
                .map_err(|e| format!("cannot start the offload-only engine: {e}"))?,
            checked: false,
        });
    }
    let bytes = plan.arena_bytes();
    let map = |fill| {
        arena::prefaulted(bytes, plan.thp, fill)
            .map_err(|e| format!("cannot map {bytes} bytes: {e}"))
    };
    let mut src = map(0)?;
    if plan.op == Op::Copy {
        fill_pattern(src.as_mut_slice());
    }
    let mut dst = map(POISON)?;
    // Declared after the arenas, so dropped (unregistering them) first.
    let mut registered = Registered(Vec::new());
    if let Some((o, kind)) = offload {
        // Pinned once, as a long-lived buffer would be; what pinning costs
        // is said, not hidden in the rows.
        let t = Instant::now();
        for m in [&src, &dst] {
            // SAFETY: the arenas stay mapped until `registered` is dropped,
            // which unregisters them first.
            unsafe { o.register(m.as_ptr(), m.len()) }
                .map_err(|e| format!("cannot register the arenas with the {kind}: {e}"))?;
            registered.0.push((o.clone(), m.as_ptr(), m.len()));
        }
        let secs = t.elapsed().as_secs_f64();
        // The offload's own description names the device, so a stand-in
        // (the tests' CUDA double) says what it is before any row.
        eprintln!(
            "bulkmem: registered 2 x {} with {} in {:.0} ms ({:.1} GB/s)",
            crate::size::fmt_size(bytes),
            o.describe(),
            secs * 1e3,
            gbps(2 * bytes, t.elapsed())
        );
    }
    let llc = bulkmem::cpu::info().llc_bytes();
    let evict = arena::eviction_buffer(llc, plan.thp)
        .map_err(|e| format!("cannot map the eviction buffer: {e}"))?;
    // The per-page baseline runs on the measuring thread, pinned like the
    // engines' first worker would be.
    bulkmem::placement::pin_to(pin_cpu).map_err(|e| format!("cannot pin to CPU {pin_cpu}: {e}"))?;

    let shapes = plan.shapes();
    let mut rows = Vec::new();
    for (n, shape) in shapes.iter().enumerate() {
        progress(
            n,
            shapes.len(),
            &format!(
                "{} x {} {}",
                shape.count,
                crate::size::fmt_size(shape.size),
                shape.layout.name()
            ),
        );
        rows.extend(measure_shape(
            plan, *shape, &engines, &mut dst, &src, &evict,
        )?);
    }
    progress(shapes.len(), shapes.len(), "done");
    Ok(rows)
}

/// One engine configuration measured in every shape.
struct Config {
    /// The row's strategy: `engine`, `engine+gpu`, `gpu only`.
    label: String,
    placement: Placement,
    /// CPU workers (channels for an offload-only engine).
    threads: usize,
    engine: Engine,
    /// Runs its batches through the checked (fault-surviving) calls.
    checked: bool,
}

fn measure_shape(
    plan: &Plan,
    shape: Shape,
    engines: &[Config],
    dst: &mut Mapping,
    src: &Mapping,
    evict: &Mapping,
) -> Result<Vec<Row>, String> {
    let Shape {
        size,
        count,
        layout,
    } = shape;
    let mut ops: Vec<(&mut [u8], &[u8])> = match layout {
        Layout::Scattered => scattered_pairs(dst.as_mut_slice(), src.as_slice(), size, count),
        Layout::Adjacent => dst
            .as_mut_slice()
            .chunks_exact_mut(size)
            .zip(src.as_slice().chunks_exact(size))
            .take(count)
            .collect(),
    };
    // Clears get their own list, built once, so nothing is built while timed.
    let mut clears: Vec<&mut [u8]> = Vec::new();
    if plan.op == Op::Clear {
        clears = ops.drain(..).map(|(d, _)| d).collect();
    }
    let total = size * count;
    let per_page = Kernel::new(Strategy::PerPage, Op::Copy).expect("per-page runs anywhere");
    let per_page_clear = Kernel::new(Strategy::PerPage, Op::Clear).expect("per-page runs anywhere");
    let baseline = |ops: &mut [(&mut [u8], &[u8])], clears: &mut [&mut [u8]]| {
        for (d, s) in ops.iter_mut() {
            per_page.copy(d, s);
        }
        for d in clears.iter_mut() {
            per_page_clear.clear(d);
        }
    };
    let run_engine = |c: &Config,
                      ops: &mut [(&mut [u8], &[u8])],
                      clears: &mut [&mut [u8]]|
     -> Result<Strategy, String> {
        let e = &c.engine;
        let r = match (plan.op, c.checked) {
            (Op::Copy, false) => e.copy_batch(ops),
            (Op::Clear, false) => e.clear_batch(clears),
            (op, true) => {
                let r = match op {
                    Op::Copy => e.copy_batch_checked(ops, Default::default()),
                    Op::Clear => e.clear_batch_checked(clears, Default::default()),
                }
                .map_err(|e| format!("checked engine batch failed: {e}"))?;
                if !r.all_done() {
                    return Err(format!(
                        "checked engine batch faulted: {:?}",
                        r.faults().next()
                    ));
                }
                Ok(r.report)
            }
        }
        .map_err(|e| format!("engine batch failed: {e}"))?;
        if !r.is_complete() {
            return Err(format!("engine batch stopped early: {r:?}"));
        }
        Ok(r.strategy)
    };
    let poison = |ops: &mut [(&mut [u8], &[u8])], clears: &mut [&mut [u8]]| {
        ops.iter_mut().for_each(|(d, _)| d.fill(POISON));
        clears.iter_mut().for_each(|d| d.fill(POISON));
    };
    let check =
        |ops: &[(&mut [u8], &[u8])], clears: &[&mut [u8]], who: &str| -> Result<(), String> {
            let bad = ops
                .iter()
                .position(|(d, s)| d != s)
                .or_else(|| clears.iter().position(|d| d.iter().any(|&b| b != 0)));
            match bad {
                None => Ok(()),
                Some(i) => Err(format!("verification failed: {who} left folio {i} wrong")),
            }
        };

    // Verify every configuration once, from a poisoned destination.
    let mut chose = Vec::new();
    for c in engines {
        poison(&mut ops, &mut clears);
        chose.push(run_engine(c, &mut ops, &mut clears)?);
        check(&ops, &clears, &c.label)?;
    }
    poison(&mut ops, &mut clears);
    baseline(&mut ops, &mut clears);
    check(&ops, &clears, "per-page")?;

    // Cell 0 is the per-page baseline, cell i + 1 engine configuration i.
    // Beside GB/s, each run's CPU time over wall time (warm-up runs too:
    // the median is over many runs anyway).
    let mut busy = vec![Vec::new(); engines.len() + 1];
    let stats = interleave(engines.len() + 1, plan.rounds, |i| {
        arena::evict_through(evict);
        let cpu = cpu_time();
        let t = Instant::now();
        match i {
            0 => baseline(&mut ops, &mut clears),
            _ => {
                run_engine(&engines[i - 1], &mut ops, &mut clears)?;
            }
        }
        let wall = t.elapsed();
        busy[i].push((cpu_time() - cpu).as_secs_f64() / wall.as_secs_f64().max(1e-9));
        Ok(gbps(total, wall))
    })?;
    let busy: Vec<Option<f64>> = busy
        .iter()
        .map(|b| Stats::of(b).map(|s| s.median))
        .collect();

    let row = |strategy: &str,
               chose: Strategy,
               threads,
               placement: &'static str,
               s: &Stats,
               cpu_busy: Option<f64>,
               cpus: Option<usize>| Row {
        op: plan.op.name(),
        strategy: strategy.to_string(),
        chose: chose.name().to_string(),
        hint: None,
        size,
        total,
        regime: "cold",
        threads,
        runs: plan.rounds.runs,
        gbps: s.clone(),
        speedup: None,
        baseline: None,
        calls: None,
        batch: Some(BatchCell {
            placement,
            layout: layout.name(),
            count,
            cpu_busy,
            bound_share: None,
            cpus,
        }),
        fill: None,
        moved: None,
        migrated: None,
    };
    let mut rows = vec![row(
        "per-page",
        Strategy::PerPage,
        1,
        "-",
        &stats[0],
        busy[0],
        None,
    )];
    for (i, c) in engines.iter().enumerate() {
        rows.push(row(
            &c.label,
            chose[i],
            c.threads,
            c.placement.name(),
            &stats[i + 1],
            busy[i + 1],
            distinct(c.engine.cpus()),
        ));
    }
    Ok(rows)
}

/// How many different CPUs `cpus` names (`None` for none: an engine of
/// copy channels only).
fn distinct(cpus: &[usize]) -> Option<usize> {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    (!v.is_empty()).then_some(v.len())
}

#[derive(Args)]
pub struct BatchArgs {
    /// copy or clear.
    #[arg(long, default_value = "copy", value_parser = crate::cli::parse_op)]
    op: Op,
    /// Folio sizes; each is measured at a constant total.
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, allow_hyphen_values = true, default_value = "4K,16K,64K,256K,2M")]
    folio: Vec<usize>,
    /// Worker counts (default: 1, 2, 4, ... up to the online CPUs). More
    /// workers than usable CPUs run with a warning: they share CPUs.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: Vec<u32>,
    /// Bytes per batch.
    #[arg(long, value_parser = size::parse_size, allow_hyphen_values = true, default_value = "256M")]
    total: usize,
    /// Also measure these folio counts at 2M (the folio-count experiment).
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
    placement: Vec<bulkmem::Placement>,
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
        None => bulkmem::placement::current_cpu(),
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
    };
    let bounds = bound::bounds(plan.op, &plan.threads, first, a.bound).map_err(runtime)?;
    let mut rows = with_progress(quiet, plan.groups(), |p| run(&plan, first, p))?;
    report::add_speedups(&mut rows);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            op: Op::Copy,
            folios: vec![4096, 64 << 10],
            threads: vec![1, 2],
            placements: vec![Placement::Spread],
            layouts: vec![Layout::Scattered, Layout::Adjacent],
            total: 1 << 20,
            counts: vec![],
            rounds: crate::harness::Rounds { runs: 1, warmup: 0 },
            thp: false,
            offload: None,
            checked: false,
        }
    }

    #[test]
    fn every_shape_and_engine_gets_a_verified_row() {
        for op in [Op::Copy, Op::Clear] {
            let mut p = plan();
            p.op = op;
            let mut rows = run(&p, bulkmem::placement::current_cpu(), &mut |_, _, _| {}).unwrap();
            crate::report::add_speedups(&mut rows);
            assert_eq!(
                rows.len(),
                2 * 2 * 3,
                "layouts x folios x (per-page + 2 engines)"
            );
            for r in &rows {
                assert!(r.gbps.median > 0.0);
                assert!(r.speedup.is_some(), "{r:?}");
                let b = r.batch.as_ref().unwrap();
                assert_eq!(b.count * r.size, r.total);
            }
            let t = crate::table::text(&tables(&rows));
            assert!(
                t.contains("scattered") && t.contains("adjacent") && t.contains("engine 2"),
                "{t}"
            );
            assert!(t.contains("256x4K") && t.contains("16x64K"), "{t}");
        }
    }

    #[test]
    fn counts_add_2m_shapes_without_repeating_the_total() {
        let mut p = plan();
        p.folios = vec![COUNT_FOLIO];
        p.total = 4 * COUNT_FOLIO;
        p.counts = vec![1, 4];
        p.layouts = vec![Layout::Scattered];
        let shapes: Vec<(usize, usize)> = p.shapes().iter().map(|s| (s.size, s.count)).collect();
        assert_eq!(shapes, vec![(COUNT_FOLIO, 4), (COUNT_FOLIO, 1)]);
        assert_eq!(p.arena_bytes(), 4 * COUNT_FOLIO);
    }
}
