//! Maps runs of built pages into the to-space: one ioctl per run where the
//! kernel takes it whole, and the refusals each mode has handled here, so
//! that the collector and the signal path behave alike. Async-signal-safe:
//! ioctls, atomics and `sched_yield` only.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use super::stats::{Counters, Side};
use crate::uffd::errno;
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

/// The kernel's answer to one mapping ioctl: bytes it mapped, and the
/// errno if it stopped short.
type Answer = (usize, Option<i32>);

/// One mapping ioctl, as [`once`] issues it (tests script the kernel's
/// answers through this).
type Ioctl = unsafe fn(fd: i32, via: Via, dst: usize, src: usize, len: usize) -> Answer;

/// One ioctl: bytes it mapped, and the errno if it stopped short.
///
/// # Safety
/// `dst..dst+len` is registered with `fd`; `src..src+len` (for Copy and
/// Move) is the caller's private anonymous memory.
unsafe fn once(fd: i32, via: Via, dst: usize, src: usize, len: usize) -> Answer {
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
/// persists) copies that page. `ENOMEM` waits and retries without end, as
/// the kernel's own page fault does: the access would have waited the
/// same way without a session, until reclaim or the OOM killer made room.
///
/// # Safety
/// As [`once`]; a Move leaves the source pages it moved empty.
pub(crate) unsafe fn run(t: &Target, via: Via, dst: usize, src: usize, len: usize) -> Mapped {
    // SAFETY: the caller's word, passed on.
    unsafe { run_by(once, t, via, dst, src, len) }
}

/// [`run`], asking the kernel through `ioctl`.
///
/// # Safety
/// As [`run`].
unsafe fn run_by(ioctl: Ioctl, t: &Target, via: Via, dst: usize, src: usize, len: usize) -> Mapped {
    let (fd, c, present) = (t.fd, t.side, t.present);
    let count = |n: usize| {
        let field: &AtomicU64 = match via {
            Via::Copy => &c.copied,
            Via::Move => &c.moved,
            Via::Zero => &c.zeroed,
        };
        Counters::add(field, (n / PAGE) as u64);
    };
    let (mut done, mut again, mut replaced_at, mut short) = (0, 0, usize::MAX, 0u32);
    while done < len {
        Counters::add(&c.ioctls, 1);
        // SAFETY: [done, len) lies in both ranges the caller vouched for.
        let (n, err) = unsafe { ioctl(fd, via, dst + done, src + done, len - done) };
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
            unsafe { run_by(ioctl, t, Via::Copy, d, s, PAGE) }
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
            libc::ENOMEM => {
                Counters::add(&c.memory_waits, 1);
                short = if n > 0 { 0 } else { short + 1 };
                wait_for_memory(short);
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
                let r = unsafe { run_by(ioctl, t, Via::Copy, d, s, len - done) };
                return shift(r, done);
            }
            // A source hole (never touched): its content is zeros.
            libc::ENOENT if via == Via::Move => {
                // SAFETY: one registered destination page.
                unsafe { run_by(ioctl, t, Via::Zero, d, 0, PAGE) }
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

/// Waits before the `times`-th retry in a row of a mapping the kernel
/// refused for want of memory: a yield at first (the OOM killer or
/// another thread's exit may already have made room), then a millisecond
/// a time, so that a long shortage costs the CPU little. Async-signal-safe.
fn wait_for_memory(times: u32) {
    if times <= 8 {
        // SAFETY: no arguments.
        unsafe { libc::sched_yield() };
        return;
    }
    let ms = libc::timespec {
        tv_sec: 0,
        tv_nsec: 1_000_000,
    };
    // SAFETY: a valid timespec; an interrupted sleep only retries sooner.
    unsafe { libc::nanosleep(&ms, core::ptr::null_mut()) };
}

/// A nested run's outcome, with its offset made relative to the outer run.
fn shift(m: Mapped, by: usize) -> Mapped {
    match m {
        Mapped::Failed { at, errno } => Mapped::Failed { at: at + by, errno },
        other => other,
    }
}

/// The refusals of the kernel that no test program provokes at will
/// (`EAGAIN` and `ENOMEM` from a race or a shortage), and the rest of
/// [`run`]'s decisions, against a scripted kernel.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::compact::stats::Counters;
    use std::cell::RefCell;
    use std::collections::VecDeque;

    const DST: usize = 0x7000_0000_0000;
    const SRC: usize = 0x6000_0000_0000;

    thread_local! {
        /// Answers still to give, each `count` times; past the end, every
        /// call maps its whole range.
        static SCRIPT: RefCell<VecDeque<(Answer, usize)>> = const { RefCell::new(VecDeque::new()) };
        /// Each call: how, where (page of the destination), pages asked.
        static CALLS: RefCell<Vec<(Via, usize, usize)>> = const { RefCell::new(Vec::new()) };
    }

    /// SAFETY (of the signature): touches no memory.
    unsafe fn scripted(_: i32, via: Via, dst: usize, src: usize, len: usize) -> Answer {
        if via != Via::Zero {
            assert_eq!(
                dst - DST,
                src - SRC,
                "the source moved with the destination"
            );
        }
        CALLS.with(|c| c.borrow_mut().push((via, (dst - DST) / PAGE, len / PAGE)));
        SCRIPT.with(|s| {
            let mut s = s.borrow_mut();
            let Some((answer, count)) = s.front_mut() else {
                return (len, None);
            };
            let a = *answer;
            *count -= 1;
            if *count == 0 {
                s.pop_front();
            }
            a
        })
    }

    struct Outcome {
        mapped: Mapped,
        calls: Vec<(Via, usize, usize)>,
        moves_left: bool,
        counters: Counters,
    }

    fn script(via: Via, pages: usize, answers: &[(Answer, usize)]) -> Outcome {
        SCRIPT.with(|s| *s.borrow_mut() = answers.iter().copied().collect());
        CALLS.with(|c| c.borrow_mut().clear());
        let (counters, moves) = (Counters::new(), AtomicBool::new(true));
        let t = Target {
            fd: -1,
            side: &counters.mutators,
            moves: &moves,
            present: Present::Keep,
        };
        // SAFETY: the scripted kernel touches no memory.
        let mapped = unsafe { run_by(scripted, &t, via, DST, SRC, pages * PAGE) };
        let left = SCRIPT.with(|s| s.borrow().len());
        assert_eq!(left, 0, "answers left unused");
        Outcome {
            mapped,
            calls: CALLS.with(|c| c.take()),
            moves_left: moves.load(Relaxed),
            counters,
        }
    }

    fn get(a: &AtomicU64) -> u64 {
        a.load(Relaxed)
    }

    #[test]
    fn a_move_that_keeps_answering_eagain_copies_that_page_and_moves_on() {
        let o = script(
            Via::Move,
            4,
            &[((0, Some(libc::EAGAIN)), MOVE_AGAIN as usize + 1)],
        );
        assert_eq!(o.mapped, Mapped::Done);
        let moves_at_0 = o.calls.iter().filter(|c| **c == (Via::Move, 0, 4)).count();
        assert_eq!(moves_at_0, MOVE_AGAIN as usize + 1);
        let rest = &o.calls[moves_at_0..];
        assert_eq!(rest, [(Via::Copy, 0, 1), (Via::Move, 1, 3)]);
        let m = &o.counters.mutators;
        assert_eq!(
            (get(&m.move_fallbacks), get(&m.copied), get(&m.moved)),
            (1, 1, 3)
        );
        assert!(o.moves_left, "one page's EAGAIN stopped every later move");
    }

    #[test]
    fn eagain_after_progress_counts_again_from_zero() {
        // Partial progress comes back as EAGAIN; the count of answers
        // without progress starts over after it, so no page is copied.
        let o = script(
            Via::Move,
            4,
            &[
                ((0, Some(libc::EAGAIN)), MOVE_AGAIN as usize),
                ((PAGE, Some(libc::EAGAIN)), 1),
                ((0, Some(libc::EAGAIN)), MOVE_AGAIN as usize),
            ],
        );
        assert_eq!(o.mapped, Mapped::Done);
        assert!(
            o.calls.iter().all(|c| c.0 == Via::Move),
            "{:?}",
            o.calls.last()
        );
        assert_eq!(o.calls.last(), Some(&(Via::Move, 1, 3)));
        assert_eq!(get(&o.counters.mutators.move_fallbacks), 0);
        assert_eq!(get(&o.counters.mutators.moved), 4);
    }

    #[test]
    fn a_copy_that_never_stops_answering_eagain_fails_at_its_page() {
        let o = script(
            Via::Copy,
            3,
            &[
                ((PAGE, Some(libc::EAGAIN)), 1),
                ((0, Some(libc::EAGAIN)), MAX_AGAIN as usize + 1),
            ],
        );
        assert_eq!(
            o.mapped,
            Mapped::Failed {
                at: PAGE,
                errno: libc::EAGAIN
            }
        );
        assert_eq!(get(&o.counters.mutators.copied), 1);
    }

    #[test]
    fn enomem_waits_and_retries_until_the_kernel_has_room() {
        // Past the yields, into the sleeps; then the kernel maps the rest.
        let o = script(
            Via::Copy,
            3,
            &[
                ((PAGE, Some(libc::EAGAIN)), 1),
                ((0, Some(libc::ENOMEM)), 12),
                ((PAGE, Some(libc::EAGAIN)), 1),
                ((0, Some(libc::ENOMEM)), 3),
            ],
        );
        assert_eq!(o.mapped, Mapped::Done);
        let m = &o.counters.mutators;
        assert_eq!((get(&m.memory_waits), get(&m.copied)), (15, 3));
        assert_eq!(o.calls.last(), Some(&(Via::Copy, 2, 1)));
    }

    #[test]
    fn enomem_from_a_move_waits_too_and_keeps_moving() {
        let o = script(Via::Move, 2, &[((0, Some(libc::ENOMEM)), 2)]);
        assert_eq!(o.mapped, Mapped::Done);
        let m = &o.counters.mutators;
        assert_eq!(
            (get(&m.memory_waits), get(&m.moved), get(&m.copied)),
            (2, 2, 0)
        );
        assert!(o.moves_left);
    }

    #[test]
    fn ebusy_copies_one_page_and_moves_the_rest() {
        let o = script(Via::Move, 3, &[((PAGE, Some(libc::EBUSY)), 1)]);
        assert_eq!(o.mapped, Mapped::Done);
        assert_eq!(
            o.calls,
            [(Via::Move, 0, 3), (Via::Copy, 1, 1), (Via::Move, 2, 1)]
        );
        assert!(o.moves_left);
    }

    #[test]
    fn einval_from_a_move_copies_the_rest_and_stops_moving() {
        let o = script(Via::Move, 4, &[((PAGE, Some(libc::EINVAL)), 1)]);
        assert_eq!(o.mapped, Mapped::Done);
        assert_eq!(o.calls, [(Via::Move, 0, 4), (Via::Copy, 1, 3)]);
        assert!(!o.moves_left, "later runs would move again");
        assert_eq!(get(&o.counters.mutators.move_fallbacks), 3);
    }

    #[test]
    fn a_source_hole_maps_a_zero_page() {
        let o = script(Via::Move, 2, &[((0, Some(libc::ENOENT)), 1)]);
        assert_eq!(o.mapped, Mapped::Done);
        assert_eq!(
            o.calls,
            [(Via::Move, 0, 2), (Via::Zero, 0, 1), (Via::Move, 1, 1)]
        );
    }

    #[test]
    fn a_copy_into_an_unregistered_range_says_so() {
        let o = script(Via::Copy, 2, &[((0, Some(libc::ENOENT)), 1)]);
        assert_eq!(o.mapped, Mapped::Unregistered);
    }

    #[test]
    fn eexist_for_a_page_the_caller_only_wants_there_stands() {
        let o = script(Via::Zero, 2, &[((PAGE, Some(libc::EEXIST)), 1)]);
        assert_eq!(o.mapped, Mapped::Done);
        assert_eq!(o.calls, [(Via::Zero, 0, 2)]);
    }

    #[test]
    fn any_other_refusal_fails_at_the_page_it_names() {
        let o = script(Via::Copy, 4, &[((2 * PAGE, Some(libc::EFAULT)), 1)]);
        assert_eq!(
            o.mapped,
            Mapped::Failed {
                at: 2 * PAGE,
                errno: libc::EFAULT
            }
        );
    }
}
