//! The cold regime of `bench copy|clear`: distinct extents scattered over
//! arenas many times the LLC, made cold before each run; `auto` gets a
//! run's extents as one batch, named strategies as the plan says.

use bulkmem::calibrate::toolkit::{poison, scattered, scattered_pairs, ColdArenas, FULL_CHECK};
use bulkmem::{Op, Strategy};

use super::{row, timed, verify, Plan, Regime};
use crate::bench::exec::{cells, Exec};
use crate::harness::{gbps, interleave};
use crate::report::Row;

pub(super) fn cold_group(plan: &Plan, size: usize, a: &mut ColdArenas) -> Result<Vec<Row>, String> {
    let cooler = &a.cooler;
    let count = (plan.total.max(size) / size).max(1);
    let total = count * size;
    let sparse = total > FULL_CHECK;
    let per_thread = count.div_ceil(plan.threads);
    let batch = bulkmem::Request {
        op: plan.op,
        total: per_thread * size,
        runs: per_thread,
        hint: plan.hint,
    };
    let cells = cells(plan, &batch, true)?;
    let execs: Vec<Exec> = cells.iter().map(|c| c.1).collect();
    let mut chose: Vec<Option<Strategy>> = vec![None; execs.len()];
    let stats = match plan.op {
        Op::Copy => {
            let mut ops = scattered_pairs(a.dst.as_mut_slice(), a.src.as_slice(), size, count);
            for (i, exec) in execs.iter().enumerate() {
                for (d, _) in ops.iter_mut() {
                    poison(d, sparse);
                }
                for part in ops.chunks_mut(per_thread) {
                    chose[i] = exec.copy_batch(part);
                }
                for (d, sr) in &ops {
                    verify(plan.op, &cells[i].0, size, "cold", d, sr, sparse)?;
                }
            }
            let mut parts: Vec<&mut [(&mut [u8], &[u8])]> = ops.chunks_mut(per_thread).collect();
            interleave(execs.len(), plan.rounds, |i| {
                let touched = parts.iter().flat_map(|p| p.iter());
                cooler.cool(2 * total, touched.flat_map(|(d, s)| [&**d, *s]));
                let t = timed(&mut parts, &plan.cpus, |part| {
                    execs[i].copy_batch(part);
                });
                Ok(gbps(total, t))
            })?
        }
        Op::Clear => {
            let mut ops = scattered(a.dst.as_mut_slice(), size, count);
            for (i, exec) in execs.iter().enumerate() {
                for d in ops.iter_mut() {
                    poison(d, sparse);
                }
                for part in ops.chunks_mut(per_thread) {
                    chose[i] = exec.clear_batch(part);
                }
                for d in &ops {
                    verify(plan.op, &cells[i].0, size, "cold", d, &[], sparse)?;
                }
            }
            let mut parts: Vec<&mut [&mut [u8]]> = ops.chunks_mut(per_thread).collect();
            interleave(execs.len(), plan.rounds, |i| {
                cooler.cool(total, parts.iter().flat_map(|p| p.iter().map(|d| &**d)));
                let t = timed(&mut parts, &plan.cpus, |part| {
                    execs[i].clear_batch(part);
                });
                Ok(gbps(total, t))
            })?
        }
    };
    // Fewer extents than threads leaves threads idle: report who worked.
    // (Splitting one extent across threads is the batch engine's job.)
    let workers = count.div_ceil(per_thread);
    Ok((0..execs.len())
        .map(|i| {
            let mut r = row(
                plan,
                &cells[i].0,
                chose[i],
                size,
                total,
                Regime::Cold,
                stats[i].clone(),
            );
            r.threads = workers;
            r.calls = Some(execs[i].calls());
            r
        })
        .collect())
}
