//! What the collector's threads, mutators' fault handlers and `ensure`
//! share about one space of a session: the to-space's page states, the
//! from-space, the producer, the userfaultfd and the counters. Everything
//! reachable from [`Shared::serve`] is async-signal-safe: atomics, ioctls,
//! `madvise`, `clock_gettime`, `futex` and the producer (whose contract
//! says the same).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Arc;

use super::map::{self, Mapped, Present, Via, PAGE};
use super::pages::{Pages, Waiters, FAILED, MAPPED, MAPPING, PRODUCING, SPINS, STAGED, UNPRODUCED};
use super::release::FromSpace;
use super::stats::{Counters, Side};
use super::{Fill, Mode, Options, Producer};
use crate::mapping::Mapping;

/// One-page buffers mutators build pages in: as many as a u64 has bits.
pub(crate) const BUFFERS: usize = 64;

/// Pages of zeros one ioctl maps at most (the zero source's size).
pub(crate) const ZERO_RUN: usize = 512;

/// Memory the session may hold twice (to-space pages built, or mapped by
/// copy, whose from-space is not yet released) before mutators' faults
/// start growing their pages into runs that free what they hold (8 MiB).
/// Islands that random mutators build ahead of the collector each hold
/// about a page twice (release.rs); when they come faster than the
/// collector reaches them (at 90% live, two mutators and the collector
/// sharing two CPUs held 60 MiB), only the mutators can stop them coming.
pub(crate) const HELD_BUDGET: u64 = (8 << 20) / PAGE as u64;
/// Pages one fault builds at most when it grows its page into a run
/// (128 KiB: at 90% live a run frees what it holds from 19 pages).
pub(crate) const GROW: usize = 32;
/// Pages mutators build between two looks at the budget.
const REFRESH: u64 = 64;
/// Pages on either side of a grown run looked at for the island it joins.
const ISLAND_LOOK: usize = 4 * GROW;
/// Areas of [`GROW`] pages faults grow runs in; a fault that finds none
/// free builds its one page.
const GROW_AREAS: usize = 4;

pub(crate) struct Shared {
    /// The session's userfaultfd (one for all its spaces).
    pub fd: Arc<OwnedFd>,
    /// The to-space: the heap's own addresses.
    pub base: usize,
    /// Pages in the heap.
    pub n: usize,
    /// The from-space: where the heap's pages went in the pause.
    pub from: usize,
    pub pages: Pages,
    pub producer: Arc<dyn Producer>,
    pub opts: Options,
    /// `UFFDIO_MOVE` may be tried; cleared for good when the kernel
    /// refuses to move between the two mappings (`map::run`).
    pub moves: AtomicBool,
    /// The whole session's counters (shared by its spaces).
    pub counters: Arc<Counters>,
    buffers: Mapping,
    buffers_taken: AtomicU64,
    /// Where threads wait for a buffer to be put back.
    buffer_wait: Waiters,
    /// [`GROW_AREAS`] areas of [`GROW`] pages, and which are taken.
    grow_areas: Mapping,
    grow_taken: AtomicU64,
    /// More than [`HELD_BUDGET`] is held twice: faults grow their pages.
    over_budget: AtomicBool,
    /// `workers * batch` pages the collector builds runs in.
    pub staging: Mapping,
    /// Never written, readable: reads as zeros and costs no memory; the
    /// source of zero pages that must be writable at once.
    zeros: Mapping,
    pub from_space: FromSpace,
    /// The first page the kernel refused to map, or usize::MAX.
    pub first_failed: AtomicUsize,
    pub failed_errno: AtomicI32,
}

/// `CLOCK_MONOTONIC` in nanoseconds (the vDSO; async-signal-safe).
pub(crate) fn now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes `t` only.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Where one space's pages are and what builds them.
pub(crate) struct Place {
    pub base: usize,
    pub n: usize,
    pub from: usize,
    pub producer: Arc<dyn Producer>,
    pub moves: bool,
}

