//! SIGSEGV and SIGBUS: the program's disposition, in the kernel as the
//! program set it, with bulkmem's checked routines served first.
//!
//! The loader keeps the program's action for each (its *view*: what its
//! `sigaction` reports) and gives the kernel:
//! * for a handler of the program's, the trampoline, with the handler's
//!   flags and mask but `SA_RESETHAND`: the trampoline asks the engine
//!   first whether the fault is a checked routine's (then it resumes at the
//!   routine's fixup), and otherwise enters the program's handler, after
//!   making the action `SIG_DFL` itself where the program asked for
//!   `SA_RESETHAND` (a checked routine's fault must not use up the
//!   program's one delivery);
//! * for `SIG_DFL` and `SIG_IGN`, exactly that. A fault in a checked
//!   routine then kills the process, as the C library's copy of the same
//!   bytes would: no handler of bulkmem's is ever seen in
//!   `/proc/PID/status`, across `exec` or by `posix_spawn` where the
//!   program has none.
//!
//! A default action the trampoline has to perform (the program's action
//! became `SIG_DFL` while a signal was on its way) is made with the raw
//! `rt_sigaction` system call, so no `sigaction` of anyone's can put a
//! handler back in front of it: a fault then re-executes and kills, a sent
//! signal is sent again and kills once the trampoline returns.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::{enter, forward_sigaction, real_handler, tramp, Flavour, HANDLERS};
use crate::{next, opened};
use bulkmem_preload_abi::sys::{self, KernelSigaction, Sigaction};

/// The index of SIGSEGV (0) and SIGBUS (1) in the views.
pub fn slot(sig: c_int) -> Option<usize> {
    match sig {
        sys::SIGSEGV => Some(0),
        sys::SIGBUS => Some(1),
        _ => None,
    }
}

const SIGNALS: [c_int; 2] = [sys::SIGSEGV, sys::SIGBUS];

/// Per fault signal: the action the program set last, as it sees it.
/// Read and written under [`ViewLock`], once [`VIEWS_READ`] (they start as
/// what the kernel had when the preload first needed them).
struct Views([UnsafeCell<Sigaction>; 2]);

// SAFETY: every access is under ViewLock.
unsafe impl Sync for Views {}

static VIEWS: Views = Views([
    UnsafeCell::new(Sigaction::EMPTY),
    UnsafeCell::new(Sigaction::EMPTY),
]);
static VIEWS_READ: AtomicBool = AtomicBool::new(false);
static VIEW_LOCK: AtomicBool = AtomicBool::new(false);

/// Per fault signal, the program's handler when a fault may enter it
/// without the lock (a handler without `SA_RESETHAND`), else 0: published
/// by every [`ViewLock`] as it is let go. The lock costs two
/// `rt_sigprocmask` calls, and a program that takes a fault per page on
/// purpose (Boehm GC's incremental mode, a write barrier of protected
/// pages) paid them on every one: 1.3x its time.
static ENTER: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// A spin lock taken with every signal blocked: a handler that interrupts
/// its holder and calls `sigaction` cannot deadlock on it, and the
/// trampoline may take it. The masks are set with the raw system call, so
/// that restoring one keeps a blocked SIGCANCEL blocked.
struct ViewLock(u64);

impl ViewLock {
    fn take() -> ViewLock {
        let old = sys::sigprocmask_raw(sys::SIG_BLOCK, !0);
        while VIEW_LOCK
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        let l = ViewLock(old);
        if !VIEWS_READ.load(Ordering::Relaxed) {
            for (k, sig) in SIGNALS.into_iter().enumerate() {
                if let Some(cur) = kernel_action_of(sig) {
                    // SAFETY: under the lock.
                    unsafe { *VIEWS.0[k].get() = cur };
                }
            }
            VIEWS_READ.store(true, Ordering::Relaxed);
        }
        l
    }

    /// Signal `k`'s view.
    fn view(&mut self, k: usize) -> &mut Sigaction {
        // SAFETY: under the lock, which `self` holds for its lifetime.
        unsafe { &mut *VIEWS.0[k].get() }
    }
}

