//! What a batch reports and how its caller steers it: [`Report`],
//! [`Progress`], [`Control`] and [`CancelToken`]. Plain data, kept apart
//! from the engine that fills them in, so that errors (which carry a
//! [`Report`]) and other modules can name them without depending on the
//! engine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::strategy::Strategy;

/// Stops a running batch after the chunks in flight. Cheap to clone; all
/// clones share one flag.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>, Option<Arc<AtomicBool>>);

impl CancelToken {
    /// A token not (yet) cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Asks every batch given this token (or a clone) to stop: workers take
    /// no new chunk, the chunks in flight finish. It cannot be undone.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`cancel`](CancelToken::cancel) was called on this token or
    /// a clone (or, for a ticket's own token, on the caller's token it follows).
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed) || self.1.as_ref().is_some_and(|p| p.load(Ordering::Relaxed))
    }

    /// A token of its own that also counts as cancelled once `parent` (or
    /// a clone of it) is: a submitted batch's, which its ticket cancels
    /// without touching the caller's token. Cancelling it leaves `parent`
    /// alone.
    pub(crate) fn linked(parent: Option<&CancelToken>) -> CancelToken {
        CancelToken(Arc::default(), parent.map(|p| Arc::clone(&p.0)))
    }
}

/// Bytes done so far, as reported after each chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// Bytes in the chunks finished so far (not necessarily a prefix of
    /// the batch: workers finish chunks out of order).
    pub done: usize,
    /// Bytes in the whole batch.
    pub total: usize,
}

/// Optional hooks for one batch.
#[derive(Clone, Copy, Default)]
pub struct Control<'a> {
    /// Checked before each chunk: once cancelled, the batch stops and its
    /// report says `cancelled`. `None`: the batch runs to the end.
    pub cancel: Option<&'a CancelToken>,
    /// Called by a worker after each chunk, concurrently from several
    /// workers; `done` only grows. A panic here stops the batch and is
    /// returned as [`Error::WorkerPanicked`](crate::Error::WorkerPanicked).
    pub progress: Option<&'a (dyn Fn(Progress) + Sync)>,
}

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
    /// The batch stopped short because its [`CancelToken`] was cancelled.
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
