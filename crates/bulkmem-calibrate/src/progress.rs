//! What a calibration reports as it goes: cells done of cells in all, and
//! the time left, estimated from the bytes each cell moves (a 1 GiB cell
//! takes far longer than a 64 B one, so counting cells would mislead).

use std::time::{Duration, Instant};

use super::ladder::Ladder;
use super::measure;
use super::measure::HOT_BYTES;
use bulkmem::Strategy;
use bulkmem_policy::auto::Shape;

/// Where a calibration is, for a progress display.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Step<'a> {
    /// Cells finished (measured or re-checked).
    pub done: usize,
    /// Cells in all ([`Ladder::units`]).
    pub of: usize,
    /// What is being measured now, e.g. "copy single 4K".
    pub label: &'a str,
    /// About how long the rest will take, from how long the cells done so
    /// far took for the bytes they moved (`None` before the first is
    /// done). Rows that level off early shorten it as they do.
    pub left: Option<std::time::Duration>,
    /// Set on a step that reports the cell `label` just measured rather
    /// than one starting (`done` has not moved): each strategy's score,
    /// in measurement order: the lower quartile of its GB/s, or for a
    /// tie-break its speed alone over the cell's choice, round by round
    /// (the choice 1.0). The profile keeps only the first
    /// pass's figures; these are every pass's, for `bulkmem tune
    /// --trace`, so a choice can be read back to the passes that made it.
    pub measured: Option<&'a [(Strategy, f64)]>,
}

/// What a row tells the progress display.
pub(super) enum Tick {
    /// A cell starts: its label and its [`cost`].
    Cell(String, f64),
    /// A row levelled off: these units and this cost will not be measured.
    Skip(usize, f64),
    /// Crossovers found: these units and this cost are added.
    More(usize, f64),
    /// A cell was measured: its label and figures ([`Step::measured`]).
    Measured(String, Vec<(Strategy, f64)>),
}

/// What one cell costs to measure, for the estimate of the time left: bytes
/// moved per strategy and run (a single call and its read, repeated up to
/// `HOT_BYTES`; a cold batch and its cooling).
pub(super) fn cost(shape: Shape, size: usize) -> f64 {
    let bytes = match shape {
        Shape::Single => size
            .saturating_mul(measure::MAX_REPS)
            .min(HOT_BYTES)
            .max(size),
        _ => size,
    };
    2.0 * bytes as f64
}

/// A re-check measures a few candidates where the first pass measured them
/// all: about this fraction of its cost.
pub(super) const RECHECK_COST: f64 = 0.4;

/// A tie-break measures two to four strategies with no read after each
/// call, in runs of at least `toolkit::MIN_RUN`: about this many first
/// passes of its cell, run for run. Up to 8 MiB, where most ties are, one
/// took 0.7-4.3x its cell's first pass (median 2.0x, 0.1-0.4 s; a full
/// and a quick tune on the Zen 3 VM); at 128 and 256 MiB, where one call
/// outlasts a run, 0.3-0.8x. A quick tune's tie-breaks of small cells run
/// three times where the first pass ran seven: 0.73x it (median of 43;
/// 2.0 x 3/7 is 0.86).
pub(super) const TIE_COST: f64 = 2.0;

/// A third pass's cost in cell-measurements: as a tie-break, two
/// strategies and `per-page` of the cell's eight or so.
pub(super) const DISPUTE_COST: f64 = 0.2;

/// The running count and estimate behind each [`Step`]: rows add and
/// remove work as they level off or find crossovers.
pub(super) struct Tracker<'p> {
    progress: &'p mut dyn FnMut(Step<'_>),
    started: Instant,
    done: usize,
    of: usize,
    cost_done: f64,
    cost_left: f64,
}

impl<'p> Tracker<'p> {
    /// Before the first cell of ladder `l`: every cell of both operations,
    /// each re-checked.
    pub(super) fn new(l: &Ladder, progress: &'p mut dyn FnMut(Step<'_>)) -> Tracker<'p> {
        let cost_left: f64 = Shape::ALL
            .iter()
            .flat_map(|&shape| l.sizes(shape).iter().map(move |&size| cost(shape, size)))
            .sum::<f64>()
            * 2.0
            * (1.0 + RECHECK_COST);
        Tracker {
            progress,
            started: Instant::now(),
            done: 0,
            of: l.units(),
            cost_done: 0.0,
            cost_left,
        }
    }

    /// Takes what a row reports; a starting cell is passed on as a step.
    pub(super) fn tick(&mut self, t: Tick) {
        match t {
            Tick::Cell(label, c) => {
                let left = (self.cost_done > 0.0).then(|| {
                    self.started
                        .elapsed()
                        .mul_f64((self.cost_left / self.cost_done).max(0.0))
                });
                (self.progress)(Step {
                    done: self.done,
                    of: self.of,
                    label: &label,
                    left,
                    measured: None,
                });
                self.done += 1;
                self.cost_done += c;
                self.cost_left -= c;
            }
            Tick::Skip(units, c) => {
                self.of = self.of.saturating_sub(units);
                self.cost_left -= c;
            }
            Tick::More(units, c) => {
                self.of += units;
                self.cost_left += c;
            }
            Tick::Measured(label, figures) => (self.progress)(Step {
                done: self.done,
                of: self.of,
                label: &label,
                left: None,
                measured: Some(&figures),
            }),
        }
    }

    /// The last step: everything done.
    pub(super) fn finish(self) {
        (self.progress)(Step {
            done: self.of,
            of: self.of,
            label: "done",
            left: Some(Duration::ZERO),
            measured: None,
        });
    }
}
