//! One batch shape of `bench batch` measured: every engine configuration
//! and the per-page baseline verified once from a poisoned destination,
//! then timed in turns, with the CPU time each run kept busy.

use std::time::Instant;

use bulkmem::calibrate::toolkit::scattered_pairs;
use bulkmem::mapping::Mapping;
use bulkmem::{ClearKernel, CopyKernel, Op, Strategy};

use super::{distinct, Config, Layout, Plan, Shape};
use crate::arena;
use crate::harness::{cpu_time, gbps, interleave, POISON};
use crate::report::{BatchCell, Row};
use bulkmem_report::stats::Stats;

pub(super) fn measure_shape(
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
    let per_page = CopyKernel::baseline();
    let per_page_clear = ClearKernel::baseline();
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
        batch: Some(BatchCell {
            placement,
            layout: layout.name(),
            count,
            cpu_busy,
            bound_share: None,
            cpus,
        }),
        ..Default::default()
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
