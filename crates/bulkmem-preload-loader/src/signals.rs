//! Knowing when a copy runs inside a signal handler, so that it never
//! starts (or waits for) helper threads there.
//!
//! `sigaction`, `signal`, `bsd_signal`, `sysv_signal`, `__sysv_signal` and
//! `sigset` are interposed: a handler the program installs is recorded in
//! [`HANDLERS`] and the kernel is given the trampoline instead, which
//! raises this thread's depth ([`crate::abi::PerThread`]) around the call
//! of the program's handler. The copy path reads it (one thread-local
//! load from the static TLS block, which neither allocates nor locks) and
//! opens the engine or starts helpers only when it is zero.
//!
//! The program sees its own handlers: the old action that `sigaction` and
//! `signal` report names the program's handler (and its `SA_SIGINFO`), not
//! the trampoline. A handler left with `longjmp` leaves the depth raised:
//! that thread then copies on its own for good, which is safe, only slower.
//!
//! The trampoline also keeps a large call's promise: before the program's
//! handler runs on a thread whose call has helper threads working, they
//! stop (the engine's `stop_for_handler`); and the handler runs as
//! the program's code, outside bulkmem (its own large copies are ordinary
//! calls).
//!
//! **SIGSEGV and SIGBUS** are bulkmem's once it is initialised
//! ([`take_faults`]): its handler stays in the kernel's hands, so that a
//! fault in a checked routine (on a helper too) is always its own to fix,
//! and a handler the program installs for them afterwards goes behind it
//! (the engine's `fault_chain_to`), trampoline and all, while the program
//! sees its own action as the current one.
//!
//! Not covered: handlers installed with a raw `rt_sigaction` system call
//! (`syscall(SYS_rt_sigaction, ...)`), or by code that calls the C library's
//! internal aliases. A large copy in such a handler is treated as outside
//! one; see the thread policy in the crate docs.

use core::cell::UnsafeCell;
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::sys::{self, Sigaction};
use crate::{engine, next, thread};

/// Signals 1..=64 (Linux's `_NSIG` is 65).
const NSIG: usize = 65;

/// The program's handler per signal (0: none recorded).
static HANDLERS: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];
/// Whether the program asked for `SA_SIGINFO` (reported back as it was).
static SIGINFO: [AtomicBool; NSIG] = [const { AtomicBool::new(false) }; NSIG];

// What the kernel calls instead of the program's handler: assembly, so
// that no Rust frame of this `panic=abort` library is on the stack while
// the program's handler runs (one that throws, or exits the thread, would
// abort in it). Installed with `SA_SIGINFO` by `sigaction`; installed by
// the `signal` family as a one-argument handler, when `info` and `ctx` are
// whatever the registers held, passed on to a handler that does not read
// them (calling a one-argument `void (*)(int)` with three integer
// arguments is harmless in the x86_64 C calling convention). A handler
// left by `longjmp` or an unwind skips `after`: the depth stays raised.
core::arch::global_asm!(
    ".pushsection .text.bulkmem_preload_trampoline,\"ax\",@progbits",
    ".p2align 4",
    ".hidden bulkmem_preload_trampoline",
    ".type bulkmem_preload_trampoline,@function",
    "bulkmem_preload_trampoline:",
    ".cfi_startproc",
    "push rbx",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset rbx, -16",
    "push r12",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset r12, -24",
    "push r13",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset r13, -32",
    "push r14",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset r14, -40",
    "sub rsp, 8",
    ".cfi_adjust_cfa_offset 8",
    "mov ebx, edi",
    "mov r12, rsi",
    "mov r13, rdx",
    "call {before}",
    "test rax, rax",
    "jz 2f",
    "mov r14, rdx",
    "mov edi, ebx",
    "mov rsi, r12",
    "mov rdx, r13",
    "call rax",
    "mov rdi, r14",
    "call {after}",
    "2:",
    "add rsp, 8",
    ".cfi_adjust_cfa_offset -8",
    "pop r14",
    ".cfi_adjust_cfa_offset -8",
    "pop r13",
    ".cfi_adjust_cfa_offset -8",
    "pop r12",
    ".cfi_adjust_cfa_offset -8",
    "pop rbx",
    ".cfi_adjust_cfa_offset -8",
    "ret",
    ".cfi_endproc",
    ".size bulkmem_preload_trampoline, . - bulkmem_preload_trampoline",
    ".popsection",
    before = sym before,
    after = sym after,
);

extern "C" {
    #[link_name = "bulkmem_preload_trampoline"]
    fn trampoline(sig: c_int, info: *mut c_void, ctx: *mut c_void);
}

