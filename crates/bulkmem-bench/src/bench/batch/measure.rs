//! One batch shape of `bench batch` measured: every engine configuration
//! and the per-page baseline verified once from a poisoned destination,
//! then timed in turns, with the CPU time each run kept busy.

use std::time::Instant;

use bulkmem::mapping::Mapping;
use bulkmem::{ClearKernel, CopyKernel, Op, Strategy};
use bulkmem_calibrate::toolkit::scattered_pairs;

use super::{distinct, Config, Layout, Plan, Shape};
use crate::arena;
use crate::harness::{cpu_time, gbps, interleave, POISON};
use crate::results::{BatchCell, Row};
use bulkmem_report::stats::Stats;

/// One shape's folios: copy pairs, or (for clears) destinations alone,
/// built once so that nothing is built while timed.
struct Folios<'a> {
    op: Op,
    ops: Vec<(&'a mut [u8], &'a [u8])>,
    clears: Vec<&'a mut [u8]>,
}

impl<'a> Folios<'a> {
    fn new(op: Op, shape: Shape, dst: &'a mut Mapping, src: &'a Mapping) -> Folios<'a> {
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
        let clears = if op == Op::Clear {
            ops.drain(..).map(|(d, _)| d).collect()
        } else {
            Vec::new()
        };
        Folios { op, ops, clears }
    }

    /// The per-page loop over every folio: the baseline.
    fn per_page(&mut self) {
        let (copy, clear) = (CopyKernel::baseline(), ClearKernel::baseline());
        for (d, s) in self.ops.iter_mut() {
            copy.copy(d, s);
        }
        for d in self.clears.iter_mut() {
            clear.clear(d);
        }
    }

    /// One batch call of `c`'s engine; what it chose.
    fn engine(&mut self, c: &Config) -> Result<Strategy, String> {
        let e = &c.engine;
        let r = match (self.op, c.checked) {
            (Op::Copy, false) => e.copy_batch(&mut self.ops),
            (Op::Clear, false) => e.clear_batch(&mut self.clears),
            (op, true) => {
                let r = match op {
                    Op::Copy => e.copy_batch_checked(&mut self.ops, Default::default()),
                    Op::Clear => e.clear_batch_checked(&mut self.clears, Default::default()),
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
    }

    fn poison(&mut self) {
        self.ops.iter_mut().for_each(|(d, _)| d.fill(POISON));
        self.clears.iter_mut().for_each(|d| d.fill(POISON));
    }

    /// Every destination as the operation leaves it, or which one is not.
    fn check(&self, who: &str) -> Result<(), String> {
        let bad = self
            .ops
            .iter()
            .position(|(d, s)| d != s)
            .or_else(|| self.clears.iter().position(|d| d.iter().any(|&b| b != 0)));
        match bad {
            None => Ok(()),
            Some(i) => Err(format!("verification failed: {who} left folio {i} wrong")),
        }
    }
}

pub(super) fn measure_shape(
    plan: &Plan,
    shape: Shape,
    engines: &[Config],
    dst: &mut Mapping,
    src: &Mapping,
    evict: &Mapping,
) -> Result<Vec<Row>, String> {
    let mut folios = Folios::new(plan.op, shape, dst, src);

    // Verify every configuration once, from a poisoned destination.
    let mut chose = Vec::new();
    for c in engines {
        folios.poison();
        chose.push(folios.engine(c)?);
        folios.check(&c.label)?;
    }
    folios.poison();
    folios.per_page();
    folios.check("per-page")?;

    // Cell 0 is the per-page baseline, cell i + 1 engine configuration i.
    // Beside GB/s, each run's CPU time over wall time (warm-up runs too:
    // the median is over many runs anyway).
    let total = shape.size * shape.count;
    let mut busy = vec![Vec::new(); engines.len() + 1];
    let stats = interleave(engines.len() + 1, plan.rounds, |i| {
        arena::evict_through(evict);
        let cpu = cpu_time();
        let t = Instant::now();
        match i {
            0 => folios.per_page(),
            _ => {
                folios.engine(&engines[i - 1])?;
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

    let row = |strategy: &str, chose: Strategy, threads, placement, i: usize, cpus| Row {
        op: plan.op.name(),
        strategy: strategy.to_string(),
        chose: chose.name().to_string(),
        size: shape.size,
        total,
        regime: "cold",
        threads,
        runs: plan.rounds.runs,
        gbps: stats[i].clone(),
        batch: Some(BatchCell {
            placement,
            layout: shape.layout.name(),
            count: shape.count,
            cpu_busy: busy[i],
            bound_share: None,
            bound: None,
            cpus,
        }),
        ..Default::default()
    };
    let mut rows = vec![row("per-page", Strategy::PerPage, 1, "-", 0, None)];
    for (i, c) in engines.iter().enumerate() {
        rows.push(row(
            &c.label,
            chose[i],
            c.threads,
            c.placement.name(),
            i + 1,
            distinct(c.engine.cpus()),
        ));
    }
    Ok(rows)
}
