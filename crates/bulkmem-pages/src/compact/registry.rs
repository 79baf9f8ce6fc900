//! The sessions a SIGBUS can belong to, where a signal handler can find
//! them: a fixed table of atomics (a handler may not lock or allocate).
//!
//! A handler announces itself in its slot's `inflight` count before it
//! reads the session pointer; `leave` clears the pointer and then waits for
//! the count to fall to zero, so no handler can use a session that is
//! being freed. The slot keeps its range afterwards as a tombstone, for a
//! fault raised before the session ended whose handler only runs after
//! (docs/design.md, "Concurrent compaction": the drain).

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering::*};
use std::sync::Mutex;

use super::shared::Shared;

/// Sessions that can be live at once.
pub(crate) const SLOTS: usize = 16;

struct Slot {
    claimed: AtomicBool,
    base: AtomicUsize,
    len: AtomicUsize,
    /// The session's from-space, once it has one: no other session may
    /// take it for a heap.
    from: AtomicUsize,
    from_len: AtomicUsize,
    session: AtomicPtr<Shared>,
    inflight: AtomicUsize,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            claimed: AtomicBool::new(false),
            base: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            from: AtomicUsize::new(0),
            from_len: AtomicUsize::new(0),
            session: AtomicPtr::new(core::ptr::null_mut()),
            inflight: AtomicUsize::new(0),
        }
    }
}

static TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];

/// Serialises reservations, so that two `prepare`s of overlapping heaps
/// cannot both find the other's range free. Never taken by a handler.
static RESERVE: Mutex<()> = Mutex::new(());

/// Why a heap cannot have a slot.
pub(crate) enum Refused {
    /// It overlaps a live session's heap (`from == false`) or from-space.
    Overlap { base: usize, len: usize, from: bool },
    /// Every slot is taken.
    Full,
}

impl Refused {
    /// The error `prepare` returns for the heap at `base..base + len`.
    pub(crate) fn error(self, base: usize, len: usize) -> crate::error::Error {
        use crate::error::Error;
        match self {
            Refused::Overlap {
                base: b,
                len: l,
                from,
            } => Error::BadRange {
                addr: base,
                len,
                why: format!(
                    "the heap overlaps {b:#x}..{:#x}, the {} of a live compaction session \
                     (finish that session first; two sessions cannot share pages)",
                    b + l,
                    if from { "from-space" } else { "heap" }
                ),
            },
            Refused::Full => Error::TooManyCompactions { max: SLOTS },
        }
    }
}

fn overlaps(a: usize, alen: usize, b: usize, blen: usize) -> bool {
    a < b.saturating_add(blen) && b < a.saturating_add(alen)
}

/// Takes a slot for a heap at `base..base + len`, which no live session's
/// heap or from-space may overlap; the handler ignores it until
/// [`publish`].
pub(crate) fn reserve(base: usize, len: usize) -> Result<usize, Refused> {
    let _guard = RESERVE.lock().unwrap_or_else(|e| e.into_inner());
    for slot in TABLE.iter().filter(|s| s.claimed.load(Acquire)) {
        let (b, l) = (slot.base.load(Acquire), slot.len.load(Acquire));
        let (f, fl) = (slot.from.load(Acquire), slot.from_len.load(Acquire));
        if overlaps(base, len, b, l) {
            return Err(Refused::Overlap {
                base: b,
                len: l,
                from: false,
            });
        }
        if overlaps(base, len, f, fl) {
            return Err(Refused::Overlap {
                base: f,
                len: fl,
                from: true,
            });
        }
    }
    for (i, slot) in TABLE.iter().enumerate() {
        if slot
            .claimed
            .compare_exchange(false, true, AcqRel, Relaxed)
            .is_ok()
        {
            slot.session.store(core::ptr::null_mut(), SeqCst);
            slot.len.store(0, SeqCst); // the old tombstone first
            slot.from_len.store(0, SeqCst);
            slot.base.store(base, SeqCst);
            slot.len.store(len, SeqCst);
            return Ok(i);
        }
    }
    Err(Refused::Full)
}

