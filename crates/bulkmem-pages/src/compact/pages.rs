//! One state word per heap page, and the rule that exactly one thread
//! builds and maps each page: whoever moves it out of a state with a
//! compare-and-swap owns the next step (docs/design.md, "Concurrent
//! compaction").
//!
//! ```text
//! UNPRODUCED --claim--> PRODUCING --(collector, built in staging)--> STAGED
//!      PRODUCING --map--> MAPPED          STAGED --claim--> MAPPING --map--> MAPPED
//!      any owner --kernel refused--> FAILED
//! ```
//!
//! The words live in an anonymous mapping, so a 4 GiB heap's million
//! pages cost nothing until touched: the pause does not grow with them.

use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::time::Duration;

use crate::mapping::Mapping;

pub(crate) const UNPRODUCED: u8 = 0;
pub(crate) const PRODUCING: u8 = 1;
pub(crate) const STAGED: u8 = 2;
pub(crate) const MAPPING: u8 = 3;
pub(crate) const MAPPED: u8 = 4;
pub(crate) const FAILED: u8 = 5;

pub(crate) struct Pages {
    /// `n` state bytes, then `n` staging slot numbers (u32, aligned).
    words: Mapping,
    n: usize,
    waits: [Waiters; WAIT_SLOTS],
}

/// Futex words threads waiting for another's step sleep on: page `p`'s
/// waiters use slot `p % WAIT_SLOTS`, so a page costs no word of its own.
const WAIT_SLOTS: usize = 64;

/// A futex word threads wait on for another thread's step, on a cache
/// line of its own; the protocol is [`Pages::set`]'s.
#[repr(align(64))]
pub(crate) struct Waiters {
    /// Bumped by an owner that publishes a step while someone sleeps here.
    seq: AtomicU32,
    /// Threads between announcing themselves and leaving.
    sleepers: AtomicU32,
}

impl Waiters {
    pub const fn new() -> Waiters {
        Waiters {
            seq: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
        }
    }

