//! The next definitions of the interposed functions (the C library's),
//! found with `dlsym(RTLD_NEXT)` without recursion, and string-instruction
//! stand-ins for the moments before they are known.
//!
//! `dlsym` may itself copy memory; while one thread resolves, every call
//! (that thread's nested ones included) uses the stand-ins. They are
//! assembly, like every code this library runs while a copy is on the
//! stack: a Rust frame of this `panic=abort` library that an unwind met
//! (a program's fault handler that throws) would abort the process.

use core::ffi::{c_void, CStr};
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use bulkmem_preload_abi::{abi, sys};

/// One resolved function pointer (null until known). The pointer comes
/// first: the assembly of the small path loads it from the static's
/// address.
#[repr(C)]
pub struct Next {
    ptr: AtomicPtr<c_void>,
    name: &'static CStr,
}

static RESOLVING: AtomicBool = AtomicBool::new(false);

impl Next {
    pub const fn new(name: &'static CStr) -> Next {
        Next {
            ptr: AtomicPtr::new(core::ptr::null_mut()),
            name,
        }
    }

    /// The next definition, or null while it cannot be known yet (another
    /// resolution is in progress, possibly this thread's own).
    #[inline(always)]
    pub fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Relaxed);
        if !p.is_null() {
            return p;
        }
        self.resolve()
    }

    #[cold]
    #[inline(never)]
    fn resolve(&self) -> *mut c_void {
        if RESOLVING
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return core::ptr::null_mut();
        }
        // SAFETY: RTLD_NEXT and a NUL-terminated name; dlsym has no other
        // precondition.
        let p = unsafe { sys::dlsym(sys::rtld_next(), self.name.as_ptr()) };
        if !p.is_null() {
            self.ptr.store(p, Ordering::Relaxed);
        }
        RESOLVING.store(false, Ordering::Release);
        p
    }

    /// The next definition, resolved now if need be, whatever else is
    /// resolving: for functions that no `dlsym` calls on its way (the
    /// signal, `prctl` and namespace functions), where null means that the
    /// C library has none.
    pub fn get_blocking(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            return p;
        }
        // SAFETY: RTLD_NEXT and a NUL-terminated name.
        let p = unsafe { sys::dlsym(sys::rtld_next(), self.name.as_ptr()) };
        self.ptr.store(p, Ordering::Release);
        p
    }
}

pub static MEMCPY: Next = Next::new(c"memcpy");
pub static MEMMOVE: Next = Next::new(c"memmove");
pub static MEMSET: Next = Next::new(c"memset");
pub static MEMPCPY: Next = Next::new(c"mempcpy");
pub static MEMCPY_CHK: Next = Next::new(c"__memcpy_chk");
pub static MEMMOVE_CHK: Next = Next::new(c"__memmove_chk");
pub static MEMSET_CHK: Next = Next::new(c"__memset_chk");
pub static SIGACTION: Next = Next::new(c"sigaction");
pub static SIGACTION_: Next = Next::new(c"__sigaction");
pub static SIGNAL: Next = Next::new(c"signal");
pub static BSD_SIGNAL: Next = Next::new(c"bsd_signal");
pub static SYSV_SIGNAL: Next = Next::new(c"sysv_signal");
pub static SYSV_SIGNAL_: Next = Next::new(c"__sysv_signal");
pub static SIGSET: Next = Next::new(c"sigset");
pub static PRCTL: Next = Next::new(c"prctl");
pub static UNSHARE: Next = Next::new(c"unshare");
pub static SETNS: Next = Next::new(c"setns");

/// Resolves, in the constructor (outside any copy), what must not wait:
/// the functions every small call jumps to (`mempcpy` too, which a
/// signal handler may call first). Nothing else: each `dlsym` costs every
/// process about a microsecond.
pub fn resolve_all() {
    for n in [&MEMCPY, &MEMMOVE, &MEMSET, &MEMPCPY] {
        n.get();
    }
}

static SIGNALS_RESOLVED: AtomicBool = AtomicBool::new(false);

/// Resolves the signal functions, all of them at the first call of any:
/// a program may call one first from a signal handler, where `dlsym` is
/// not safe, but only from a handler it installed through one of them
/// (what a raw system call installs is not covered), and that first call
/// was outside every handler. The fortified copies, `prctl`, `unshare`
/// and `setns` are resolved on their own first use.
pub fn resolve_signals() {
    if SIGNALS_RESOLVED.load(Ordering::Acquire) {
        return;
    }
    for n in [
        &SIGACTION,
        &SIGACTION_,
        &SIGNAL,
        &BSD_SIGNAL,
        &SYSV_SIGNAL,
        &SYSV_SIGNAL_,
        &SIGSET,
    ] {
        n.get_blocking();
    }
    SIGNALS_RESOLVED.store(true, Ordering::Release);
}

