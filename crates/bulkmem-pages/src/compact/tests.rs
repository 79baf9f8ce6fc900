//! Compaction tests that reach inside a session: stray pages mapped
//! behind its back, and the handler's answer to a late fault. The others
//! run against the public interface in `tests/compact.rs`, with the same
//! support code (crates/bulkmem/tests/common, compiled here too: it names
//! the crate `bulkmem`, which this crate's tests alias to itself); each
//! runs alone in a fresh copy of the test binary.

use std::sync::Arc;

// The parts of bulkmem's `tests/common` these tests use (`alone` names
// `skip` as its sibling); none names more of the library than this crate.
#[path = "../../../bulkmem/tests/common/alone.rs"]
mod alone;
#[allow(dead_code)]
#[path = "../../../bulkmem/tests/common/skip.rs"]
mod skip;
#[allow(dead_code)]
#[path = "../../../bulkmem/tests/common/slide_heap.rs"]
mod slide_heap;

use super::{Compaction, Mode, Options, Stats, PAGE};
use alone::alone;
use slide_heap::{heap, mutate, SlideHeap, PER_PAGE};

/// What bulkmem's SIGBUS handler answers for a fault at `addr` now (true:
/// served or retried, false: not a session's).
fn late_fault(addr: usize) -> bool {
    // SAFETY: serve only reads tables and maps pages of live sessions.
    unsafe { super::registry::serve(addr) }
}

/// Forks a child that sleeps holding the heap's pages shared (as a zygote's
/// children do): the kernel cannot move a shared page (`EBUSY`).
fn share_with_child() -> libc::pid_t {
    // SAFETY: the child only sleeps until killed.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: async-signal-safe calls; we die with the parent (which
        // kills us anyway) or after a while, never holding the test's
        // output pipe open for ever.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::alarm(120);
            loop {
                libc::pause();
            }
        }
    }
    pid
}

fn reap(pid: libc::pid_t) {
    // SAFETY: our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, core::ptr::null_mut(), 0);
    }
}

/// One compaction while `mutators` threads hammer counters.
fn round(pages: usize, opts: Options, mutators: usize, eexist: bool, ebusy: bool) -> Stats {
    let h = Arc::new(SlideHeap::new(pages, 40, 3));
    let m = heap(pages, &h);
    let sharer = ebusy.then(share_with_child);
    // SAFETY: no thread touches the heap until prepare returns.
    let mut s = unsafe { Compaction::prepare(m.as_mut_ptr(), m.len(), h.clone(), opts) }.unwrap();
    if eexist {
        // Stray pages where no mutator reads (free space, past the live
        // objects): the session must replace them, or `verify` finds
        // their bytes where zeros belong.
        let free = h.live.len().div_ceil(PER_PAGE);
        for p in [free, (free + pages) / 2, pages - 1] {
            s.map_behind(p).unwrap();
        }
    }
    let mut stats = None;
    let expect = mutate(&h, m.as_mut_ptr() as usize, mutators, 4000, || {
        s.start().unwrap();
        stats = Some(s.finish().unwrap());
    });
    if let Some(pid) = sharer {
        reap(pid);
    }
    h.verify(m.as_ptr(), &expect).unwrap();
    let stats = stats.unwrap();
    assert_eq!(stats.failed, 0);
    assert_eq!(
        stats.by_collector + stats.by_mutators,
        pages as u64,
        "{stats:?}"
    );
    stats
}

#[test]
fn counters_stay_exact_while_two_mutators_and_the_collector_race_100_rounds() {
    if !alone(
        "compact::tests::counters_stay_exact_while_two_mutators_and_the_collector_race_100_rounds",
    ) {
        return;
    }
    let moves = super::support().unwrap().moves;
    let (mut eexist, mut fallbacks, mut by_mutators) = (0, 0, 0);
    for r in 0..100 {
        let mode = [Mode::Copy, Mode::Move, Mode::Auto][r % 3];
        if mode == Mode::Move && !moves {
            continue;
        }
        let opts = Options::default()
            .mode(mode)
            .batch([1, 16, 64, 512][r % 4])
            .workers(1 + r % 2);
        let s = round(1024, opts, 2, r % 2 == 0, r % 4 < 2);
        eexist += s.eexist;
        fallbacks += s.move_fallbacks;
        by_mutators += s.by_mutators;
    }
    eprintln!(
        "100 rounds: {eexist} EEXIST, {fallbacks} moves copied, {by_mutators} pages by mutators"
    );
    assert!(eexist > 0, "no stray page was found and replaced");
    assert!(!moves || fallbacks > 0, "no move fell back to a copy");
    assert!(by_mutators > 0, "the mutators never built a page");
}

#[test]
fn the_drain_races_late_faults_and_leaves_a_finished_range_alone() {
    if !alone("compact::tests::the_drain_races_late_faults_and_leaves_a_finished_range_alone") {
        return;
    }
    for _ in 0..20 {
        // No collector threads: finish builds on this thread while both
        // mutators fault, and they go on after it returns.
        let pages = 512;
        let h = Arc::new(SlideHeap::new(pages, 4, 2));
        let m = heap(pages, &h);
        let (base, len, opts) = (m.as_mut_ptr(), m.len(), Options::default());
        // SAFETY: no other thread touches the heap yet.
        let s = unsafe { Compaction::prepare(base, len, h.clone(), opts) }.unwrap();
        let expect = mutate(&h, m.as_mut_ptr() as usize, 2, 20_000, || {
            s.finish().unwrap();
        });
        h.verify(m.as_ptr(), &expect).unwrap();
        // A late handler for a finished range: retried where the page is
        // there, and passed on where it is not (it is no longer ours).
        assert!(late_fault(m.as_ptr() as usize));
        // SAFETY: drops one page of our own heap.
        unsafe { libc::madvise(m.as_mut_ptr().cast(), PAGE, libc::MADV_DONTNEED) };
        assert!(!late_fault(m.as_ptr() as usize));
    }
}
