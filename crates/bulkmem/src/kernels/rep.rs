//! x86 string instructions: `rep movsb`, `rep movsq`, `rep stosb`,
//! `rep stosq`. With ERMS/FSRM the byte forms are the fastest temporal copy
//! on many CPUs; without them (seed 000's Zen 3) they lose to the per-page
//! loop, which is why `auto` consults the CPU before picking them.

use core::arch::asm;

/// # Safety
/// `src` readable and `dst` writable for `n` bytes, not overlapping.
#[inline(always)]
pub unsafe fn movsb(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the caller guarantees both ranges; the direction flag is clear
    // on entry by the ABI, so the copy runs upwards within them.
    unsafe {
        asm!("rep movsb", inout("rcx") n => _, inout("rdi") dst => _,
             inout("rsi") src => _, options(nostack, preserves_flags));
    }
}

/// # Safety
/// `src` readable and `dst` writable for `8 * qwords` bytes, not overlapping.
#[inline(always)]
pub unsafe fn movsq(dst: *mut u8, src: *const u8, qwords: usize) {
    // SAFETY: as for movsb, over 8 * qwords bytes.
    unsafe {
        asm!("rep movsq", inout("rcx") qwords => _, inout("rdi") dst => _,
             inout("rsi") src => _, options(nostack, preserves_flags));
    }
}

/// # Safety
/// `dst` writable for `n` bytes.
#[inline(always)]
pub unsafe fn stosb(dst: *mut u8, n: usize) {
    // SAFETY: the caller guarantees the range; DF is clear by the ABI.
    unsafe {
        asm!("rep stosb", inout("rcx") n => _, inout("rdi") dst => _,
             in("al") 0u8, options(nostack, preserves_flags));
    }
}

/// # Safety
/// `dst` writable for `8 * qwords` bytes.
#[inline(always)]
pub unsafe fn stosq(dst: *mut u8, qwords: usize) {
    // SAFETY: the caller guarantees the range; DF is clear by the ABI.
    unsafe {
        asm!("rep stosq", inout("rcx") qwords => _, inout("rdi") dst => _,
             in("rax") 0u64, options(nostack, preserves_flags));
    }
}

/// `rep movsb` over the whole range.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes, not overlapping.
pub unsafe fn copy_movsb(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: forwarded contract.
    unsafe { movsb(dst, src, len) }
}

/// `rep movsq` over the 8-byte words, `rep movsb` for the last 0-7 bytes.
///
/// # Safety
/// As [`copy_movsb`].
pub unsafe fn copy_movsq(dst: *mut u8, src: *const u8, len: usize) {
    let q = len / 8;
    // SAFETY: 8*q <= len, and the tail covers exactly [8*q, len).
    unsafe {
        movsq(dst, src, q);
        movsb(dst.add(q * 8), src.add(q * 8), len % 8);
    }
}

/// `rep stosb` over the whole range.
///
/// # Safety
/// `dst` writable for `len` bytes.
pub unsafe fn clear_stosb(dst: *mut u8, len: usize) {
    // SAFETY: forwarded contract.
    unsafe { stosb(dst, len) }
}

/// `rep stosq` over the 8-byte words, `rep stosb` for the last 0-7 bytes.
///
/// # Safety
/// As [`clear_stosb`].
pub unsafe fn clear_stosq(dst: *mut u8, len: usize) {
    let q = len / 8;
    // SAFETY: 8*q <= len, and the tail covers exactly [8*q, len).
    unsafe {
        stosq(dst, q);
        stosb(dst.add(q * 8), len % 8);
    }
}
