//! What a return code means: `bm_strerror` (the code's fixed words),
//! `bm_last_error` (this thread's last failure, from `status`).

use std::ffi::{c_char, c_int};

use crate::status;

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
