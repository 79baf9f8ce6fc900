//! The engine's side of the calls that need a process without the
//! preload's threads (the loader defines the functions and sends them here
//! once the engine is open): they wait until no helper thread is alive
//! before they reach the kernel.
//!
//! * `prctl(PR_SET_SECCOMP, ...)`: in strict mode only `read`, `write`,
//!   `_exit` and `sigreturn` remain, so no helper could be started or
//!   joined, and a filter applies to the calling thread only: helpers
//!   would run outside the sandbox. Helpers are forbidden from then on,
//!   and bulkmem's lazy initialisation (which opens /proc/cpuinfo and the
//!   profile) is done first: no copy may open a file afterwards.
//! * `unshare` and `setns`: a new user namespace (and `setns` into a mount
//!   or user namespace) needs a single-threaded process: they wait until
//!   the helpers of other threads' calls are gone, and no call starts new
//!   ones meanwhile.
//!
//! Not covered: the same requests made with `syscall(SYS_seccomp, ...)`,
//! `syscall(SYS_unshare, ...)` and the like (libseccomp's `seccomp_load`
//! uses the `seccomp` system call when the kernel has it): set
//! `BULKMEM_PRELOAD_THREADS=1` for such programs, and `BULKMEM_PRELOAD=off`
//! if the sandbox forbids opening files before their first large copy
//! (opening the engine, and bulkmem's lazy initialisation, which reads
//! /proc/cpuinfo and the profile).

use std::ffi::{c_int, c_ulong, c_void};

use crate::{accel, helpers, loader};

type PrctlFn = unsafe extern "C" fn(c_int, c_ulong, c_ulong, c_ulong, c_ulong) -> c_int;
type IntFn = unsafe extern "C" fn(c_int) -> c_int;
type SetnsFn = unsafe extern "C" fn(c_int, c_int) -> c_int;

fn errno() -> c_int {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() }
}

/// Runs `call`; when it fails with `EINVAL` right after helpers were
/// stopped, tries again for a while: `pthread_join` returns when a thread
/// has released its memory, a moment before the kernel removes it from the
/// thread group, and until then the process still counts as threaded.
fn retried(stopped: bool, call: impl Fn() -> c_int) -> c_int {
    let mut r = call();
    if !stopped {
        return r;
    }
    for _ in 0..4000 {
        if r == 0 || errno() != libc::EINVAL {
            break;
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 50_000,
        };
        // SAFETY: a valid timespec; the remainder is not wanted.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
        r = call();
    }
    r
}

/// `prctl(PR_SET_SECCOMP, ...)`, the only request the loader sends here,
/// `real` being the C library's `prctl`. After it no file can be opened:
/// bulkmem's lazy initialisation (CPU facts, profile) is done before, not
/// by the next copy, and helpers are forbidden from then on.
///
/// # Safety
/// `prctl`'s contract; `real` is the C library's function.
pub unsafe extern "C" fn prctl(
    real: *mut c_void,
    option: c_int,
    a2: c_ulong,
    a3: c_ulong,
    a4: c_ulong,
    a5: c_ulong,
) -> c_int {
    accel::prepare_for_sandbox();
    helpers::without_threads(true, careful(), |_| {
        // SAFETY: the C library's prctl, with the arguments the caller
        // passed.
        unsafe { std::mem::transmute::<*mut c_void, PrctlFn>(real)(option, a2, a3, a4, a5) }
    })
}

/// `unshare`, `real` being the C library's.
///
/// # Safety
/// `unshare`'s contract; `real` is the C library's function.
pub unsafe extern "C" fn unshare(real: *mut c_void, flags: c_int) -> c_int {
    // SAFETY: the C library's unshare; it has no memory preconditions.
    let call = || unsafe { std::mem::transmute::<*mut c_void, IntFn>(real)(flags) };
    helpers::without_threads(false, careful(), |stopped| retried(stopped, call))
}

/// Whether waiting for helpers could wait for ever: from a signal handler
/// (the call it interrupted may be the one whose helpers run) or from
/// bulkmem's own code.
fn careful() -> bool {
    loader::in_handler() || accel::inside()
}

/// `setns`, `real` being the C library's.
///
/// # Safety
/// `setns`'s contract; `real` is the C library's function.
pub unsafe extern "C" fn setns(real: *mut c_void, fd: c_int, nstype: c_int) -> c_int {
    // SAFETY: the C library's setns; it has no memory preconditions.
    let call = || unsafe { std::mem::transmute::<*mut c_void, SetnsFn>(real)(fd, nstype) };
    helpers::without_threads(false, careful(), |stopped| retried(stopped, call))
}