/// The kernel's action for `sig`, asked with the raw system call, as a
/// C library `sigaction`: never through the next `sigaction` in the chain,
/// which may answer something else. libjsig, for one, answers a query
/// about a signal the JVM owns with the action saved before the JVM's
/// (`SIG_DFL`), and taking that for the program's view made the first
/// caught fault after a large copy kill the JVM.
fn kernel_action_of(sig: c_int) -> Option<Sigaction> {
    let mut k = KernelSigaction::DEFAULT;
    if sys::rt_sigaction(sig, None, Some(&mut k)) != 0 {
        return None;
    }
    let mut a = Sigaction::EMPTY;
    a.sa_sigaction = k.handler;
    a.sa_flags = k.flags as u32 as c_int;
    a.sa_restorer = k.restorer;
    a.sa_mask.bits[0] = k.mask;
    Some(a)
}

/// In a child of `fork`: the lock is free. The thread that may have held
/// it in the parent (for a few system calls, with every signal blocked, so
/// never the forking thread itself) does not exist in the child.
pub extern "C" fn unlock_in_child() {
    VIEW_LOCK.store(false, Ordering::Release);
}

impl Drop for ViewLock {
    fn drop(&mut self) {
        for (k, enter) in ENTER.iter().enumerate() {
            let v = *self.view(k);
            let direct = real_handler(v.sa_sigaction) && v.sa_flags & sys::SA_RESETHAND == 0;
            enter.store(if direct { v.sa_sigaction } else { 0 }, Ordering::Release);
        }
        VIEW_LOCK.store(false, Ordering::Release);
        sys::sigprocmask_raw(sys::SIG_SETMASK, self.0);
    }
}

/// The handler of the program's view of signal `k`.
pub fn view_handler(k: usize) -> usize {
    ViewLock::take().view(k).sa_sigaction
}

/// What the kernel is given for the program's action `a`: for a handler,
/// the trampoline, without `SA_RESETHAND` (performed by the trampoline)
/// and with `SA_SIGINFO`, whatever the program asked: without it the
/// kernel leaves the siginfo unwritten, and a checked routine's fault
/// could not be told by its code and address (the program sees its own
/// flags in its view, and its handler gets what it expects).
fn kernel_action(a: &Sigaction) -> Sigaction {
    let mut k = *a;
    if real_handler(a.sa_sigaction) {
        k.sa_sigaction = tramp();
        k.sa_flags &= !sys::SA_RESETHAND;
        k.sa_flags |= sys::SA_SIGINFO;
    }
    k
}

/// The flags the trampoline takes from the program's: what the view shows
/// as the program set it, whatever the kernel keeps.
const OWN_FLAGS: c_int = sys::SA_RESETHAND | sys::SA_SIGINFO;

/// `sigaction` for SIGSEGV/SIGBUS: the program's action becomes its view
/// and goes to the kernel as [`kernel_action`] makes it.
///
/// # Safety
/// `act` null or readable, `old` null or writable (they may be the same
/// struct, as the C library allows).
pub unsafe fn program_action(
    f: &next::Next,
    k: usize,
    sig: c_int,
    act: *const Sigaction,
    old: *mut Sigaction,
) -> c_int {
    // Read before `old` is written: it may be the same struct.
    // SAFETY: the caller's contract.
    let act = unsafe { act.as_ref() }.copied();
    // The C library's functions are resolved before the lock is taken:
    // resolving takes the dynamic loader's lock, which a thread inside
    // `dlopen` (running a constructor that calls sigaction) holds.
    next::resolve_signals();
    let mut l = ViewLock::take();
    let view = l.view(k);
    let Some(a) = act.as_ref() else {
        // SAFETY: the caller's buffer or null.
        unsafe { report(old, view) };
        return 0;
    };
    if real_handler(a.sa_sigaction) {
        // Recorded before the kernel can call the trampoline for it.
        HANDLERS[sig as usize].store(a.sa_sigaction, Ordering::Release);
    }
    let kernel = kernel_action(a);
    // SAFETY: a valid action; the C library checks the signal and flags as
    // it would for the program.
    let r = unsafe { forward_sigaction(f, sig, &kernel, core::ptr::null_mut()) };
    if r != 0 {
        return r;
    }
    // SAFETY: the caller's buffer or null.
    unsafe { report(old, view) };
    // The view is what the kernel keeps (the C library's restorer and its
    // flag, the mask without SIGKILL and SIGSTOP), with the program's
    // handler, SA_RESETHAND and SA_SIGINFO.
    match kernel_action_of(sig) {
        // What the kernel took, unless an interposer after us kept the
        // trampoline to itself (libjsig saves, rather than installs, an
        // action for a signal the JVM owns): then the program's own.
        Some(mut kept) if kept.sa_sigaction == kernel.sa_sigaction => {
            kept.sa_sigaction = a.sa_sigaction;
            kept.sa_flags = (kept.sa_flags & !OWN_FLAGS) | (a.sa_flags & OWN_FLAGS);
            *view = kept;
        }
        _ => *view = *a,
    }
    0
}

