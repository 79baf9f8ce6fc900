//! Maps runs of built pages into the to-space: one ioctl per run where the
//! kernel takes it whole, and the refusals each mode has handled here, so
//! that the collector and the signal path behave alike. Async-signal-safe:
//! ioctls, atomics and `sched_yield` only.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use super::stats::{Counters, Side};
use crate::uffd::ioctl::{
    UffdioCopy, UffdioMove, UffdioRange, UffdioZeropage, UFFDIO_COPY, UFFDIO_MOVE, UFFDIO_ZEROPAGE,
};

pub(crate) const PAGE: usize = 4096;

/// `EAGAIN` answers without progress before a run counts as failed.
const MAX_AGAIN: u32 = 10_000;

/// How a run gets into the to-space.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Via {
    /// `UFFDIO_COPY` from the source pages.
    Copy,
    /// `UFFDIO_MOVE` of the source pages (`EBUSY` pages are copied).
    Move,
    /// `UFFDIO_ZEROPAGE`; no source.
    Zero,
}

/// How a run ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mapped {
    /// Every page is mapped (by this call, or, for [`Present::Keep`],
    /// found mapped: `EEXIST`).
    Done,
    /// The range is no longer registered (`ENOENT` from COPY or ZEROPAGE):
    /// the session is finishing, and the access can simply be retried.
    Unregistered,
    /// The kernel refused the page at byte offset `at` with `errno`; the
    /// pages before it are mapped.
    Failed { at: usize, errno: i32 },
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() }
}

/// One ioctl: bytes it mapped, and the errno if it stopped short.
///
/// # Safety
/// `dst..dst+len` is registered with `fd`; `src..src+len` (for Copy and
/// Move) is the caller's private anonymous memory.
unsafe fn once(fd: i32, via: Via, dst: usize, src: usize, len: usize) -> (usize, Option<i32>) {
    let (rc, done) = match via {
        Via::Copy => {
            let mut a = UffdioCopy {
                dst: dst as u64,
                src: src as u64,
                len: len as u64,
                mode: 0,
                copy: 0,
            };
            // SAFETY: valid fd and struct; the caller's ranges.
            let rc = unsafe { libc::ioctl(fd, UFFDIO_COPY, &mut a) };
            (rc, a.copy)
        }
        Via::Move => {
            let mut a = UffdioMove {
                dst: dst as u64,
                src: src as u64,
                len: len as u64,
                mode: 0,
                moved: 0,
            };
            // SAFETY: as above.
            let rc = unsafe { libc::ioctl(fd, UFFDIO_MOVE, &mut a) };
            (rc, a.moved)
        }
        Via::Zero => {
            let mut a = UffdioZeropage {
                range: UffdioRange {
                    start: dst as u64,
                    len: len as u64,
                },
                mode: 0,
                zeropage: 0,
            };
            // SAFETY: as above.
            let rc = unsafe { libc::ioctl(fd, UFFDIO_ZEROPAGE, &mut a) };
            (rc, a.zeropage)
        }
    };
    // The kernel writes a negative errno into the count when nothing was
    // done, and returns EAGAIN after partial progress.
    let done = (done.max(0) as usize).min(len) / PAGE * PAGE;
    if rc == 0 {
        (len, None)
    } else {
        (done, Some(errno()))
    }
}

/// What an `EEXIST` means to the caller of [`run`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Present {
    /// The caller owns the page, so nobody in the session mapped it: the
    /// page was populated behind the session's back and does not hold the
    /// built content. It is dropped and mapped again (counted in
    /// `Side::eexist`).
    Replace,
    /// The caller only wants the page there (a refault): what is there
    /// stands.
    Keep,
}

/// `MADV_DONTNEED_LOCKED` (Linux 5.18): `MADV_DONTNEED` for `VM_LOCKED`
/// memory, which plain `MADV_DONTNEED` refuses with `EINVAL`.
pub(crate) const MADV_DONTNEED_LOCKED: libc::c_int = 24;

/// Drops the pages of `addr..addr + len` (locked or not). False if the
/// kernel refused both ways.
pub(crate) fn drop_pages(addr: usize, len: usize) -> bool {
    // SAFETY: madvise on the session's own mappings; the pages' content
    // is not needed (the caller's word). Async-signal-safe.
    unsafe {
        libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) == 0
            || libc::madvise(addr as *mut libc::c_void, len, MADV_DONTNEED_LOCKED) == 0
    }
}