/// The program's handler to call (0: none) and what to give [`after`].
#[repr(C)]
struct Before {
    handler: usize,
    was_inside: usize,
}

/// Before the program's handler: nothing of a large call on this thread
/// may run on while the handler does, which may never come back; and the
/// handler runs as the program's code, outside bulkmem.
extern "C" fn before(sig: c_int, _info: *mut c_void, ctx: *mut c_void) -> Before {
    let h = usize::try_from(sig)
        .ok()
        .and_then(|s| HANDLERS.get(s))
        .map_or(0, |h| h.load(Ordering::Acquire));
    if h == 0 {
        return Before {
            handler: 0,
            was_inside: 0,
        };
    }
    if let Some(e) = engine::loaded() {
        (e.stop_for_handler)(ctx);
    }
    let t = thread::this();
    let was = t.inside.replace(false);
    t.depth.set(t.depth.get().saturating_add(1));
    Before {
        handler: h,
        was_inside: usize::from(was),
    }
}

/// After a handler that returned.
extern "C" fn after(was_inside: usize) {
    let t = thread::this();
    t.depth.set(t.depth.get().saturating_sub(1));
    t.inside.set(was_inside != 0);
}

fn tramp() -> usize {
    trampoline as *const () as usize
}

/// A handler worth wrapping (not `SIG_DFL`, `SIG_IGN`, `SIG_ERR` or
/// `SIG_HOLD`).
fn real_handler(h: usize) -> bool {
    h != sys::SIG_DFL && h != sys::SIG_IGN && h != sys::SIG_ERR && h != sys::SIG_HOLD
}

fn slot(sig: c_int) -> Option<usize> {
    usize::try_from(sig).ok().filter(|&s| s > 0 && s < NSIG)
}

type SigactionFn = unsafe extern "C" fn(c_int, *const Sigaction, *mut Sigaction) -> c_int;
type SignalFn = unsafe extern "C" fn(c_int, usize) -> usize;

fn no_function() -> c_int {
    sys::set_errno(sys::ENOSYS);
    -1
}

/// # Safety
/// `sigaction`'s contract.
unsafe fn forward_sigaction(
    f: &next::Next,
    sig: c_int,
    act: *const Sigaction,
    old: *mut Sigaction,
) -> c_int {
    next::resolve_signals();
    let p = f.get_blocking();
    if p.is_null() {
        return no_function();
    }
    // SAFETY: p is the C library's sigaction; forwarded contract.
    unsafe { core::mem::transmute::<*mut c_void, SigactionFn>(p)(sig, act, old) }
}

/// `sigaction` with the program's handler behind the trampoline.
///
/// # Safety
/// `sigaction`'s contract.
unsafe fn wrapped_sigaction(
    f: &next::Next,
    sig: c_int,
    act: *const Sigaction,
    old: *mut Sigaction,
) -> c_int {
    let Some(i) = slot(sig).filter(|_| !thread::inside()) else {
        // SAFETY: forwarded contract (the C library reports EINVAL; or
        // bulkmem's own install and queries, which see the real thing).
        return unsafe { forward_sigaction(f, sig, act, old) };
    };
    if let Some(k) = fault_slot(sig) {
        if FAULTS_OURS.load(Ordering::Acquire) {
            // SAFETY: the caller's act and old, as sigaction takes them.
            return unsafe { program_fault_action(k, sig, act.as_ref(), old) };
        }
    }
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
            SIGINFO[i].store(mine.sa_flags & sys::SA_SIGINFO != 0, Ordering::Relaxed);
            // Recorded before the kernel can call the trampoline for it.
            HANDLERS[i].store(h, Ordering::Release);
            mine.sa_sigaction = tramp();
            mine.sa_flags |= sys::SA_SIGINFO;
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
                o.sa_flags &= !sys::SA_SIGINFO;
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
    act: *const Sigaction,
    old: *mut Sigaction,
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
    act: *const Sigaction,
    old: *mut Sigaction,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { wrapped_sigaction(&next::SIGACTION_, sig, act, old) }
}

/// How a function of the `signal` family installs a handler, as glibc's
/// does with `sigaction` (for SIGSEGV and SIGBUS, which go behind
/// bulkmem's handler rather than to the kernel).
#[derive(Clone, Copy)]
enum Flavour {
    /// `signal`, `bsd_signal`: the signal blocked in its handler, calls
    /// restarted.
    Bsd,
    /// `sysv_signal`: one delivery, then the default; the signal not
    /// blocked in its handler.
    SysV,
    /// `sigset`: nothing blocked, no flags; the signal unblocked.
    Sigset,
}

