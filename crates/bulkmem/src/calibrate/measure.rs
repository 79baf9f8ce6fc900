//! The measurements behind a profile, on the calling thread, the way the
//! seeds measure (docs/design.md, "How to measure"):
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
//! Strategies take turns run by run, so a noisy neighbour slows all of them
//! alike; every strategy is verified once per cell from a poisoned
//! destination, so a broken kernel cannot report a fast number. Each
//! strategy's figure is its lower quartile over the runs
//! ([`lower_quartile`]): a kernel that is fast only some of the time is
//! scored by the rest.

use std::time::Instant;

use super::choose::Measured;
use super::toolkit::{self, gbps, lower_quartile, pattern, read_once, shuffled, POISON};
use crate::auto::Shape;
use crate::calls::{clear_batch_with, copy_batch_with};
use crate::error::Error;
use crate::handle::Kernel;
use crate::mapping::Mapping;
use crate::strategy::{Op, Options, Strategy};

/// Bytes a hot run moves at least (by repeating the call).
pub const HOT_BYTES: usize = 64 << 20;

/// Maps `len` bytes advised to huge pages (as the kernel's direct map is,
/// so TLB misses do not dominate) and touches every page with `fill`.
fn prefaulted(len: usize, fill: u8) -> Result<Mapping, Error> {
    toolkit::prefaulted(len, true, fill).map_err(|e| Error::Calibration {
        what: format!("cannot map {len} bytes: {e}"),
    })
}

fn wrong(op: Op, s: Strategy, size: usize, at: usize) -> Error {
    Error::Calibration {
        what: format!(
            "{op} strategy {s} left byte {at} wrong ({size}-byte cell); its numbers would be meaningless"
        ),
    }
}

/// Figures of `strategies` for one single-call `size`, hot and consumed
/// (each call followed by [`read_once`] of its destination), over `runs`
/// interleaved runs.
pub(super) fn hot(
    op: Op,
    size: usize,
    strategies: &[Strategy],
    runs: usize,
) -> Result<Measured, Error> {
    let mut src = prefaulted(size, 0)?;
    pattern(src.as_mut_slice());
    let mut dst = prefaulted(size, POISON)?;
    let kernels: Vec<Kernel> = strategies
        .iter()
        .map(|&s| Kernel::new(s, op))
        .collect::<Result<_, _>>()?;
    let call = |k: &Kernel, dst: &mut [u8], src: &[u8]| match op {
        Op::Copy => k.copy(dst, src),
        Op::Clear => k.clear(dst),
    };
    let call_and_read = |k: &Kernel, dst: &mut [u8], src: &[u8]| {
        call(k, dst, src);
        std::hint::black_box(read_once(dst));
    };
    for k in &kernels {
        dst.as_mut_slice().fill(POISON);
        call(k, dst.as_mut_slice(), src.as_slice());
        let bad = match op {
            Op::Copy => dst
                .as_slice()
                .iter()
                .zip(src.as_slice())
                .position(|(a, b)| a != b),
            Op::Clear => dst.as_slice().iter().position(|&b| b != 0),
        };
        if let Some(at) = bad {
            return Err(wrong(op, k.strategy(), size, at));
        }
    }
    let reps = (HOT_BYTES / size.max(1)).max(1);
    let samples = toolkit::interleave(kernels.len(), runs, 0, |i| {
        let k = &kernels[i];
        call_and_read(k, dst.as_mut_slice(), src.as_slice());
        let t = Instant::now();
        for _ in 0..reps {
            call_and_read(k, dst.as_mut_slice(), src.as_slice());
        }
        Ok::<_, Error>(gbps(reps * size, t.elapsed()))
    })?;
    Ok(Measured {
        op,
        shape: Shape::Single,
        size,
        gbps: strategies
            .iter()
            .copied()
            .zip(samples.into_iter().map(lower_quartile))
            .collect(),
    })
}

/// Arenas for cold batches of one shape, sized for the largest total.
pub(super) struct Arenas {
    src: Mapping,
    dst: Mapping,
    evict: Mapping,
}

