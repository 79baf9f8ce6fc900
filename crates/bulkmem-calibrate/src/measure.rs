//! The measurements behind a profile, on the calling thread, the way the
//! kernel patches measured (docs/measurements.md, "How to measure"):
//!
//! * single calls hot and consumed: the same source and destination every
//!   call, each call followed by one read of the whole destination
//!   ([`read_once`]) and timed with it, repeated until a run has moved
//!   [`HOT_BYTES`], each run preceded by one untimed call of the same
//!   strategy (so it starts from the cache state it leaves, not the
//!   previous strategy's: at 32 MiB a clear after a temporal loop's dirty
//!   lines measured 0.75x of the same clear after a non-temporal one). A
//!   single call with hint `auto` is every preloaded `memcpy`, and programs
//!   read what they copy: timed alone, a copy that streams its destination
//!   to DRAM wins cells its caller then loses (docs/design.md, "The whole
//!   use");
//! * batches cold: extents scattered (shuffled) over arenas of the batch
//!   total, an eviction pass before each run, every strategy through the
//!   library's batch call, as `auto` runs it.
//!
//! Strategies take turns run by run (hot runs piece by piece,
//! [`toolkit::interleave_sliced`]), so a noisy neighbour slows all of them
//! alike; every strategy is verified once per cell from a poisoned
//! destination, so a broken kernel cannot report a fast number. Each
//! strategy's figure is its lower quartile over the runs
//! ([`lower_quartile`]): a kernel that is fast only some of the time is
//! scored by the rest.

use std::time::{Duration, Instant};

use super::choose::Measured;
use super::toolkit::{
    self, first_wrong, gbps, lower_quartile, paired_ratio, pattern, poison, read_once, scattered,
    scattered_pairs, ColdArenas, Piece, Race, FULL_CHECK, POISON,
};
use crate::error::Error;
use bulkmem::mapping::Mapping;
use bulkmem::{clear_batch_opts, copy_batch_opts};
use bulkmem::{Op, Options, Strategy};
use bulkmem_policy::auto::Shape;
use bulkmem_policy::handle::Kernel;

/// Bytes a hot run moves at least (by repeating the call), up to
/// `MAX_REPS` calls.
pub const HOT_BYTES: usize = 64 << 20;

/// Calls a hot run makes at most: 64 K calls of 64 bytes take a few
/// milliseconds, plenty for the clock, where the whole [`HOT_BYTES`] took
/// a million calls and a quarter of a quick calibration's small cells.
pub const MAX_REPS: usize = 1 << 16;

/// Maps `len` bytes advised to huge pages (as the kernel's direct map is,
/// so TLB misses do not dominate) and touches every page with `fill`.
fn prefaulted(len: usize, fill: u8) -> Result<Mapping, Error> {
    toolkit::prefaulted(len, true, fill).map_err(|e| Error::Measure {
        what: format!("cannot map {len} bytes: {e}"),
    })
}

/// A kernel's first run in a cell is also its check: what it wrote over
/// the poison is compared (then) with what it should have written, so no
/// cell pays for a separate pass per strategy (at 256 MiB and up that
/// cost as much as the measuring).
fn checked(
    op: Op,
    s: Strategy,
    size: usize,
    dst: &[u8],
    src: &[u8],
    sparse: bool,
) -> Result<(), Error> {
    match first_wrong(dst, if op == Op::Copy { src } else { &[] }, sparse) {
        Some(at) => Err(wrong(op, s, size, at)),
        None => Ok(()),
    }
}

fn wrong(op: Op, s: Strategy, size: usize, at: usize) -> Error {
    Error::Measure {
        what: format!(
            "{op} strategy {s} left byte {at} wrong ({size}-byte cell); its numbers would be meaningless"
        ),
    }
}

/// Figures of `strategies` for one single-call `size`, hot, each call
/// followed by [`read_once`] of its destination (the whole use), over
/// `runs` interleaved runs ([`hot_samples`]).
pub(super) fn hot(
    op: Op,
    size: usize,
    strategies: &[Strategy],
    runs: usize,
) -> Result<Measured, Error> {
    let samples = hot_samples(op, size, strategies, runs, true, Duration::ZERO, Race::WIDE)?;
    Ok(scored(op, size, strategies, &samples, |v| {
        lower_quartile(v.to_vec())
    }))
}

/// A single-call cell of `strategies`, each scored from its samples.
fn scored(
    op: Op,
    size: usize,
    strategies: &[Strategy],
    samples: &[Vec<f64>],
    score: impl Fn(&[f64]) -> f64,
) -> Measured {
    Measured {
        op,
        shape: Shape::Single,
        size,
        gbps: strategies
            .iter()
            .zip(samples)
            .map(|(&s, v)| (s, score(v)))
            .collect(),
    }
}

