//! Knowing when a copy runs inside a signal handler, so that it never
//! starts (or waits for) the engine's threads there.
//!
//! `sigaction`, `signal`, `bsd_signal`, `sysv_signal`, `__sysv_signal` and
//! `sigset` are interposed: a handler the program installs is recorded in
//! [`HANDLERS`] and the kernel is given [`trampoline`] instead, which raises
//! this thread's [`DEPTH`] around the call of the program's handler. The copy
//! path reads `DEPTH` (one thread-local load: the preload is in the initial
//! TLS block, so this neither allocates nor locks) and uses the engine only
//! when it is zero.
//!
//! The program sees its own handlers: the old action that `sigaction` and
//! `signal` report names the program's handler (and its `SA_SIGINFO`), not
//! the trampoline. A handler left with `longjmp` leaves the depth raised:
//! that thread then copies on its own for good, which is safe, only slower.
//!
//! Not covered: handlers installed with a raw `rt_sigaction` system call
//! (`syscall(SYS_rt_sigaction, ...)`), or by code that calls the C library's
//! internal aliases. A large copy in such a handler is treated as outside
//! one; see the thread policy in the crate docs.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::next;

/// Signals 1..=64 (Linux's `_NSIG` is 65).
const NSIG: usize = 65;

thread_local! {
    /// Signal handlers (wrapped by the trampoline) this thread is inside.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// The program's handler per signal (0: none recorded).
static HANDLERS: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
/// Whether the program asked for `SA_SIGINFO` (reported back as it was).
static SIGINFO: [AtomicBool; NSIG] = [const { AtomicBool::new(false) }; NSIG];

/// Whether this thread is inside a signal handler of the program's (or left
/// one with `longjmp`).
#[inline]
pub fn in_handler() -> bool {
    DEPTH.with(|d| d.get()) != 0
}

/// `C-unwind`: a handler may throw (C++ with `-fnon-call-exceptions`)
/// through the trampoline, which then leaves the depth raised, as
/// `longjmp` does.
type Action = extern "C-unwind" fn(c_int, *mut libc::siginfo_t, *mut c_void);

/// What the kernel calls instead of the program's handler. Installed with
/// `SA_SIGINFO` by `sigaction`; installed by the `signal` family as a
/// one-argument handler, when `info` and `ctx` are whatever the registers
/// held, passed on to a handler that does not read them.
extern "C-unwind" fn trampoline(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let h = usize::try_from(sig)
        .ok()
        .and_then(|s| HANDLERS.get(s))
        .map_or(0, |h| h.load(Ordering::Acquire));
    if h == 0 {
        return;
    }
    DEPTH.with(|d| d.set(d.get().saturating_add(1)));
    // SAFETY: `h` was recorded from a handler the program installed for this
    // signal; calling a one-argument `void (*)(int)` with three integer
    // arguments is harmless in the C calling conventions of the targets
    // this preload builds for (x86_64 and aarch64 Linux: extra arguments in
    // registers are ignored).
    unsafe { std::mem::transmute::<usize, Action>(h)(sig, info, ctx) };
    DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
}

fn tramp() -> usize {
    trampoline as Action as usize
}

/// A handler worth wrapping (not `SIG_DFL`, `SIG_IGN`, `SIG_ERR` or
/// `SIG_HOLD`).
fn real_handler(h: usize) -> bool {
    h != libc::SIG_DFL && h != libc::SIG_IGN && h != libc::SIG_ERR && h != 2
}

fn slot(sig: c_int) -> Option<usize> {
    usize::try_from(sig).ok().filter(|&s| s > 0 && s < NSIG)
}

type SigactionFn =
    unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
type SignalFn = unsafe extern "C" fn(c_int, usize) -> usize;

fn no_function() -> c_int {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    -1
}

/// # Safety
/// `sigaction`'s contract.
unsafe fn forward_sigaction(
    f: &next::Next,
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let p = f.get_blocking();
    if p.is_null() {
        return no_function();
    }
    // SAFETY: p is the C library's sigaction; forwarded contract.
    unsafe { std::mem::transmute::<*mut c_void, SigactionFn>(p)(sig, act, old) }
}

/// `sigaction` with the program's handler behind the trampoline.
///
/// # Safety
/// `sigaction`'s contract.
unsafe fn wrapped_sigaction(
    f: &next::Next,
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let Some(i) = slot(sig) else {
        // SAFETY: forwarded contract (the C library reports EINVAL).
        return unsafe { forward_sigaction(f, sig, act, old) };
    };
    let prev = (
        HANDLERS[i].load(Ordering::Acquire),
        SIGINFO[i].load(Ordering::Relaxed),
    );
    let mut mine;
    let mut act_p = act;
    if !act.is_null() {
        // SAFETY: the caller's act points to a sigaction.
        mine = unsafe { *act };
        let h = mine.sa_sigaction;
        if real_handler(h) {
            SIGINFO[i].store(mine.sa_flags & libc::SA_SIGINFO != 0, Ordering::Relaxed);
            // Recorded before the kernel can call the trampoline for it.
            HANDLERS[i].store(h, Ordering::Release);
            mine.sa_sigaction = tramp();
            mine.sa_flags |= libc::SA_SIGINFO;
            act_p = &mine;
        }
    }
    // SAFETY: forwarded contract; act_p is the caller's or our copy of it.
    let r = unsafe { forward_sigaction(f, sig, act_p, old) };
    if r != 0 {
        if !act.is_null() {
            HANDLERS[i].store(prev.0, Ordering::Release);
            SIGINFO[i].store(prev.1, Ordering::Relaxed);
        }
        return r;
    }
    if !old.is_null() {
        // SAFETY: the C library filled the caller's old action.
        let o = unsafe { &mut *old };
        if o.sa_sigaction == tramp() {
            o.sa_sigaction = prev.0;
            if !prev.1 {
                o.sa_flags &= !libc::SA_SIGINFO;
            }
        }
    }
    r
}

/// # Safety
/// `sigaction`'s contract.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { wrapped_sigaction(&next::SIGACTION, sig, act, old) }
}

