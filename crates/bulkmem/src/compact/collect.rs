//! The collector's side: threads that build the to-space in address order,
//! a batch at a time, and map each run of built pages with one ioctl (the
//! kernel then flushes the TLB once per run, not once per page). Behind
//! them, the from-space is unmapped in 2 MiB steps as soon as no page still
//! to be built reads it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};

use super::map::{self, Via, PAGE};
use super::pages::{self, MAPPED, MAPPING, PRODUCING, STAGED, UNPRODUCED};
use super::shared::Shared;
use super::stats::Counters;
use super::{Fill, Mode};

/// The largest batch a worker builds before mapping (2 MiB of pages).
pub(crate) const MAX_BATCH: usize = 512;
/// From-space is released in steps of this many pages.
const RELEASE_STEP: usize = 512;

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

/// One collector thread (`worker` numbers its staging area): takes batches
/// until the heap is done.
pub(crate) fn work(s: &Shared, cursor: &Cursor, worker: usize) {
    let batch = s.opts.pages_per_batch();
    let staging = s.staging.as_ptr() as usize + worker * batch * PAGE;
    let mut kinds = [Kind::Theirs; MAX_BATCH];
    loop {
        let first = cursor.next.fetch_add(batch, Relaxed);
        if first >= s.n {
            break;
        }
        let end = (first + batch).min(s.n);
        build(s, worker, staging, first, end, &mut kinds);
        map_batch(s, staging, first, end, &kinds);
        // Mutators may be copying pages out of our staging area: it is
        // ours again once every page staged in it is MAPPED.
        for p in first..end {
            let mut spins = 0;
            while kinds[p - first] == Kind::Built && s.pages.load(p) == MAPPING {
                pages::backoff(&mut spins);
            }
        }
        release(s, cursor);
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
            Kind::Zero => (Via::Zero, 0),
            _ => (s.same_via(), s.from + i * PAGE),
        };
        // SAFETY: to-space pages i..j are ours (PRODUCING or MAPPING) and
        // registered; the source is our staging area, or the from-space
        // pages the producer said are these pages unchanged.
        let r = unsafe {
            map::run(
                s.fd(),
                &s.counters.collector,
                via,
                s.base + i * PAGE,
                src,
                len,
            )
        };
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
    if !s.can_move {
        return Via::Copy;
    }
    match s.opts.mode {
        Mode::Copy => Via::Copy,
        Mode::Move => Via::Move,
        Mode::Auto => {
            let whole =
                pages == MAX_BATCH && (s.base + first * PAGE).is_multiple_of(MAX_BATCH * PAGE);
            if whole && s.opts.huge_pages {
                Via::Move
            } else {
                Via::Copy
            }
        }
    }
}

/// Advances the watermark over MAPPED pages and unmaps the from-space no
/// page above it reads (the producer's `first_source`), in 2 MiB steps.
fn release(s: &Shared, cursor: &Cursor) {
    if cursor.releasing.swap(true, Acquire) {
        return; // another thread is at it
    }
    let mut w = cursor.watermark.load(Relaxed);
    while w < s.n && s.pages.load(w) == MAPPED {
        w += 1;
    }
    cursor.watermark.store(w, Relaxed);
    if w < s.n {
        let needed = s.producer.first_source(w).min(s.n);
        let done = s.released.load(Relaxed);
        let upto = needed / RELEASE_STEP * RELEASE_STEP;
        if upto > done {
            let len = (upto - done) * PAGE;
            // SAFETY: from-space pages done..upto: no page still to be
            // built reads them (the producer's promise), and the ones
            // moved back are gone already.
            unsafe { libc::munmap((s.from + done * PAGE) as *mut libc::c_void, len) };
            Counters::add(&s.counters.released, len as u64);
            s.released.store(upto, Relaxed);
        }
    }
    cursor.releasing.store(false, Release);
}