/// For a tie-break ([`break_tie`](super::break_tie)): `strategies` hot
/// with nothing reading the destination, in runs of at least
/// `toolkit::MIN_RUN` raced as [`Race::TIE_BREAK`], each scored against
/// `choice` ([`paired_ratio`]: the median over the rounds of its run over
/// the choice's in the same round, the choice 1). A tie-break asks
/// whether one kernel beats another by a few percent; a slow spell that
/// spans a round then cancels instead of landing on one kernel's score
/// (`bench`'s `auto/best` line pairs its rows alike).
pub(super) fn alone(
    op: Op,
    size: usize,
    strategies: &[Strategy],
    runs: usize,
    choice: Strategy,
) -> Result<Measured, Error> {
    let samples = hot_samples(
        op,
        size,
        strategies,
        runs,
        false,
        toolkit::MIN_RUN,
        Race::TIE_BREAK,
    )?;
    let of = |s| strategies.iter().position(|&x| x == s).map(|i| &samples[i]);
    let Some(mine) = of(choice) else {
        return Err(Error::Measure {
            what: format!("a tie-break of {op} at {size} bytes without its choice {choice}"),
        });
    };
    Ok(scored(op, size, strategies, &samples, |v| {
        paired_ratio(v, mine).unwrap_or(0.0)
    }))
}

/// Each kernel's samples (GB/s by round) for [`hot`] and [`alone`]: hot,
/// each call followed by [`read_once`] of its destination where
/// `consumed`, over `runs` interleaved runs, each moving [`HOT_BYTES`]
/// (in [`MAX_REPS`] calls at most) and lasting at least `min_run` (an
/// untimed probe run of each kernel, the fastest, sets the calls), cut
/// into pieces that take turns ([`toolkit::slices`]: each piece after its
/// untimed calls), dropping kernels that cannot win as `race` says.
fn hot_samples(
    op: Op,
    size: usize,
    strategies: &[Strategy],
    runs: usize,
    consumed: bool,
    min_run: Duration,
    race: Race,
) -> Result<Vec<Vec<f64>>, Error> {
    let mut src = prefaulted(size, 0)?;
    pattern(src.as_mut_slice());
    let mut dst = prefaulted(size, POISON)?;
    let kernels: Vec<Kernel> = strategies
        .iter()
        .map(|&s| Kernel::new(s, op))
        .collect::<Result<_, _>>()?;
    let call = |k: &Kernel, dst: &mut [u8], src: &[u8]| match k {
        Kernel::Copy(k) => k.copy(dst, src),
        Kernel::Clear(k) => k.clear(dst),
    };
    let call_and_read = |k: &Kernel, dst: &mut [u8], src: &[u8]| {
        call(k, dst, src);
        if consumed {
            std::hint::black_box(read_once(dst));
        }
    };
    let sparse = size > FULL_CHECK;
    let mut reps = (HOT_BYTES / size.max(1)).clamp(1, MAX_REPS);
    // Untimed calls before each piece (toolkit::warm_calls) where the timed
    // ones repeat or the cache's edge is near; a single call of a large
    // cell finds the buffers as the last run left them, which is what a
    // warm-up would make.
    let warm = if reps > 1 || toolkit::warm_calls(size) > 1 {
        toolkit::warm_calls(size)
    } else {
        0
    };
    if !min_run.is_zero() {
        let probe = kernels
            .iter()
            .map(|k| {
                let t = Instant::now();
                for _ in 0..reps {
                    call_and_read(k, dst.as_mut_slice(), src.as_slice());
                }
                t.elapsed()
            })
            .min()
            .unwrap_or_default();
        reps = toolkit::reps_lasting(reps, probe, min_run);
    }
    let slices = toolkit::slices(reps, warm);
    let per = reps.div_ceil(slices);
    let mut unchecked = vec![true; kernels.len()];
    let samples = toolkit::interleave_sliced(kernels.len(), runs, 0, slices, Some(race), |i| {
        let k = &kernels[i];
        // Each kernel's first piece is also its check (see `checked`).
        let first = std::mem::take(&mut unchecked[i]);
        if first {
            poison(dst.as_mut_slice(), sparse);
        }
        for _ in 0..warm {
            call_and_read(k, dst.as_mut_slice(), src.as_slice());
        }
        let t = Instant::now();
        for _ in 0..per {
            call_and_read(k, dst.as_mut_slice(), src.as_slice());
        }
        let time = t.elapsed();
        if first {
            checked(
                op,
                k.strategy(),
                size,
                dst.as_slice(),
                src.as_slice(),
                sparse,
            )?;
        }
        Ok::<_, Error>(Piece {
            bytes: per * size,
            time,
        })
    })?;
    Ok(samples)
}

