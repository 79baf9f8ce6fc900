//! What the program sees of signals: its own dispositions, in the kernel
//! and in what `sigaction` reports, and its handlers entered as the kernel
//! enters them; while the preload knows when a copy runs inside a handler
//! (so that it never starts, or waits for, helper threads there) and
//! survives faults in bulkmem's checked routines.
//!
//! `sigaction`, `signal`, `bsd_signal`, `sysv_signal`, `__sysv_signal` and
//! `sigset` are interposed. A handler the program installs is recorded in
//! [`HANDLERS`] and the kernel is given the trampoline in its place, with
//! the program's own flags and mask: `SA_ONSTACK`, `SA_NODEFER`,
//! `SA_RESTART`, `SA_RESETHAND` (but for SIGSEGV and SIGBUS, [`faults`])
//! mean to the kernel what the program asked. `SIG_DFL` and `SIG_IGN` go
//! to the kernel as they are, so `/proc/PID/status`, `exec` and
//! `posix_spawn` see the program's own.
//!
//! The trampoline records the handler's signal frame in this thread's
//! state ([`bulkmem_preload_abi::abi::PerThread::enter_handler`]), stops the helper
//! threads of a call this thread is in, and *jumps* to the program's
//! handler: the handler runs in the frame the kernel made, returns to the
//! C library's `__restore_rt` and backtraces as without the preload. The
//! copy path reads whether the stack pointer is inside a recorded frame
//! (no counter to lower: a handler left with `siglongjmp` is gone as soon
//! as the stack is above its frame).
//!
//! The program's `sigaction` reports its own handler where the kernel has
//! the trampoline, with the flags the kernel keeps for it.
//!
//! Not covered: handlers installed with a raw `rt_sigaction` system call
//! (`syscall(SYS_rt_sigaction, ...)`), or by code that calls the C
//! library's internal aliases. A large copy in such a handler is treated as
//! outside one; see the thread policy in the crate docs.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::{next, opened, thread};
use bulkmem_preload_abi::abi::HANDLER_REACH;
use bulkmem_preload_abi::sys::{self, Sigaction};

mod faults;

pub use faults::{faults_ours, take_faults, unlock_in_child};

/// Signals 1..=64 (Linux's `_NSIG` is 65).
const NSIG: usize = 65;

/// The program's handler per signal (0: none recorded).
static HANDLERS: [AtomicUsize; NSIG] = [const { AtomicUsize::new(0) }; NSIG];

// What the kernel calls instead of the program's handler: assembly, so
// that no Rust frame of this `panic=abort` library is on the stack while
// the program's handler runs, and so that the handler is *jumped* to with
// the kernel's registers and return address (the C library's restorer).
// `decide` gets the kernel's three arguments and the signal frame (the
// stack pointer at entry); it returns the handler to enter, or 0 when the
// signal is dealt with (a checked routine's fault, resumed at its fixup; a
// default action performed). rax is zeroed for the handler, as the kernel
// does for handlers declared without a prototype.
core::arch::global_asm!(
    ".pushsection .text.bulkmem_preload_trampoline,\"ax\",@progbits",
    ".p2align 4",
    ".hidden bulkmem_preload_trampoline",
    ".type bulkmem_preload_trampoline,@function",
    "bulkmem_preload_trampoline:",
    ".cfi_startproc",
    "push rdi",
    ".cfi_adjust_cfa_offset 8",
    "push rsi",
    ".cfi_adjust_cfa_offset 8",
    "push rdx",
    ".cfi_adjust_cfa_offset 8",
    "lea rcx, [rsp + 24]",
    "call {decide}",
    "pop rdx",
    ".cfi_adjust_cfa_offset -8",
    "pop rsi",
    ".cfi_adjust_cfa_offset -8",
    "pop rdi",
    ".cfi_adjust_cfa_offset -8",
    "test rax, rax",
    "jz 2f",
    "mov r11, rax",
    "xor eax, eax",
    "jmp r11",
    "2:",
    "ret",
    ".cfi_endproc",
    ".size bulkmem_preload_trampoline, . - bulkmem_preload_trampoline",
    ".popsection",
    decide = sym decide,
);

extern "C" {
    #[link_name = "bulkmem_preload_trampoline"]
    fn trampoline(sig: c_int, info: *mut c_void, ctx: *mut c_void);
}