/// `EAGAIN` answers to a move, without progress, before the page is
/// copied instead.
const MOVE_AGAIN: u32 = 16;

/// Where [`run`] maps and what it may do there: the session's
/// userfaultfd, the side its counts go to, the session's permission to
/// move (`moves`: a move the kernel refuses for the pair of mappings,
/// `EINVAL` for a mapping locked on one side only, different protections
/// or a shared, file or hugetlb source, clears it, and that page and every
/// later one are copied), and what an `EEXIST` means.
pub(crate) struct Target<'a> {
    pub fd: i32,
    pub side: &'a Side,
    pub moves: &'a AtomicBool,
    pub present: Present,
}

/// Maps `len` bytes at `dst` from `src` with `via`. A move refused for
/// one page (`EBUSY`: pinned, or shared after fork; an `EAGAIN` that
/// persists) copies that page.
///
/// # Safety
/// As [`once`]; a Move leaves the source pages it moved empty.
pub(crate) unsafe fn run(t: &Target, via: Via, dst: usize, src: usize, len: usize) -> Mapped {
    let (fd, c, present) = (t.fd, t.side, t.present);
    let count = |n: usize| {
        let field: &AtomicU64 = match via {
            Via::Copy => &c.copied,
            Via::Move => &c.moved,
            Via::Zero => &c.zeroed,
        };
        Counters::add(field, (n / PAGE) as u64);
    };
    let (mut done, mut again, mut replaced_at) = (0, 0, usize::MAX);
    while done < len {
        Counters::add(&c.ioctls, 1);
        // SAFETY: [done, len) lies in both ranges the caller vouched for.
        let (n, err) = unsafe { once(fd, via, dst + done, src + done, len - done) };
        count(n);
        done += n;
        let Some(e) = err else { continue };
        if n > 0 {
            again = 0;
        }
        let (d, s) = (dst + done, src + done);
        // One page copied in place of a move.
        let copy_one = || {
            Counters::add(&c.move_fallbacks, 1);
            // SAFETY: one page of both ranges.
            unsafe { run(t, Via::Copy, d, s, PAGE) }
        };
        let step = match e {
            libc::EAGAIN if via == Via::Move && n == 0 && again >= MOVE_AGAIN => copy_one(),
            libc::EAGAIN => {
                if n == 0 {
                    again += 1;
                    if again > MAX_AGAIN {
                        return Mapped::Failed { at: done, errno: e };
                    }
                    // SAFETY: no arguments; async-signal-safe.
                    unsafe { libc::sched_yield() };
                }
                continue;
            }
            libc::EEXIST if present == Present::Keep => Mapped::Done,
            // Populated behind the session's back: drop it and map the
            // built page (once; a second EEXIST at the same page fails).
            libc::EEXIST => {
                if replaced_at == d || !drop_pages(d, PAGE) {
                    return Mapped::Failed { at: done, errno: e };
                }
                Counters::add(&c.eexist, 1);
                replaced_at = d;
                continue;
            }
            libc::EBUSY if via == Via::Move => copy_one(),
            // The pair of mappings cannot move at all: copy from here on.
            libc::EINVAL if via == Via::Move => {
                t.moves.store(false, Relaxed);
                Counters::add(&c.move_fallbacks, ((len - done) / PAGE) as u64);
                // SAFETY: the rest of both ranges.
                let r = unsafe { run(t, Via::Copy, d, s, len - done) };
                return shift(r, done);
            }
            // A source hole (never touched): its content is zeros.
            libc::ENOENT if via == Via::Move => {
                // SAFETY: one registered destination page.
                unsafe { run(t, Via::Zero, d, 0, PAGE) }
            }
            libc::ENOENT => return Mapped::Unregistered,
            _ => return Mapped::Failed { at: done, errno: e },
        };
        match step {
            Mapped::Done => {}
            other => return shift(other, done),
        }
        done += PAGE;
        again = 0;
    }
    Mapped::Done
}

/// A nested run's outcome, with its offset made relative to the outer run.
fn shift(m: Mapped, by: usize) -> Mapped {
    match m {
        Mapped::Failed { at, errno } => Mapped::Failed { at: at + by, errno },
        other => other,
    }
}
