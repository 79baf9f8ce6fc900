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
}

impl Pages {
    pub fn new(n: usize) -> std::io::Result<Pages> {
        let states = n.next_multiple_of(4);
        let words = Mapping::options()
            .noreserve(true)
            .map(states + 4 * n.max(1))?;
        Ok(Pages { words, n })
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

    /// Publishes the owner's step (the page's content, its mapping).
    pub fn set(&self, p: usize, s: u8) {
        self.state(p).store(s, Ordering::Release);
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

/// Waits a little for another thread's step: spins first (a page is built
/// in well under a microsecond), then yields the CPU, so that on a machine
/// with fewer CPUs than threads the owner gets to run.
pub(crate) fn backoff(spins: &mut u32) {
    if *spins < 64 {
        core::hint::spin_loop();
    } else {
        // SAFETY: sched_yield has no arguments and is async-signal-safe.
        unsafe { libc::sched_yield() };
    }
    *spins = spins.saturating_add(1);
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
}
