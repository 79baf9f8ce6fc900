//! `bulkmem bench batch`: seed 002's experiments on the batch engine.
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

use bulkmem::mapping::Mapping;
use bulkmem::{Engine, Kernel, Op, Placement, Strategy};

use crate::arena;
use crate::bench_mem::{fill_pattern, gbps, shuffled, POISON};
use crate::report::{BatchCell, Row};
use crate::stats::Stats;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    pub runs: usize,
    pub thp: bool,
}

/// Folio size of the count experiment, as in seed 002.
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
    for &p in &plan.placements {
        for &t in &plan.threads {
            let e = Engine::builder()
                .threads(t)
                .placement(p)
                .build()
                .map_err(|e| format!("cannot start a {t}-thread engine: {e}"))?;
            engines.push((p, t, e));
        }
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
    let llc = bulkmem::cpu::info().llc_bytes();
    let evict = arena::prefaulted((2 * llc).max(64 << 20), plan.thp, 1)
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

fn measure_shape(
    plan: &Plan,
    shape: Shape,
    engines: &[(Placement, usize, Engine)],
    dst: &mut Mapping,
    src: &Mapping,
    evict: &Mapping,
) -> Result<Vec<Row>, String> {
    let Shape {
        size,
        count,
        layout,
    } = shape;
    let (d_order, s_order) = match layout {
        Layout::Scattered => (shuffled(count, 0xba7c_0001), shuffled(count, 0xba7c_0002)),
        Layout::Adjacent => ((0..count).collect(), (0..count).collect()),
    };
    let mut d_slots: Vec<Option<&mut [u8]>> = dst
        .as_mut_slice()
        .chunks_exact_mut(size)
        .take(count)
        .map(Some)
        .collect();
    let s_slots: Vec<&[u8]> = src.as_slice().chunks_exact(size).take(count).collect();
    let mut ops: Vec<(&mut [u8], &[u8])> = d_order
        .iter()
        .zip(&s_order)
        .map(|(&d, &s)| (d_slots[d].take().expect("a permutation"), s_slots[s]))
        .collect();
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
    let run_engine = |e: &Engine,
                      ops: &mut [(&mut [u8], &[u8])],
                      clears: &mut [&mut [u8]]|
     -> Result<Strategy, String> {
        let r = match plan.op {
            Op::Copy => e.copy_batch(ops),
            Op::Clear => e.clear_batch(clears),
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
    for (_, _, e) in engines {
        poison(&mut ops, &mut clears);
        chose.push(run_engine(e, &mut ops, &mut clears)?);
        check(&ops, &clears, "the engine")?;
    }
    poison(&mut ops, &mut clears);
    baseline(&mut ops, &mut clears);
    check(&ops, &clears, "per-page")?;

    let mut base_samples = Vec::new();
    let mut samples = vec![Vec::new(); engines.len()];
    for _ in 0..plan.runs {
        arena::evict_through(evict);
        let t = Instant::now();
        baseline(&mut ops, &mut clears);
        base_samples.push(gbps(total, t.elapsed()));
        for (i, (_, _, e)) in engines.iter().enumerate() {
            arena::evict_through(evict);
            let t = Instant::now();
            run_engine(e, &mut ops, &mut clears)?;
            samples[i].push(gbps(total, t.elapsed()));
        }
    }

    let row = |strategy: &str, chose: Strategy, threads, placement: &'static str, s: &[f64]| Row {
        op: plan.op.name(),
        strategy: strategy.to_string(),
        chose: chose.name().to_string(),
        hint: None,
        size,
        total,
        regime: "cold",
        threads,
        runs: plan.runs,
        gbps: Stats::or_zero(s),
        speedup: None,
        batch: Some(BatchCell {
            placement,
            layout: layout.name(),
            count,
        }),
        fill: None,
        moved: None,
        migrated: None,
    };
    let mut rows = vec![row("per-page", Strategy::PerPage, 1, "-", &base_samples)];
    for (i, (p, t, _)) in engines.iter().enumerate() {
        rows.push(row("engine", chose[i], *t, p.name(), &samples[i]));
    }
    Ok(rows)
}

/// Tables: per (layout, placement), a row per thread count (and the
/// per-page baseline), a column per shape.
pub fn tables(rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let batch = |r: &Row| r.batch.clone().expect("batch rows");
    let mut groups: Vec<(&'static str, &'static str)> = Vec::new();
    for r in rows.iter().filter(|r| r.strategy == "engine") {
        let b = batch(r);
        if !groups.contains(&(b.layout, b.placement)) {
            groups.push((b.layout, b.placement));
        }
    }
    for (layout, placement) in groups {
        let mut cols: Vec<(usize, usize)> = Vec::new();
        for r in rows.iter().filter(|r| batch(r).layout == layout) {
            if !cols.contains(&(r.size, batch(r).count)) {
                cols.push((r.size, batch(r).count));
            }
        }
        let first = &rows[0];
        let _ = writeln!(
            out,
            "\n{}, cold, {layout} folios, placement {placement}: GB/s, median of {}; x = speed-up over per-page (1 thread)",
            first.op, first.runs
        );
        let _ = write!(out, "{:<14}", "threads");
        for &(size, count) in &cols {
            let _ = write!(
                out,
                "{:>17}",
                format!("{count}x{}", crate::size::fmt_size(size))
            );
        }
        out.push('\n');
        let mut labels: Vec<(String, usize)> = vec![("per-page".into(), 0)];
        let mut ts: Vec<usize> = rows
            .iter()
            .filter(|r| r.strategy == "engine")
            .map(|r| r.threads)
            .collect();
        ts.sort_unstable();
        ts.dedup();
        labels.extend(ts.into_iter().map(|t| (format!("engine {t}"), t)));
        for (label, t) in labels {
            let _ = write!(out, "{label:<14}");
            for &(size, count) in &cols {
                let cell = rows.iter().find(|r| {
                    let b = batch(r);
                    r.size == size
                        && b.count == count
                        && b.layout == layout
                        && if t == 0 {
                            r.strategy == "per-page"
                        } else {
                            r.strategy == "engine" && r.threads == t && b.placement == placement
                        }
                });
                let text = match cell {
                    Some(r) if t == 0 => format!("{:.2}", r.gbps.median),
                    Some(r) => format!("{:.2} {:>5.2}x", r.gbps.median, r.speedup.unwrap_or(0.0)),
                    None => "-".into(),
                };
                let _ = write!(out, "{text:>17}");
            }
            out.push('\n');
        }
    }
    out
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
            runs: 1,
            thp: false,
        }
    }

    #[test]
    fn every_shape_and_engine_gets_a_verified_row() {
        for op in [Op::Copy, Op::Clear] {
            let mut p = plan();
            p.op = op;
            let mut rows = run(&p, arena::current_cpu(), &mut |_, _, _| {}).unwrap();
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
            let t = tables(&rows);
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
