//! What a batch says back: [`Report`]. Plain data, kept apart from the
//! engine that fills it in, so that errors (which carry one) and other
//! modules can name it without depending on the engine. How a caller
//! steers a batch is `control.rs`.

use crate::strategy::Strategy;

/// What a batch did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The primitive every chunk used.
    pub strategy: Strategy,
    /// Bytes in the batch.
    pub total: usize,
    /// Bytes written: always the batch's first `bytes_done` bytes, in
    /// extent order.
    pub bytes_done: usize,
    /// Extents `0..extents_done` are complete; none after them is.
    pub extents_done: usize,
    /// The extent that was cut short, and how many of its leading bytes
    /// were written (the rest are untouched).
    pub partial: Option<(usize, usize)>,
    /// The batch stopped short because its [`CancelToken`](crate::CancelToken) was cancelled.
    /// Such a batch returns `Ok` with this report, not an error: the
    /// caller asked for the stop and needs to know what was written (see
    /// [`CancelToken`](crate::CancelToken)). A batch that finished before the token was seen
    /// is complete and not `cancelled`.
    pub cancelled: bool,
    /// Chunks the batch was cut into.
    pub chunks: usize,
    /// Threads that executed at least one chunk (the caller's included
    /// when it ran the batch inline).
    pub workers: usize,
    /// Bytes copied by offload channels (`crate::offload`); 0 without one.
    pub offloaded: usize,
    /// Chunks a channel failed on and the CPU copied again instead.
    pub offload_redone: usize,
}

impl Report {
    /// Whether every byte of the batch was written (`bytes_done == total`);
    /// an empty batch is complete.
    pub fn is_complete(&self) -> bool {
        self.bytes_done == self.total
    }

    /// The report of a batch of `total` bytes cancelled before any of it
    /// ran (for wrappers whose own cancel hook fires before they call the
    /// engine): nothing written, no chunks, no workers, and `strategy`
    /// [`Strategy::Auto`] because none was chosen.
    pub fn cancelled_before_start(total: usize) -> Report {
        Report {
            strategy: Strategy::Auto,
            total,
            bytes_done: 0,
            extents_done: 0,
            partial: None,
            cancelled: true,
            chunks: 0,
            workers: 0,
            offloaded: 0,
            offload_redone: 0,
        }
    }
}
