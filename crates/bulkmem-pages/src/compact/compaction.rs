//! A session's life: `prepare` in the pause, `start` the collector,
//! `ensure` before system calls, `finish` (the drain).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::collect::{self, Cursor, Part};
use super::map::PAGE;
use super::pages::{FAILED, MAPPED};
use super::shared::{Place, Shared};
use super::stats::Counters;
use super::stop::build_in_place;
use super::vmas::{self, Vma};
use super::{registry, setup, Mode, Options, Producer, Stats};
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
/// SIGBUS mode), else what it supports. The kernel is asked once per
/// process; a filter installed afterwards makes `prepare` fail, saying so.
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

/// One heap, or one part of a heap, that a session compacts: its pages
/// and the producer that builds them (see [`Compaction::prepare_spaces`]).
pub struct Space {
    heap: *mut u8,
    len: usize,
    producer: Arc<dyn Producer>,
}

impl Space {
    /// The page-aligned range `heap..heap + len`, built by `producer`.
    pub fn new(heap: *mut u8, len: usize, producer: Arc<dyn Producer>) -> Space {
        Space {
            heap,
            len,
            producer,
        }
    }
}

/// A concurrent compaction of one heap, or of several spaces in one pause
/// (see the module docs).
pub struct Compaction {
    parts: Vec<Arc<Part>>,
    counters: Arc<Counters>,
    workers: Vec<JoinHandle<()>>,
    pages: usize,
    pause: Duration,
    done: bool,
    /// The process that prepared it: a forked child's copy of the session
    /// has no collector threads and no registered range, and leaves it be.
    owner: libc::pid_t,
}

/// A space flipped in this pause, kept to undo it if a later one fails.
struct Flipped {
    part: Arc<Part>,
    pieces: Vec<Vma>,
}

impl Flipped {
    /// Puts the heap back as it was (nothing was built in its to-space).
    ///
    /// # Safety
    /// Inside the pause that flipped it.
    unsafe fn undo(self) {
        let s = &self.part.shared;
        setup::unregister(s.fd(), s.base, s.n * PAGE);
        registry::leave(self.part.slot);
        // SAFETY: the caller's pause; the to-space holds nothing.
        unsafe { setup::unflip(s.base, s.from, s.n * PAGE, &self.pieces) };
    }
}

