//! The C library's `memcpy` and `memset`: what an application gets today,
//! one call at a time (glibc picks its own primitive per call size).

/// # Safety
/// `src` readable and `dst` writable for `len` bytes, not overlapping.
pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: forwarded contract; memcpy's own.
    unsafe { libc::memcpy(dst.cast(), src.cast(), len) };
}

/// # Safety
/// `dst` writable for `len` bytes.
pub unsafe fn clear(dst: *mut u8, len: usize) {
    // SAFETY: forwarded contract; memset's own.
    unsafe { libc::memset(dst.cast(), 0, len) };
}
