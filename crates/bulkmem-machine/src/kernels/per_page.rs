//! The kernel's baseline: one `copy_page()` / `clear_page()` call per 4 KiB
//! page, each a `rep movsq` / `rep stosq` of 512 words (REP_GOOD CPUs). Kept
//! so every measurement has the loop that batching must never lose to.

/// The kernel's base page; the loop steps by this, not by the host page size,
/// so results compare across machines.
pub const PAGE: usize = 4096;

#[cfg(target_arch = "x86_64")]
#[inline(never)]
unsafe fn copy_page(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller passes one page (or the final partial page).
    unsafe { super::rep::copy_movsq(dst, src, len) }
}

#[cfg(target_arch = "x86_64")]
#[inline(never)]
unsafe fn clear_page(dst: *mut u8, len: usize) {
    // SAFETY: the caller passes one page (or the final partial page).
    unsafe { super::rep::clear_stosq(dst, len) }
}

#[cfg(not(target_arch = "x86_64"))]
use super::portable::{clear as clear_page, copy as copy_page};

/// # Safety
/// `src` readable and `dst` writable for `len` bytes, not overlapping.
pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
    let mut off = 0;
    while off < len {
        let n = PAGE.min(len - off);
        // SAFETY: [off, off + n) lies within both ranges.
        unsafe { copy_page(dst.add(off), src.add(off), n) };
        off += n;
    }
}

/// # Safety
/// `dst` writable for `len` bytes.
pub unsafe fn clear(dst: *mut u8, len: usize) {
    let mut off = 0;
    while off < len {
        let n = PAGE.min(len - off);
        // SAFETY: [off, off + n) lies within the range.
        unsafe { clear_page(dst.add(off), n) };
        off += n;
    }
}