impl Shared {
    pub fn new(
        fd: Arc<OwnedFd>,
        place: Place,
        opts: Options,
        counters: Arc<Counters>,
    ) -> std::io::Result<Shared> {
        let mut staging = Mapping::options().align(2 << 20);
        if let Some(huge) = opts.huge_pages {
            staging = staging.huge_pages(huge);
        }
        let staging = staging.map(opts.workers * opts.pages_per_batch() * PAGE)?;
        let zeros = Mapping::options().inaccessible(true).map(ZERO_RUN * PAGE)?;
        // SAFETY: our own fresh mapping, made readable (never writable).
        if unsafe { libc::mprotect(zeros.as_mut_ptr().cast(), zeros.len(), libc::PROT_READ) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let Place {
            base,
            n,
            from,
            producer,
            moves,
        } = place;
        Ok(Shared {
            fd,
            base,
            n,
            from,
            pages: Pages::new(n)?,
            producer,
            opts,
            moves: AtomicBool::new(moves),
            counters,
            buffers: Mapping::anonymous(BUFFERS * PAGE)?,
            buffers_taken: AtomicU64::new(0),
            buffer_wait: Waiters::new(),
            grow_areas: Mapping::options()
                .noreserve(true)
                .map(GROW_AREAS * GROW * PAGE)?,
            grow_taken: AtomicU64::new(0),
            over_budget: AtomicBool::new(false),
            staging,
            zeros,
            from_space: FromSpace::new(from, n)?,
            first_failed: AtomicUsize::new(usize::MAX),
            failed_errno: AtomicI32::new(0),
        })
    }

    pub fn contains(&self, addr: usize) -> bool {
        addr.wrapping_sub(self.base) < self.n * PAGE
    }

    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Where `map::run` maps for this space, counting into `side`.
    pub fn target<'a>(&'a self, side: &'a Side, present: Present) -> map::Target<'a> {
        map::Target {
            fd: self.fd(),
            side,
            moves: &self.moves,
            present,
        }
    }

    /// Maps `len` bytes of to-space page `p` on from `src` with `via`,
    /// counting into `side`; the caller owns the pages.
    ///
    /// # Safety
    /// `src..src + len` is readable memory of ours (a buffer, staging, the
    /// zero source, or from-space pages the producer handed back).
    pub unsafe fn map(&self, side: &Side, via: Via, p: usize, src: usize, len: usize) -> Mapped {
        // SAFETY: registered to-space pages the caller owns, and the
        // caller's source.
        unsafe {
            map::run(
                &self.target(side, Present::Replace),
                via,
                self.base + p * PAGE,
                src,
                len,
            )
        }
    }

    /// A mutator's fault at `addr`: makes its page present. False when the
    /// page cannot be (the kernel refused to map it): the signal is then
    /// the program's.
    pub fn serve(&self, addr: usize) -> bool {
        let t0 = now_ns();
        let ok = self.make_present((addr - self.base) / PAGE, true);
        Counters::add(&self.counters.faults, 1);
        self.counters.stall(now_ns().saturating_sub(t0));
        ok
    }

    /// Makes page `p` present: builds and maps it, maps what the collector
    /// staged for it, or waits for the thread that holds it. `faulted`: the
    /// caller found it missing, so a page already MAPPED was dropped since
    /// (or raced with its mapping) and gets a zero page, as anonymous
    /// memory would.
    pub fn make_present(&self, p: usize, faulted: bool) -> bool {
        let mut first = true;
        loop {
            match self.pages.load(p) {
                UNPRODUCED => {
                    if self.pages.claim(p, UNPRODUCED, PRODUCING) {
                        if faulted && self.over_budget.load(Relaxed) {
                            if let Some(area) = self.take_grow_area() {
                                let ok = self.grow(p, area);
                                self.put_grow_area(area);
                                return ok;
                            }
                        }
                        let buf = self.take_buffer();
                        let ok = self.produce_one(p, buf);
                        self.put_buffer(buf);
                        return ok;
                    }
                }
                STAGED => {
                    if self.pages.claim(p, STAGED, MAPPING) {
                        let src = self.staging.as_ptr() as usize + self.pages.staged_at(p) * PAGE;
                        let side = &self.counters.mutators;
                        // SAFETY: the collector's staged copy, which it
                        // keeps until the page is MAPPED.
                        let r = unsafe { self.map(side, Via::Copy, p, src, PAGE) };
                        Counters::add(&self.counters.mutators.pages, 1);
                        return self.settle(p, 1, r);
                    }
                }
                MAPPED => {
                    if first && faulted {
                        Counters::add(&self.counters.refaults, 1);
                        let t = self.target(&self.counters.mutators, Present::Keep);
                        // SAFETY: a registered to-space page; one that is
                        // there after all stands (Keep).
                        let r = unsafe { map::run(&t, Via::Zero, self.base + p * PAGE, 0, PAGE) };
                        return !matches!(r, Mapped::Failed { .. });
                    }
                    if !first {
                        Counters::add(&self.counters.waits, 1);
                    }
                    return true;
                }
                FAILED => return false,
                _ => {
                    self.pages.wait_while(p, |s| s == PRODUCING || s == MAPPING);
                }
            }
            first = false;
        }
    }

    /// Sets [`Self::over_budget`] from the counters: by the collector
    /// after each batch, by a mutator after each run it grows and every
    /// [`REFRESH`] pages mutators build. A fault reads the flag only: the
    /// counters sit on cache lines other CPUs write, and reading them all
    /// on every fault cost it a few hundred nanoseconds.
    pub fn refresh_budget(&self) {
        let over = self.held_twice() > HELD_BUDGET;
        if self.over_budget.load(Relaxed) != over {
            self.over_budget.store(over, Relaxed);
        }
    }

    /// Pages the session holds twice now: pages mapped by copy or move (a
    /// moved from-space page is counted released later, though it went
    /// with the move) less writable zeros and released from-space.
    fn held_twice(&self) -> u64 {
        let c = &*self.counters;
        let get = |a: &AtomicU64| a.load(Relaxed);
        let mapped = get(&c.collector.copied)
            + get(&c.mutators.copied)
            + get(&c.collector.moved)
            + get(&c.mutators.moved);
        mapped.saturating_sub(get(&c.writable_zeros) + get(&c.released) / PAGE as u64)
    }

    /// Builds page `p` (PRODUCING, ours) and the unclaimed pages after it
    /// in `area`, until the run frees at least as much from-space as it
    /// holds (or reaches [`GROW`] pages, a page not ours, or one that is
    /// not built); maps the run with one ioctl and releases the from-space
    /// that no page outside the island it is now part of reads.
    fn grow(&self, p: usize, area: usize) -> bool {
        let pr = &*self.producer;
        let early = pr.last_source(0) != usize::MAX;
        let lo = if p == 0 { 0 } else { pr.last_source(p - 1) };
        let mut end = p;
        loop {
            let at = area + (end - p) * PAGE;
            // SAFETY: page end - p < GROW of our grow area, ours until put
            // back.
            let out = unsafe { &mut *(at as *mut [u8; PAGE]) };
            let fill = pr.produce(end, self.from as *const u8, out);
            if fill != Fill::Built {
                let ok = self.map_run(p, end, area);
                return self.map_built(end, fill, at) && ok;
            }
            end += 1;
            let frees = pr.first_source(end).min(self.n).saturating_sub(lo);
            if !early
                || end == self.n
                || end - p == GROW
                || frees >= end - p
                || !self.pages.claim(end, UNPRODUCED, PRODUCING)
            {
                break;
            }
        }
        let ok = self.map_run(p, end, area);
        if ok && early {
            self.refresh_budget();
            // The island: the run and the MAPPED pages on either side (a
            // bounded look; stopping short only releases less).
            let (mut a, mut b) = (p, end);
            while a > 0 && p - a < ISLAND_LOOK && self.pages.load(a - 1) == MAPPED {
                a -= 1;
            }
            while b < self.n && b - end < ISLAND_LOOK && self.pages.load(b) == MAPPED {
                b += 1;
            }
            let lo = if a == 0 { 0 } else { pr.last_source(a - 1) };
            let hi = if b == self.n {
                self.n
            } else {
                pr.first_source(b)
            };
            self.from_space.release(lo, hi, &self.counters.released);
        }
        ok
    }

    /// Maps built pages `first..end` (PRODUCING, ours) from `area`.
    fn map_run(&self, first: usize, end: usize, area: usize) -> bool {
        if first == end {
            return true;
        }
        let len = (end - first) * PAGE;
        // SAFETY: the run's pages, built in our grow area.
        let r = unsafe { self.map(&self.counters.mutators, self.single_via(), first, area, len) };
        Counters::add(&self.counters.mutators.pages, (end - first) as u64);
        self.settle(first, end - first, r)
    }

    /// How a page built by a mutator is mapped: one page, so a move would
    /// only trade the kernel's copy for a fresh buffer page; copied unless
    /// moves are asked for.
    fn single_via(&self) -> Via {
        if self.opts.mode == Mode::Move && self.moves.load(Relaxed) {
            Via::Move
        } else {
            Via::Copy
        }
    }

    /// How an unchanged from-space page comes back: moved (no copy, the
    /// from-space page goes with it) wherever the kernel can.
    pub fn same_via(&self) -> Via {
        if self.opts.mode != Mode::Copy && self.moves.load(Relaxed) {
            Via::Move
        } else {
            Via::Copy
        }
    }

    /// The zero source: `pages` (at most [`ZERO_RUN`]) readable zeros.
    pub fn zeros(&self) -> usize {
        self.zeros.as_ptr() as usize
    }

    /// Builds page `p` (PRODUCING, ours) in `buf` (a buffer of ours) and
    /// maps it, as a mutator.
    fn produce_one(&self, p: usize, buf: usize) -> bool {
        // SAFETY: the buffer is this thread's until put back, a whole page.
        let out = unsafe { &mut *(buf as *mut [u8; PAGE]) };
        let fill = self.producer.produce(p, self.from as *const u8, out);
        self.map_built(p, fill, buf)
    }

    /// Maps page `p` (PRODUCING, ours) as `fill` says, `buf` holding it if
    /// built; a zero page is mapped writable (not the shared zero page:
    /// the access that wanted it is most often a write, which would fault
    /// again to copy it).
    fn map_built(&self, p: usize, fill: Fill, buf: usize) -> bool {
        let (via, src) = match fill {
            Fill::Built => (self.single_via(), buf),
            Fill::Zero => (Via::Copy, self.zeros()),
            Fill::Same => (self.same_via(), self.from + p * PAGE),
        };
        if fill == Fill::Zero {
            Counters::add(&self.counters.writable_zeros, 1);
        }
        // SAFETY: our buffer, the zero source, or the from-space page the
        // producer says is this page unchanged.
        let r = unsafe { self.map(&self.counters.mutators, via, p, src, PAGE) };
        if self.counters.mutators.pages.fetch_add(1, Relaxed) % REFRESH == REFRESH - 1 {
            self.refresh_budget();
        }
        self.settle(p, 1, r)
    }

    /// Makes pages `first..end` present on this thread, mapping each run
    /// of zero pages (free space: an allocation buffer) writable with one
    /// ioctl. False if the kernel refused a page.
    pub fn make_range_present(&self, first: usize, end: usize) -> bool {
        let buf = self.take_buffer();
        let mut ok = true;
        // Claimed zero pages wait in run..p for one ioctl.
        let (mut run, mut p) = (first, first);
        while p < end {
            if p - run == ZERO_RUN {
                ok &= self.map_zeros(run, p);
                run = p;
            }
            if self.pages.claim(p, UNPRODUCED, PRODUCING) {
                // SAFETY: our buffer, a whole page.
                let out = unsafe { &mut *(buf as *mut [u8; PAGE]) };
                let fill = self.producer.produce(p, self.from as *const u8, out);
                if fill == Fill::Zero {
                    p += 1;
                    continue;
                }
                ok &= self.map_zeros(run, p);
                ok &= self.map_built(p, fill, buf);
            } else {
                // Someone else's: ours are mapped before waiting for it.
                ok &= self.map_zeros(run, p);
                ok &= self.make_present(p, false);
            }
            p += 1;
            run = p;
        }
        ok &= self.map_zeros(run, end);
        self.put_buffer(buf);
        ok
    }

    /// Maps pages `first..end` (claimed, ours) as writable zeros.
    fn map_zeros(&self, first: usize, end: usize) -> bool {
        if first == end {
            return true;
        }
        // SAFETY: the zero source holds ZERO_RUN pages, at least as many.
        let r = unsafe {
            self.map(
                &self.counters.mutators,
                Via::Copy,
                first,
                self.zeros(),
                (end - first) * PAGE,
            )
        };
        Counters::add(&self.counters.mutators.pages, (end - first) as u64);
        Counters::add(&self.counters.writable_zeros, (end - first) as u64);
        self.settle(first, end - first, r)
    }

    /// Publishes the outcome of mapping pages `first..first + count`, which
    /// the caller owns: MAPPED, or FAILED from the page the kernel refused.
    pub fn settle(&self, first: usize, count: usize, r: Mapped) -> bool {
        let good = match r {
            Mapped::Done | Mapped::Unregistered => count,
            Mapped::Failed { at, errno } => {
                self.first_failed.fetch_min(first + at / PAGE, AcqRel);
                self.failed_errno.store(errno, Relaxed);
                at / PAGE
            }
        };
        for p in first..first + good {
            self.pages.set(p, MAPPED);
        }
        for p in first + good..first + count {
            Counters::add(&self.counters.failed, 1);
            self.pages.set(p, FAILED);
        }
        good == count
    }

    /// One of the mutators' page buffers; sleeps while all are taken
    /// (more threads faulting at once than there are buffers).
    fn take_buffer(&self) -> usize {
        let mut spins = 0;
        loop {
            if let Some(i) = take_bit(&self.buffers_taken, BUFFERS) {
                return self.buffers.as_ptr() as usize + i * PAGE;
            }
            if spins < SPINS {
                spins += 1;
                core::hint::spin_loop();
                continue;
            }
            self.buffer_wait
                .sleep_while(|| self.buffers_taken.load(SeqCst) == u64::MAX);
        }
    }

    /// A free grow area, or None (never waits: the caller then builds one
    /// page).
    fn take_grow_area(&self) -> Option<usize> {
        take_bit(&self.grow_taken, GROW_AREAS)
            .map(|i| self.grow_areas.as_ptr() as usize + i * GROW * PAGE)
    }

    fn put_grow_area(&self, area: usize) {
        let i = (area - self.grow_areas.as_ptr() as usize) / (GROW * PAGE);
        self.grow_taken.fetch_and(!(1u64 << i), Release);
    }

    fn put_buffer(&self, buf: usize) {
        let i = (buf - self.buffers.as_ptr() as usize) / PAGE;
        self.buffers_taken.fetch_and(!(1u64 << i), SeqCst);
        self.buffer_wait.wake();
    }
}

/// Takes the lowest clear bit below `limit` (at most 64) of `taken`: its
/// index, or None while all are set.
fn take_bit(taken: &AtomicU64, limit: usize) -> Option<usize> {
    loop {
        let free = (!taken.load(Acquire)).trailing_zeros() as usize;
        if free >= limit {
            return None;
        }
        let bit = 1u64 << free;
        if taken.fetch_or(bit, AcqRel) & bit == 0 {
            return Some(free);
        }
    }
}