impl Arenas {
    /// Arenas for totals up to `total`; the eviction buffer is twice the
    /// LLC (at least 64 MiB).
    pub(super) fn new(op: Op, total: usize, llc: usize) -> Result<Arenas, Error> {
        let mut src = prefaulted(if op == Op::Copy { total } else { 1 }, 0)?;
        pattern(src.as_mut_slice());
        Ok(Arenas {
            src,
            dst: prefaulted(total, POISON)?,
            evict: prefaulted(llc.saturating_mul(2).max(64 << 20), 1)?,
        })
    }
}

/// Medians of `strategies` for a cold batch of `total` bytes in extents of
/// `shape.extent()` bytes, scattered over `a`.
pub(super) fn cold(
    op: Op,
    shape: Shape,
    total: usize,
    strategies: &[Strategy],
    runs: usize,
    a: &mut Arenas,
) -> Result<Measured, Error> {
    let size = shape.extent();
    let count = (total / size).max(1);
    let dst_order = shuffled(count, 0x5eed_0001);
    let src_order = shuffled(count, 0x5eed_0002);
    let mut dst_slots: Vec<Option<&mut [u8]>> = a
        .dst
        .as_mut_slice()
        .chunks_exact_mut(size)
        .take(count)
        .map(Some)
        .collect();
    // A batch that touches several times the LLC leaves nothing of the
    // previous run worth evicting: skip the pass (on a 260 MiB L3 it read
    // 520 MiB before every run and dominated the calibration's time).
    let evict = total < 2 * a.evict.len();
    let rate = |t: Instant| gbps(count * size, t.elapsed());
    let samples = match op {
        Op::Copy => {
            let src_slots: Vec<&[u8]> = a.src.as_slice().chunks_exact(size).collect();
            let mut ops: Vec<(&mut [u8], &[u8])> = dst_order
                .iter()
                .zip(&src_order)
                .filter_map(|(&d, &s)| Some((dst_slots[d].take()?, *src_slots.get(s)?)))
                .collect();
            for &s in strategies {
                ops.iter_mut().for_each(|(d, _)| d.fill(POISON));
                copy_batch_with(Options::strategy(s), &mut ops)?;
                for (d, sr) in &ops {
                    if let Some(at) = d.iter().zip(sr.iter()).position(|(x, y)| x != y) {
                        return Err(wrong(op, s, total, at));
                    }
                }
            }
            toolkit::interleave(strategies.len(), runs, 0, |i| {
                if evict {
                    toolkit::evict(&a.evict);
                }
                let t = Instant::now();
                copy_batch_with(Options::strategy(strategies[i]), &mut ops)?;
                Ok::<_, Error>(rate(t))
            })?
        }
        Op::Clear => {
            let mut ops: Vec<&mut [u8]> = dst_order
                .iter()
                .filter_map(|&d| dst_slots[d].take())
                .collect();
            for &s in strategies {
                ops.iter_mut().for_each(|d| d.fill(POISON));
                clear_batch_with(Options::strategy(s), &mut ops)?;
                if let Some(at) = ops.iter().flat_map(|d| d.iter()).position(|&b| b != 0) {
                    return Err(wrong(op, s, total, at));
                }
            }
            toolkit::interleave(strategies.len(), runs, 0, |i| {
                if evict {
                    toolkit::evict(&a.evict);
                }
                let t = Instant::now();
                clear_batch_with(Options::strategy(strategies[i]), &mut ops)?;
                Ok::<_, Error>(rate(t))
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
        let m = hot(Op::Copy, 8192, &s, 1).unwrap();
        assert_eq!(m.gbps.len(), 2);
        assert!(m.gbps.iter().all(|g| g.1 > 0.0), "{m:?}");
        let mut a = Arenas::new(Op::Clear, 1 << 20, 0).unwrap();
        let m = cold(Op::Clear, Shape::SmallExtents, 1 << 20, &s, 1, &mut a).unwrap();
        assert_eq!((m.size, m.gbps.len()), (1 << 20, 2));
        assert!(m.gbps.iter().all(|g| g.1 > 0.0), "{m:?}");
    }
}
