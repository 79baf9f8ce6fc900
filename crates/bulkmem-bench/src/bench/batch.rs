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
//!
//! This file is the plan and the engines it starts; measuring one shape is
//! `measure.rs`, the flags and handler `args.rs`, the tables `tables.rs`.

use std::time::Instant;

use bulkmem::offload::Offload;
use bulkmem::placement::Placement;
use bulkmem::{Engine, Op};

use crate::arena;
use crate::harness::{fill_pattern, gbps, Rounds, POISON};
use crate::results::Row;

mod args;
mod bound;
mod measure;
mod offload;
mod tables;

pub use args::{cmd, BatchArgs};
use measure::measure_shape;
use offload::Registered;
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
    /// Also measure each engine copying every extent on its own (`engine
    /// N single`): the batches before four-extent copies.
    pub single: bool,
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
            if plan.single && plan.op == Op::Copy {
                engines.push(Config {
                    label: "engine single".into(),
                    placement: p,
                    threads: t,
                    engine: start(b.clone().gangs(false))?,
                    checked: false,
                });
            }
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
            bulkmem_machine::units::format_bytes(bytes),
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
                bulkmem_machine::units::format_bytes(shape.size),
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

/// How many different CPUs `cpus` names (`None` for none: an engine of
/// copy channels only).
fn distinct(cpus: &[usize]) -> Option<usize> {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    (!v.is_empty()).then_some(v.len())
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
            single: false,
        }
    }

    #[test]
    fn every_shape_and_engine_gets_a_verified_row() {
        for op in [Op::Copy, Op::Clear] {
            let mut p = plan();
            p.op = op;
            let mut rows = run(
                &p,
                bulkmem_machine::machine::placement::current_cpu(),
                &mut |_, _, _| {},
            )
            .unwrap();
            crate::results::add_speedups(&mut rows);
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
            let t = bulkmem_report::table::text(&tables(&rows));
            assert!(
                t.contains("scattered") && t.contains("adjacent") && t.contains("engine 2"),
                "{t}"
            );
            assert!(t.contains("256x4K") && t.contains("16x64K"), "{t}");
        }
    }

    #[test]
    fn single_and_checked_rows_sit_beside_each_engine() {
        for op in [Op::Copy, Op::Clear] {
            let mut p = plan();
            p.op = op;
            p.layouts = vec![Layout::Scattered];
            p.folios = vec![4096];
            p.checked = true;
            p.single = true;
            let rows = run(
                &p,
                bulkmem_machine::machine::placement::current_cpu(),
                &mut |_, _, _| {},
            )
            .unwrap();
            let count = |s: &str| rows.iter().filter(|r| r.strategy == s).count();
            assert_eq!(count("engine checked"), 2, "{op:?}");
            // One extent at a time is a copy's comparison: clears have
            // no four-extent form.
            let single = if op == Op::Copy { 2 } else { 0 };
            assert_eq!(count("engine single"), single, "{op:?}");
            let t = bulkmem_report::table::text(&tables(&rows));
            assert_eq!(t.contains("engine 2 single"), op == Op::Copy, "{t}");
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
