//! Concurrent compaction for moving garbage collectors: mutators run on
//! while bulkmem builds the compacted heap, the way Android's collector
//! compacts with userfaultfd (docs/design.md, "Concurrent compaction").
//!
//! In the collector's pause, [`Compaction::prepare`] moves the heap's pages to
//! a from-space and leaves an empty to-space at the heap's addresses,
//! registered with a userfaultfd in SIGBUS mode; the pause does not grow
//! with the heap. The mutators then resume, with their roots already
//! pointing at the objects' new addresses. A mutator that touches a
//! to-space page nobody has built yet takes a SIGBUS; bulkmem's handler
//! claims the page, has the collector's [`Producer`] build it in a buffer,
//! maps it, and returns: the access is retried and succeeds. Meanwhile the
//! collector's threads ([`Compaction::start`]) build the rest in address
//! order and map each run of pages with one ioctl, and the from-space is
//! unmapped behind them as it empties. [`Compaction::finish`] waits for the
//! last page, drains the handlers still running and unregisters.
//!
//! ```no_run
//! # extern crate bulkmem_pages as bulkmem; // users name bulkmem
//! use std::sync::Arc;
//! use bulkmem::compact::{Fill, Options, Producer, Compaction};
//!
//! /// Slides every page down by one: to-space page p is from-space page p + 1.
//! struct Slide { pages: usize }
//! impl Producer for Slide {
//!     fn produce(&self, page: usize, from: *const u8, out: &mut [u8; 4096]) -> Fill {
//!         if page + 1 >= self.pages {
//!             return Fill::Zero;
//!         }
//!         // SAFETY: from-space page `page + 1` is inside the heap.
//!         let src = unsafe { std::slice::from_raw_parts(from.add((page + 1) * 4096), 4096) };
//!         out.copy_from_slice(src);
//!         Fill::Built
//!     }
//!     fn first_source(&self, page: usize) -> usize {
//!         page + 1
//!     }
//! }
//!
//! let heap = bulkmem::mapping::Mapping::anonymous(64 << 20)?;
//! // ... in the collector's pause, once every mutator has stopped:
//! // SAFETY: no thread touches the heap during the call or holds a
//! // reference into it afterwards.
//! let mut session = unsafe {
//!     Compaction::prepare(heap.as_mut_ptr(), heap.len(), Arc::new(Slide { pages: 16384 }), Options::default())
//! }?;
//! session.start()?;
//! // ... resume the mutators; they fault pages in as they touch them ...
//! let stats = session.finish()?;
//! println!("{} pages by mutators, stall p99 {:?}", stats.by_mutators, stats.stall.quantile(0.99));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Where it works
//! Linux with userfaultfd's SIGBUS mode (4.14), `UFFDIO_MOVE` for moves
//! (6.8), and permission to open a userfaultfd (user-mode faults only,
//! which needs no privilege on kernels since 5.11 unless the
//! `vm.unprivileged_userfaultfd` sysctl or a seccomp filter says
//! otherwise). [`support`] says what this process has, or why not;
//! without it, [`stop_the_world`] compacts in the pause with no
//! userfaultfd at all, and [`crate::uffd::Mover`] still moves pages.
//!
//! # What the program must know
//! * The heap must be mapped throughout, readable and writable: `prepare`
//!   refuses a range with a hole or running past its mapping, memory the
//!   program protected (`PROT_NONE`, read-only: compaction would silently
//!   make it writable), and a range overlapping a live session's heap or
//!   from-space, saying which and where. It may span several mappings
//!   (parts advised or locked differently); each moves at its offset.
//! * Threads that touch the heap during a session must leave SIGBUS
//!   unblocked, and bulkmem's handler must be in front (it installs it;
//!   see `bulkmem::fault::reinstall` for programs that install their own
//!   after it: theirs is chained for every fault that is not a session's).
//!   The handler blocks every other signal while it serves a page: a
//!   signal handler of the program's that reads the heap, a `siglongjmp`
//!   out of a time-out, an asynchronous `pthread_cancel` all happen once
//!   the page is mapped, never with it half-built.
//! * The kernel does not take faults for us: a system call handed an
//!   unbuilt page (`read` into the heap, `write` from it) fails with
//!   `EFAULT`. Call [`Compaction::ensure`] on the range first. The same
//!   call makes a mutator's allocation buffer present and writable with
//!   one ioctl per run of free pages, so filling it takes no fault per
//!   page ([`Compaction::ensurer`] gives mutator threads a handle).
//! * Mutators may keep running across [`Compaction::finish`] and after.
//! * `fork` during a session first builds every page (a `pthread_atfork`
//!   handler), so the child gets a whole heap; the from-space is not
//!   inherited, and the child's copy of the `Compaction` does nothing when
//!   finished or dropped.
//! * The heap becomes a private anonymous mapping, readable and writable,
//!   whatever it was (a `MAP_SHARED`, file or hugetlb mapping is compacted
//!   into anonymous memory, its pages copied, never moved). Under
//!   `mlockall(MCL_FUTURE)` the to-space is locked as the heap was; an
//!   `mlock` of the heap alone and other `madvise` advice are not carried
//!   over (see [`Options::huge_pages`]).
//! * A page found populated behind the session's back (`EEXIST`: a thread
//!   touched the heap in the pause) is not taken for built: it is dropped
//!   and the built page mapped in its place ([`Stats::eexist`]). A move the
//!   kernel refuses (`EINVAL`, `EBUSY`, a persisting `EAGAIN`) is a copy.
//! * Several spaces (a moving space and the arena of its roots, parts of a
//!   heap) compact in one pause with [`Compaction::prepare_spaces`]; a part
//!   of a mapping compacted again and again leaves the mappings as the
//!   first time did.