/// Arenas for cold `op` batches of up to `total` bytes on this machine.
pub(super) fn cold_arenas(op: Op, total: usize) -> Result<ColdArenas, Error> {
    ColdArenas::new(op, total, bulkmem::cpu::info().llc_bytes(), true).map_err(|e| Error::Measure {
        what: format!("cannot map the arenas of a {total}-byte batch: {e}"),
    })
}

/// Scores (lower quartiles) of `strategies` for a cold batch of `total` bytes in extents of
/// `shape.extent()` bytes, scattered over `a`.
pub(super) fn cold(
    op: Op,
    shape: Shape,
    total: usize,
    strategies: &[Strategy],
    runs: usize,
    a: &mut ColdArenas,
) -> Result<Measured, Error> {
    let size = shape.extent();
    let count = (total / size).max(1);
    let cooler = &a.cooler;
    let sparse = total > FULL_CHECK;
    let rate = |t: Instant| gbps(count * size, t.elapsed());
    let samples = match op {
        Op::Copy => {
            let mut ops = scattered_pairs(a.dst.as_mut_slice(), a.src.as_slice(), size, count);
            let mut unchecked = vec![true; strategies.len()];
            toolkit::interleave_pruned(strategies.len(), runs, Race::WIDE, |i| {
                let first = std::mem::take(&mut unchecked[i]);
                if first {
                    ops.iter_mut().for_each(|(d, _)| poison(d, sparse));
                }
                cooler.cool(2 * total, ops.iter().flat_map(|(d, s)| [&**d, *s]));
                let t = Instant::now();
                copy_batch_opts(&mut ops, Options::strategy(strategies[i]))?;
                let r = rate(t);
                if first {
                    for (d, sr) in &ops {
                        checked(op, strategies[i], total, d, sr, sparse)?;
                    }
                }
                Ok::<_, Error>(r)
            })?
        }
        Op::Clear => {
            let mut ops = scattered(a.dst.as_mut_slice(), size, count);
            let mut unchecked = vec![true; strategies.len()];
            toolkit::interleave_pruned(strategies.len(), runs, Race::WIDE, |i| {
                let first = std::mem::take(&mut unchecked[i]);
                if first {
                    ops.iter_mut().for_each(|d| poison(d, sparse));
                }
                cooler.cool(total, ops.iter().map(|d| &**d));
                let t = Instant::now();
                clear_batch_opts(&mut ops, Options::strategy(strategies[i]))?;
                let r = rate(t);
                if first {
                    for d in &ops {
                        checked(op, strategies[i], total, d, &[], sparse)?;
                    }
                }
                Ok::<_, Error>(r)
            })?
        }
    };
    Ok(Measured {
        op,
        shape,
        size: total,
        gbps: strategies
            .iter()
            .copied()
            .zip(samples.into_iter().map(lower_quartile))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_and_cold_cells_measure_every_strategy_given() {
        let s = [Strategy::PerPage, Strategy::Portable];
        for (consumed, min_run) in [(false, Duration::ZERO), (false, Duration::from_millis(1))] {
            let v = hot_samples(Op::Copy, 8192, &s, 1, consumed, min_run, Race::WIDE).unwrap();
            assert!(v.len() == 2 && v.iter().all(|x| x.len() == 1 && x[0] > 0.0));
        }
        let m = hot(Op::Copy, 8192, &s, 1).unwrap();
        assert_eq!(m.gbps.len(), 2);
        assert!(m.gbps.iter().all(|g| g.1 > 0.0), "{m:?}");
        // Alone, against the choice: the choice scores 1.
        let m = alone(Op::Clear, 8192, &s, 2, Strategy::Portable).unwrap();
        assert_eq!(m.gbps[1], (Strategy::Portable, 1.0));
        assert!(m.gbps[0].1 > 0.0, "{m:?}");
        let mut a = ColdArenas::new(Op::Clear, 1 << 20, 0, true).unwrap();
        let m = cold(Op::Clear, Shape::SmallExtents, 1 << 20, &s, 1, &mut a).unwrap();
        assert_eq!((m.size, m.gbps.len()), (1 << 20, 2));
        assert!(m.gbps.iter().all(|g| g.1 > 0.0), "{m:?}");
    }
}
