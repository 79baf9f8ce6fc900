//! The collector's side: threads that build the to-space in address order,
//! a batch at a time, and map each run of built pages with one ioctl (the
//! kernel then flushes the TLB once per run, not once per page). Behind
//! them, the from-space is released as soon as no page still to be built
//! reads it (`release.rs`). A session of several spaces is built space by
//! space, in the order given.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::Arc;

use super::map::{Via, PAGE};
use super::pages::{MAPPED, MAPPING, PRODUCING, STAGED, UNPRODUCED};
use super::shared::Shared;
use super::stats::Counters;
use super::{Fill, Mode};

/// The largest batch a worker builds before mapping (2 MiB of pages).
pub(crate) const MAX_BATCH: usize = 512;
/// Gap pages filled between two releases of what they freed (1 MiB).
const GAP_RELEASE: usize = 256;

/// What the collector does with one page of its batch.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Someone else claimed it.
    Theirs,
    Built,
    Zero,
    Same,
}

/// Where the collector's threads are: the next batch to take, and the
/// from-space release, which one thread at a time advances.
pub(crate) struct Cursor {
    next: AtomicUsize,
    /// Every page below it is MAPPED.
    watermark: AtomicUsize,
    releasing: AtomicBool,
}

impl Cursor {
    pub fn new() -> Cursor {
        Cursor {
            next: AtomicUsize::new(0),
            watermark: AtomicUsize::new(0),
            releasing: AtomicBool::new(false),
        }
    }
}

/// One space of a session (a heap), with where its collector threads are.
pub(crate) struct Part {
    pub shared: Arc<Shared>,
    pub cursor: Cursor,
    /// Its slot in the registry.
    pub slot: usize,
}

/// One collector thread (`worker` numbers its staging area in each
/// space): takes batches until every space is done.
pub(crate) fn work(parts: &[Arc<Part>], worker: usize) {
    let mut kinds = [Kind::Theirs; MAX_BATCH];
    for part in parts {
        work_on(&part.shared, &part.cursor, worker, &mut kinds);
    }
}

fn work_on(s: &Shared, cursor: &Cursor, worker: usize, kinds: &mut [Kind; MAX_BATCH]) {
    let batch = s.opts.pages_per_batch();
    let staging = s.staging.as_ptr() as usize + worker * batch * PAGE;
    loop {
        let first = cursor.next.fetch_add(batch, Relaxed);
        if first >= s.n {
            break;
        }
        let end = (first + batch).min(s.n);
        build_and_map(s, worker, staging, first, end, kinds);
        // Gaps between islands the mutators built ahead, filled so that
        // the from-space they read can go (release.rs), all released with
        // one call (each call costs a TLB shootdown on the mutators'
        // CPUs).
        let gaps = release(s, cursor);
        let (mut done, mut built) = (0, 0);
        for (i, &(lo, hi)) in gaps.iter().enumerate() {
            for at in (lo..hi).step_by(batch) {
                build_and_map(s, worker, staging, at, (at + batch).min(hi), kinds);
            }
            built += hi - lo;
            // Released every GAP_RELEASE pages built: all at the end would
            // hold what the gaps read twice meanwhile.
            if built >= GAP_RELEASE || i + 1 == gaps.len() {
                let released = &s.counters.released;
                s.from_space
                    .release_gaps(&s.pages, &*s.producer, &gaps[done..=i], released);
                (done, built) = (i + 1, 0);
            }
        }
    }
    release(s, cursor);
}

/// Builds and maps the unclaimed pages of `first..end` (at most a batch).
fn build_and_map(
    s: &Shared,
    worker: usize,
    staging: usize,
    first: usize,
    end: usize,
    kinds: &mut [Kind],
) {
    build(s, worker, staging, first, end, kinds);
    map_batch(s, staging, first, end, kinds);
    // Mutators may be copying pages out of our staging area: it is ours
    // again once every page staged in it is MAPPED.
    for p in first..end {
        if kinds[p - first] == Kind::Built {
            s.pages.wait_while(p, |st| st == MAPPING);
        }
    }
}