/// glibc exports its implementation under this name too.
///
/// # Safety
/// `sigaction`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { wrapped_sigaction(&next::SIGACTION_, sig, act, old) }
}

/// One of the `signal` family: the C library's own function installs the
/// trampoline (keeping its semantics: `SA_RESTART`, `SA_RESETHAND`,
/// `SIG_HOLD`...), the program's handler recorded behind it.
///
/// # Safety
/// The function's contract.
unsafe fn wrapped_signal(f: &next::Next, sig: c_int, h: usize) -> usize {
    let p = f.get_blocking();
    if p.is_null() {
        no_function();
        return libc::SIG_ERR;
    }
    // SAFETY: p is the C library's function of this signature.
    let real = unsafe { std::mem::transmute::<*mut c_void, SignalFn>(p) };
    let Some(i) = slot(sig).filter(|_| real_handler(h)) else {
        // SAFETY: forwarded contract.
        let r = unsafe { real(sig, h) };
        return if r == tramp() {
            slot(sig).map_or(r, |i| HANDLERS[i].load(Ordering::Acquire))
        } else {
            r
        };
    };
    let prev = (
        HANDLERS[i].load(Ordering::Acquire),
        SIGINFO[i].load(Ordering::Relaxed),
    );
    SIGINFO[i].store(false, Ordering::Relaxed);
    HANDLERS[i].store(h, Ordering::Release);
    // SAFETY: forwarded contract, with the trampoline as the handler.
    let r = unsafe { real(sig, tramp()) };
    if r == libc::SIG_ERR {
        HANDLERS[i].store(prev.0, Ordering::Release);
        SIGINFO[i].store(prev.1, Ordering::Relaxed);
        return r;
    }
    if r == tramp() {
        prev.0
    } else {
        r
    }
}

/// # Safety
/// `signal`'s contract.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, h: usize) -> usize {
    // SAFETY: forwarded contract.
    unsafe { wrapped_signal(&next::SIGNAL, sig, h) }
}

/// # Safety
/// `bsd_signal`'s contract.
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: c_int, h: usize) -> usize {
    // SAFETY: forwarded contract.
    unsafe { wrapped_signal(&next::BSD_SIGNAL, sig, h) }
}

/// # Safety
/// `sysv_signal`'s contract.
#[no_mangle]
pub unsafe extern "C" fn sysv_signal(sig: c_int, h: usize) -> usize {
    // SAFETY: forwarded contract.
    unsafe { wrapped_signal(&next::SYSV_SIGNAL, sig, h) }
}

/// What `signal` becomes in programs built with `-std=c99` and no
/// `_GNU_SOURCE`/`_DEFAULT_SOURCE`.
///
/// # Safety
/// `sysv_signal`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __sysv_signal(sig: c_int, h: usize) -> usize {
    // SAFETY: forwarded contract.
    unsafe { wrapped_signal(&next::SYSV_SIGNAL_, sig, h) }
}

/// # Safety
/// `sigset`'s contract.
#[no_mangle]
pub unsafe extern "C" fn sigset(sig: c_int, h: usize) -> usize {
    // SAFETY: forwarded contract.
    unsafe { wrapped_signal(&next::SIGSET, sig, h) }
}
