//! Short copies and clears (at most 64 bytes) with overlapping unaligned
//! word accesses: the heads and tails of every vector kernel, so that none of
//! them ever touches a byte outside `[dst, dst + len)`.

use core::ptr::{read_unaligned, write_unaligned};

/// Copies `len <= 64` bytes.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes; they do not overlap.
#[inline(always)]
pub unsafe fn copy_upto_64(dst: *mut u8, src: *const u8, len: usize) {
    debug_assert!(len <= 64);
    // SAFETY: (whole body) every access below lies in [0, len) of its buffer,
    // because each pair covers [0, w) and [len - w, len) with w <= len.
    unsafe {
        if len > 32 {
            let a = read_unaligned(src as *const [u128; 2]);
            let b = read_unaligned(src.add(len - 32) as *const [u128; 2]);
            write_unaligned(dst as *mut [u128; 2], a);
            write_unaligned(dst.add(len - 32) as *mut [u128; 2], b);
        } else if len >= 16 {
            let a = read_unaligned(src as *const u128);
            let b = read_unaligned(src.add(len - 16) as *const u128);
            write_unaligned(dst as *mut u128, a);
            write_unaligned(dst.add(len - 16) as *mut u128, b);
        } else if len >= 8 {
            let a = read_unaligned(src as *const u64);
            let b = read_unaligned(src.add(len - 8) as *const u64);
            write_unaligned(dst as *mut u64, a);
            write_unaligned(dst.add(len - 8) as *mut u64, b);
        } else if len >= 4 {
            let a = read_unaligned(src as *const u32);
            let b = read_unaligned(src.add(len - 4) as *const u32);
            write_unaligned(dst as *mut u32, a);
            write_unaligned(dst.add(len - 4) as *mut u32, b);
        } else if len >= 2 {
            let a = read_unaligned(src as *const u16);
            let b = read_unaligned(src.add(len - 2) as *const u16);
            write_unaligned(dst as *mut u16, a);
            write_unaligned(dst.add(len - 2) as *mut u16, b);
        } else if len == 1 {
            *dst = *src;
        }
    }
}

/// Zeroes `len <= 64` bytes.
///
/// # Safety
/// `dst` writable for `len` bytes.
#[inline(always)]
pub unsafe fn zero_upto_64(dst: *mut u8, len: usize) {
    debug_assert!(len <= 64);
    // SAFETY: (whole body) as in copy_upto_64, each store pair covers
    // [0, w) and [len - w, len) with w <= len.
    unsafe {
        if len > 32 {
            write_unaligned(dst as *mut [u128; 2], [0; 2]);
            write_unaligned(dst.add(len - 32) as *mut [u128; 2], [0; 2]);
        } else if len >= 16 {
            write_unaligned(dst as *mut u128, 0);
            write_unaligned(dst.add(len - 16) as *mut u128, 0);
        } else if len >= 8 {
            write_unaligned(dst as *mut u64, 0);
            write_unaligned(dst.add(len - 8) as *mut u64, 0);
        } else if len >= 4 {
            write_unaligned(dst as *mut u32, 0);
            write_unaligned(dst.add(len - 4) as *mut u32, 0);
        } else if len >= 2 {
            write_unaligned(dst as *mut u16, 0);
            write_unaligned(dst.add(len - 2) as *mut u16, 0);
        } else if len == 1 {
            *dst = 0;
        }
    }
}

/// Bytes from `p` to the next 64-byte boundary (0 if aligned).
#[inline(always)]
pub fn to_line(p: *const u8) -> usize {
    (p as usize).wrapping_neg() & 63
}
