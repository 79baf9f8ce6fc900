//! A session's life: `prepare` in the pause, `start` the collector,
//! `ensure` before system calls, `finish` (the drain).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::collect::{self, Cursor};
use super::map::PAGE;
use super::pages::{self, FAILED, MAPPED};
use super::shared::Shared;
use super::{registry, setup, Fill, Mode, Options, Producer, Stats};
use crate::error::Error;
use crate::uffd::ioctl::{
    IOCTL_BIT_MOVE, IOCTL_BIT_ZEROPAGE, UFFD_FEATURE_MOVE, UFFD_FEATURE_SIGBUS,
};
use crate::uffd::{check_aligned, open_with};

/// What this process can do (see [`support`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Support {
    /// `UFFDIO_MOVE` (Linux 6.8): [`super::Mode::Move`] and the moves of
    /// [`super::Mode::Auto`].
    pub moves: bool,
}

/// Whether concurrent compaction works in this process: an error saying
/// why not (no userfaultfd, refused by the sysctl or a seccomp filter, no
/// SIGBUS mode), else what it supports.
pub fn support() -> Result<Support, Error> {
    let offered = offered()?;
    if offered & UFFD_FEATURE_SIGBUS == 0 {
        return Err(Error::NotSupportedHere {
            what: "userfaultfd SIGBUS mode (UFFD_FEATURE_SIGBUS, Linux 4.14)".into(),
        });
    }
    Ok(Support {
        moves: offered & UFFD_FEATURE_MOVE != 0,
    })
}

/// The features the kernel offers a userfaultfd, asked once per process
/// (opening one to ask costs tens of microseconds of the pause).
fn offered() -> Result<u64, Error> {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    const KNOWN: u64 = 1 << 63;
    static OFFERED: AtomicU64 = AtomicU64::new(0);
    let o = OFFERED.load(Relaxed);
    if o & KNOWN != 0 {
        return Ok(o & !KNOWN);
    }
    let (_, o) = open_with(0)?;
    OFFERED.store(o | KNOWN, Relaxed);
    Ok(o)
}

/// A concurrent compaction of one heap (see the module docs).
pub struct Compaction {
    shared: Arc<Shared>,
    cursor: Arc<Cursor>,
    slot: usize,
    workers: Vec<JoinHandle<()>>,
    pause: Duration,
    done: bool,
    /// The process that prepared it: a forked child's copy of the session
    /// has no collector threads and no registered range, and leaves it be.
    owner: libc::pid_t,
}

impl Compaction {
    /// Prepares the compaction of `heap..heap + len` (page-aligned, one
    /// mapping, readable and writable), inside the collector's pause: the
    /// heap's pages move to a from-space, and its addresses read as the
    /// to-space `producer` builds, a page at a time, from then on.
    ///
    /// # Safety
    /// No thread touches the heap during the call. Afterwards no Rust
    /// reference may span a page that is not built yet (a fault there is
    /// served, but the compiler may assume the memory stable), and the
    /// threads that touch the heap leave SIGBUS unblocked.
    pub unsafe fn prepare(
        heap: *mut u8,
        len: usize,
        producer: Arc<dyn Producer>,
        opts: Options,
    ) -> Result<Compaction, Error> {
        opts.check()?;
        let base = heap as usize;
        check_aligned("heap", base, len)?;
        if len == 0 {
            return Err(Error::BadRange {
                addr: base,
                len,
                why: "the heap is empty".into(),
            });
        }
        let offered = support()?;
        if opts.mode == Mode::Move && !offered.moves {
            return Err(Error::NotSupportedHere {
                what: "userfaultfd UFFD_FEATURE_MOVE (UFFDIO_MOVE needs Linux 6.8 or later)".into(),
            });
        }
        let mut want = UFFD_FEATURE_SIGBUS;
        if offered.moves && opts.mode != Mode::Copy {
            want |= UFFD_FEATURE_MOVE;
        }
        let (fd, features) = open_with(want)?;
        crate::checked::mc::handler::ensure();
        crate::checked::mc::handler::set_server(registry::serve);
        registry::complete_before_fork();

        let t0 = Instant::now();
        // SAFETY: the caller stops every thread that could touch the heap.
        let from = unsafe { setup::flip(base, len, opts.huge_pages) }?;
        let undo = |e: Error| {
            // SAFETY: nothing was built in the to-space yet.
            unsafe { setup::unflip(base, from, len) };
            e
        };
        let fd_raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let ioctls = setup::register(fd_raw, base, len).map_err(undo)?;
        if ioctls & IOCTL_BIT_ZEROPAGE == 0 {
            return Err(undo(Error::NotSupportedHere {
                what: "UFFDIO_ZEROPAGE on the to-space".into(),
            }));
        }
        let can_move = features & UFFD_FEATURE_MOVE != 0 && ioctls & IOCTL_BIT_MOVE != 0;
        let shared =
            Shared::new(fd, base, len / PAGE, from, producer, opts, can_move).map_err(|e| {
                undo(Error::Config(format!(
                    "compact: cannot map the session's buffers: {e}"
                )))
            })?;
        let shared = Arc::new(shared);
        let Some(slot) = registry::enter(Arc::as_ptr(&shared), base, len) else {
            return Err(undo(Error::Config(format!(
                "compact: {} sessions are live already",
                registry::SLOTS
            ))));
        };
        Ok(Compaction {
            shared,
            cursor: Arc::new(Cursor::new()),
            slot,
            workers: Vec::new(),
            pause: t0.elapsed(),
            done: false,
            // SAFETY: getpid has no arguments and cannot fail.
            owner: unsafe { libc::getpid() },
        })
    }