/// Writes `view` into the program's `old` as the C library writes the
/// kernel's action there: the handler, flags, restorer and the kernel's
/// 64 signals of the mask, the rest of the caller's set untouched.
///
/// # Safety
/// `old` null or writable.
unsafe fn report(old: *mut Sigaction, view: &Sigaction) {
    // SAFETY: the caller's contract.
    if let Some(o) = unsafe { old.as_mut() } {
        o.sa_sigaction = view.sa_sigaction;
        o.sa_mask.bits[0] = view.sa_mask.bits[0];
        o.sa_flags = view.sa_flags;
        o.sa_restorer = view.sa_restorer;
    }
}

/// The `signal` family for SIGSEGV/SIGBUS: the action glibc's function
/// would install, through [`program_action`].
pub(super) fn program_signal(k: usize, sig: c_int, h: usize, flavour: Flavour) -> usize {
    let mut a = Sigaction::EMPTY;
    a.sa_sigaction = h;
    // SAFETY: the set is ours to fill.
    unsafe {
        sys::sigemptyset(&mut a.sa_mask);
        match flavour {
            Flavour::Bsd => {
                sys::sigaddset(&mut a.sa_mask, sig);
                a.sa_flags = sys::SA_RESTART;
            }
            Flavour::SysV => a.sa_flags = sys::SA_RESETHAND | sys::SA_NODEFER,
            Flavour::Sigset => {}
        }
    }
    let mut old = Sigaction::EMPTY;
    // SAFETY: our own action and buffer.
    if unsafe { program_action(&next::SIGACTION, k, sig, &a, &mut old) } != 0 {
        return sys::SIG_ERR;
    }
    if let Flavour::Sigset = flavour {
        // As glibc's sigset: the signal unblocked, and SIG_HOLD reported
        // where it was blocked.
        let mut one = Sigaction::EMPTY.sa_mask;
        let mut was = Sigaction::EMPTY.sa_mask;
        // SAFETY: sets of our own.
        unsafe {
            sys::sigaddset(&mut one, sig);
            sys::pthread_sigmask(sys::SIG_UNBLOCK, &one, &mut was);
        }
        if was.bits[0] & (1 << (sig - 1)) != 0 {
            return sys::SIG_HOLD;
        }
    }
    old.sa_sigaction
}

