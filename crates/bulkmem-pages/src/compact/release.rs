//! Giving the from-space's memory back while the session runs, so that
//! the heap is never held twice: the pages no page still to be built reads
//! are dropped with `MADV_DONTNEED` (`MADV_DONTNEED_LOCKED` for a locked
//! heap), which leaves the mapping in place, so releasing costs no mapping
//! churn (no `munmap` splitting it, taking `mmap_lock` for writing and
//! shooting down TLBs while mutators fault), and the whole from-space is
//! unmapped at once when the session ends.
//!
//! Two ways pages become free. Behind the collector: once every page
//! below the watermark is mapped, the from-space below the producer's
//! `first_source` of it is read by nobody, and is released in steps of
//! [`STEP`]. Ahead of it: an island of to-space pages the mutators built
//! (faulted in, or `ensure`d) frees the from-space between what the pages
//! before and after it read (`last_source` and `first_source`). A lone
//! page frees little: the from-space pages at its two ends hold objects of
//! its neighbours too, and at 90% live a page is built from 1.1 from-space
//! pages. So whenever the mutators have built [`SWEEP`] pages since the
//! last sweep, the collector sweeps for islands, releases what they alone
//! read, and fills the narrow gaps between islands out of order, merging
//! them, which always frees more than it builds (the two shared pages at
//! the gap go too). What stays held twice is about two from-space pages
//! per island: at 50% live next to nothing, at 90% live with a random
//! mutator most of a page per page it builds ahead. When mutators build
//! islands faster than the collector reaches them, the sweep cannot keep
//! up; past a budget (`shared::HELD_BUDGET`, 8 MiB held twice) a fault
//! grows its page into a run long enough to free what it holds and
//! releases that run's from-space itself (`Shared::grow`), so the memory
//! held twice stays near the budget whatever the mutators do (measured in
//! docs/measurements.md, "Concurrent compaction").

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use super::map::{self, PAGE};
use super::pages::{Pages, MAPPED};
use super::stats::Counters;
use super::Producer;
use crate::mapping::Mapping;

/// Pages released at once behind the collector (2 MiB).
pub(crate) const STEP: usize = 512;
/// Pages built by mutators between two sweeps ahead of the collector
/// (4 MiB).
pub(crate) const SWEEP: u64 = 512;
/// The widest gap between two islands the collector fills out of order,
/// merging them: the from-space pages at the ends of both, which each
/// held for its neighbour, can then go too.
pub(crate) const GAP: usize = 64;

/// Ranges one `process_madvise` takes (`UIO_MAXIOV`).
const IOV_MAX: usize = 1024;

/// One space's from-space and which of its pages are released.
pub(crate) struct FromSpace {
    base: usize,
    n: usize,
    /// Every page below it is released.
    prefix: AtomicUsize,
    /// A bit per page, set once released (so none is counted twice).
    bits: Mapping,
    /// Mutator-built pages when the last sweep ran.
    swept_at: AtomicU64,
    /// A pidfd of this process for `process_madvise`, or -1.
    pidfd: i32,
}

impl FromSpace {
    pub fn new(base: usize, n: usize) -> std::io::Result<FromSpace> {
        Ok(FromSpace {
            base,
            n,
            prefix: AtomicUsize::new(0),
            bits: Mapping::options()
                .noreserve(true)
                .map(n.div_ceil(64).max(1) * 8)?,
            swept_at: AtomicU64::new(0),
            pidfd: own_pidfd(),
        })
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        // SAFETY: word i of the bitmap (i < n / 64 rounded up), 8-aligned
        // in a page-aligned mapping that lives as long as self, accessed
        // only through atomics.
        unsafe { &*self.bits.as_ptr().add(i * 8).cast::<AtomicU64>() }
    }

    /// Marks from-space pages `lo..hi` released, counting the ones not
    /// released before into `released` (bytes); whether any was new.
    fn mark(&self, lo: usize, hi: usize, released: &AtomicU64) -> bool {
        let mut fresh = 0u64;
        let mut p = lo;
        while p < hi {
            // The bits of pages p..min(hi, next word) in word p / 64.
            let end = (p / 64 * 64 + 64).min(hi);
            let bits = (u64::MAX >> (64 - (end - p))) << (p % 64);
            let w = self.word(p / 64);
            if w.load(Relaxed) & bits != bits {
                fresh += u64::from((w.fetch_or(bits, Relaxed) & bits ^ bits).count_ones());
            }
            p = end;
        }
        Counters::add(released, fresh * PAGE as u64);
        fresh > 0
    }

    /// Releases from-space pages `lo..hi`, counting the ones not released
    /// before into `released` (bytes). The caller is the only releaser.
    pub fn release(&self, lo: usize, hi: usize, released: &AtomicU64) {
        let hi = hi.min(self.n);
        if lo < hi && self.mark(lo, hi, released) {
            self.drop_range(lo, hi);
        }
    }