// The stand-ins: `rep movsb` forward (memcpy), backward where the
// destination is above an overlapping source (memmove), `rep stosb`
// (memset), and for mempcpy the forward copy returning its end. The
// direction flag is clear on entry, as the ABI requires, and again on
// return.
core::arch::global_asm!(
    ".pushsection .text.bulkmem_preload_standins,\"ax\",@progbits",
    ".p2align 4",
    ".hidden bulkmem_preload_copy_forward",
    ".type bulkmem_preload_copy_forward,@function",
    "bulkmem_preload_copy_forward:",
    ".cfi_startproc",
    "mov rax, rdi",
    "mov rcx, rdx",
    "rep movsb",
    "ret",
    ".cfi_endproc",
    ".size bulkmem_preload_copy_forward, . - bulkmem_preload_copy_forward",
    ".p2align 4",
    ".hidden bulkmem_preload_copy_end",
    ".type bulkmem_preload_copy_end,@function",
    "bulkmem_preload_copy_end:",
    ".cfi_startproc",
    "mov rcx, rdx",
    "rep movsb",
    "mov rax, rdi",
    "ret",
    ".cfi_endproc",
    ".size bulkmem_preload_copy_end, . - bulkmem_preload_copy_end",
    ".p2align 4",
    ".hidden bulkmem_preload_move_bytes",
    ".type bulkmem_preload_move_bytes,@function",
    "bulkmem_preload_move_bytes:",
    ".cfi_startproc",
    "mov rax, rdi",
    "mov rcx, rdx",
    "cmp rdi, rsi",
    "jbe 2f",
    "lea r8, [rsi + rdx]",
    "cmp rdi, r8",
    "jae 2f",
    "test rdx, rdx",
    "jz 2f",
    "lea rdi, [rdi + rdx - 1]",
    "lea rsi, [rsi + rdx - 1]",
    "std",
    "rep movsb",
    "cld",
    "ret",
    "2:",
    "rep movsb",
    "ret",
    ".cfi_endproc",
    ".size bulkmem_preload_move_bytes, . - bulkmem_preload_move_bytes",
    ".p2align 4",
    ".hidden bulkmem_preload_set_bytes",
    ".type bulkmem_preload_set_bytes,@function",
    "bulkmem_preload_set_bytes:",
    ".cfi_startproc",
    "mov r8, rdi",
    "mov eax, esi",
    "mov rcx, rdx",
    "rep stosb",
    "mov rax, r8",
    "ret",
    ".cfi_endproc",
    ".size bulkmem_preload_set_bytes, . - bulkmem_preload_set_bytes",
    ".popsection",
);

extern "C-unwind" {
    #[link_name = "bulkmem_preload_copy_forward"]
    pub fn copy_forward(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void;
    #[link_name = "bulkmem_preload_copy_end"]
    pub fn copy_end(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void;
    #[link_name = "bulkmem_preload_move_bytes"]
    pub fn move_bytes(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void;
    #[link_name = "bulkmem_preload_set_bytes"]
    pub fn set_bytes(d: *mut c_void, c: core::ffi::c_int, n: usize) -> *mut c_void;
}

/// The C library's `memcpy`, `memmove`, `memset` or `mempcpy`
/// (`abi::C_*`), or its stand-in if the C library has none (yet): for the
/// engine, and for calls the loader leaves to the C library.
pub extern "C" fn c_function(which: u32) -> *const c_void {
    match which {
        abi::C_MEMCPY => or_standin(&MEMCPY, copy_forward as *const c_void),
        abi::C_MEMMOVE => or_standin(&MEMMOVE, move_bytes as *const c_void),
        abi::C_MEMPCPY => or_standin(&MEMPCPY, copy_end as *const c_void),
        _ => or_standin(&MEMSET, set_bytes as *const c_void),
    }
}

/// The C library's function if known, else the stand-in (as an address).
fn or_standin(n: &Next, standin: *const c_void) -> *const c_void {
    let p = n.get();
    if p.is_null() {
        standin
    } else {
        p
    }
}