    /// Starts the collector's threads (each blocks every asynchronous
    /// signal, as bulkmem's workers do). Without it, `finish` builds what
    /// the mutators have not, on the calling thread.
    pub fn start(&mut self) -> Result<(), Error> {
        if !self.workers.is_empty() {
            return Ok(());
        }
        for w in 0..self.shared.opts.workers {
            let (s, c) = (Arc::clone(&self.shared), Arc::clone(&self.cursor));
            let spawn = || {
                std::thread::Builder::new()
                    .name("bulkmem-compact".into())
                    .spawn(move || collect::work(&s, &c, w))
            };
            let h = crate::threads::quiet(spawn).map_err(|e| {
                Error::Config(format!("compact: cannot start a collector thread: {e}"))
            })?;
            self.workers.push(h);
        }
        Ok(())
    }

    /// Builds every page of `addr..addr + len` that is not built yet, on
    /// this thread: for memory about to be handed to the kernel, which
    /// fails with `EFAULT` on an unbuilt page instead of faulting it in.
    pub fn ensure(&self, addr: *const u8, len: usize) -> Result<(), Error> {
        let s = &self.shared;
        let (a, end) = (addr as usize, (addr as usize).saturating_add(len));
        if len == 0 {
            return Ok(());
        }
        if !s.contains(a) || !s.contains(end - 1) {
            return Err(Error::BadRange {
                addr: a,
                len,
                why: "the range is not inside the session's heap".into(),
            });
        }
        for p in (a - s.base) / PAGE..=(end - 1 - s.base) / PAGE {
            if !s.make_present(p, false) {
                return Err(failed(s));
            }
        }
        Ok(())
    }

    /// The from-space: the heap's pages as they were in the pause (below
    /// what has been released).
    pub fn from_space(&self) -> *const u8 {
        self.shared.from as *const u8
    }

    /// Faults served so far (cheap: one atomic load).
    pub fn faults(&self) -> u64 {
        self.shared
            .counters
            .faults
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A cheap reader of [`Compaction::faults`] that can outlive the session
    /// (for a mutator thread timing its own accesses).
    pub fn fault_counter(&self) -> impl Fn() -> u64 + Send + Sync + 'static {
        let s = Arc::clone(&self.shared);
        move || s.counters.faults.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What the session has done so far.
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot(self.shared.n, self.pause)
    }

    /// Waits for every page to be built and mapped, then drains: the
    /// to-space is unregistered, the handlers still serving it finish,
    /// and the from-space is unmapped. Pages the kernel refused to map are
    /// built in place (counted in [`Stats::failed`]).
    pub fn finish(mut self) -> Result<Stats, Error> {
        self.drain()
    }

    fn drain(&mut self) -> Result<Stats, Error> {
        self.done = true;
        // SAFETY: getpid has no arguments and cannot fail.
        if unsafe { libc::getpid() } != self.owner {
            // A forked child: fork built every page first, and the
            // collector threads and the registration are the parent's.
            std::mem::forget(std::mem::take(&mut self.workers));
            return Ok(self.stats());
        }
        let s = &self.shared;
        if self.workers.is_empty() {
            collect::work(s, &self.cursor, 0);
        }
        let mut panicked = false;
        for h in self.workers.drain(..) {
            panicked |= h.join().is_err();
        }
        // Pages mutators hold are theirs to finish.
        for p in 0..s.n {
            let mut spins = 0;
            while !matches!(s.pages.load(p), MAPPED | FAILED) {
                pages::backoff(&mut spins);
            }
        }
        setup::unregister(s.fd(), s.base, s.n * PAGE);
        registry::leave(self.slot);
        // Unregistered now: what the kernel refused is written in place.
        for p in (0..s.n).filter(|&p| s.pages.load(p) == FAILED) {
            // SAFETY: an unregistered page of the to-space, ours to write.
            let out = unsafe { &mut *((s.base + p * PAGE) as *mut [u8; PAGE]) };
            build_in_place(&*s.producer, p, s.from, out);
        }
        let done = s.released.load(std::sync::atomic::Ordering::Relaxed);
        if done < s.n {
            // SAFETY: the rest of our from-space; nothing reads it now.
            unsafe {
                libc::munmap(
                    (s.from + done * PAGE) as *mut libc::c_void,
                    (s.n - done) * PAGE,
                )
            };
        }
        if panicked {
            return Err(Error::Config(
                "compact: a collector thread panicked (in the producer?)".into(),
            ));
        }
        Ok(self.stats())
    }
}

