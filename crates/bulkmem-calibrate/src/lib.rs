//! Calibration: measure every strategy on this machine and build the
//! profile `auto` follows (docs/design.md, "Calibration"). This crate
//! measures; the policy (`bulkmem_policy::auto`) decides, from the rules and the
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
//! Before the ladder, the shape of the non-temporal copies is raced
//! (`nt_shape.rs`), so every non-temporal row runs the shape the profile
//! then records.
//!
//! This file is the module list. The options and the ladder for this
//! machine are `ladder.rs`; measuring a ladder (and [`calibrate`], the
//! entry) `passes.rs`, with the estimate of the time left in
//! `progress.rs`; the rules' baseline and the choice of a cell's winner
//! `choose.rs`; describing a profile in words `summary.rs`, and writing it
//! to disk safely `save.rs`.

pub mod cache_edge;
mod choose;
mod error;
mod ladder;
mod level;
mod measure;
mod nt_shape;
mod passes;
mod progress;
mod read;
mod read_pages;
mod save;
mod summary;
pub mod toolkit;

pub use choose::{
    break_tie, candidates, choose, disputed, recheck, rules_choice, settle_dispute,
    steady_near_top, ties, Measured, Prior, KEEP, NEAR_TOP, TIE_FLOOR,
};
pub use error::Error;
pub use ladder::{
    ladder, ladder_here, ladder_top, memory_cap, CalibrateOptions, Ladder, FULL_RUNS,
    QUICK_TOP_FLOOR, SMALL_CELL, TOP_FLOOR,
};
pub use level::{levelled, LEVEL_FLAT, LEVEL_FROM, LEVEL_TIE};
pub use measure::HOT_BYTES;
pub use nt_shape::{pick as pick_nt_shape, race_nt_shapes, ShapeRace, SHAPE_MARGIN, SHAPE_RUNS};
pub use passes::{calibrate, measure_ladder, DISPUTES_UPTO, QUICK_TIES};
pub use progress::Step;
pub use read::read_bandwidth;
pub use read_pages::read_pages;
pub use save::{check_target, check_writable, write_profile};
pub use summary::summary;
pub use toolkit::read_once;