mod collect;
mod compaction;
mod kernel;
mod map;
mod pages;
mod registry;
mod release;
mod setup;
mod shared;
mod stats;
mod stop;
#[cfg(test)]
mod tests;
mod vmas;

pub use compaction::{support, Compaction, Space, Support};
pub use stats::{Histogram, Stats};
pub use stop::stop_the_world;

/// The size of a page the session builds and maps.
pub const PAGE: usize = map::PAGE;

/// What [`Producer::produce`] left for a to-space page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// `out` holds the page.
    Built,
    /// The page is all zeros (`out` is ignored): mapped as a zero page,
    /// which costs no memory until written.
    Zero,
    /// The page is the from-space page at the same index, unchanged, and
    /// no other to-space page reads it (`out` is ignored): it is moved
    /// back without a copy where the kernel can move pages.
    Same,
}

/// What the collector supplies: how to build each page of the to-space.
///
/// `produce` runs on the collector's threads and inside SIGBUS handlers
/// on mutator threads, on the alternate signal stack when the thread has
/// one, concurrently for different pages (never twice for one page). So it
/// must be async-signal-safe: read the from-space and the collector's own
/// tables (built before `prepare`, not changed during the session), write
/// `out`, and nothing else. In particular it must not allocate, lock,
/// touch the to-space (that fault could not be served from inside the
/// handler: the process dies), panic, or use much stack (a few KiB are
/// left on a typical alternate signal stack).
pub trait Producer: Send + Sync {
    /// Writes to-space page `page` into `out`, reading the from-space at
    /// `from_space` (the heap's pages as they were in the pause).
    fn produce(&self, page: usize, from_space: *const u8, out: &mut [u8; PAGE]) -> Fill;

    /// The lowest from-space page that to-space pages `page..` read. Must
    /// not decrease as `page` grows (it does not for a sliding compactor).
    /// The session releases the from-space below it once every page below
    /// `page` is built. The default, 0, keeps the whole from-space until
    /// `finish`.
    fn first_source(&self, page: usize) -> usize {
        let _ = page;
        0
    }