impl Compaction {
    /// Prepares the compaction of `heap..heap + len` (page-aligned,
    /// readable and writable throughout), inside the collector's pause:
    /// the heap's pages move to a from-space, and its addresses read as
    /// the to-space `producer` builds, a page at a time, from then on.
    ///
    /// Refused, the heap untouched, with the reason: a range with a hole
    /// or running past its mapping, memory the program protected
    /// (`PROT_NONE`, read-only), a range overlapping a live session's heap
    /// or from-space, a process without room for a second heap's worth of
    /// address space.
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
        // SAFETY: forwarded contract.
        unsafe { Compaction::prepare_spaces(vec![Space::new(heap, len, producer)], opts) }
    }

    /// As [`Compaction::prepare`], for several spaces in one pause (a
    /// moving space and the arena holding its roots; the parts of a heap
    /// a generational collector compacts): each is checked, moved aside
    /// and registered, and one set of collector threads builds them in the
    /// order given. A space may be any page-aligned part of a mapping;
    /// compacting the same part again and again leaves the process's
    /// mappings as they were after the first time. If one space is
    /// refused, none is touched.
    ///
    /// # Safety
    /// As [`Compaction::prepare`], for every space.
    pub unsafe fn prepare_spaces(spaces: Vec<Space>, opts: Options) -> Result<Compaction, Error> {
        opts.check()?;
        if spaces.is_empty() {
            return Err(Error::BadRange {
                addr: 0,
                len: 0,
                why: "no space to compact was given".into(),
            });
        }
        for sp in &spaces {
            check_aligned("heap", sp.heap as usize, sp.len)?;
            if sp.len == 0 {
                return Err(Error::BadRange {
                    addr: sp.heap as usize,
                    len: 0,
                    why: "the heap is empty".into(),
                });
            }
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
        let fd = Arc::new(fd);
        crate::checked::mc::handler::ensure();
        crate::checked::mc::handler::set_server(registry::serve);
        registry::complete_before_fork();

        let t0 = Instant::now();
        let counters = Arc::new(Counters::new());
        let can_move = features & UFFD_FEATURE_MOVE != 0 && opts.mode != Mode::Copy;
        let mut flipped: Vec<Flipped> = Vec::with_capacity(spaces.len());
        for sp in spaces {
            // SAFETY: the caller's pause.
            match unsafe { flip_one(sp, &fd, opts, &counters, can_move) } {
                Ok(f) => flipped.push(f),
                Err(e) => {
                    for f in flipped.into_iter().rev() {
                        // SAFETY: the same pause; nothing was built.
                        unsafe { f.undo() };
                    }
                    return Err(e);
                }
            }
        }
        let pages = flipped.iter().map(|f| f.part.shared.n).sum();
        Ok(Compaction {
            parts: flipped.into_iter().map(|f| f.part).collect(),
            counters,
            workers: Vec::new(),
            pages,
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
        let workers = self.parts[0].shared.opts.workers;
        for w in 0..workers {
            let parts = self.parts.clone();
            let spawn = || {
                std::thread::Builder::new()
                    .name("bulkmem-compact".into())
                    .spawn(move || collect::work(&parts, w))
            };
            let h = crate::threads::quiet(spawn).map_err(|e| Error::Syscall {
                call: "pthread_create",
                errno: e.raw_os_error().unwrap_or(libc::EAGAIN),
            })?;
            self.workers.push(h);
        }
        Ok(())
    }

    /// Builds every page of `addr..addr + len` that is not built yet, on
    /// this thread, mapping each run of free space (pages the producer
    /// says are zeros) writable with one ioctl:
    ///
    /// * before handing heap memory to the kernel (`read` into it), which
    ///   fails with `EFAULT` on an unbuilt page instead of faulting it in;
    /// * for an allocation buffer a mutator is about to fill: its pages
    ///   then take no fault at all (without it, one SIGBUS each).
    ///
    /// The range must lie in one of the session's spaces.
    pub fn ensure(&self, addr: *const u8, len: usize) -> Result<(), Error> {
        ensure_in(&self.parts, addr, len)
    }

    /// [`Compaction::ensure`] for other threads: a cheap handle mutator
    /// threads keep to make their allocation buffers present while the
    /// collector's thread owns the session (and finishes it). After the
    /// session has finished every page is present, and it returns at once.
    pub fn ensurer(
        &self,
    ) -> impl Fn(*const u8, usize) -> Result<(), Error> + Send + Sync + 'static {
        let parts = self.parts.clone();
        move |addr, len| ensure_in(&parts, addr, len)
    }

    /// The from-space of the session's first space: its pages as they
    /// were in the pause (below what has been released).
    pub fn from_space(&self) -> *const u8 {
        self.parts[0].shared.from as *const u8
    }

    /// Faults served so far (cheap: one atomic load).
    pub fn faults(&self) -> u64 {
        self.counters
            .faults
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A cheap reader of [`Compaction::faults`] that can outlive the session
    /// (for a mutator thread timing its own accesses).
    pub fn fault_counter(&self) -> impl Fn() -> u64 + Send + Sync + 'static {
        let c = Arc::clone(&self.counters);
        move || c.faults.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What the session has done so far.
    pub fn stats(&self) -> Stats {
        self.counters.snapshot(self.pages, self.pause)
    }

    /// Waits for every page to be built and mapped, then drains: the
    /// to-space is unregistered, the handlers still serving it finish,
    /// and the from-space is unmapped. Pages the kernel refused to map are
    /// built in place (counted in [`Stats::failed`]). Mutators may go on
    /// running throughout, and after.
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
        if self.workers.is_empty() {
            collect::work(&self.parts, 0);
        }
        let mut panicked = false;
        for h in self.workers.drain(..) {
            panicked |= h.join().is_err();
        }
        for part in &self.parts {
            let s = &part.shared;
            // Pages mutators hold are theirs to finish.
            for p in 0..s.n {
                s.pages.wait_while(p, |st| !matches!(st, MAPPED | FAILED));
            }
            setup::unregister(s.fd(), s.base, s.n * PAGE);
            registry::leave(part.slot);
            // Unregistered now: what the kernel refused is written in place.
            for p in (0..s.n).filter(|&p| s.pages.load(p) == FAILED) {
                write_failed(s, p);
                s.pages.set(p, MAPPED);
            }
            s.from_space.unmap();
        }
        if panicked {
            return Err(Error::CollectorPanicked);
        }
        Ok(self.stats())
    }
}

fn ensure_in(parts: &[Arc<Part>], addr: *const u8, len: usize) -> Result<(), Error> {
    let (a, end) = (addr as usize, (addr as usize).saturating_add(len));
    if len == 0 {
        return Ok(());
    }
    let Some(part) = parts
        .iter()
        .find(|p| p.shared.contains(a) && p.shared.contains(end - 1))
    else {
        return Err(Error::BadRange {
            addr: a,
            len,
            why: "the range is not inside one of the session's heaps".into(),
        });
    };
    let s = &part.shared;
    if !s.make_range_present((a - s.base) / PAGE, (end - 1 - s.base) / PAGE + 1) {
        return Err(failed(s));
    }
    Ok(())
}

/// Builds page `p`, which the kernel refused to map, into the to-space
/// once it is unregistered: through /proc/self/mem, which writes even
/// where the program made the heap read-only during the session, else
/// directly.
fn write_failed(s: &Shared, p: usize) {
    use std::os::unix::fs::FileExt;
    let mut page = vec![0u8; PAGE];
    let out: &mut [u8; PAGE] = (&mut page[..]).try_into().expect("one page");
    build_in_place(&*s.producer, p, s.from, out);
    let dst = s.base + p * PAGE;
    let through_mem = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")
        .and_then(|f| f.write_at(&page, dst as u64))
        .is_ok_and(|n| n == PAGE);
    if !through_mem {
        // SAFETY: an unregistered page of the to-space, ours to write.
        unsafe { std::ptr::copy_nonoverlapping(page.as_ptr(), dst as *mut u8, PAGE) };
    }
}

/// Checks, moves aside and registers one space, inside the pause.
///
/// # Safety
/// The caller's pause: nothing touches the space.
unsafe fn flip_one(
    sp: Space,
    fd: &Arc<std::os::fd::OwnedFd>,
    opts: Options,
    counters: &Arc<Counters>,
    can_move: bool,
) -> Result<Flipped, Error> {
    let (base, len) = (sp.heap as usize, sp.len);
    let slot = registry::reserve(base, len).map_err(|r| r.error(base, len))?;
    let cancel = |e: Error| {
        registry::cancel(slot);
        e
    };
    let pieces = vmas::covering(base, len).map_err(|e| {
        cancel(Error::BadRange {
            addr: base,
            len,
            why: format!("cannot read the process's mappings (/proc/self/maps): {e}"),
        })
    })?;
    if let Some(why) = vmas::unfit(&pieces, base, len) {
        return Err(cancel(Error::BadRange {
            addr: base,
            len,
            why,
        }));
    }
    let fd_raw = std::os::fd::AsRawFd::as_raw_fd(&**fd);
    let huge = opts.huge_pages;
    // SAFETY: the caller's pause.
    let flipped = unsafe { setup::flip(base, len, &pieces, fd_raw, huge) };
    let (from, ioctls) = flipped.map_err(cancel)?;
    registry::set_from(slot, from, len);
    let undo = |e: Error| {
        setup::unregister(fd_raw, base, len);
        // SAFETY: nothing was built in the to-space yet.
        unsafe { setup::unflip(base, from, len, &pieces) };
        cancel(e)
    };
    if ioctls & IOCTL_BIT_ZEROPAGE == 0 {
        return Err(undo(Error::NotSupportedHere {
            what: "UFFDIO_ZEROPAGE on the to-space".into(),
        }));
    }
    let moves = can_move
        && ioctls & IOCTL_BIT_MOVE != 0
        && pieces.iter().all(Vma::movable)
        && super::kernel::moves_are_safe();
    let place = Place {
        base,
        n: len / PAGE,
        from,
        producer: sp.producer,
        moves,
    };
    let shared = match Shared::new(Arc::clone(fd), place, opts, Arc::clone(counters)) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            return Err(undo(Error::Syscall {
                call: "mmap",
                errno: e.raw_os_error().unwrap_or(libc::ENOMEM),
            }))
        }
    };
    registry::publish(slot, Arc::as_ptr(&shared));
    Ok(Flipped {
        part: Arc::new(Part {
            shared,
            cursor: Cursor::new(),
            slot,
        }),
        pieces,
    })
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

impl Compaction {
    /// For tests of stray pages: maps a page of 0xA5 bytes at page `page`
    /// of the first space behind the session's back, as a thread touching
    /// the heap in the pause would have populated it, leaving the page's
    /// state alone. The session must replace it with the built page.
    #[cfg(test)]
    pub(crate) fn map_behind(&self, page: usize) -> Result<(), Error> {
        let s = &self.parts[0].shared;
        let buf = vec![0xA5u8; PAGE];
        let dst = s.base + page * PAGE;
        let t = s.target(&s.counters.mutators, super::map::Present::Keep);
        // SAFETY: a registered to-space page and a readable source page.
        match unsafe {
            super::map::run(&t, super::map::Via::Copy, dst, buf.as_ptr() as usize, PAGE)
        } {
            super::map::Mapped::Failed { errno, .. } => Err(Error::Ioctl {
                op: "UFFDIO_COPY",
                addr: dst,
                errno,
                report: Box::default(),
            }),
            _ => Ok(()),
        }
    }
}
