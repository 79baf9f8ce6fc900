//! The hot-buffer regimes of `bench copy|clear` (hot, consume, pipe): the
//! same source and destination on every call, per thread, each cell
//! checked once and then timed over repeated calls.

use std::time::Duration;

use bulkmem::mapping::Mapping;
use bulkmem::{Op, Strategy};
use bulkmem_calibrate::toolkit::{
    bench_pieces, poison, reps_lasting, slices, warm_calls, FULL_CHECK,
};

use super::exec::{cells, Exec};
use super::{place, row, timed, verify, After, Plan, Regime};
use crate::arena;
use crate::bench::pipe_sink::PipeSink;
use crate::harness::{fill_pattern, interleave_sliced, Piece, POISON};
use crate::results::Row;

/// One thread's hot buffers of one size, and where its destination goes
/// after each call.
struct HotPair {
    /// `src_off` bytes longer than the cell's size: the source is
    /// [`HotPair::src`].
    src: Mapping,
    src_off: usize,
    /// As `src`: the destination is `dst_off` bytes in.
    dst: Mapping,
    dst_off: usize,
    after: After,
    /// The pipe regime's pipe (its reader drains it until dropped).
    sink: Option<PipeSink>,
}

impl HotPair {
    /// `reps` calls of `exec`, each followed by handing the destination to
    /// its next user (nothing, one read, or the pipe).
    fn run(&mut self, op: Op, exec: Exec, reps: usize) -> Result<(), String> {
        let HotPair {
            src,
            src_off,
            dst,
            dst_off,
            after,
            sink,
        } = self;
        let (dst, src) = (
            &mut dst.as_mut_slice()[*dst_off..],
            &src.as_slice()[*src_off..],
        );
        match after {
            After::Nothing => exec.repeated(op, dst, src, reps, |_| Ok(())),
            After::Read => exec.repeated(op, dst, src, reps, |d| {
                std::hint::black_box(bulkmem_calibrate::read_once(d));
                Ok(())
            }),
            After::Pipe => {
                let sink = sink.as_mut().ok_or("the pipe regime has no pipe")?;
                exec.repeated(op, dst, src, reps, |d| sink.send(d))
            }
        }
    }
}

/// Per-thread hot buffers of one size.
pub(super) struct HotBufs {
    pairs: Vec<HotPair>,
}

impl HotBufs {
    pub(super) fn new(plan: &Plan, size: usize, after: After) -> Result<HotBufs, String> {
        let mut pairs = Vec::new();
        for _ in 0..plan.threads {
            let src_off = if plan.op == Op::Copy {
                plan.src_offset
            } else {
                0
            };
            let mut src = arena::prefaulted(size + src_off, plan.thp, 0)
                .map_err(|e| format!("cannot map {size} bytes: {e}"))?;
            fill_pattern(&mut src.as_mut_slice()[src_off..]);
            place(&src, plan.src_node, "source")?;
            let dst_off = plan.dst_offset;
            let dst = arena::prefaulted(size + dst_off, plan.thp, POISON)
                .map_err(|e| format!("cannot map {size} bytes: {e}"))?;
            place(&dst, plan.dst_node, "destination")?;
            let sink = match after {
                After::Pipe => Some(PipeSink::new()?),
                _ => None,
            };
            pairs.push(HotPair {
                src,
                src_off,
                dst,
                dst_off,
                after,
                sink,
            });
        }
        Ok(HotBufs { pairs })
    }
}

pub(super) fn hot_group(
    plan: &Plan,
    size: usize,
    regime: Regime,
    bufs: &mut HotBufs,
) -> Result<Vec<Row>, String> {
    let cells = cells(
        plan,
        &bulkmem_policy::auto::Request::single(plan.op, size, plan.hint),
        false,
    )?;
    let execs: Vec<Exec> = cells.iter().map(|c| c.1).collect();
    // Check each cell once, from a poisoned destination.
    let mut chose: Vec<Option<Strategy>> = vec![None; execs.len()];
    let sparse = size > FULL_CHECK;
    for (i, exec) in execs.iter().enumerate() {
        for p in bufs.pairs.iter_mut() {
            let (s, d) = (p.src_off, p.dst_off);
            poison(&mut p.dst.as_mut_slice()[d..], sparse);
            chose[i] = match plan.op {
                Op::Copy => exec.copy(&mut p.dst.as_mut_slice()[d..], &p.src.as_slice()[s..]),
                Op::Clear => exec.clear(&mut p.dst.as_mut_slice()[d..]),
            };
            verify(
                plan.op,
                &cells[i].0,
                size,
                regime.name(),
                &p.dst.as_slice()[d..],
                &p.src.as_slice()[s..],
                sparse,
            )?;
        }
    }
    // One run (or piece) of `exec`: untimed calls first (`toolkit::warm_calls`: one,
    // or four near the cache's edge), so the caches hold what this
    // strategy leaves behind, not what the previous cell did (at 32 MiB a
    // clear after a temporal loop's dirty lines measured 0.75x of the same
    // clear after a non-temporal one); then `reps` timed calls.
    let mut run = |exec: Exec, reps: usize| {
        let failed = std::sync::Mutex::new(None);
        let keep = |r: Result<(), String>| {
            if let Err(e) = r {
                *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            }
        };
        for _ in 0..warm_calls(size) {
            timed(&mut bufs.pairs, &plan.cpus, |p| {
                keep(p.run(plan.op, exec, 1))
            });
        }
        let t = timed(&mut bufs.pairs, &plan.cpus, |p| {
            keep(p.run(plan.op, exec, reps))
        });
        match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(t),
        }
    };
    let mut reps = (plan.hot_bytes / size).max(1);
    if !plan.min_run.is_zero() {
        // The fastest row sets the length, so no row's runs are shorter.
        let mut fastest = Duration::MAX;
        for &exec in &execs {
            fastest = fastest.min(run(exec, reps)?);
        }
        reps = reps_lasting(reps, fastest, plan.min_run);
    }
    // A run in pieces that take turns with the other rows' (the
    // library's `toolkit::slices`), so rows see the same spells of a
    // shared machine, and two at least (`toolkit::bench_pieces`: a
    // DRAM-bound call drifts over a round). A multi-threaded piece would
    // pay its threads' start and join each time, so those runs stay whole.
    let slices = match plan.threads {
        1 => bench_pieces(slices(reps, warm_calls(size)), plan.min_run),
        _ => 1,
    };
    let per = reps.div_ceil(slices);
    let stats = interleave_sliced(execs.len(), plan.rounds, slices, |i| {
        Ok(Piece {
            bytes: per * size * plan.threads,
            time: run(execs[i], per)?,
        })
    })?;
    Ok((0..execs.len())
        .map(|i| {
            row(
                plan,
                &cells[i].0,
                chose[i],
                size,
                size,
                regime,
                stats[i].clone(),
            )
        })
        .collect())
}