    /// One past the highest from-space page that to-space pages `..=page`
    /// read (for a sliding compactor, the from-space page after the one
    /// holding the last byte that lands in page `page`). Must not decrease
    /// as `page` grows. With it, the from-space that only a run of pages
    /// mutators built ahead of the collector read is released at once
    /// (`last_source(first - 1)..first_source(end)` for the run
    /// `first..end`), so that random mutators do not hold the heap twice;
    /// and once 8 MiB is held twice all the same, a mutator's fault also
    /// builds up to 31 pages after its own, until they free what they
    /// hold (its stall grows, the memory does not).
    /// The default, `usize::MAX`, releases nothing early.
    fn last_source(&self, page: usize) -> usize {
        let _ = page;
        usize::MAX
    }
}

/// How built pages get into the to-space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// `UFFDIO_COPY` from the staging buffers: works on every kernel with
    /// userfaultfd.
    Copy,
    /// `UFFDIO_MOVE` of the staging pages and of unchanged from-space
    /// pages (Linux 6.8); a page the kernel refuses to move (`EBUSY`:
    /// pinned, shared after fork; `EINVAL`: a locked, shared, file or
    /// hugetlb heap, one made read-only) is copied, and where the kernel
    /// could move a swapped-out page wrongly (before the 2025 swap-cache
    /// fixes, with swap on) nothing is moved.
    Move,
    /// Moves where a move saves work (unchanged from-space pages, whole
    /// 2 MiB runs out of huge-page staging), copies otherwise and where
    /// the kernel cannot move.
    #[default]
    Auto,
}

/// How a session runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    mode: Mode,
    workers: usize,
    batch: usize,
    huge_pages: Option<bool>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            mode: Mode::Auto,
            workers: 1,
            batch: 0,
            huge_pages: None,
        }
    }
}

impl Options {
    /// How pages are mapped (default [`Mode::Auto`]).
    pub fn mode(mut self, mode: Mode) -> Options {
        self.mode = mode;
        self
    }

    /// Collector threads (default 1; at most 64).
    pub fn workers(mut self, workers: usize) -> Options {
        self.workers = workers;
        self
    }

    /// Pages a collector thread builds before mapping them with one ioctl
    /// (at most 512; default 64, or 512 with huge pages, so that whole
    /// 2 MiB runs can move as one). A mutator that faults on a page the
    /// collector has built but not mapped maps that page itself; one the
    /// collector is building it waits for.
    pub fn batch(mut self, pages: usize) -> Options {
        self.batch = pages.max(1);
        self
    }

    /// The batch in effect.
    pub(crate) fn pages_per_batch(&self) -> usize {
        match self.batch {
            0 if self.huge_pages == Some(true) => collect::MAX_BATCH,
            0 => 64,
            b => b,
        }
    }

    /// Advise huge pages for the to-space and the staging buffers
    /// (`true`: `MADV_HUGEPAGE`) or advise against them (`false`:
    /// `MADV_NOHUGEPAGE`). Without this call the to-space gets no advice:
    /// the system's policy applies, and a space that is part of a larger
    /// mapping merges back into it when the session ends. A heap the
    /// program advised (`MADV_HUGEPAGE`) keeps its advice only if this
    /// says so: the to-space is a fresh mapping.
    pub fn huge_pages(mut self, huge: bool) -> Options {
        self.huge_pages = Some(huge);
        self
    }

    fn check(&self) -> Result<(), crate::error::Error> {
        use crate::error::Error;
        if !(1..=64).contains(&self.workers) {
            return Err(Error::OutOfRange {
                what: "compact collector threads",
                value: self.workers,
                min: 1,
                max: 64,
            });
        }
        if !(1..=collect::MAX_BATCH).contains(&self.pages_per_batch()) {
            return Err(Error::OutOfRange {
                what: "compact batch pages",
                value: self.batch,
                min: 1,
                max: collect::MAX_BATCH,
            });
        }
        Ok(())
    }
}
