//! Knowing when a copy runs inside a signal handler, so that it never
//! starts (or waits for) helper threads there.
//!
//! `sigaction`, `signal`, `bsd_signal`, `sysv_signal`, `__sysv_signal` and
//! `sigset` are interposed: a handler the program installs is recorded in
//! [`HANDLERS`] and the kernel is given [`trampoline`] instead, which raises
//! this thread's [`DEPTH`] around the call of the program's handler. The copy
//! path reads `DEPTH` (one thread-local load: the preload is in the initial
//! TLS block, so this neither allocates nor locks) and starts helpers only
//! when it is zero.
//!
//! The program sees its own handlers: the old action that `sigaction` and
//! `signal` report names the program's handler (and its `SA_SIGINFO`), not
//! the trampoline. A handler left with `longjmp` leaves the depth raised:
//! that thread then copies on its own for good, which is safe, only slower.
//!
//! The trampoline also keeps a large call's promise: before the program's
//! handler runs on a thread whose call has helper threads working, they
//! stop ([`crate::helpers::stop_for_handler`]); and the handler runs as
//! the program's code, outside bulkmem (its own large copies are ordinary
//! calls).
//!
//! **SIGSEGV and SIGBUS** are bulkmem's once it is initialised
//! ([`take_faults`]): its handler stays in the kernel's hands, so that a
//! fault in a checked routine (on a helper too) is always its own to fix,
//! and a handler the program installs for them afterwards goes behind it
//! (`bulkmem::fault::chain_to`), trampoline and all, while the program
//! sees its own action as the current one.
//!
//! Not covered: handlers installed with a raw `rt_sigaction` system call
//! (`syscall(SYS_rt_sigaction, ...)`), or by code that calls the C library's
//! internal aliases. A large copy in such a handler is treated as outside
//! one; see the thread policy in the crate docs.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::{accel, helpers, next};

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
    // Nothing of a large call on this thread may run on while the handler
    // does, which may never come back.
    helpers::stop_for_handler(ctx);
    let was = accel::leave_for_handler();
    DEPTH.with(|d| d.set(d.get().saturating_add(1)));
    // SAFETY: `h` was recorded from a handler the program installed for this
    // signal; calling a one-argument `void (*)(int)` with three integer
    // arguments is harmless in the C calling conventions of the targets
    // this preload builds for (x86_64 and aarch64 Linux: extra arguments in
    // registers are ignored).
    unsafe { std::mem::transmute::<usize, Action>(h)(sig, info, ctx) };
    DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    accel::back_from_handler(was);
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
    let Some(i) = slot(sig).filter(|_| !accel::inside()) else {
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
    let p = f.get_blocking();
    if p.is_null() {
        no_function();
        return libc::SIG_ERR;
    }
    // SAFETY: p is the C library's function of this signature.
    let real = unsafe { std::mem::transmute::<*mut c_void, SignalFn>(p) };
    if let (Some(k), false) = (fault_slot(sig), accel::inside()) {
        if FAULTS_OURS.load(Ordering::Acquire) && h != 2 {
            return program_fault_signal(k, sig, h, flavour);
        }
    }
    let Some(i) = slot(sig).filter(|_| real_handler(h) && !accel::inside()) else {
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
struct Views([std::cell::UnsafeCell<std::mem::MaybeUninit<libc::sigaction>>; 2]);

// SAFETY: every access is under ViewLock.
unsafe impl Sync for Views {}

static VIEWS: Views = Views([
    std::cell::UnsafeCell::new(std::mem::MaybeUninit::zeroed()),
    std::cell::UnsafeCell::new(std::mem::MaybeUninit::zeroed()),
]);
static VIEW_LOCK: AtomicBool = AtomicBool::new(false);

/// A spin lock taken with every signal blocked: a handler that interrupts
/// its holder and calls `sigaction` cannot deadlock on it. The masks are
/// set with the raw system call, so that restoring one keeps a blocked
/// SIGCANCEL blocked (see `cancel`).
struct ViewLock(u64);

impl ViewLock {
    fn take() -> ViewLock {
        let old = crate::cancel::block_raw(!0);
        while VIEW_LOCK
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        ViewLock(old)
    }
}

impl Drop for ViewLock {
    fn drop(&mut self) {
        VIEW_LOCK.store(false, Ordering::Release);
        crate::cancel::set_raw(self.0);
    }
}

fn fault_slot(sig: c_int) -> Option<usize> {
    match sig {
        libc::SIGSEGV => Some(0),
        libc::SIGBUS => Some(1),
        _ => None,
    }
}

/// The program's view of fault signal `k`.
fn view(k: usize) -> libc::sigaction {
    let _l = ViewLock::take();
    // SAFETY: under the lock; zeroed is a valid sigaction (SIG_DFL).
    unsafe { (*VIEWS.0[k].get()).assume_init() }
}

/// What the program sees of the kernel's action `a` for `sig`: its own
/// handler where the trampoline stands for it.
fn as_program_sees(sig: c_int, mut a: libc::sigaction) -> libc::sigaction {
    if let (Some(i), true) = (slot(sig), a.sa_sigaction == tramp()) {
        a.sa_sigaction = HANDLERS[i].load(Ordering::Acquire);
        if !SIGINFO[i].load(Ordering::Relaxed) {
            a.sa_flags &= !libc::SA_SIGINFO;
        }
    }
    a
}

/// Puts bulkmem's fault handler in front of SIGSEGV and SIGBUS, for good,
/// remembering what the program had installed. Called once, as bulkmem's
/// own code (its `sigaction` calls reach the C library).
pub fn take_faults() {
    let _l = ViewLock::take();
    for (k, sig) in [(0, libc::SIGSEGV), (1, libc::SIGBUS)] {
        let mut cur = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
        // SAFETY: a query into our own buffer.
        let r =
            unsafe { forward_sigaction(&next::SIGACTION, sig, std::ptr::null(), cur.as_mut_ptr()) };
        if r == 0 {
            // SAFETY: under the lock; filled by the query.
            unsafe { (*VIEWS.0[k].get()).write(as_program_sees(sig, cur.assume_init())) };
        }
    }
    bulkmem::fault::install();
    FAULTS_OURS.store(true, Ordering::Release);
}

/// Whether bulkmem's handler is (still) the kernel's for SIGSEGV and
/// SIGBUS: not when a handler installed with a raw system call displaced
/// it. Called as bulkmem's own code.
pub fn faults_ours() -> bool {
    FAULTS_OURS.load(Ordering::Acquire) && bulkmem::fault::is_installed()
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
    act: Option<&libc::sigaction>,
    old: *mut libc::sigaction,
) -> c_int {
    let _l = ViewLock::take();
    // SAFETY: under the lock.
    let slot_view = unsafe { &mut *VIEWS.0[k].get() };
    if !old.is_null() {
        // SAFETY: the caller's buffer; the view is initialised (zeroed or
        // written).
        unsafe { old.write(slot_view.assume_init()) };
    }
    let Some(a) = act else {
        return 0;
    };
    let mut behind = *a;
    if let (Some(i), true) = (slot(sig), real_handler(a.sa_sigaction)) {
        SIGINFO[i].store(a.sa_flags & libc::SA_SIGINFO != 0, Ordering::Relaxed);
        // Recorded before bulkmem can chain to the trampoline for it.
        HANDLERS[i].store(a.sa_sigaction, Ordering::Release);
        behind.sa_sigaction = tramp();
        behind.sa_flags |= libc::SA_SIGINFO;
    }
    if accel::as_bulkmem(|| bulkmem::fault::chain_to(sig, &behind)).is_err() {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() = libc::EINVAL };
        return -1;
    }
    slot_view.write(*a);
    0
}

/// The `signal` family for SIGSEGV/SIGBUS once they are bulkmem's: the
/// action glibc's function would install, behind bulkmem's handler.
fn program_fault_signal(k: usize, sig: c_int, h: usize, flavour: Flavour) -> usize {
    // SAFETY: a zeroed sigaction is a valid empty one.
    let mut a: libc::sigaction = unsafe { std::mem::zeroed() };
    a.sa_sigaction = h;
    // SAFETY: the set is ours to fill.
    unsafe {
        libc::sigemptyset(&mut a.sa_mask);
        match flavour {
            Flavour::Bsd => {
                libc::sigaddset(&mut a.sa_mask, sig);
                a.sa_flags = libc::SA_RESTART;
            }
            Flavour::SysV => a.sa_flags = libc::SA_RESETHAND | libc::SA_NODEFER,
            Flavour::Sigset => {
                let mut one = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
                libc::sigemptyset(one.as_mut_ptr());
                libc::sigaddset(one.as_mut_ptr(), sig);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, one.as_ptr(), std::ptr::null_mut());
            }
        }
    }
    let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: our own action and buffer.
    match unsafe { program_fault_action(k, sig, Some(&a), old.as_mut_ptr()) } {
        // SAFETY: filled by the call.
        0 => unsafe { old.assume_init() }.sa_sigaction,
        _ => libc::SIG_ERR,
    }
}
