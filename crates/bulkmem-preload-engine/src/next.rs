//! The C library's `memcpy`, `memmove` and `memset` as the loader found
//! them (its string-instruction stand-ins where the C library had none),
//! for the part of a large call bulkmem does not do. Set by [`attach`]
//! before any entry point can run.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

use bulkmem_preload_abi::abi::{self, CopyFn, Loader, SetFn};

static MEMCPY: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static MEMMOVE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static MEMSET: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

pub fn attach(l: &Loader) {
    for (slot, which) in [
        (&MEMCPY, abi::C_MEMCPY),
        (&MEMMOVE, abi::C_MEMMOVE),
        (&MEMSET, abi::C_MEMSET),
    ] {
        slot.store((l.c_library)(which).cast_mut(), Ordering::Release);
    }
}

/// # Safety
/// `memcpy`'s contract.
pub unsafe fn memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    // SAFETY: the C library's memcpy (or the stand-in), set by `attach`.
    unsafe { std::mem::transmute::<*mut c_void, CopyFn>(MEMCPY.load(Ordering::Relaxed))(d, s, n) }
}

/// # Safety
/// `memmove`'s contract.
pub unsafe fn memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    // SAFETY: the C library's memmove (or the stand-in), set by `attach`.
    unsafe { std::mem::transmute::<*mut c_void, CopyFn>(MEMMOVE.load(Ordering::Relaxed))(d, s, n) }
}

/// # Safety
/// `memset`'s contract.
pub unsafe fn memset(d: *mut c_void, c: c_int, n: usize) -> *mut c_void {
    // SAFETY: the C library's memset (or the stand-in), set by `attach`.
    unsafe { std::mem::transmute::<*mut c_void, SetFn>(MEMSET.load(Ordering::Relaxed))(d, c, n) }
}
