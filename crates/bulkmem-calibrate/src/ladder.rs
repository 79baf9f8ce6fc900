//! The sizes a calibration measures: singles from 64 bytes and cold
//! batches from 1 MiB, geometric up to a top past every cache a thread was
//! measured to get, capped by the machine's memory.

use super::cache_edge;
use crate::error::Error;
use bulkmem_policy::auto::Shape;

/// The sizes calibration measures.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Ladder {
    /// Single-call lengths.
    pub singles: Vec<usize>,
    /// Batch totals of 4 KiB extents.
    pub small: Vec<usize>,
    /// Batch totals of 2 MiB extents.
    pub large: Vec<usize>,
    /// Runs per cell.
    pub runs: usize,
    /// Runs per single-call cell up to [`SMALL_CELL`]: as many as the full
    /// ladder's even when quick, since they take milliseconds and a choice
    /// there from three runs flipped with the noise (a quick profile's 4 KiB
    /// clear went to `avx2` at 0.83x `avx512`, read back or not).
    pub small_runs: usize,
    /// Whether this is the quick ladder.
    pub quick: bool,
    /// The cache this thread gets (bytes): measured by [`ladder_here`](super::ladder_here),
    /// the reported LLC share in [`ladder`]. Cells past twice it may end a
    /// shape's climb ([`levelled`](super::levelled)).
    pub cache: usize,
}

/// The ladder's top: at least [`TOP_FLOOR`] and 32x the cache one thread
/// gets (`share`); for a quick ladder [`QUICK_TOP_FLOOR`] and 8x. Capped
/// at [`memory_cap`], and never under 4 MiB. (On the Zen 3 VM the
/// measured share flips between 256 KiB, 4 and 8 MiB from one run to the
/// next; at 32x the quick ladder then grew a 256 MiB rung and took
/// 24-25 s instead of 14-18; at 8x it stays at the 64 MiB floor.)
pub fn ladder_top(share: usize, memory: usize, quick: bool) -> usize {
    let (floor, times) = if quick {
        (QUICK_TOP_FLOOR, 8)
    } else {
        (TOP_FLOOR, 32)
    };
    let want = share.saturating_mul(times).max(floor);
    want.min(memory_cap(memory))
}

/// The least top: far past any cache a thread was measured to get on the
/// machines tried (16-32 MiB on Zen 3 and 4 VMs, 512 KiB for a copy on the
/// Emerald Rapids VM, whose L3 ran copies no faster than memory).
pub const TOP_FLOOR: usize = 256 << 20;

/// A quick ladder's least top: twice the largest cache a thread was
/// measured to get, where the full ladder's floor is 8x: past the cache
/// for a copy read back (source and destination: 128 MiB through a
/// 32 MiB L3), and a 64 MiB choice stands for larger sizes: in 21 full
/// tunes on the Zen 3 VM the 64 MiB cell's choice measured a median 1.00x
/// (a tenth under 0.95x) of the best in the 256 MiB cell of the same row,
/// one pass each. Its 128 MiB cells were 6.5 of a quick calibration's
/// 22 s on the Zen 3 VM, and its 256 MiB ones a quarter of it on the
/// Emerald Rapids VM (the 8x-cache rule still lifts it where the cache is
/// large).
pub const QUICK_TOP_FLOOR: usize = 64 << 20;

/// Runs per cell of the full ladder.
pub const FULL_RUNS: usize = 7;

/// Single calls up to this size get [`Ladder::small_runs`].
pub const SMALL_CELL: usize = 1 << 20;

impl Ladder {
    /// Runs for a cell of `shape` and `size`.
    pub fn runs_for(&self, shape: Shape, size: usize) -> usize {
        if shape == Shape::Single && size <= SMALL_CELL {
            self.small_runs.max(self.runs)
        } else {
            self.runs
        }
    }
}

/// No cell measures more than an eighth of `memory` (a copy cell maps its
/// total twice), rounded down to 64 MiB so the cap reads as a size
/// (`3008M`, not `3085512K`), and never under 4 MiB.
pub fn memory_cap(memory: usize) -> usize {
    ((memory / 8) & !((64 << 20) - 1)).max(4 << 20)
}

/// The ladder for a machine whose threads each get `share` bytes of LLC
/// and that has `memory` bytes of RAM.
pub fn ladder(share: usize, memory: usize, quick: bool) -> Ladder {
    let top = ladder_top(share, memory, quick);
    // Geometric from `from`, by `step`, ending at `top` itself (larger
    // requests use the last cell): a step that would pass it stops there.
    let geo = |from: usize, step: usize| {
        let mut v = vec![from];
        while let Some(&last) = v.last().filter(|&&l| l < top) {
            v.push(last.saturating_mul(step).min(top));
        }
        v
    };
    let (single_step, runs) = if quick { (4, 3) } else { (2, FULL_RUNS) };
    Ladder {
        singles: geo(64, single_step),
        small: geo(1 << 20, if quick { 8 } else { 4 }),
        large: geo(4 << 20, 4),
        runs,
        small_runs: FULL_RUNS,
        quick,
        cache: share,
    }
}

impl Ladder {
    /// The sizes of one shape.
    pub fn sizes(&self, shape: Shape) -> &[usize] {
        match shape {
            Shape::Single => &self.singles,
            Shape::SmallExtents => &self.small,
            Shape::LargeExtents => &self.large,
        }
    }

