//! What a checked batch did to each extent ([`Outcome`]), and the report
//! that lists them ([`CheckedReport`]). Plain data: here rather than in the
//! engine so that the single-threaded checked batches of this module return
//! the same type without depending on the engine.

use super::Fault;
use crate::report::Report;

/// What a checked batch did to one extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every byte copied (or zeroed).
    Done,
    /// Stopped at a SIGBUS: bytes before `Fault::offset` (relative to the
    /// extent) are done. Nothing after it was written, except, in extents
    /// longer than the engine's chunk, by pieces other workers were
    /// already running when the fault happened (their bytes are then the
    /// correct copy).
    Faulted(Fault),
    /// The batch was cancelled (or a progress callback panicked) after
    /// this many leading bytes of the extent; the rest is untouched.
    Partial(usize),
    /// Never touched: the batch stopped before reaching it.
    NotStarted,
}

/// A checked batch's report: the batch as a whole (as for unchecked
/// batches; faulted bytes count as processed) and one outcome per extent,
/// in the caller's order.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckedReport {
    /// The batch as a whole; bytes of faulted extents count as processed.
    pub report: Report,
    /// One outcome per extent, in the caller's order.
    pub extents: Vec<Outcome>,
}

impl CheckedReport {
    /// The faulted extents, as (index, fault).
    pub fn faults(&self) -> impl Iterator<Item = (usize, &Fault)> {
        self.extents
            .iter()
            .enumerate()
            .filter_map(|(i, o)| match o {
                Outcome::Faulted(f) => Some((i, f)),
                _ => None,
            })
    }

    /// Whether every extent is [`Outcome::Done`].
    pub fn all_done(&self) -> bool {
        self.extents.iter().all(|o| *o == Outcome::Done)
    }
}
