//! How a batch's caller steers it: [`Control`], which carries a
//! [`CancelToken`] and a [`Progress`] callback. Plain data, kept apart
//! from the engine that honours them (and from `report.rs`, what a batch
//! says back), so that other modules name them without the engine.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Stops a running batch after the chunks in flight. Cheap to clone; all
/// clones share one flag, so a clone moved to another thread (or the
/// token borrowed by a progress callback) stops a batch given the original.
///
/// The batch is checked before each chunk is taken, so it stops at a chunk
/// boundary and what it wrote is a prefix of the batch.
///
/// # A cancelled batch is `Ok`, not `Err`
///
/// Cancelling is something the caller asked for, not a failure: the batch
/// returns `Ok(report)` with [`Report::cancelled`](crate::Report::cancelled) set, and the report says
/// exactly what was written ([`Report::extents_done`](crate::Report::extents_done), [`Report::partial`](crate::Report::partial))
/// so the caller can resume or undo. An `Err` would have to carry that
/// report anyway and would mix an expected outcome with real failures in
/// every `?`. (C has one return channel: there the same batch returns
/// `-ECANCELED` and fills the `bm_report` alike.)
///
/// ```
/// use bulkmem::{CancelToken, Control, Engine, Progress};
///
/// let engine = Engine::builder().threads(2).chunk(1 << 20).inline_max(0).build()?;
/// let src = vec![1u8; 8 << 20];
/// let mut dst = vec![0u8; 8 << 20];
///
/// // Cancelled on another thread before the batch starts: nothing runs.
/// let token = CancelToken::new();
/// let remote = token.clone();
/// std::thread::spawn(move || remote.cancel()).join().unwrap();
/// let ctl = Control { cancel: Some(&token), progress: None };
/// let report = engine.copy_batch_with_control(&mut [(&mut dst[..], &src[..])], ctl)?;
/// assert!(report.cancelled && report.bytes_done == 0);
///
/// // Cancelled from the progress callback (a worker thread) once 2 MiB
/// // are done: the batch stops after the chunks in flight.
/// let token = CancelToken::new();
/// let stop_at_2mib = |p: Progress| {
///     if p.done >= 2 << 20 {
///         token.cancel();
///     }
/// };
/// let ctl = Control { cancel: Some(&token), progress: Some(&stop_at_2mib) };
/// let report = engine.copy_batch_with_control(&mut [(&mut dst[..], &src[..])], ctl)?;
/// assert!(report.cancelled && !report.is_complete());
/// assert!(report.bytes_done >= 2 << 20);
/// // Exactly the reported prefix was written, nothing after it.
/// assert!(dst[..report.bytes_done].iter().all(|&b| b == 1));
/// assert!(dst[report.bytes_done..].iter().all(|&b| b == 0));
/// # Ok::<(), bulkmem::Error>(())
/// ```
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

/// Bytes done so far, as reported after a chunk (see [`Control::progress`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// Bytes in the chunks finished so far, strictly more than in the
    /// previous call (not necessarily a prefix of the batch: workers finish
    /// chunks out of order).
    pub done: usize,
    /// Bytes in the whole batch.
    pub total: usize,
}

/// Optional hooks for one batch.
///
/// ```
/// use std::sync::Mutex;
/// use bulkmem::{Control, Engine, Progress};
///
/// let engine = Engine::builder().threads(2).chunk(1 << 20).inline_max(0).build()?;
/// let src = vec![9u8; 16 << 20];
/// let mut dst = vec![0u8; 16 << 20];
/// let seen = Mutex::new(Vec::new());
/// let record = |p: Progress| seen.lock().unwrap().push(p.done);
/// let ctl = Control { cancel: None, progress: Some(&record) };
/// let report = engine.copy_batch_with_control(&mut [(&mut dst[..], &src[..])], ctl)?;
///
/// let seen = seen.into_inner().unwrap();
/// assert!(seen.windows(2).all(|w| w[0] < w[1])); // strictly increasing
/// assert_eq!(seen.last(), Some(&report.total)); // the last call: all of it
/// assert!(seen.len() <= report.chunks); // at most one call per chunk
/// # Ok::<(), bulkmem::Error>(())
/// ```
#[derive(Clone, Copy, Default)]
pub struct Control<'a> {
    /// Checked before each chunk is taken: once cancelled, the batch stops
    /// after the chunks in flight and returns `Ok` with a report that says
    /// `cancelled` (see [`CancelToken`] for why that is not an error).
    /// `None`: the batch runs to the end.
    pub cancel: Option<&'a CancelToken>,
    /// Called after a chunk is finished, with the bytes of all chunks
    /// finished so far. What is promised:
    ///
    /// - **Serialised**: calls never overlap; the engine holds a lock
    ///   across each one, so the callback needs no locking against itself
    ///   (it must still be `Sync`: successive calls may come from
    ///   different threads). A slow callback delays the workers waiting to
    ///   report.
    /// - **Which thread**: the one that finished the chunk: one of the
    ///   engine's workers, an offload thread, or the calling thread when
    ///   the batch runs there (at most
    ///   [`inline_max`](crate::EngineBuilder::inline_max) bytes, or one
    ///   chunk); for a submitted batch, the engine's submission thread
    ///   instead of the caller.
    /// - **Strictly increasing**: each call's [`Progress::done`] is larger
    ///   than the previous one's. A worker whose count is not above the
    ///   last one delivered (another worker reported a later total first)
    ///   skips its call, so there are at most as many calls as chunks
    ///   ([`Report::chunks`](crate::Report::chunks)) and usually fewer.
    /// - **Last call**: carries exactly the report's
    ///   [`bytes_done`](crate::Report::bytes_done), so `total` for a batch that
    ///   completes; a batch that wrote nothing (empty, or cancelled before
    ///   its first chunk) makes no call.
    /// - **Never after the call returns**: the batch call (or the ticket's
    ///   completion, for a submitted batch) waits for every worker, so the
    ///   callback may borrow the caller's locals.
    ///
    /// It may cancel the batch through its token. It must not submit to
    /// the engine running it ([`EngineError::Reentrant`](crate::EngineError::Reentrant)).
    /// A panic here stops the batch and is returned as
    /// [`EngineError::WorkerPanicked`](crate::EngineError::WorkerPanicked),
    /// with the report of what was done.
    pub progress: Option<&'a (dyn Fn(Progress) + Sync)>,
}