/// One of the `signal` family: the C library's own function installs the
/// trampoline (keeping its semantics: `SA_RESTART`, `SA_RESETHAND`,
/// `SIG_HOLD`...), the program's handler recorded behind it.
///
/// # Safety
/// The function's contract.
unsafe fn wrapped_signal(f: &next::Next, sig: c_int, h: usize, flavour: Flavour) -> usize {
    next::resolve_signals();
    let p = f.get_blocking();
    if p.is_null() {
        no_function();
        return sys::SIG_ERR;
    }
    // SAFETY: p is the C library's function of this signature.
    let real = unsafe { core::mem::transmute::<*mut c_void, SignalFn>(p) };
    if let (Some(k), false) = (fault_slot(sig), thread::inside()) {
        if FAULTS_OURS.load(Ordering::Acquire) && h != sys::SIG_HOLD {
            return program_fault_signal(k, sig, h, flavour);
        }
    }
    let Some(i) = slot(sig).filter(|_| real_handler(h) && !thread::inside()) else {
        // SAFETY: forwarded contract.
        let r = unsafe { real(sig, h) };
        return if r == tramp() {
            slot(sig).map_or(r, |i| HANDLERS[i].load(Ordering::Acquire))
        } else if fault_slot(sig).is_some() && FAULTS_OURS.load(Ordering::Acquire) {
            // `sigset(SIGSEGV, SIG_HOLD)`: what the program had is what
            // it sees, not bulkmem's handler.
            fault_slot(sig).map_or(r, |k| view(k).sa_sigaction)
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
    if r == sys::SIG_ERR {
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
    unsafe { wrapped_signal(&next::SIGNAL, sig, h, Flavour::Bsd) }
}

/// # Safety
/// `bsd_signal`'s contract.
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: c_int, h: usize) -> usize {
    // SAFETY: forwarded contract.
    unsafe { wrapped_signal(&next::BSD_SIGNAL, sig, h, Flavour::Bsd) }
}

/// # Safety
/// `sysv_signal`'s contract.
#[no_mangle]
pub unsafe extern "C" fn sysv_signal(sig: c_int, h: usize) -> usize {
    // SAFETY: forwarded contract.
    unsafe { wrapped_signal(&next::SYSV_SIGNAL, sig, h, Flavour::SysV) }
}

/// What `signal` becomes in programs built with `-std=c99` and no
/// `_GNU_SOURCE`/`_DEFAULT_SOURCE`.
///
/// # Safety
/// `sysv_signal`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __sysv_signal(sig: c_int, h: usize) -> usize {
    // SAFETY: forwarded contract.
    unsafe { wrapped_signal(&next::SYSV_SIGNAL_, sig, h, Flavour::SysV) }
}

/// # Safety
/// `sigset`'s contract.
#[no_mangle]
pub unsafe extern "C" fn sigset(sig: c_int, h: usize) -> usize {
    // SAFETY: forwarded contract.
    unsafe { wrapped_signal(&next::SIGSET, sig, h, Flavour::Sigset) }
}

// ---- SIGSEGV and SIGBUS, behind bulkmem's handler -------------------------

/// Whether bulkmem's fault handler has been put in front ([`take_faults`]).
static FAULTS_OURS: AtomicBool = AtomicBool::new(false);

/// Per fault signal (SIGSEGV, SIGBUS): the action the program installed
/// last, as it sees it (its handler, not the trampoline), once bulkmem's
/// handler is in front. Read and written under [`ViewLock`].
struct Views([UnsafeCell<Sigaction>; 2]);

// SAFETY: every access is under ViewLock.
unsafe impl Sync for Views {}

static VIEWS: Views = Views([
    UnsafeCell::new(Sigaction::EMPTY),
    UnsafeCell::new(Sigaction::EMPTY),
]);
static VIEW_LOCK: AtomicBool = AtomicBool::new(false);

/// A spin lock taken with every signal blocked: a handler that interrupts
/// its holder and calls `sigaction` cannot deadlock on it. The masks are
/// set with the raw system call, so that restoring one keeps a blocked
/// SIGCANCEL blocked (see `cancel`).
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
        ViewLock(old)
    }
}

impl Drop for ViewLock {
    fn drop(&mut self) {
        VIEW_LOCK.store(false, Ordering::Release);
        sys::sigprocmask_raw(sys::SIG_SETMASK, self.0);
    }
}

fn fault_slot(sig: c_int) -> Option<usize> {
    match sig {
        sys::SIGSEGV => Some(0),
        sys::SIGBUS => Some(1),
        _ => None,
    }
}