    fn drop_range(&self, lo: usize, hi: usize) {
        if !map::drop_pages(self.base + lo * PAGE, (hi - lo) * PAGE) {
            // Neither madvise is allowed here: map fresh, inaccessible
            // memory over it instead, which frees the pages and keeps the
            // addresses ours (an unmapped hole could be taken by another
            // mapping before `unmap`).
            // SAFETY: our from-space pages lo..hi, which nothing reads.
            unsafe {
                libc::mmap(
                    (self.base + lo * PAGE) as *mut libc::c_void,
                    (hi - lo) * PAGE,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
        }
    }

    /// Releases many ranges at once: one `process_madvise` (one system
    /// call and, on recent kernels, one TLB flush for them all) where the
    /// kernel takes it for this process, else one `madvise` each.
    fn release_many(&self, ranges: &[(usize, usize)], released: &AtomicU64) {
        let fresh: Vec<libc::iovec> = ranges
            .iter()
            .filter(|&&(lo, hi)| self.mark(lo, hi, released))
            .map(|&(lo, hi)| libc::iovec {
                iov_base: (self.base + lo * PAGE) as *mut libc::c_void,
                iov_len: (hi - lo) * PAGE,
            })
            .collect();
        for chunk in fresh.chunks(IOV_MAX) {
            let want: usize = chunk.iter().map(|v| v.iov_len).sum();
            if self.pidfd < 0 || advise_all(self.pidfd, chunk) != want {
                for v in chunk {
                    let lo = (v.iov_base as usize - self.base) / PAGE;
                    self.drop_range(lo, lo + v.iov_len / PAGE);
                }
            }
        }
    }

    /// Releases the from-space below `needed` (what the pages still to be
    /// built read from) in whole steps.
    pub fn release_below(&self, needed: usize, released: &AtomicU64) {
        let done = self.prefix.load(Relaxed);
        let upto = needed.min(self.n) / STEP * STEP;
        if upto > done {
            self.release(done, upto, released);
            self.prefix.store(upto, Relaxed);
        }
    }

    /// Whether the mutators have built [`SWEEP`] pages (`built`) since
    /// the last sweep; if so, the caller sweeps now.
    pub fn due(&self, built: u64) -> bool {
        if built < self.swept_at.load(Relaxed) + SWEEP {
            return false;
        }
        self.swept_at.store(built, Relaxed);
        true
    }

    /// Sweeps to-space pages `from..` for islands of built pages, releases
    /// the from-space only they read, and returns the gaps of at most
    /// [`GAP`] pages between two islands (to-space ranges), whose pages
    /// the caller builds to merge them.
    pub fn sweep(
        &self,
        pages: &Pages,
        producer: &dyn Producer,
        from: usize,
        released: &AtomicU64,
    ) -> Vec<(usize, usize)> {
        let n = self.n;
        let (mut ranges, mut grow) = (Vec::new(), Vec::new());
        let mut p = from.max(1);
        let mut last_end = None;
        while p < n {
            if pages.load(p) != MAPPED {
                p += 1;
                continue;
            }
            let (a, b) = island(pages, p, n);
            p = b;
            if let Some(r) = self.frees(producer, a, b) {
                ranges.push(r);
            }
            if let Some(e) = last_end.filter(|&e| a - e <= GAP) {
                grow.push((e, a));
            }
            last_end = Some(b);
        }
        self.release_many(&ranges, released);
        if producer.last_source(0) == usize::MAX {
            grow.clear(); // nothing would be released
        }
        grow
    }

    /// Releases what filling `gaps` (to-space pages `e..a` between two
    /// islands each, which the caller just built) freed, in one call: the
    /// from-space the islands on either side held for the gap,
    /// `first_source(e)` up to `last_source(a - 1)`; what the islands
    /// alone read went before.
    pub fn release_gaps(
        &self,
        pages: &Pages,
        producer: &dyn Producer,
        gaps: &[(usize, usize)],
        released: &AtomicU64,
    ) {
        let prefix = self.prefix.load(Relaxed);
        let ranges: Vec<(usize, usize)> = gaps
            .iter()
            .filter(|&&(e, a)| e < a && (e..a).all(|p| pages.load(p) == MAPPED))
            .map(|&(e, a)| {
                let lo = producer.first_source(e).max(prefix);
                (lo, producer.last_source(a - 1).min(self.n))
            })
            .filter(|&(lo, hi)| lo < hi)
            .collect();
        self.release_many(&ranges, released);
    }

    /// The from-space that only to-space island `a..b` (a > 0) reads.
    fn frees(&self, producer: &dyn Producer, a: usize, b: usize) -> Option<(usize, usize)> {
        let n = self.n;
        let lo = producer.last_source(a - 1).max(self.prefix.load(Relaxed));
        let hi = if b == n { n } else { producer.first_source(b) }.min(n);
        (lo < hi).then_some((lo, hi))
    }

    /// Unmaps the whole from-space (the session is over).
    pub fn unmap(&self) {
        // SAFETY: our from-space; nothing reads it any more.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.n * PAGE) };
    }
}

/// The island of MAPPED pages that starts at `a` (MAPPED): `a..b`.
#[inline]
fn island(pages: &Pages, a: usize, n: usize) -> (usize, usize) {
    let mut b = a;
    while b < n && pages.load(b) == MAPPED {
        b += 1;
    }
    (a, b)
}

/// `process_madvise(pidfd, iov, MADV_DONTNEED)`, or with
/// `MADV_DONTNEED_LOCKED` where that is refused: bytes advised (less than
/// asked on failure).
fn advise_all(pidfd: i32, iov: &[libc::iovec]) -> usize {
    for advice in [libc::MADV_DONTNEED, map::MADV_DONTNEED_LOCKED] {
        // SAFETY: a valid pidfd of this process and iovecs of our own
        // from-space; the kernel reads them only.
        let n = unsafe {
            libc::syscall(
                libc::SYS_process_madvise,
                pidfd,
                iov.as_ptr(),
                iov.len(),
                advice,
                0,
            )
        };
        if n >= 0 {
            return n as usize;
        }
    }
    0
}

/// A pidfd of this process (Linux 5.3), close-on-exec, or -1.
fn own_pidfd() -> i32 {
    // SAFETY: pidfd_open(getpid(), 0) returns a new descriptor or -1;
    // getpid cannot fail.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    // pidfds are close-on-exec from birth.
    if fd < 0 {
        -1
    } else {
        fd as i32
    }
}

impl Drop for FromSpace {
    fn drop(&mut self) {
        if self.pidfd >= 0 {
            // SAFETY: our own descriptor.
            unsafe { libc::close(self.pidfd) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compact::pages::UNPRODUCED;
    use crate::compact::{Fill, Producer};

    /// A sliding compaction at 50% live: to-space page p is built from
    /// from-space pages 2p and 2p + 1.
    struct Halve;
    impl Producer for Halve {
        fn produce(&self, _: usize, _: *const u8, _: &mut [u8; PAGE]) -> Fill {
            Fill::Built
        }
        fn first_source(&self, p: usize) -> usize {
            2 * p
        }
        fn last_source(&self, p: usize) -> usize {
            2 * p + 2
        }
    }

    fn resident(at: usize, pages: usize) -> Vec<bool> {
        let mut v = vec![0u8; pages];
        // SAFETY: mincore of our own mapping into a vector of its size.
        let rc = unsafe { libc::mincore(at as *mut libc::c_void, pages * PAGE, v.as_mut_ptr()) };
        assert_eq!(rc, 0);
        v.iter().map(|b| b & 1 != 0).collect()
    }

    #[test]
    fn runs_built_ahead_release_what_only_they_read_and_the_prefix_goes_in_steps() {
        let n = 2 * STEP + 64;
        let from = Mapping::options().populate(true).map(n * PAGE).unwrap();
        let base = from.as_ptr() as usize;
        let pages = Pages::new(n).unwrap();
        let space = FromSpace::new(base, n).unwrap();
        let released = AtomicU64::new(0);
        for p in 10..14 {
            pages.set(p, MAPPED);
        }
        assert_eq!(pages.load(9), UNPRODUCED);
        // Too few pages built by mutators yet: no sweep.
        assert!(!space.due(SWEEP - 1));
        assert!(space.due(SWEEP) && !space.due(SWEEP + 1));
        let grow = space.sweep(&pages, &Halve, 0, &released);
        // One island: no gap to fill.
        assert!(grow.is_empty());
        // Pages 10..14 read 20..28, and nothing else does.
        let r = resident(base, 40);
        assert!(
            r[..20].iter().all(|&x| x) && r[28..].iter().all(|&x| x),
            "{r:?}"
        );
        assert!(r[20..28].iter().all(|&x| !x), "{r:?}");
        assert_eq!(released.load(Relaxed), 8 * PAGE as u64);
        // The prefix goes in whole steps only, and counts each page once.
        space.release_below(STEP - 1, &released);
        assert_eq!(released.load(Relaxed), 8 * PAGE as u64);
        space.release_below(STEP + 7, &released);
        assert!(resident(base, STEP + 1)[..STEP].iter().all(|&x| !x));
        assert!(resident(base, STEP + 1)[STEP]);
        assert_eq!(released.load(Relaxed), (STEP * PAGE) as u64);
    }
}