    /// Progress units: one per (op, shape, size), measured and re-checked.
    pub fn units(&self) -> usize {
        2 * 2 * (self.singles.len() + self.small.len() + self.large.len())
    }
}

/// Bytes of physical memory (sysconf), or 8 GiB where it cannot be told.
pub(super) fn physical_memory() -> usize {
    // SAFETY: sysconf has no preconditions; it returns -1 for unknown names.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && page > 0 {
        (pages as usize).saturating_mul(page as usize)
    } else {
        8 << 30
    }
}

/// How to calibrate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CalibrateOptions {
    /// Fewer sizes (x4 steps) and runs (3); the profile records it.
    pub quick: bool,
    /// Runs per cell (scored by their lower quartile); `None`: 7, or 3
    /// with `quick`.
    pub runs: Option<usize>,
    /// Pin the calling thread to this CPU for the measurement (it stays
    /// pinned afterwards); `None` measures where the thread runs.
    pub cpu: Option<usize>,
}

impl CalibrateOptions {
    /// The full calibration (x2 steps for single calls, 7 runs).
    pub fn full() -> CalibrateOptions {
        CalibrateOptions {
            quick: false,
            runs: None,
            cpu: None,
        }
    }

    /// The quick calibration.
    pub fn quick() -> CalibrateOptions {
        CalibrateOptions {
            quick: true,
            ..CalibrateOptions::full()
        }
    }

    /// Sets the runs per cell.
    pub fn runs(mut self, runs: usize) -> CalibrateOptions {
        self.runs = Some(runs.max(1));
        self
    }

    /// Sets the CPU to measure on.
    pub fn cpu(mut self, cpu: usize) -> CalibrateOptions {
        self.cpu = Some(cpu);
        self
    }
}

/// The ladder [`calibrate`] measures with `opts` on this machine, on the
/// CPU `opts` names (the calling thread is pinned there first): its top
/// from the cache this thread gets, measured ([`cache_edge::find`], well
/// under a second), not from the LLC the CPU reports.
pub fn ladder_here(opts: &CalibrateOptions) -> Result<Ladder, Error> {
    if let Some(c) = opts.cpu {
        bulkmem::placement::pin_to(c).map_err(|e| Error::Measure {
            what: format!("cannot pin to CPU {c}: {e}"),
        })?;
    }
    let memory = physical_memory();
    let edge = cache_edge::find(memory_cap(memory) / 4)?;
    let mut l = ladder(edge.edge, memory, opts.quick);
    if let Some(r) = opts.runs {
        l.runs = r.max(1);
        l.small_runs = l.runs;
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladders_reach_the_floor_and_32_caches_within_an_eighth_of_memory() {
        let mem = 24 << 30;
        for (share, top) in [
            (16 << 20, 512 << 20),
            (64 << 20, 2 << 30),
            (512 << 10, TOP_FLOOR),
            (0, TOP_FLOOR),
            (24 << 20, 768 << 20),
        ] {
            assert_eq!(ladder_top(share, mem, false), top, "{share}");
            for quick in [false, true] {
                let top = ladder_top(share, mem, quick);
                let l = ladder(share, mem, quick);
                assert_eq!(l.singles[0], 64);
                for v in [&l.singles, &l.small, &l.large] {
                    assert_eq!(*v.last().unwrap(), top, "ends at the top: {v:?}");
                    assert!(v.windows(2).all(|w| w[1] > w[0]));
                }
                assert_eq!(l.small[0], 1 << 20);
                assert!(l.large[0] >= 2 * (2 << 20), "at least two 2 MiB extents");
            }
        }
        // A quick ladder stops sooner: where the cache is small, and at
        // 8 caches where they lift it.
        assert_eq!(ladder_top(512 << 10, mem, true), QUICK_TOP_FLOOR);
        assert_eq!(ladder_top(8 << 20, mem, true), QUICK_TOP_FLOOR);
        assert_eq!(ladder_top(16 << 20, mem, true), 128 << 20);
        // A small machine caps the top, and every point, at an eighth of
        // its memory.
        assert_eq!(ladder_top(16 << 20, 2 << 30, false), 256 << 20);
        assert_eq!(ladder_top(16 << 20, 1 << 30, false), 128 << 20);
        let l = ladder(130 << 20, 10 << 30, false);
        let cap = (10usize << 30) / 8;
        assert_eq!(memory_cap(10 << 30), cap, "already a multiple of 64 MiB");
        assert_eq!(
            memory_cap((23 << 30) + (555 << 20)),
            3008 << 20,
            "rounded down"
        );
        for v in [&l.singles, &l.small, &l.large] {
            assert_eq!(*v.last().unwrap(), cap, "{v:?}");
        }
        assert_eq!(ladder_top(16 << 20, 0, false), 4 << 20);
        let (full, quick) = (ladder(16 << 20, mem, false), ladder(16 << 20, mem, true));
        assert!(quick.units() < full.units());
        assert!(quick.runs < full.runs);
        // Small single calls get the full ladder's runs even when quick.
        for l in [&quick, &full] {
            assert_eq!(l.runs_for(Shape::Single, 4096), full.runs);
            assert_eq!(l.runs_for(Shape::Single, 2 << 20), l.runs);
            assert_eq!(l.runs_for(Shape::SmallExtents, 1 << 20), l.runs);
        }
    }
}
