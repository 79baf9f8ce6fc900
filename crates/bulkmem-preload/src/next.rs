//! The next definitions of the interposed functions (the C library's),
//! found with `dlsym(RTLD_NEXT)` lazily and without recursion, and
//! string-instruction stand-ins for the moments before they are known.
//!
//! `dlsym` may itself copy memory; while one thread resolves, every call
//! (that thread's nested ones included) uses the stand-ins, which are
//! inline assembly: nothing here can be compiled back into a call to
//! `memcpy`, which would be ours.

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

// "C-unwind": the C library's functions may be left by an unwind (a
// program's fault handler that throws, or calls pthread_exit).
pub type CopyFn = unsafe extern "C-unwind" fn(*mut c_void, *const c_void, usize) -> *mut c_void;
pub type SetFn = unsafe extern "C-unwind" fn(*mut c_void, c_int, usize) -> *mut c_void;
pub type CopyChkFn =
    unsafe extern "C-unwind" fn(*mut c_void, *const c_void, usize, usize) -> *mut c_void;
pub type SetChkFn = unsafe extern "C-unwind" fn(*mut c_void, c_int, usize, usize) -> *mut c_void;

/// One resolved function pointer (null until known).
pub struct Next {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
}

static RESOLVING: AtomicBool = AtomicBool::new(false);

impl Next {
    pub const fn new(name: &'static CStr) -> Next {
        Next {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The next definition if already known, else null (no resolving).
    #[inline(always)]
    pub fn known(&self) -> *mut c_void {
        self.ptr.load(Ordering::Relaxed)
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
    pub fn resolve(&self) -> *mut c_void {
        if RESOLVING
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return std::ptr::null_mut();
        }
        // SAFETY: RTLD_NEXT and a NUL-terminated name; dlsym has no other
        // precondition.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
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
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        self.ptr.store(p, Ordering::Release);
        p
    }
}

pub static MEMCPY: Next = Next::new(c"memcpy");
pub static MEMMOVE: Next = Next::new(c"memmove");
pub static MEMSET: Next = Next::new(c"memset");
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
/// the functions every small call jumps to, and the signal functions,
/// which a program may call first from a signal handler, where `dlsym`
/// is not safe. The fortified copies, `prctl`, `unshare` and `setns` are
/// resolved on their first use: most processes make none of those calls.
/// (Not a measurable saving: an exec of /bin/true under the preload cost
/// 1.12-1.15x of plain either way on a 2-vCPU Zen 4 VM.)
pub fn resolve_all() {
    for n in [&MEMCPY, &MEMMOVE, &MEMSET] {
        n.get();
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
}

/// The C library's `memcpy`, or the stand-in.
///
/// # Safety
/// `memcpy`'s contract.
#[inline(always)]
pub unsafe fn memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    let p = MEMCPY.get();
    if p.is_null() {
        // SAFETY: forwarded contract.
        return unsafe { copy_forward(d, s, n) };
    }
    // SAFETY: p is the C library's memcpy; forwarded contract.
    unsafe { std::mem::transmute::<*mut c_void, CopyFn>(p)(d, s, n) }
}

/// The C library's `memmove`, or the stand-in.
///
/// # Safety
/// `memmove`'s contract.
#[inline(always)]
pub unsafe fn memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    let p = MEMMOVE.get();
    if p.is_null() {
        // SAFETY: forwarded contract.
        return unsafe { move_bytes(d, s, n) };
    }
    // SAFETY: p is the C library's memmove; forwarded contract.
    unsafe { std::mem::transmute::<*mut c_void, CopyFn>(p)(d, s, n) }
}

/// The C library's `memset`, or the stand-in.
///
/// # Safety
/// `memset`'s contract.
#[inline(always)]
pub unsafe fn memset(d: *mut c_void, c: c_int, n: usize) -> *mut c_void {
    let p = MEMSET.get();
    if p.is_null() {
        // SAFETY: forwarded contract.
        return unsafe { set_bytes(d, c, n) };
    }
    // SAFETY: p is the C library's memset; forwarded contract.
    unsafe { std::mem::transmute::<*mut c_void, SetFn>(p)(d, c, n) }
}

/// `rep movsb` forward: any length, memcpy semantics.
///
/// # Safety
/// `s` readable and `d` writable for `n` bytes; `d` not after `s` if they
/// overlap.
#[inline(never)]
pub unsafe fn copy_forward(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's ranges; the direction flag is clear per the ABI.
    unsafe {
        std::arch::asm!("rep movsb", inout("rdi") d => _, inout("rsi") s => _,
            inout("rcx") n => _, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    for i in 0..n {
        // SAFETY: in range; volatile keeps this a byte loop, not a memcpy call.
        unsafe {
            (d as *mut u8)
                .add(i)
                .write_volatile((s as *const u8).add(i).read_volatile())
        };
    }
    d
}

/// memmove semantics with string instructions (backwards when `d` is
/// above an overlapping `s`).
///
/// # Safety
/// `memmove`'s contract.
#[inline(never)]
pub unsafe fn move_bytes(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    let (du, su) = (d as usize, s as usize);
    if du <= su || du >= su.wrapping_add(n) || n == 0 {
        // SAFETY: forward is correct when d is at or below s, or disjoint.
        return unsafe { copy_forward(d, s, n) };
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: copies backwards from the last byte, then restores the
    // direction flag the ABI requires clear.
    unsafe {
        std::arch::asm!("std", "rep movsb", "cld",
            inout("rdi") (d as *mut u8).add(n - 1) => _,
            inout("rsi") (s as *const u8).add(n - 1) => _,
            inout("rcx") n => _, options(nostack));
    }
    #[cfg(not(target_arch = "x86_64"))]
    for i in (0..n).rev() {
        // SAFETY: in range; volatile keeps this a byte loop.
        unsafe {
            (d as *mut u8)
                .add(i)
                .write_volatile((s as *const u8).add(i).read_volatile())
        };
    }
    d
}

/// `rep stosb`.
///
/// # Safety
/// `d` writable for `n` bytes.
#[inline(never)]
pub unsafe fn set_bytes(d: *mut c_void, c: c_int, n: usize) -> *mut c_void {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's range; the direction flag is clear per the ABI.
    unsafe {
        std::arch::asm!("rep stosb", inout("rdi") d => _, inout("rcx") n => _,
            in("al") c as u8, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    for i in 0..n {
        // SAFETY: in range; volatile keeps this a byte loop.
        unsafe { (d as *mut u8).add(i).write_volatile(c as u8) };
    }
    d
}