/// Records slot `i`'s from-space.
pub(crate) fn set_from(i: usize, from: usize, len: usize) {
    TABLE[i].from.store(from, SeqCst);
    TABLE[i].from_len.store(len, SeqCst);
}

/// Publishes `session` in slot `i` to the handler.
pub(crate) fn publish(i: usize, session: *const Shared) {
    TABLE[i].session.store(session.cast_mut(), SeqCst);
}

/// Gives back a slot whose session never started (its heap is as it was).
pub(crate) fn cancel(i: usize) {
    let slot = &TABLE[i];
    slot.session.store(core::ptr::null_mut(), SeqCst);
    slot.len.store(0, SeqCst);
    slot.from_len.store(0, SeqCst);
    slot.claimed.store(false, Release);
}

/// Withdraws slot `i`'s session; returns once no handler uses it.
pub(crate) fn leave(i: usize) {
    let slot = &TABLE[i];
    slot.session.store(core::ptr::null_mut(), SeqCst);
    while slot.inflight.load(SeqCst) != 0 {
        std::thread::yield_now();
    }
    slot.from_len.store(0, SeqCst);
    slot.claimed.store(false, Release);
}

/// The SIGBUS server (see `checked::mc::handler::set_server`): serves a
/// fault at `addr` in a live session's to-space. A fault in a finished
/// session's range (raised before it ended, handled after) is retried
/// when its page is resident now; anything else is not ours.
///
/// # Safety
/// Called from a SIGBUS handler (or any thread) with the faulting address.
pub(crate) unsafe fn serve(addr: usize) -> bool {
    for slot in &TABLE {
        let (base, len) = (slot.base.load(Acquire), slot.len.load(Acquire));
        if addr.wrapping_sub(base) >= len {
            continue;
        }
        slot.inflight.fetch_add(1, SeqCst);
        let s = slot.session.load(SeqCst);
        // SAFETY: a non-null pointer read after announcing ourselves stays
        // valid until `inflight` falls back (see `leave`).
        let served = (!s.is_null())
            .then(|| unsafe { &*s })
            .filter(|s| s.contains(addr))
            .map(|s| s.serve(addr));
        slot.inflight.fetch_sub(1, SeqCst);
        match served {
            Some(r) => return r,
            None if resident(addr) => return true,
            None => {}
        }
    }
    false
}

/// Whether the page holding `addr` is in memory (mincore).
fn resident(addr: usize) -> bool {
    let mut v = 0u8;
    let page = addr & !(super::map::PAGE - 1);
    // SAFETY: mincore reads the page tables and writes one byte to `v`.
    let rc = unsafe { libc::mincore(page as *mut libc::c_void, super::map::PAGE, &mut v) };
    rc == 0 && v & 1 != 0
}

/// Builds every page of every live session on the calling thread (with
/// the collector, which keeps going): run before `fork`, so that a child
/// gets whole heaps rather than to-spaces with holes it cannot fill.
pub(crate) fn complete_all() {
    for slot in &TABLE {
        if slot.session.load(SeqCst).is_null() {
            continue;
        }
        slot.inflight.fetch_add(1, SeqCst);
        let s = slot.session.load(SeqCst);
        if !s.is_null() {
            // SAFETY: valid while we are counted in `inflight`.
            let s = unsafe { &*s };
            for p in 0..s.n {
                s.make_present(p, false);
            }
        }
        slot.inflight.fetch_sub(1, SeqCst);
    }
}

/// Registers [`complete_all`] to run before every `fork` (once).
pub(crate) fn complete_before_fork() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn prepare() {
        complete_all();
    }
    ONCE.call_once(|| {
        // SAFETY: registers a handler that only builds pages.
        unsafe { libc::pthread_atfork(Some(prepare), None, None) };
    });
}