/// The trampoline's SIGSEGV or SIGBUS: a checked routine's fault resumes
/// at its fixup; any other is the program's, as its view says. Returns the
/// handler to enter, or 0. Async-signal-safe.
pub fn on_fault(k: usize, sig: c_int, info: *mut c_void, ctx: *mut c_void, frame: usize) -> usize {
    // si_code, after si_signo and si_errno: > 0 for a fault the kernel
    // raised, <= 0 for a signal sent by kill, tgkill or sigqueue.
    let code = if info.is_null() {
        0
    } else {
        // SAFETY: the kernel's siginfo for this signal.
        unsafe { info.cast::<c_int>().add(2).read() }
    };
    if let Some(e) = opened::loaded() {
        // SAFETY: the kernel's siginfo and ucontext for this signal.
        if unsafe { (e.fault_resume)(sig, info, ctx) } {
            return 0;
        }
        // A helper thread never runs a handler of the program's: a sent
        // signal that landed on one (helpers leave SIGSEGV and SIGBUS
        // unblocked for their checked routines) goes to the thread whose
        // call it works for; a fault that is not a checked routine's is a
        // bug of bulkmem's, and kills as an unhandled fault does.
        let owner = (e.helper_owner)(frame);
        if owner != 0 {
            if code <= 0 {
                // SAFETY: raw system calls with no memory arguments.
                unsafe {
                    let pid = sys::call(sys::SYS_GETPID, &[]);
                    sys::call(
                        sys::SYS_TGKILL,
                        &[pid as usize, owner as usize, sig as usize],
                    );
                }
            } else {
                sys::rt_sigaction(sig, Some(&KernelSigaction::DEFAULT), None);
            }
            return 0;
        }
    }
    // A handler the kernel would simply run: no lock. One that a
    // concurrent `sigaction` is replacing may run once more, as a signal
    // the kernel is already delivering would.
    let h = ENTER[k].load(Ordering::Acquire);
    if h != 0 {
        enter(ctx, frame);
        return h;
    }
    let mut l = ViewLock::take();
    let view = l.view(k);
    let h = view.sa_sigaction;
    if real_handler(h) {
        if view.sa_flags & sys::SA_RESETHAND != 0 {
            // What the kernel does for SA_RESETHAND: the handler becomes
            // SIG_DFL, flags, mask and restorer stay.
            view.sa_sigaction = sys::SIG_DFL;
            let mut cur = KernelSigaction::DEFAULT;
            if sys::rt_sigaction(sig, None, Some(&mut cur)) == 0 {
                cur.handler = sys::SIG_DFL;
                cur.flags |= sys::SA_RESETHAND as u32 as u64;
                sys::rt_sigaction(sig, Some(&cur), None);
            }
        }
        drop(l);
        enter(ctx, frame);
        return h;
    }
    // SIG_DFL, or SIG_IGN: the kernel had the trampoline when the signal
    // was sent, and has the program's action by now, or will in a moment.
    if h == sys::SIG_IGN && code <= 0 {
        return 0;
    }
    sys::rt_sigaction(sig, Some(&KernelSigaction::DEFAULT), None);
    drop(l);
    if code <= 0 {
        // Sent: again, to be delivered (and kill) once the trampoline
        // returns and the signal is unblocked. A fault re-executes.
        // SAFETY: raw system calls with no memory arguments.
        unsafe {
            let pid = sys::call(sys::SYS_GETPID, &[]);
            let tid = sys::call(sys::SYS_GETTID, &[]);
            sys::call(sys::SYS_TGKILL, &[pid as usize, tid as usize, sig as usize]);
        }
    }
    0
}

/// What the kernel should have for fault signal `k`: the trampoline for a
/// program's handler, else the program's `SIG_DFL` or `SIG_IGN`.
fn expected(view: &Sigaction) -> usize {
    if real_handler(view.sa_sigaction) {
        tramp()
    } else {
        view.sa_sigaction
    }
}

/// Puts the trampoline in front of a handler the kernel has for SIGSEGV or
/// SIGBUS that the loader did not install (a raw system call's, or one
/// installed before the preload was loaded), taking that action as the
/// program's. Called by the engine's one-time set-up.
pub extern "C" fn take_faults() {
    next::resolve_signals();
    let mut l = ViewLock::take();
    for (k, sig) in SIGNALS.into_iter().enumerate() {
        let view = l.view(k);
        // The kernel's own answer: an interposer's could be stale.
        let Some(cur) = kernel_action_of(sig) else {
            continue;
        };
        if cur.sa_sigaction == expected(view) || cur.sa_sigaction == tramp() {
            continue;
        }
        if real_handler(cur.sa_sigaction) {
            HANDLERS[sig as usize].store(cur.sa_sigaction, Ordering::Release);
            let kernel = kernel_action(&cur);
            // SAFETY: a valid action.
            unsafe { forward_sigaction(&next::SIGACTION, sig, &kernel, core::ptr::null_mut()) };
        }
        *view = cur;
    }
}

/// Whether the kernel's actions for SIGSEGV and SIGBUS are those the loader
/// keeps for the program (not displaced by a raw system call): then a
/// fault on a helper thread never reaches a handler of the program's.
/// Called as bulkmem's own code.
pub extern "C" fn faults_ours() -> bool {
    let want = {
        let mut l = ViewLock::take();
        [expected(l.view(0)), expected(l.view(1))]
    };
    SIGNALS
        .into_iter()
        .zip(want)
        .all(|(sig, w)| sys::kernel_handler(sig) == w)
}
