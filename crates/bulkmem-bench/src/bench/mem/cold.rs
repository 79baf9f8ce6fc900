//! The cold regime of `bench copy|clear`: distinct extents scattered over
//! arenas many times the LLC, made cold before each batch; `auto` gets a
//! run's extents as one batch, named strategies as the plan says. Each
//! row's batch runs twice a round, cooled before each.

use bulkmem::{Op, Strategy};
use bulkmem_calibrate::toolkit::{
    bench_pieces, poison, scattered, scattered_pairs, ColdArenas, FULL_CHECK,
};

use super::exec::{cells, Exec};
use super::{row, timed, verify, Plan, Regime};
use crate::harness::{interleave_sliced, Piece};
use crate::results::Row;

/// The threads' extents in about the order a run touched them (the
/// threads go through their parts side by side), which is what the
/// cooler needs to find what is still cached.
fn in_touch_order<'p, T>(parts: &'p [&mut [T]], per_thread: usize) -> impl Iterator<Item = &'p T> {
    (0..per_thread).flat_map(move |k| parts.iter().filter_map(move |p| p.get(k)))
}

pub(super) fn cold_group(plan: &Plan, size: usize, a: &mut ColdArenas) -> Result<Vec<Row>, String> {
    let cooler = &a.cooler;
    let count = (plan.total.max(size) / size).max(1);
    let total = count * size;
    let sparse = total > FULL_CHECK;
    let per_thread = count.div_ceil(plan.threads);
    let batch = bulkmem_policy::auto::Request {
        op: plan.op,
        total: per_thread * size,
        runs: per_thread,
        hint: plan.hint,
    };
    let cells = cells(plan, &batch, true)?;
    let execs: Vec<Exec> = cells.iter().map(|c| c.1).collect();
    let mut chose: Vec<Option<Strategy>> = vec![None; execs.len()];
    // Each row's batch runs at two points of every round, cooled before
    // each (`toolkit::bench_pieces`: DRAM's speed drifts over a round);
    // multi-threaded runs stay whole, as hot ones do.
    let pieces = match plan.threads {
        1 => bench_pieces(1, plan.min_run),
        _ => 1,
    };
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
            interleave_sliced(execs.len(), plan.rounds, pieces, |i| {
                let touched = in_touch_order(&parts, per_thread);
                cooler.cool(2 * total, touched.flat_map(|(d, s)| [&**d, *s]));
                let time = timed(&mut parts, &plan.cpus, |part| {
                    execs[i].copy_batch(part);
                });
                Ok(Piece { bytes: total, time })
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
            interleave_sliced(execs.len(), plan.rounds, pieces, |i| {
                cooler.cool(total, in_touch_order(&parts, per_thread).map(|d| &**d));
                let time = timed(&mut parts, &plan.cpus, |part| {
                    execs[i].clear_batch(part);
                });
                Ok(Piece { bytes: total, time })
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

#[cfg(test)]
mod tests {
    use super::in_touch_order;

    #[test]
    fn threads_extents_are_cooled_in_the_order_they_were_touched() {
        let (mut a, mut b) = ([0, 2, 4], [1, 3]);
        let parts: Vec<&mut [i32]> = vec![&mut a, &mut b];
        let order: Vec<i32> = in_touch_order(&parts, 3).copied().collect();
        assert_eq!(order, [0, 1, 2, 3, 4]);
    }
}
