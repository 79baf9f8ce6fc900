//! The one way a thread here waits until others are done: a count of the
//! parties still working, which a waiter sleeps on until it reaches zero.
//! The engine's pool waits on one for its workers, a submitted batch's
//! ticket for the batch (with a deadline, [`Latch::wait_until`]), the
//! `LD_PRELOAD` library's calls for their helper threads.
//!
//! The sleep/wake protocol, beside the code as rayon-core keeps its own:
//!
//! - the count is raised ([`Latch::add`]) before the parties it counts can
//!   run, by the thread that starts them;
//! - a party's last act on the shared work is [`Latch::count_down`]: a
//!   `Release` decrement, and the one that reaches zero wakes every
//!   sleeper (`FUTEX_WAKE`). Nothing the party did before is then unseen;
//! - a waiter ([`Latch::wait`]) reads the count (`Acquire`); at zero it
//!   returns, else it sleeps with `FUTEX_WAIT` on the value it read, which
//!   returns at once if the count moved in between, so a wake between the
//!   read and the sleep is never lost, and reads again (a spurious wake
//!   costs one more read).
//!
//! Waiting for *work* is another thing, and keeps its lock and condvar:
//! the pool's idle workers until a batch comes, the submission thread
//! until a ticket is queued, a caller until the engine's batch lock frees
//! (`engine/serial.rs`). Those sleepers hold a queue or a lock anyway; a
//! latch is for the one who waits on parties it started, which may be a
//! thread that can take no lock at all.
//!
//! No lock, no allocation, and the system call is made directly on x86-64,
//! never touching `errno`: a thread without the C library's per-thread
//! state (the preload's helpers) or a signal handler may use a latch. The
//! word is a futex word: the latch must not move while anyone sleeps on it
//! (it is borrowed for as long).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A count of unfinished parties that [`Latch::wait`] sleeps on until it
/// is zero; see the module docs for the protocol.
///
/// ```
/// use bulkmem_machine::latch::Latch;
///
/// let done = Latch::new(0);
/// std::thread::scope(|s| {
///     done.add(2);
///     for _ in 0..2 {
///         s.spawn(|| {
///             // ... this party's share of the work ...
///             done.count_down();
///         });
///     }
///     done.wait();
///     assert_eq!(done.count(), 0);
/// });
/// ```
#[derive(Debug)]
pub struct Latch {
    count: AtomicU32,
}

impl Latch {
    /// A latch counting `count` parties.
    pub const fn new(count: u32) -> Latch {
        Latch {
            count: AtomicU32::new(count),
        }
    }

    /// Counts `n` more parties, before they can run.
    pub fn add(&self, n: u32) {
        self.count.fetch_add(n, Ordering::Relaxed);
    }

    /// One party is done with the work; the last one wakes the waiters.
    pub fn count_down(&self) {
        if self.count.fetch_sub(1, Ordering::Release) == 1 {
            futex(&self.count, libc::FUTEX_WAKE, i32::MAX as u32, None);
        }
    }

    /// Parties still counted.
    pub fn count(&self) -> u32 {
        self.count.load(Ordering::Acquire)
    }

    /// Returns once the count is zero; what every party did before its
    /// [`Latch::count_down`] is then visible.
    pub fn wait(&self) {
        loop {
            let v = self.count.load(Ordering::Acquire);
            if v == 0 {
                return;
            }
            futex_for(&self.count, v, None);
        }
    }

    /// As [`Latch::wait`], giving up at `deadline`: whether the count
    /// reached zero.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        loop {
            let v = self.count.load(Ordering::Acquire);
            if v == 0 {
                return true;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            futex_for(&self.count, v, Some(left));
        }
    }

    /// Sets the count to zero without waking anyone: for the child of a
    /// `fork`, where the parties counted do not exist.
    pub fn forget(&self) {
        self.count.store(0, Ordering::Relaxed);
    }
}

/// Sleeps while `word` holds `v`, at most `left` (a relative timeout, as
/// FUTEX_WAIT takes it).
/// Wakes every thread sleeping on `word` ([`futex_for`]); for other
/// sleep protocols of the crate (a compaction's page waits), which keep
/// their own words.
pub fn wake_all(word: &AtomicU32) {
    futex(word, libc::FUTEX_WAKE, i32::MAX as u32, None);
}

/// Sleeps on `word` while it holds `v`, for at most `left` (for ever
/// without): returns at once if it holds something else, and may return
/// early for no reason. Async-signal-safe.
pub fn futex_for(word: &AtomicU32, v: u32, left: Option<Duration>) {
    let ts = left.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    futex(word, libc::FUTEX_WAIT, v, ts.as_ref());
}

/// `futex(word, op | FUTEX_PRIVATE_FLAG, val, timeout)`; its result is
/// not needed (a wait that returns for any reason reads the count again).
fn futex(word: &AtomicU32, op: libc::c_int, val: u32, timeout: Option<&libc::timespec>) {
    let op = (op | libc::FUTEX_PRIVATE_FLAG) as usize;
    let timeout = timeout.map_or(std::ptr::null(), |t| t as *const libc::timespec);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: FUTEX_WAIT/WAKE on a live, aligned word, with a live
    // timespec or none; the `syscall` instruction clobbers rcx and r11
    // only.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_futex as isize => _,
            in("rdi") word.as_ptr(),
            in("rsi") op,
            in("rdx") val as usize,
            in("r10") timeout,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as above, through the C library (which may set `errno`).
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), op, val, timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latch_at_zero_does_not_wait() {
        Latch::new(0).wait();
        let l = Latch::new(1);
        l.count_down();
        l.wait();
        assert_eq!(l.count(), 0);
    }

    #[test]
    fn the_waiter_sees_every_partys_work() {
        use std::sync::atomic::AtomicUsize;
        for _ in 0..200 {
            let (l, sum) = (Latch::new(0), AtomicUsize::new(0));
            std::thread::scope(|s| {
                l.add(4);
                for i in 1..=4 {
                    let (l, sum) = (&l, &sum);
                    s.spawn(move || {
                        sum.fetch_add(i, Ordering::Relaxed);
                        l.count_down();
                    });
                }
                l.wait();
                assert_eq!(sum.load(Ordering::Relaxed), 10);
                assert_eq!(l.count(), 0);
            });
        }
    }

    #[test]
    fn a_timed_wait_gives_up_and_then_sees_the_count_reach_zero() {
        let l = Latch::new(1);
        assert!(!l.wait_until(Instant::now() + Duration::from_millis(5)));
        std::thread::scope(|s| {
            s.spawn(|| l.count_down());
            assert!(l.wait_until(Instant::now() + Duration::from_secs(60)));
        });
        assert!(l.wait_until(Instant::now()));
    }

    #[test]
    fn forget_empties_the_count() {
        let l = Latch::new(3);
        l.forget();
        l.wait();
    }
}
