//! `prctl(PR_SET_SECCOMP, ...)`, `unshare` and `setns`: the calls that need
//! a process without the preload's helper threads. With the engine open,
//! they go through it, which stops the helpers first (see its `sandbox`);
//! without it there are none.
//!
//! A seccomp filter or strict mode may forbid opening files: the engine is
//! opened and initialised before one is set, and never afterwards.
//!
//! `prctl` is variadic in C; it is defined here with its five integer
//! arguments, which is how callers pass them on x86_64 Linux.

use core::ffi::{c_int, c_ulong, c_void};

use crate::{engine, next, opened};
use bulkmem_preload_abi::sys;

type PrctlFn = unsafe extern "C" fn(c_int, c_ulong, c_ulong, c_ulong, c_ulong) -> c_int;
type IntFn = unsafe extern "C" fn(c_int) -> c_int;
type SetnsFn = unsafe extern "C" fn(c_int, c_int) -> c_int;

fn fail_nosys() -> c_int {
    sys::set_errno(sys::ENOSYS);
    -1
}

/// # Safety
/// `prctl`'s contract.
#[no_mangle]
pub unsafe extern "C" fn prctl(
    option: c_int,
    a2: c_ulong,
    a3: c_ulong,
    a4: c_ulong,
    a5: c_ulong,
) -> c_int {
    let p = next::PRCTL.get_blocking();
    if p.is_null() {
        return fail_nosys();
    }
    if option == sys::PR_SET_SECCOMP {
        let e = engine::get();
        // Whatever happens, no file is to be opened for the engine from
        // here on.
        engine::never_open();
        if let Some(e) = e {
            // SAFETY: the C library's prctl and the caller's arguments.
            return unsafe { (e.prctl)(p, option, a2, a3, a4, a5) };
        }
    }
    // SAFETY: the C library's prctl, with the arguments the caller passed.
    unsafe { core::mem::transmute::<*mut c_void, PrctlFn>(p)(option, a2, a3, a4, a5) }
}

/// # Safety
/// `unshare`'s contract.
#[no_mangle]
pub unsafe extern "C" fn unshare(flags: c_int) -> c_int {
    let p = next::UNSHARE.get_blocking();
    if p.is_null() {
        return fail_nosys();
    }
    if let Some(e) = opened::loaded() {
        // SAFETY: the C library's unshare and the caller's argument.
        return unsafe { (e.unshare)(p, flags) };
    }
    // SAFETY: the C library's unshare; it has no memory preconditions.
    unsafe { core::mem::transmute::<*mut c_void, IntFn>(p)(flags) }
}

/// # Safety
/// `setns`'s contract.
#[no_mangle]
pub unsafe extern "C" fn setns(fd: c_int, nstype: c_int) -> c_int {
    let p = next::SETNS.get_blocking();
    if p.is_null() {
        return fail_nosys();
    }
    if let Some(e) = opened::loaded() {
        // SAFETY: the C library's setns and the caller's arguments.
        return unsafe { (e.setns)(p, fd, nstype) };
    }
    // SAFETY: the C library's setns; it has no memory preconditions.
    unsafe { core::mem::transmute::<*mut c_void, SetnsFn>(p)(fd, nstype) }
}
