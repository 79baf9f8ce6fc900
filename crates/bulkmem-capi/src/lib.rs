//! The C interface of bulkmem (`include/bulkmem.h`): libbulkmem.so.0 and
//! libbulkmem.a. Every function is documented in the header; this crate
//! only checks C arguments, calls the Rust library, and maps its errors to
//! negative errnos ([`status`]). No panic unwinds into C.

#![allow(clippy::missing_safety_doc)] // the contracts are in bulkmem.h

mod batch;
#[cfg(target_arch = "x86_64")]
mod compact;
mod exports;
mod ext;
mod fill;
mod mover;
mod numa;
mod single;
mod sized;
mod status;
mod structs;
mod ticket;

use std::ffi::{c_char, c_int};

/// `bm_version`.
pub extern "C" fn bm_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// A decimal version component from Cargo (a compile-time constant).
const fn component(s: &str) -> i32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut n = 0;
    while i < b.len() {
        n = n * 10 + (b[i] - b'0') as i32;
        i += 1;
    }
    n
}

const MAJOR: i32 = component(env!("CARGO_PKG_VERSION_MAJOR"));
const MINOR: i32 = component(env!("CARGO_PKG_VERSION_MINOR"));
const PATCH: i32 = component(env!("CARGO_PKG_VERSION_PATCH"));

/// `bm_version_number`: the header's `BULKMEM_VERSION_NUMBER` formula.
pub extern "C" fn bm_version_number() -> c_int {
    MAJOR * 10000 + MINOR * 100 + PATCH
}

/// `bm_check_version`.
pub extern "C" fn bm_check_version(major: c_int, minor: c_int) -> c_int {
    status::call(|| {
        if major != MAJOR {
            return Err(status::fail(
                libc::ENOTSUP,
                format!("built for bulkmem {major}.x, running with {MAJOR}.{MINOR}.{PATCH}"),
            ));
        }
        if minor > MINOR {
            return Err(status::fail(
                libc::ENOTSUP,
                format!(
                    "built for bulkmem {major}.{minor}, running with the older {MAJOR}.{MINOR}.{PATCH}"
                ),
            ));
        }
        Ok(0)
    })
}

/// `bm_strerror`.
pub extern "C" fn bm_strerror(err: c_int) -> *const c_char {
    let s: &'static [u8] = match -err {
        0 => b"success\0",
        libc::EINVAL => b"invalid argument (NULL pointer, unknown name, overlapping or malformed extents, bad options)\0",
        libc::ENOTSUP => b"not supported by this CPU or kernel\0",
        libc::ENOMEM => b"not enough memory\0",
        libc::EIO => b"a bad page stopped the operation (SIGBUS)\0",
        libc::EHWPOISON => b"a hardware-poisoned page stopped the operation\0",
        libc::ECANCELED => b"cancelled\0",
        libc::ENOTRECOVERABLE => b"internal error in bulkmem\0",
        libc::ENODEV => b"no such NUMA node\0",
        libc::EAGAIN => b"try again: a thread could not be started, or some pages were left behind\0",
        libc::EPERM => b"operation not permitted\0",
        libc::EFAULT => b"bad address (a checked copy stopped at an unmapped or protected page: SIGSEGV)\0",
        libc::EBUSY => b"busy\0",
        libc::EEXIST => b"destination already populated\0",
        libc::ENOENT => b"no such page or entry\0",
        libc::ESRCH => b"no such process\0",
        _ => b"unknown error code\0",
    };
    s.as_ptr().cast()
}

/// `bm_last_error`.
pub extern "C" fn bm_last_error() -> *const c_char {
    status::last()
}

/// Not in the header: panics inside a `bm_*` call on purpose and returns
/// what any entry point returns for an internal error (`-ENOTRECOVERABLE`).
/// The C suite uses it to check that a caught panic prints nothing.
#[doc(hidden)]
pub extern "C" fn test_panic() -> c_int {
    status::call(|| panic!("bm__test_panic: a deliberate panic"))
}