/// Claims and builds the pages of `first..end` no one else has.
fn build(s: &Shared, worker: usize, staging: usize, first: usize, end: usize, kinds: &mut [Kind]) {
    for p in first..end {
        let i = p - first;
        kinds[i] = Kind::Theirs;
        if !s.pages.claim(p, UNPRODUCED, PRODUCING) {
            continue;
        }
        // SAFETY: page i of this worker's staging area, which only this
        // worker writes (mutators read STAGED pages of it).
        let out = unsafe { &mut *((staging + i * PAGE) as *mut [u8; PAGE]) };
        kinds[i] = match s.producer.produce(p, s.from as *const u8, out) {
            Fill::Built => {
                s.pages
                    .set_staged_at(p, (worker * s.opts.pages_per_batch() + i) as u32);
                s.pages.set(p, STAGED);
                Kind::Built
            }
            Fill::Zero => Kind::Zero,
            Fill::Same => Kind::Same,
        };
    }
}

/// Maps the batch's runs: consecutive pages of one kind that are ours.
fn map_batch(s: &Shared, staging: usize, first: usize, end: usize, kinds: &[Kind]) {
    // A staged page is ours to map once we take it back from STAGED (a
    // mutator may have taken it first and mapped it itself).
    let take = |p: usize| kinds[p - first] != Kind::Built || s.pages.claim(p, STAGED, MAPPING);
    let mut i = first;
    while i < end {
        let k = kinds[i - first];
        if k == Kind::Theirs || !take(i) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        let mut skip = 0;
        while j < end && kinds[j - first] == k {
            if !take(j) {
                skip = 1;
                break;
            }
            j += 1;
        }
        let len = (j - i) * PAGE;
        let (via, src) = match k {
            Kind::Built => (built_via(s, i, j - i), staging + (i - first) * PAGE),
            // Free space: the shared zero page (no memory until written).
            Kind::Zero => (Via::Zero, 0),
            _ => (s.same_via(), s.from + i * PAGE),
        };
        // SAFETY: to-space pages i..j are ours (PRODUCING or MAPPING); the
        // source is our staging area, the zero source, or the from-space
        // pages the producer said are these pages unchanged.
        let r = unsafe { s.map(&s.counters.collector, via, i, src, len) };
        Counters::add(&s.counters.collector.pages, (j - i) as u64);
        s.settle(i, j - i, r);
        i = j + skip;
    }
}

/// How a run of staged pages is mapped. `Auto` moves a run only where the
/// move is worth it: a whole, aligned 2 MiB run out of a huge-page staging
/// area, which the kernel moves as one PMD and leaves the heap backed by a
/// huge page; smaller runs are copied (a moved staging page must be faulted
/// in afresh next time, which costs what the copy saves).
fn built_via(s: &Shared, first: usize, pages: usize) -> Via {
    if !s.moves.load(Relaxed) {
        return Via::Copy;
    }
    match s.opts.mode {
        Mode::Copy => Via::Copy,
        Mode::Move => Via::Move,
        Mode::Auto => {
            let whole =
                pages == MAX_BATCH && (s.base + first * PAGE).is_multiple_of(MAX_BATCH * PAGE);
            if whole && s.opts.huge_pages == Some(true) {
                Via::Move
            } else {
                Via::Copy
            }
        }
    }
}

/// Advances the watermark over MAPPED pages, releases the from-space no
/// page above it reads, and, when the mutators have built enough ahead,
/// sweeps for their islands: returns the to-space ranges to build so that
/// the small ones grow.
fn release(s: &Shared, cursor: &Cursor) -> Vec<(usize, usize)> {
    if cursor.releasing.swap(true, Acquire) {
        return Vec::new(); // another thread is at it
    }
    let mut w = cursor.watermark.load(Relaxed);
    while w < s.n && s.pages.load(w) == MAPPED {
        w += 1;
    }
    cursor.watermark.store(w, Relaxed);
    s.refresh_budget();
    let mut grow = Vec::new();
    if w < s.n {
        let released = &s.counters.released;
        let needed = s.producer.first_source(w);
        s.from_space.release_below(needed, released);
        if s.from_space.due(s.counters.mutators.pages.load(Relaxed)) {
            grow = s.from_space.sweep(&s.pages, &*s.producer, w, released);
        }
    }
    cursor.releasing.store(false, Release);
    grow
}
