//! The library's own threads (engine workers, the submission thread,
//! offload channels) are invisible to the program's signals: each starts
//! with every asynchronous signal blocked, for its whole life, so a
//! process-directed signal (a `kill`, SIGTERM to a daemon that blocks it
//! and reads it with `sigwait` or `signalfd`, SIGINT from the terminal) is
//! delivered to one of the program's threads, as it would be without
//! bulkmem.
//!
//! The mask is set in the starting thread around the spawn, so the new
//! thread inherits it before it runs a single instruction (blocking from
//! inside the new thread would leave a window in which a signal could be
//! delivered to it). Synchronous signals stay unblocked: a fault while its
//! signal is blocked kills the process, and the checked routines need
//! SIGSEGV and SIGBUS to reach their handler. glibc keeps its internal
//! signals (cancellation, `setxid`) deliverable whatever is asked.

use core::mem::MaybeUninit;

/// The signals a faulting instruction raises; public (and explained) as
/// `bulkmem::fault::SYNCHRONOUS_SIGNALS`.
pub const SYNCHRONOUS: [libc::c_int; 6] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
];

/// Every signal but the synchronous ones.
pub fn asynchronous() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigfillset initialises the set; sigdelset edits it.
    unsafe {
        libc::sigfillset(set.as_mut_ptr());
        for s in SYNCHRONOUS {
            libc::sigdelset(set.as_mut_ptr(), s);
        }
        set.assume_init()
    }
}

/// Every signal but the synchronous ones, glibc's internal signals
/// (cancellation, `setxid`) included, set bit by bit: `sigaddset` refuses
/// those, and a signal handler that must not be interrupted by anything
/// the program can send needs them blocked too (`sa_mask` is passed to
/// the kernel as it is). The kernel ignores SIGKILL's and SIGSTOP's bits.
pub fn asynchronous_all() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set; the bits are written
    // through its first word, signal s at bit s - 1 as the kernel reads
    // it (x86-64: 64 signals in one u64).
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        let mut bits = u64::MAX;
        for s in SYNCHRONOUS {
            bits &= !(1u64 << (s - 1));
        }
        set.as_mut_ptr().cast::<u64>().write(bits);
        set.assume_init()
    }
}

/// Runs `spawn` with every asynchronous signal blocked in this thread, so
/// that the threads it starts inherit the mask, then restores this
/// thread's own.
pub fn quiet<R>(spawn: impl FnOnce() -> R) -> R {
    let all = asynchronous();
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: valid sets; pthread_sigmask changes this thread's mask only.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &all, old.as_mut_ptr()) };
    let r = spawn();
    // SAFETY: `old` was filled by the call above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), core::ptr::null_mut()) };
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread started quietly blocks every asynchronous signal and no
    /// synchronous one; the starting thread's mask is as it was.
    #[test]
    fn quiet_threads_block_asynchronous_signals_only() {
        fn mask() -> libc::sigset_t {
            let mut m = MaybeUninit::<libc::sigset_t>::uninit();
            // SAFETY: querying this thread's mask into `m`.
            unsafe {
                libc::pthread_sigmask(libc::SIG_BLOCK, core::ptr::null(), m.as_mut_ptr());
                m.assume_init()
            }
        }
        let blocked = |m: &libc::sigset_t, s| {
            // SAFETY: a valid, initialised set.
            unsafe { libc::sigismember(m, s) == 1 }
        };
        let before = mask();
        let inner = quiet(|| std::thread::spawn(mask).join().unwrap());
        let after = mask();
        for s in [
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGALRM,
            libc::SIGUSR1,
            libc::SIGCHLD,
        ] {
            assert!(blocked(&inner, s), "signal {s} reaches a quiet thread");
            assert_eq!(blocked(&after, s), blocked(&before, s), "signal {s}");
        }
        for s in SYNCHRONOUS {
            assert!(!blocked(&inner, s), "synchronous signal {s} blocked");
        }
    }
}
