//! Chunks of one job that several threads claim in increasing order: the
//! batch engine's workers use it, and so can a caller that splits a copy
//! over threads of its own (the `LD_PRELOAD` library's helpers do).
//!
//! The protocol, as rayon-core writes its latch's beside the code:
//!
//! - every thread calls [`Chunks::claim`] until it returns `None`, and
//!   finishes each chunk it claimed before it asks again;
//! - a chunk that could not be completed is recorded with
//!   [`Chunks::fail`] (the lowest is kept), and no chunk after it is
//!   handed out from then on;
//! - anyone may [`Chunks::stop`] the job: no chunk is handed out after the
//!   stop is seen, and the chunks already claimed are finished;
//! - once every thread is done (the caller's own wait: a join, a latch),
//!   chunks `0..done()` are complete. Claims are handed out in order and
//!   each one is finished, so what is done is always a prefix, cut at the
//!   first failure.
//!
//! Atomics only, `Relaxed`: the caller's wait for its threads orders their
//! writes before it reads [`Chunks::done`]. No allocation, lock or system
//! call, so a thread without the C library's per-thread state, or a
//! signal handler, may use it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// `count` chunks claimed in increasing order by any number of threads;
/// see the module docs for the protocol.
///
/// ```
/// use std::sync::Mutex;
/// use bulkmem_machine::chunks::Chunks;
///
/// let src = vec![7u8; 1 << 20];
/// let mut dst = vec![0u8; 1 << 20];
/// let chunk = 256 << 10;
/// let chunks = Chunks::new(src.len().div_ceil(chunk));
/// let parts: Vec<_> = dst.chunks_mut(chunk).zip(src.chunks(chunk)).map(Mutex::new).collect();
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| {
///             while let Some(c) = chunks.claim() {
///                 let (d, s) = &mut *parts[c].lock().unwrap();
///                 d.copy_from_slice(s);
///             }
///         });
///     }
/// });
/// assert_eq!(chunks.done(), chunks.count());
/// assert_eq!(dst, src);
/// ```
#[derive(Debug)]
pub struct Chunks {
    count: usize,
    /// The next chunk to hand out (past `count` once all are taken).
    next: AtomicUsize,
    stopped: AtomicBool,
    /// The lowest chunk recorded as failed (`usize::MAX`: none).
    failed: AtomicUsize,
}

impl Chunks {
    /// `count` chunks, none claimed.
    pub const fn new(count: usize) -> Chunks {
        Chunks {
            count,
            next: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            failed: AtomicUsize::new(usize::MAX),
        }
    }

    /// How many chunks the job has.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The next chunk for this thread to finish, or `None` once every
    /// chunk is taken, the job is stopped, or the chunk would come after a
    /// failed one.
    #[inline]
    pub fn claim(&self) -> Option<usize> {
        if self.stopped.load(Ordering::Relaxed) {
            return None;
        }
        let c = self.next.fetch_add(1, Ordering::Relaxed);
        (c < self.count && c < self.failed.load(Ordering::Relaxed)).then_some(c)
    }

    /// Hands out no more chunks; those claimed are still finished.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Whether [`Chunks::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Records that chunk `c` could not be completed: the done prefix ends
    /// before it, and no later chunk is handed out.
    pub fn fail(&self, c: usize) {
        self.failed.fetch_min(c, Ordering::Relaxed);
    }

    /// The lowest chunk recorded as failed, if any.
    pub fn failed(&self) -> Option<usize> {
        Some(self.failed.load(Ordering::Relaxed)).filter(|&c| c != usize::MAX)
    }

    /// Chunks `0..done()` are complete, once every thread that claimed
    /// chunks has finished (before that, an upper bound).
    pub fn done(&self) -> usize {
        self.next
            .load(Ordering::Relaxed)
            .min(self.count)
            .min(self.failed.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_handed_out_once_each_in_order() {
        let c = Chunks::new(3);
        assert_eq!(
            [c.claim(), c.claim(), c.claim()],
            [Some(0), Some(1), Some(2)]
        );
        assert_eq!((c.claim(), c.claim()), (None, None));
        assert_eq!((c.done(), c.failed()), (3, None));
    }

    #[test]
    fn a_failure_cuts_the_prefix_and_the_chunks_after_it() {
        let c = Chunks::new(10);
        for _ in 0..4 {
            c.claim();
        }
        c.fail(2);
        c.fail(3);
        assert_eq!((c.claim(), c.failed(), c.done()), (None, Some(2), 2));
    }

    #[test]
    fn a_stop_hands_out_nothing_and_keeps_what_was_claimed() {
        let c = Chunks::new(10);
        c.claim();
        c.claim();
        c.stop();
        assert!(c.is_stopped());
        assert_eq!((c.claim(), c.done()), (None, 2));
        assert_eq!(Chunks::new(0).claim(), None);
    }

    #[test]
    fn threads_share_every_chunk_exactly_once() {
        let c = Chunks::new(10_000);
        let seen: Vec<AtomicUsize> = (0..10_000).map(|_| AtomicUsize::new(0)).collect();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    while let Some(k) = c.claim() {
                        seen[k].fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert!(seen.iter().all(|n| n.load(Ordering::Relaxed) == 1));
        assert_eq!(c.done(), 10_000);
    }
}
