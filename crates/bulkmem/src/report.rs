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
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Bytes done so far, as reported after each chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
}

/// Optional hooks for one batch.
#[derive(Clone, Copy, Default)]
pub struct Control<'a> {
    pub cancel: Option<&'a CancelToken>,
    /// Called by a worker after each chunk, concurrently from several
    /// workers; `done` only grows. A panic here stops the batch and is
    /// returned as [`Error::WorkerPanicked`](crate::Error::WorkerPanicked).
    pub progress: Option<&'a (dyn Fn(Progress) + Sync)>,
}

/// What a batch did.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    pub cancelled: bool,
    /// Chunks the batch was cut into, and threads that executed some.
    pub chunks: usize,
    pub workers: usize,
}

impl Report {
    pub fn is_complete(&self) -> bool {
        self.bytes_done == self.total
    }
}
