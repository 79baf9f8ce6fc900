//! A batch running in the background: the [`Ticket`] a submission returns
//! and the state it shares with the submission thread (see `submit`).
//!
//! The state is shared through an `Arc`, so that the thread can finish a
//! batch whose ticket is being dropped, and a ticket can be waited on from
//! any thread (it is `Sync`; `wait` takes `&self` and returns a copy of the
//! outcome, so several waiters all get it).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::pool::{lock, Inside};
use super::Engine;
use crate::control::{CancelToken, Progress};
use crate::error::Error;
use crate::latch::Latch;
use crate::report::Report;

/// One submitted batch's state, shared by its ticket and the submission
/// thread.
pub(super) struct Shared {
    /// The ticket's own token, linked to the caller's if it gave one:
    /// [`Ticket::cancel`], a dropped ticket and a dropped engine set it.
    pub(super) cancel: CancelToken,
    /// Bytes in chunks finished so far (the progress callback's `done`).
    pub(super) done_bytes: AtomicUsize,
    pub(super) total: usize,
    /// Counted down once `result` holds the outcome: what waiters sleep on,
    /// and what `is_done` reads without a lock.
    finished: Latch,
    result: Mutex<Option<Result<Report, Error>>>,
    /// Written once, on completion; never read, so it stays readable.
    fd: OwnedFd,
}

impl Shared {
    /// `parent`: the caller's token, which cancels this batch too.
    pub(super) fn new(total: usize, parent: Option<&CancelToken>) -> Result<Arc<Shared>, Error> {
        // SAFETY: eventfd takes no pointers; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(Error::Syscall {
                call: "eventfd",
                errno: std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EMFILE),
            });
        }
        // SAFETY: `fd` was just created by this call and nothing else owns
        // it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Arc::new(Shared {
            cancel: CancelToken::linked(parent),
            done_bytes: AtomicUsize::new(0),
            total,
            finished: Latch::new(1),
            result: Mutex::new(None),
            fd,
        }))
    }

    /// Stores the outcome and wakes every waiter (condition variable and
    /// eventfd). Called once, after the batch has returned: every byte it
    /// reports is written and visible (its workers have drained their
    /// stores and been joined through the pool's lock).
    pub(super) fn finish(&self, outcome: Result<Report, Error>) {
        *lock(&self.result) = Some(outcome);
        self.finished.count_down();
        let one = 1u64;
        // SAFETY: writes the 8 bytes of a live u64 to this state's own
        // eventfd. It cannot fail: the counter is written once, far from
        // overflow; a failure would only leave the fd unreadable.
        unsafe {
            libc::write(
                self.fd.as_raw_fd(),
                (&one as *const u64).cast::<libc::c_void>(),
                8,
            )
        };
    }
}

/// A batch submitted with [`Engine::submit_copy`], [`Engine::submit_clear`]
/// or [`Engine::submit_fill`], running in the background.
///
/// Wait for it ([`wait`](Ticket::wait), [`wait_timeout`](Ticket::wait_timeout),
/// [`try_wait`](Ticket::try_wait)) from any thread, any number of times:
/// each returns the same outcome, as the synchronous call would have
/// returned it. Or poll its file descriptor ([`AsRawFd`]): an eventfd that
/// becomes readable when the batch is done, for `epoll`/`poll` loops.
///
/// Dropping a ticket whose batch is not done cancels the batch and waits
/// for it to stop (after the chunks in flight): once the drop returns, the
/// engine no longer touches the batch's memory, and the caller may free it.
///
/// In a child made by `fork()`, a ticket of the parent's never completes
/// (the batch runs in the parent): waiting returns
/// [`Error::ForkedChild`] at once, and dropping it does not wait.
pub struct Ticket<'e> {
    pub(super) shared: Arc<Shared>,
    pub(super) engine: &'e Engine,
    /// The process that submitted it.
    pub(super) pid: u32,
}

impl std::fmt::Debug for Ticket<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("progress", &self.progress())
            .field("done", &self.is_done())
            .finish()
    }
}

impl Ticket<'_> {
    /// Blocks until the batch is done and returns its outcome: the report,
    /// or the error the synchronous call would have returned.
    /// [`Error::Reentrant`] (at once) when called from a progress callback
    /// or fill patch of the same engine before the batch is done: that
    /// batch holds the engine, so this one could never start.
    pub fn wait(&self) -> Result<Report, Error> {
        match self.wait_until(None) {
            Some(outcome) => outcome,
            None => unreachable!("a wait without a deadline ends with an outcome"),
        }
    }

    /// As [`Ticket::wait`], giving up after `timeout`: `None` if the batch
    /// is still running then.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Result<Report, Error>> {
        // A timeout too long to represent is no timeout.
        self.wait_until(Instant::now().checked_add(timeout))
    }

    /// The outcome if the batch is done, `None` otherwise; never blocks.
    pub fn try_wait(&self) -> Option<Result<Report, Error>> {
        if self.pid == std::process::id() && !self.is_done() {
            return None;
        }
        self.wait_until(Some(Instant::now()))
    }

    /// Whether the batch is done (its outcome is ready).
    pub fn is_done(&self) -> bool {
        self.shared.finished.count() == 0
    }

    /// Asks the batch to stop: if it has not started it never will; if it
    /// is running it stops after the chunks in flight, and its report says
    /// exactly which prefix was written (as [`CancelToken::cancel`]).
    /// Returns at once; [`wait`](Ticket::wait) for the report.
    pub fn cancel(&self) {
        self.shared.cancel.cancel();
    }

    /// Bytes in the chunks finished so far, and in the whole batch. As
    /// [`Progress`] from a callback, `done` counts finished chunks, which
    /// are a prefix of the batch only once it is done.
    pub fn progress(&self) -> Progress {
        Progress {
            done: self.shared.done_bytes.load(Ordering::Relaxed),
            total: self.shared.total,
        }
    }

    fn wait_until(&self, deadline: Option<Instant>) -> Option<Result<Report, Error>> {
        if self.pid != std::process::id() {
            // The parent's submission thread does not exist here, and any
            // lock it held at the fork stays held: touch nothing.
            return Some(Err(Error::ForkedChild {
                what: "a ticket",
                owner: self.pid,
            }));
        }
        if !self.is_done() && Inside::current() == self.engine.id() {
            return Some(Err(Error::Reentrant));
        }
        let done = match deadline {
            None => {
                self.shared.finished.wait();
                true
            }
            Some(d) => self.shared.finished.wait_until(d),
        };
        done.then(|| {
            lock(&self.shared.result)
                .clone()
                .expect("the outcome is stored before the latch opens")
        })
    }
}

impl AsRawFd for Ticket<'_> {
    /// An eventfd (close-on-exec, non-blocking) that becomes readable when
    /// the batch is done and stays readable. It belongs to the ticket: do
    /// not close it or read from it.
    fn as_raw_fd(&self) -> RawFd {
        self.shared.fd.as_raw_fd()
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.pid != std::process::id() || self.is_done() {
            return;
        }
        self.shared.cancel.cancel();
        // Inside a callback of this engine, `wait` returns `Reentrant` at
        // once instead of waiting, and that is sound: the callback's batch
        // holds the engine's marker, so this ticket's batch has not started
        // writing, and with its token cancelled it never will.
        let _ = self.wait();
    }
}