/// Where the trampoline goes for `sig`: the program's handler, entered
/// ([`enter`]), or 0.
extern "C" fn decide(sig: c_int, info: *mut c_void, ctx: *mut c_void, frame: usize) -> usize {
    if let Some(k) = faults::slot(sig) {
        return faults::on_fault(k, sig, info, ctx, frame);
    }
    let h = slot(sig).map_or(0, |i| HANDLERS[i].load(Ordering::Acquire));
    if h != 0 {
        enter(ctx, frame);
    }
    h
}

/// Before a program's handler: nothing of a large call on this thread may
/// run on while the handler does, which may never come back; and the copy
/// path must know it runs inside the handler until it returns or leaves.
fn enter(ctx: *mut c_void, frame: usize) {
    if let Some(e) = opened::loaded() {
        (e.stop_for_handler)(ctx);
    }
    let alt = altstack_bottom(ctx, frame);
    let bottom = alt.unwrap_or(frame.saturating_sub(HANDLER_REACH));
    thread::this().enter_handler(frame, bottom, alt.is_some());
}

/// The start of the alternate signal stack `frame` is on, if it is on the
/// one the kernel saved in the handler's context (`uc_stack`: `ss_sp` at
/// 16, `ss_size` at 32 in x86_64's `ucontext_t`).
fn altstack_bottom(ctx: *mut c_void, frame: usize) -> Option<usize> {
    if ctx.is_null() {
        return None;
    }
    // SAFETY: the kernel's ucontext for this handler, on its signal frame.
    let (sp, size) = unsafe {
        let b = ctx.cast::<u8>();
        (
            b.add(16).cast::<usize>().read(),
            b.add(32).cast::<usize>().read(),
        )
    };
    (size != 0 && frame >= sp && frame - sp <= size).then_some(sp)
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

/// The C library's `sigaction`.
///
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
    if let Some(k) = faults::slot(sig) {
        // SAFETY: the caller's act and old, as sigaction takes them.
        return unsafe { faults::program_action(f, k, sig, act, old) };
    }
    let Some(i) = slot(sig) else {
        // SAFETY: forwarded contract (the C library reports EINVAL).
        return unsafe { forward_sigaction(f, sig, act, old) };
    };
    let prev = HANDLERS[i].load(Ordering::Acquire);
    let mut mine;
    let mut act_p = act;
    if !act.is_null() {
        // SAFETY: the caller's act points to a sigaction.
        mine = unsafe { *act };
        let h = mine.sa_sigaction;
        if real_handler(h) {
            // Recorded before the kernel can call the trampoline for it.
            HANDLERS[i].store(h, Ordering::Release);
            mine.sa_sigaction = tramp();
            act_p = &mine;
        }
    }
    // SAFETY: forwarded contract; act_p is the caller's or our copy of it.
    let r = unsafe { forward_sigaction(f, sig, act_p, old) };
    if r != 0 {
        if !act.is_null() {
            HANDLERS[i].store(prev, Ordering::Release);
        }
        return r;
    }
    if !old.is_null() {
        // SAFETY: the C library filled the caller's old action.
        let o = unsafe { &mut *old };
        if o.sa_sigaction == tramp() {
            o.sa_sigaction = prev;
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
/// does with `sigaction` (for SIGSEGV and SIGBUS, whose actions the loader
/// installs itself: [`faults`]).
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
    if let Some(k) = faults::slot(sig) {
        if h != sys::SIG_HOLD {
            return faults::program_signal(k, sig, h, flavour);
        }
        // `sigset(SIGSEGV, SIG_HOLD)` blocks it and reports what the
        // program had, not the trampoline.
        // SAFETY: forwarded contract.
        let r = unsafe { real(sig, h) };
        return if r == tramp() {
            faults::view_handler(k)
        } else {
            r
        };
    }
    let Some(i) = slot(sig).filter(|_| real_handler(h)) else {
        // SAFETY: forwarded contract.
        let r = unsafe { real(sig, h) };
        return if r == tramp() {
            slot(sig).map_or(r, |i| HANDLERS[i].load(Ordering::Acquire))
        } else {
            r
        };
    };
    let prev = HANDLERS[i].load(Ordering::Acquire);
    HANDLERS[i].store(h, Ordering::Release);
    // SAFETY: forwarded contract, with the trampoline as the handler.
    let r = unsafe { real(sig, tramp()) };
    if r == sys::SIG_ERR {
        HANDLERS[i].store(prev, Ordering::Release);
        return r;
    }
    if r == tramp() {
        prev
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
