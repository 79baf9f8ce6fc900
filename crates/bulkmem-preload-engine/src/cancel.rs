//! glibc's cancellation signal, kept out of a call while its helpers run.
//!
//! An asynchronous `pthread_cancel` is glibc's SIGCANCEL (the first
//! real-time signal), whose handler unwinds the thread at once. Arriving
//! while helpers write the caller's memory, it would take the caller away
//! and leave them writing. So the caller blocks it for the multi-threaded
//! part of the call, with the raw system call (glibc's `sigprocmask`
//! refuses to block its own signals), and a pending cancellation takes the
//! thread as soon as the copy is complete: a moment the program could have
//! cancelled it at. A handler of the program's that runs meanwhile (after
//! the helpers stopped) lets it in again ([`allow_in_handler`]), so that a
//! handler that never returns leaves no blocked SIGCANCEL behind.
//!
//! Within that window every mask this thread sets goes through the raw
//! system call too ([`block_raw`], [`set_raw`]): glibc's `sigprocmask` and
//! `pthread_sigmask` take SIGCANCEL out of any set they are given, so
//! restoring a saved mask with them unblocks it.

use std::ffi::c_void;

/// glibc's SIGCANCEL (`__SIGRTMIN`).
const SIGCANCEL: i32 = 32;
const BIT: u64 = 1 << (SIGCANCEL - 1);
/// SIGCANCEL in a kernel mask.
pub const CANCEL: u64 = BIT;

fn sigprocmask(how: libc::c_int, set: Option<u64>) -> u64 {
    let mut old = 0u64;
    let set_ptr = set.as_ref().map_or(std::ptr::null(), |s| s as *const u64);
    // SAFETY: rt_sigprocmask with 8-byte sets (the kernel's sigset_t size)
    // on this thread; made directly, so errno is left alone.
    unsafe {
        crate::raw_thread::syscall(
            libc::SYS_rt_sigprocmask,
            &[
                how as usize,
                set_ptr as usize,
                &mut old as *mut u64 as usize,
                8,
            ],
        )
    };
    old
}

/// Blocks the signals of `set` (a kernel mask: bit `n - 1` for signal
/// `n`) on this thread, SIGCANCEL included if asked; returns the mask to
/// give [`set_raw`].
pub fn block_raw(set: u64) -> u64 {
    sigprocmask(libc::SIG_BLOCK, Some(set))
}

/// Unblocks the signals of `set` (a kernel mask) on this thread.
pub fn unblock_raw(set: u64) {
    sigprocmask(libc::SIG_UNBLOCK, Some(set));
}

/// Sets this thread's mask to `mask` exactly.
pub fn set_raw(mask: u64) {
    sigprocmask(libc::SIG_SETMASK, Some(mask));
}

/// The kernel mask of every signal but those a faulting instruction
/// raises.
pub fn all_but_synchronous() -> u64 {
    bulkmem::fault::SYNCHRONOUS_SIGNALS
        .iter()
        .fold(!0u64, |m, &s| m & !(1u64 << (s - 1)))
}

/// The kernel mask of every signal but SIGSEGV and SIGBUS, the faults a
/// checked routine survives: a helper thread's.
pub fn all_but_faults() -> u64 {
    !((1u64 << (libc::SIGSEGV - 1)) | (1u64 << (libc::SIGBUS - 1)))
}

/// From a signal handler: unblocks SIGCANCEL now and in the mask the
/// interrupted context gets back (`uc`, a `ucontext_t`, may be null).
/// Async-signal-safe.
pub fn allow_in_handler(uc: *mut c_void) {
    if !uc.is_null() {
        // SAFETY: the kernel's ucontext for this handler; its uc_sigmask
        // is the mask sigreturn restores, whose first word holds signals
        // 1..=64 (glibc's sigdelset refuses SIGCANCEL, one of its own).
        unsafe {
            let u = uc.cast::<libc::ucontext_t>();
            let words = (&raw mut (*u).uc_sigmask).cast::<u64>();
            *words &= !BIT;
        }
    }
    sigprocmask(libc::SIG_UNBLOCK, Some(BIT));
}
