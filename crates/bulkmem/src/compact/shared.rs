//! What the collector's threads, mutators' fault handlers and `ensure`
//! share: the to-space's page states, the from-space, the producer, the
//! userfaultfd and the counters. Everything reachable from
//! [`Shared::serve`] is async-signal-safe: atomics, ioctls, `mincore`,
//! `clock_gettime`, `sched_yield` and the producer (whose contract says
//! the same).

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Arc;

use super::map::{self, Mapped, Via, PAGE};
use super::pages::{self, Pages, FAILED, MAPPED, MAPPING, PRODUCING, STAGED, UNPRODUCED};
use super::stats::Counters;
use super::{Fill, Mode, Options, Producer};
use crate::mapping::Mapping;

/// One-page buffers mutators build pages in: as many as a u64 has bits.
pub(crate) const BUFFERS: usize = 64;

pub(crate) struct Shared {
    pub fd: OwnedFd,
    /// The to-space: the heap's own addresses.
    pub base: usize,
    /// Pages in the heap.
    pub n: usize,
    /// The from-space: where the heap's pages went in the pause.
    pub from: usize,
    pub pages: Pages,
    pub producer: Arc<dyn Producer>,
    pub opts: Options,
    /// UFFDIO_MOVE is allowed on the to-space.
    pub can_move: bool,
    pub counters: Counters,
    buffers: Mapping,
    buffers_taken: AtomicU64,
    /// `workers * batch` pages the collector builds runs in.
    pub staging: Mapping,
    /// From-space pages below this are unmapped.
    pub released: AtomicUsize,
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

impl Shared {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        fd: OwnedFd,
        base: usize,
        n: usize,
        from: usize,
        producer: Arc<dyn Producer>,
        opts: Options,
        can_move: bool,
    ) -> std::io::Result<Shared> {
        let staging = Mapping::options()
            .align(2 << 20)
            .huge_pages(opts.huge_pages)
            .map(opts.workers * opts.pages_per_batch() * PAGE)?;
        Ok(Shared {
            fd,
            base,
            n,
            from,
            pages: Pages::new(n)?,
            producer,
            opts,
            can_move,
            counters: Counters::new(),
            buffers: Mapping::anonymous(BUFFERS * PAGE)?,
            buffers_taken: AtomicU64::new(0),
            staging,
            released: AtomicUsize::new(0),
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
        let (mut spins, mut first) = (0, true);
        loop {
            match self.pages.load(p) {
                UNPRODUCED => {
                    if self.pages.claim(p, UNPRODUCED, PRODUCING) {
                        return self.produce_one(p);
                    }
                }
                STAGED => {
                    if self.pages.claim(p, STAGED, MAPPING) {
                        let src = self.staging.as_ptr() as usize + self.pages.staged_at(p) * PAGE;
                        // SAFETY: a registered to-space page this thread
                        // owns (MAPPING), and the collector's staged copy,
                        // which it keeps until the page is MAPPED.
                        let r = unsafe {
                            map::run(
                                self.fd(),
                                &self.counters.mutators,
                                Via::Copy,
                                self.dst(p),
                                src,
                                PAGE,
                            )
                        };
                        Counters::add(&self.counters.mutators.pages, 1);
                        return self.settle(p, 1, r);
                    }
                }
                MAPPED => {
                    if first && faulted {
                        Counters::add(&self.counters.refaults, 1);
                        // SAFETY: a registered to-space page; EEXIST (it is
                        // there after all) counts as done.
                        let r = unsafe {
                            map::run(
                                self.fd(),
                                &self.counters.mutators,
                                Via::Zero,
                                self.dst(p),
                                0,
                                PAGE,
                            )
                        };
                        return !matches!(r, Mapped::Failed { .. });
                    }
                    if !first {
                        Counters::add(&self.counters.waits, 1);
                    }
                    return true;
                }
                FAILED => return false,
                _ => pages::backoff(&mut spins), // PRODUCING, MAPPING
            }
            first = false;
        }
    }

    fn dst(&self, p: usize) -> usize {
        self.base + p * PAGE
    }

    /// How a page built by a mutator is mapped: one page, so a move would
    /// only trade the kernel's copy for a fresh buffer page; copied unless
    /// moves are asked for.
    fn single_via(&self) -> Via {
        if self.opts.mode == Mode::Move && self.can_move {
            Via::Move
        } else {
            Via::Copy
        }
    }

    /// How an unchanged from-space page comes back: moved (no copy, the
    /// from-space page goes with it) wherever the kernel can.
    pub fn same_via(&self) -> Via {
        if self.opts.mode != Mode::Copy && self.can_move {
            Via::Move
        } else {
            Via::Copy
        }
    }

    /// Builds page `p` (PRODUCING, ours) in a buffer and maps it.
    fn produce_one(&self, p: usize) -> bool {
        let buf = self.take_buffer();
        // SAFETY: the buffer is this thread's until put back, a whole page.
        let out = unsafe { &mut *(buf as *mut [u8; PAGE]) };
        let fill = self.producer.produce(p, self.from as *const u8, out);
        let (via, src) = match fill {
            Fill::Built => (self.single_via(), buf),
            // Not a zero page: the access that faulted is most often a
            // write, which would then fault again to copy the zero page.
            Fill::Zero => {
                // SAFETY: our buffer, a whole page.
                unsafe { core::ptr::write_bytes(buf as *mut u8, 0, PAGE) };
                (Via::Copy, buf)
            }
            Fill::Same => (self.same_via(), self.from + p * PAGE),
        };
        // SAFETY: a registered to-space page this thread owns, and a source
        // page that is ours (the buffer) or the from-space page the
        // producer says is this page unchanged.
        let r = unsafe {
            map::run(
                self.fd(),
                &self.counters.mutators,
                via,
                self.dst(p),
                src,
                PAGE,
            )
        };
        self.put_buffer(buf);
        Counters::add(&self.counters.mutators.pages, 1);
        self.settle(p, 1, r)
    }

    /// Publishes the outcome of mapping pages `first..first + count`, which
    /// the caller owns: MAPPED, or FAILED from the page the kernel refused.
    pub fn settle(&self, first: usize, count: usize, r: Mapped) -> bool {
        let bad = match r {
            Mapped::Done | Mapped::Unregistered => count,
            Mapped::Failed { at, errno } => {
                self.first_failed.fetch_min(first + at / PAGE, AcqRel);
                self.failed_errno.store(errno, Relaxed);
                at / PAGE
            }
        };
        for p in first..first + bad {
            self.pages.set(p, MAPPED);
        }
        for p in first + bad..first + count {
            Counters::add(&self.counters.failed, 1);
            self.pages.set(p, FAILED);
        }
        bad == count
    }

    fn take_buffer(&self) -> usize {
        let mut spins = 0;
        loop {
            let taken = self.buffers_taken.load(Acquire);
            let free = (!taken).trailing_zeros() as usize;
            if free < BUFFERS {
                let bit = 1u64 << free;
                if self.buffers_taken.fetch_or(bit, AcqRel) & bit == 0 {
                    return self.buffers.as_ptr() as usize + free * PAGE;
                }
            } else {
                pages::backoff(&mut spins);
            }
        }
    }

    fn put_buffer(&self, buf: usize) {
        let i = (buf - self.buffers.as_ptr() as usize) / PAGE;
        self.buffers_taken.fetch_and(!(1u64 << i), Release);
    }
}
