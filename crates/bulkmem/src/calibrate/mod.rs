//! Calibration: measure every strategy on this machine and build the
//! profile `auto` follows (docs/design.md, "Calibration"). This module
//! measures; the policy (`crate::auto`) decides, from the rules and the
//! profile this writes. `bulkmem tune` is a thin command over
//! [`calibrate`] and [`write_profile`]; a program can calibrate itself the
//! same way.
//!
//! Three shapes per operation, on a ladder of sizes ([`ladder()`]):
//!
//! * single calls, hot, each followed by a read of its destination (the
//!   whole use: [`read_once`]), from 64 B to the top of the ladder;
//! * batches of 4 KiB extents and of 2 MiB extents, cold, from 1 MiB
//!   (4 MiB for 2 MiB extents) to the top.
//!
//! The top is at least 256 MiB and 32x the cache this thread gets,
//! measured ([`cache_edge`]), not the LLC a VM reports (its host's), so
//! the largest requests are measured rather than left to the last cell
//! (with the ladder stopping at 4x the share, 64 MiB on a Zen 3 VM, glibc's
//! memcpy beat the `avx2-nt` chosen for 256 MiB and 1 GiB by 6%; there the
//! cache measures 16-32 MiB, so the top is 512 MiB-1 GiB); it is capped at
//! an eighth of physical memory. A shape's climb ends early where two
//! cells past the cache measure alike ([`levelled`]).
//!
//! This file is the entry: the options, the rules' baseline and the ladder
//! for this machine. Measuring a ladder is `passes.rs` (with the estimate
//! of the time left in `progress.rs`), describing a profile in words
//! `summary.rs`, and writing it to disk safely `save.rs`.

pub mod cache_edge;
mod choose;
mod ladder;
mod level;
mod measure;
mod passes;
mod progress;
mod read;
mod read_pages;
mod save;
mod summary;
pub mod toolkit;

use crate::auto::{decide, Machine, Profile, Request, Shape};
use crate::error::Error;
use crate::strategy::{Hint, Op, Strategy};

pub use choose::{
    break_tie, candidates, choose, disputed, recheck, settle_dispute, steady_near_top, ties,
    Measured, Prior, KEEP, NEAR_TOP, TIE_FLOOR,
};
pub use ladder::{
    ladder, ladder_top, memory_cap, Ladder, FULL_RUNS, QUICK_TOP_FLOOR, SMALL_CELL, TOP_FLOOR,
};
pub use level::{levelled, LEVEL_FLAT, LEVEL_FROM, LEVEL_TIE};
pub use measure::HOT_BYTES;
pub use passes::{measure_ladder, DISPUTES_UPTO, QUICK_TIES};
pub use progress::Step;
pub use read::read_bandwidth;
pub use read_pages::read_pages;
pub use save::{check_target, check_writable, write_profile};
pub use summary::summary;
pub use toolkit::read_once;

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

/// The built-in rules' choice on this machine for a cell (no profile, no
/// overrides): what a profile departs from only where it measured better.
pub fn rules_choice(op: Op, shape: Shape, size: usize) -> Strategy {
    let req = match shape {
        Shape::Single => Request::single(op, size, Hint::Auto),
        _ => Request::batch(op, size, (size / shape.extent()).max(2), Hint::Auto),
    };
    decide(Machine::this(), &req).strategy
}

/// The ladder [`calibrate`] measures with `opts` on this machine, on the
/// CPU `opts` names (the calling thread is pinned there first): its top
/// from the cache this thread gets, measured ([`cache_edge::find`], well
/// under a second), not from the LLC the CPU reports.
pub fn ladder_here(opts: &CalibrateOptions) -> Result<Ladder, Error> {
    if let Some(c) = opts.cpu {
        crate::machine::placement::pin_to(c).map_err(|e| Error::Calibration {
            what: format!("cannot pin to CPU {c}: {e}"),
        })?;
    }
    let memory = ladder::physical_memory();
    let edge = cache_edge::find(memory_cap(memory) / 4)?;
    let mut l = ladder(edge.edge, memory, opts.quick);
    if let Some(r) = opts.runs {
        l.runs = r.max(1);
        l.small_runs = l.runs;
    }
    Ok(l)
}

/// Measures every strategy this CPU runs, for both operations, on the
/// ladder `opts` describes, on the calling thread, and returns the profile
/// (not yet written: see [`write_profile`]). `progress` is called before
/// each cell and once at the end. Takes from seconds (`quick`) to a few
/// minutes, and maps up to twice the ladder's top in memory.
pub fn calibrate(
    opts: &CalibrateOptions,
    progress: &mut dyn FnMut(Step<'_>),
) -> Result<Profile, Error> {
    measure_ladder(&ladder_here(opts)?, progress)
}