/// The program's view of fault signal `k`.
fn view(k: usize) -> Sigaction {
    let _l = ViewLock::take();
    // SAFETY: under the lock.
    unsafe { *VIEWS.0[k].get() }
}

/// What the program sees of the kernel's action `a` for `sig`: its own
/// handler where the trampoline stands for it.
fn as_program_sees(sig: c_int, mut a: Sigaction) -> Sigaction {
    if let (Some(i), true) = (slot(sig), a.sa_sigaction == tramp()) {
        a.sa_sigaction = HANDLERS[i].load(Ordering::Acquire);
        if !SIGINFO[i].load(Ordering::Relaxed) {
            a.sa_flags &= !sys::SA_SIGINFO;
        }
    }
    a
}

/// Puts bulkmem's fault handler in front of SIGSEGV and SIGBUS, for good,
/// remembering what the program had installed. Called once, by the
/// engine's initialisation, as bulkmem's own code (its `sigaction` calls
/// reach the C library).
pub extern "C" fn take_faults() {
    let Some(e) = engine::loaded() else {
        return;
    };
    let _l = ViewLock::take();
    for (k, sig) in [(0, sys::SIGSEGV), (1, sys::SIGBUS)] {
        let mut cur = Sigaction::EMPTY;
        // SAFETY: a query into our own buffer.
        let r = unsafe { forward_sigaction(&next::SIGACTION, sig, core::ptr::null(), &mut cur) };
        if r == 0 {
            // SAFETY: under the lock.
            unsafe { *VIEWS.0[k].get() = as_program_sees(sig, cur) };
        }
    }
    (e.fault_install)();
    FAULTS_OURS.store(true, Ordering::Release);
}

/// Whether bulkmem's handler is (still) the kernel's for SIGSEGV and
/// SIGBUS: not when a handler installed with a raw system call displaced
/// it. Called as bulkmem's own code.
pub extern "C" fn faults_ours() -> bool {
    FAULTS_OURS.load(Ordering::Acquire)
        && engine::loaded().is_some_and(|e| (e.fault_is_installed)())
}

/// `sigaction` for SIGSEGV/SIGBUS once they are bulkmem's: the program's
/// action goes behind bulkmem's handler (trampoline and all), and the
/// program sees its own.
///
/// # Safety
/// `old` null or writable.
unsafe fn program_fault_action(
    k: usize,
    sig: c_int,
    act: Option<&Sigaction>,
    old: *mut Sigaction,
) -> c_int {
    let _l = ViewLock::take();
    // SAFETY: under the lock.
    let slot_view = unsafe { &mut *VIEWS.0[k].get() };
    if !old.is_null() {
        // SAFETY: the caller's buffer.
        unsafe { old.write(*slot_view) };
    }
    let Some(a) = act else {
        return 0;
    };
    let mut behind = *a;
    if let (Some(i), true) = (slot(sig), real_handler(a.sa_sigaction)) {
        SIGINFO[i].store(a.sa_flags & sys::SA_SIGINFO != 0, Ordering::Relaxed);
        // Recorded before bulkmem can chain to the trampoline for it.
        HANDLERS[i].store(a.sa_sigaction, Ordering::Release);
        behind.sa_sigaction = tramp();
        behind.sa_flags |= sys::SA_SIGINFO;
    }
    let Some(e) = engine::loaded() else {
        sys::set_errno(sys::EINVAL);
        return -1;
    };
    // As bulkmem's own code: the engine's calls of `sigaction` reach the
    // C library.
    let t = thread::this();
    let was = t.inside.replace(true);
    // SAFETY: a valid action, which the engine reads as `libc::sigaction`
    // (the same layout: checked there).
    let r = unsafe { (e.fault_chain_to)(sig, (&behind as *const Sigaction).cast()) };
    t.inside.set(was);
    if r != 0 {
        sys::set_errno(sys::EINVAL);
        return -1;
    }
    *slot_view = *a;
    0
}

/// The `signal` family for SIGSEGV/SIGBUS once they are bulkmem's: the
/// action glibc's function would install, behind bulkmem's handler.
fn program_fault_signal(k: usize, sig: c_int, h: usize, flavour: Flavour) -> usize {
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
            Flavour::Sigset => {
                let mut one = Sigaction::EMPTY.sa_mask;
                sys::sigaddset(&mut one, sig);
                sys::pthread_sigmask(sys::SIG_UNBLOCK, &one, core::ptr::null_mut());
            }
        }
    }
    let mut old = Sigaction::EMPTY;
    // SAFETY: our own action and buffer.
    match unsafe { program_fault_action(k, sig, Some(&a), &mut old) } {
        0 => old.sa_sigaction,
        _ => sys::SIG_ERR,
    }
}
