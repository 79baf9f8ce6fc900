//! Maps runs of built pages into the to-space: one ioctl per run where the
//! kernel takes it whole, and the refusals each mode has handled here, so
//! that the collector and the signal path behave alike. Async-signal-safe:
//! ioctls, atomics and `sched_yield` only.

use core::sync::atomic::AtomicU64;

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
    /// Every page is mapped (by this call, or found mapped: `EEXIST`).
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

/// Maps `len` bytes at `dst` from `src` with `via`, counting into `c`.
///
/// # Safety
/// As [`once`]; a Move leaves the source pages it moved empty.
pub(crate) unsafe fn run(
    fd: i32,
    c: &Side,
    via: Via,
    dst: usize,
    src: usize,
    len: usize,
) -> Mapped {
    let count = |n: usize| {
        let field: &AtomicU64 = match via {
            Via::Copy => &c.copied,
            Via::Move => &c.moved,
            Via::Zero => &c.zeroed,
        };
        Counters::add(field, (n / PAGE) as u64);
    };
    let (mut done, mut again) = (0, 0);
    while done < len {
        Counters::add(&c.ioctls, 1);
        // SAFETY: [done, len) lies in both ranges the caller vouched for.
        let (n, err) = unsafe { once(fd, via, dst + done, src + done, len - done) };
        count(n);
        done += n;
        let Some(e) = err else { continue };
        let (d, s) = (dst + done, src + done);
        match e {
            libc::EAGAIN => {
                if n == 0 {
                    again += 1;
                    if again > MAX_AGAIN {
                        return Mapped::Failed { at: done, errno: e };
                    }
                    // SAFETY: no arguments; async-signal-safe.
                    unsafe { libc::sched_yield() };
                } else {
                    again = 0;
                }
                continue;
            }
            // Someone mapped this page first; theirs stands.
            libc::EEXIST => Counters::add(&c.eexist, 1),
            // A pinned source page, or one shared after fork: copy it.
            libc::EBUSY if via == Via::Move => {
                Counters::add(&c.move_fallbacks, 1);
                // SAFETY: one page of both ranges.
                match unsafe { run(fd, c, Via::Copy, d, s, PAGE) } {
                    Mapped::Done => {}
                    other => return shift(other, done),
                }
            }
            // A source hole (never touched): its content is zeros.
            libc::ENOENT if via == Via::Move => {
                // SAFETY: one registered destination page.
                match unsafe { run(fd, c, Via::Zero, d, 0, PAGE) } {
                    Mapped::Done => {}
                    other => return shift(other, done),
                }
            }
            libc::ENOENT => return Mapped::Unregistered,
            _ => return Mapped::Failed { at: done, errno: e },
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