impl Drop for Compaction {
    /// A session dropped without `finish` finishes: the heap must be whole
    /// before anyone else can see it.
    fn drop(&mut self) {
        if !self.done {
            let _ = self.drain();
        }
    }
}

fn failed(s: &Shared) -> Error {
    use std::sync::atomic::Ordering::Relaxed;
    Error::Ioctl {
        op: "UFFDIO_COPY",
        addr: s.base + s.first_failed.load(Relaxed).min(s.n) * PAGE,
        errno: s.failed_errno.load(Relaxed),
        report: Box::default(),
    }
}

/// Builds page `p` straight into `out` (a to-space page that is ordinary
/// memory): the path without userfaultfd.
fn build_in_place(producer: &dyn Producer, p: usize, from: usize, out: &mut [u8; PAGE]) {
    match producer.produce(p, from as *const u8, out) {
        Fill::Built => {}
        Fill::Zero => out.fill(0),
        Fill::Same => {
            // SAFETY: from-space page p, which the producer says is this
            // page unchanged.
            let src = unsafe { &*((from + p * PAGE) as *const [u8; PAGE]) };
            out.copy_from_slice(src);
        }
    }
}

/// Compacts `heap..heap + len` entirely inside the caller's pause, with
/// no userfaultfd: the heap's pages move to a from-space, and every page
/// is built straight into the fresh to-space. The path where [`support`]
/// says no; the from-space is released as it empties, as in a session.
///
/// # Safety
/// As [`Compaction::prepare`]; no thread touches the heap until it returns.
pub unsafe fn stop_the_world(
    heap: *mut u8,
    len: usize,
    producer: &dyn Producer,
    opts: Options,
) -> Result<Stats, Error> {
    opts.check()?;
    let base = heap as usize;
    check_aligned("heap", base, len)?;
    let t0 = Instant::now();
    // SAFETY: the caller's pause.
    let from = unsafe { setup::flip(base, len, opts.huge_pages) }?;
    let n = len / PAGE;
    let mut released = 0;
    for p in 0..n {
        // SAFETY: page p of the fresh, unregistered to-space.
        let out = unsafe { &mut *((base + p * PAGE) as *mut [u8; PAGE]) };
        build_in_place(producer, p, from, out);
        let upto = producer.first_source(p + 1).min(n) / 512 * 512;
        if p + 1 < n && upto > released {
            // SAFETY: from-space no later page reads (the producer's word).
            unsafe {
                libc::munmap(
                    (from + released * PAGE) as *mut libc::c_void,
                    (upto - released) * PAGE,
                )
            };
            released = upto;
        }
    }
    // SAFETY: the rest of our from-space.
    unsafe {
        libc::munmap(
            (from + released * PAGE) as *mut libc::c_void,
            (n - released) * PAGE,
        )
    };
    let mut stats = super::stats::Counters::new().snapshot(n, t0.elapsed());
    stats.by_collector = n as u64;
    stats.released = (released * PAGE) as u64;
    Ok(stats)
}

impl Compaction {
    /// For tests of the `EEXIST` path: builds page `page` and maps it
    /// behind the session's back, as a second mapper would, leaving its
    /// state alone. The session then finds it mapped when it maps it.
    /// (Feature `test-hooks`.)
    #[cfg(feature = "test-hooks")]
    pub fn map_behind(&self, page: usize) -> Result<(), Error> {
        let s = &self.shared;
        let mut buf = vec![0u8; PAGE];
        let out: &mut [u8; PAGE] = (&mut buf[..]).try_into().expect("one page");
        let src = match s.producer.produce(page, s.from as *const u8, out) {
            Fill::Built => buf.as_ptr() as usize,
            Fill::Zero => {
                buf.fill(0);
                buf.as_ptr() as usize
            }
            Fill::Same => s.from + page * PAGE,
        };
        // SAFETY: a registered to-space page and a readable source page.
        match unsafe {
            super::map::run(
                s.fd(),
                &s.counters.mutators,
                super::map::Via::Copy,
                s.base + page * PAGE,
                src,
                PAGE,
            )
        } {
            super::map::Mapped::Failed { errno, .. } => Err(Error::Ioctl {
                op: "UFFDIO_COPY",
                addr: s.base + page * PAGE,
                errno,
                report: Box::default(),
            }),
            _ => Ok(()),
        }
    }
}

/// For tests of the drain: what bulkmem's SIGBUS handler answers for a
/// fault at `addr` now (true: served or retried, false: not a session's).
/// (Feature `test-hooks`.)
#[cfg(feature = "test-hooks")]
pub fn late_fault(addr: usize) -> bool {
    // SAFETY: serve only reads tables and maps pages of live sessions.
    unsafe { registry::serve(addr) }
}