    /// After a step was published with a sequentially consistent store:
    /// wakes whoever sleeps here (one load when nobody does).
    pub fn wake(&self) {
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            self.seq.fetch_add(1, Ordering::SeqCst);
            crate::latch::wake_all(&self.seq);
        }
    }

    /// Sleeps once, unless `busy` (a sequentially consistent read of the
    /// state waited on) says the step came meanwhile; returns on a wake,
    /// a spurious return or after [`NAP`]. The caller loops.
    pub fn sleep_while(&self, busy: impl Fn() -> bool) {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let seq = self.seq.load(Ordering::SeqCst);
        if busy() {
            crate::latch::futex_for(&self.seq, seq, Some(NAP));
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Spins before sleeping (pages and buffers alike): a page is built and mapped in a few
/// microseconds, and a sleep costs its owner a wake-up system call.
pub(crate) const SPINS: u32 = 64;

/// A sleeper looks again after this long even unwoken (a guard, not part
/// of the protocol).
const NAP: Duration = Duration::from_millis(10);

impl Pages {
    pub fn new(n: usize) -> std::io::Result<Pages> {
        let states = n.next_multiple_of(4);
        let words = Mapping::options()
            .noreserve(true)
            .map(states + 4 * n.max(1))?;
        Ok(Pages {
            words,
            n,
            waits: [const { Waiters::new() }; WAIT_SLOTS],
        })
    }

    fn state(&self, p: usize) -> &AtomicU8 {
        assert!(p < self.n);
        // SAFETY: byte p of the mapping, which lives as long as self; an
        // AtomicU8 has u8's layout and the mapping is only ever accessed
        // through atomics.
        unsafe { &*self.words.as_ptr().add(p).cast::<AtomicU8>() }
    }

    fn slot(&self, p: usize) -> &AtomicU32 {
        assert!(p < self.n);
        let at = self.n.next_multiple_of(4) + 4 * p;
        // SAFETY: 4 aligned bytes inside the mapping (page-aligned base,
        // `at` a multiple of 4), accessed only through atomics.
        unsafe { &*self.words.as_ptr().add(at).cast::<AtomicU32>() }
    }

    pub fn load(&self, p: usize) -> u8 {
        self.state(p).load(Ordering::Acquire)
    }

    /// Moves page `p` from `from` to `to`; true if this caller did.
    pub fn claim(&self, p: usize, from: u8, to: u8) -> bool {
        self.state(p)
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Publishes the owner's step (the page's content, its mapping), and
    /// wakes whoever sleeps on it.
    ///
    /// The protocol: the owner stores the state, then reads its slot's
    /// sleeper count; a waiter counts itself in, reads the slot's
    /// sequence, then reads the state, and sleeps only if it is unchanged
    /// (all sequentially consistent). Either the waiter sees the new
    /// state, or the owner sees the waiter and bumps the sequence before
    /// waking, so the waiter's sleep returns at once or is woken: no wake
    /// is lost. Without sleepers, publishing costs one load.
    pub fn set(&self, p: usize, s: u8) {
        self.state(p).store(s, Ordering::SeqCst);
        self.waits[p % WAIT_SLOTS].wake();
    }

    /// Waits while page `p`'s state satisfies `busy` (another thread
    /// holds it): spins briefly, then sleeps until its owner publishes a
    /// step ([`Pages::set`]). Returns the state that ended the wait.
    /// Async-signal-safe: atomics and `futex`.
    pub fn wait_while(&self, p: usize, busy: impl Fn(u8) -> bool) -> u8 {
        let mut spins = 0;
        loop {
            let s = self.state(p).load(Ordering::SeqCst);
            if !busy(s) {
                return s;
            }
            if spins < SPINS {
                spins += 1;
                core::hint::spin_loop();
                continue;
            }
            self.waits[p % WAIT_SLOTS].sleep_while(|| busy(self.state(p).load(Ordering::SeqCst)));
        }
    }

    /// Where a STAGED page waits in the collector's staging area (written
    /// before the page is published as STAGED).
    pub fn set_staged_at(&self, p: usize, slot: u32) {
        self.slot(p).store(slot, Ordering::Relaxed);
    }

    pub fn staged_at(&self, p: usize) -> usize {
        self.slot(p).load(Ordering::Relaxed) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_claimer_wins_and_slots_are_kept_per_page() {
        let p = Pages::new(1000).unwrap();
        assert_eq!(p.load(999), UNPRODUCED);
        assert!(p.claim(7, UNPRODUCED, PRODUCING));
        assert!(!p.claim(7, UNPRODUCED, PRODUCING));
        p.set_staged_at(7, 42);
        p.set_staged_at(8, 43);
        p.set(7, STAGED);
        assert_eq!(
            (p.load(7), p.staged_at(7), p.staged_at(8)),
            (STAGED, 42, 43)
        );
        assert_eq!(p.load(6), UNPRODUCED);
    }

    #[test]
    fn a_waiter_sleeps_until_the_owner_publishes_and_is_woken() {
        for page in [5, 5 + WAIT_SLOTS, 999] {
            let p = Pages::new(1000).unwrap();
            assert!(p.claim(page, UNPRODUCED, PRODUCING));
            std::thread::scope(|s| {
                let w = s.spawn(|| p.wait_while(page, |st| st == PRODUCING));
                // The waiter is asleep (counted in its slot) before the
                // owner publishes: the wake must reach it.
                while p.waits[page % WAIT_SLOTS].sleepers.load(Ordering::SeqCst) == 0 {
                    std::thread::yield_now();
                }
                p.set(page, MAPPED);
                assert_eq!(w.join().unwrap(), MAPPED);
            });
            assert_eq!(
                p.waits[page % WAIT_SLOTS].sleepers.load(Ordering::SeqCst),
                0
            );
        }
    }
}
