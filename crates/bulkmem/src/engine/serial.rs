//! The lock that runs an engine's batches one at a time, and survives a
//! caller that never comes back.
//!
//! A batch small enough to run inline (see [`super::INLINE_MAX`]) calls
//! its progress callback, or a fill's patch, on the submitting thread. A C
//! callback that leaves with `longjmp` (or a C++ exception through C
//! frames) skips every Rust frame below it: no guard is dropped, so a
//! `Mutex` held by the batch would stay locked for good. This lock is not a
//! guard-owned mutex but a busy marker (owner thread, a per-call generation,
//! and for an inline batch the stack address the batch runs below), so
//! that an abandoned call can be told from a live one:
//!
//! * The owner thread submits again. If the new call's stack lies *below*
//!   the mark (stacks grow down), it is nested inside the batch's callback:
//!   refused with [`EngineError::Reentrant`], as before. If it lies at or above
//!   it, the frames that held the marker are gone: the call was abandoned,
//!   and the new call takes the marker over (the abandoned batch ran
//!   inline, so no worker still uses it).
//! * Another thread waits while the owner works. While the owner runs a
//!   batch inline, the waiter watches its heartbeat (bumped per chunk and
//!   per callback return); after [`STALL`] without one it gives up with
//!   [`EngineError::Busy`] instead of waiting for a caller that may never return.
//!   Batches on the workers are never abandoned this way (their callbacks
//!   run on worker threads, which a `longjmp` cannot leave) and are waited
//!   for as long as they take.
//!
//! The comparison assumes the thread's stack is one downward-growing
//! region: a callback that switches stacks (`swapcontext`, coroutines)
//! and submits from there may be taken for an abandoned call.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use super::pool::{lock, Inside};
use super::Scratch;
use crate::error::EngineError;

/// How long a waiter lets an inline batch on another thread go without a
/// heartbeat before giving up with [`EngineError::Busy`].
pub(crate) const STALL: Duration = Duration::from_secs(1);

/// How often a waiter looks at the heartbeat.
const POLL: Duration = Duration::from_millis(20);

pub(super) struct Serial {
    state: Mutex<State>,
    freed: Condvar,
    /// Bumped whenever the owner's batch completes a chunk or a callback
    /// returns.
    beat: AtomicU64,
    /// Used only by the marker's owner, through its [`SerialGuard`].
    scratch: UnsafeCell<Scratch>,
}

// SAFETY: `scratch` is reached only through a `SerialGuard`, and at most
// one guard is live per engine: a guard is made only for the thread that
// set the marker, with that marker's generation; a marker is taken over
// only when its call's frames are gone (see the module docs), so the old
// guard can never be used again.
unsafe impl Sync for Serial {}

#[derive(Default)]
struct State {
    owner: Option<Owner>,
    generation: u64,
}

#[derive(Clone, Copy)]
struct Owner {
    thread: ThreadId,
    generation: u64,
    /// While the owner runs its batch inline: a stack address of the
    /// batch's loop, above every callback it calls. 0 otherwise.
    inline_sp: usize,
}

/// An address in the caller's stack frame (approximately its stack
/// pointer).
#[inline(never)]
pub(super) fn stack_addr() -> usize {
    let probe = 0u8;
    std::hint::black_box(&probe) as *const u8 as usize
}

impl Serial {
    pub(super) fn new() -> Serial {
        Serial {
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
            beat: AtomicU64::new(0),
            scratch: UnsafeCell::new(Scratch::default()),
        }
    }

    /// Takes the marker for `engine`'s next batch; `here` is a stack address
    /// of the submitting call ([`stack_addr`] in its first frame).
    pub(super) fn acquire(
        &self,
        engine: usize,
        here: usize,
    ) -> Result<SerialGuard<'_>, EngineError> {
        let me = thread::current().id();
        let mut st = lock(&self.state);
        let mut watch: Option<(u64, u64, Instant)> = None;
        while let Some(o) = st.owner {
            if o.thread == me {
                if o.inline_sp != 0 && here >= o.inline_sp {
                    // Abandoned: a callback of it left without returning.
                    Inside::forget(engine);
                    break;
                }
                return Err(EngineError::Reentrant);
            }
            if Inside::current() == engine {
                // A callback on a worker of the running batch.
                return Err(EngineError::Reentrant);
            }
            if o.inline_sp != 0 {
                let beat = self.beat.load(Ordering::Relaxed);
                match watch {
                    Some((g, b, since)) if g == o.generation && b == beat => {
                        if since.elapsed() >= STALL {
                            return Err(EngineError::Busy {
                                stalled_ms: since.elapsed().as_millis() as u64,
                            });
                        }
                    }
                    _ => watch = Some((o.generation, beat, Instant::now())),
                }
            } else {
                watch = None;
            }
            st = self
                .freed
                .wait_timeout(st, POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        st.generation += 1;
        let generation = st.generation;
        st.owner = Some(Owner {
            thread: me,
            generation,
            inline_sp: 0,
        });
        Ok(SerialGuard {
            serial: self,
            generation,
        })
    }

    /// The owner is about to run its batch on its own thread, below stack
    /// address `sp` (0: it has finished doing so).
    pub(super) fn mark_inline(&self, sp: usize) {
        let me = thread::current().id();
        if let Some(o) = lock(&self.state).owner.as_mut() {
            if o.thread == me {
                o.inline_sp = sp;
            }
        }
    }

    /// The owner's batch made progress.
    pub(super) fn beat(&self) {
        self.beat.fetch_add(1, Ordering::Relaxed);
    }
}

/// The marker held by one call; dropping it frees the engine.
pub(super) struct SerialGuard<'a> {
    serial: &'a Serial,
    generation: u64,
}

impl Deref for SerialGuard<'_> {
    type Target = Scratch;
    fn deref(&self) -> &Scratch {
        // SAFETY: this guard's generation holds the marker (see the Sync
        // impl): no other reference to the scratch is in use.
        unsafe { &*self.serial.scratch.get() }
    }
}

impl DerefMut for SerialGuard<'_> {
    fn deref_mut(&mut self) -> &mut Scratch {
        // SAFETY: as in `deref`; `&mut self` makes this the only borrow
        // through this guard.
        unsafe { &mut *self.serial.scratch.get() }
    }
}

impl Drop for SerialGuard<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.serial.state);
        if st.owner.is_some_and(|o| o.generation == self.generation) {
            st.owner = None;
        }
        drop(st);
        self.serial.freed.notify_all();
    }
}
