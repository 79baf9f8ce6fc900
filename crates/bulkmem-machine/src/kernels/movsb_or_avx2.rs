//! `rep movsb` or the AVX2 loop, chosen per call from the pair's alignment.
//! On AMD CPUs with FSRM, a copy past the L2 runs `rep movsb` 1.2-1.3x as
//! fast as the vector loop when the destination and the source share
//! their offset in a 64-byte line (the fast-string path moves whole lines;
//! measured on Zen 5 at 1-4 MiB, hot), and no faster, or slower (Zen 4:
//! 0.93x glibc's vector loop), when they do not: glibc therefore never
//! takes `rep movsb` past the L2 on AMD. One compare of the two addresses
//! gives each case its kernel (docs/design.md, "Strategies").

use super::{avx2, rep};

/// Whether `dst` and `src` lie at the same offset in a 64-byte line.
#[inline]
pub fn paired(dst: *mut u8, src: *const u8) -> bool {
    (dst as usize).wrapping_sub(src as usize).is_multiple_of(64)
}

/// `rep movsb` when [`paired`], the AVX2 loop otherwise.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes, not overlapping;
/// the CPU has AVX2 (the descriptor's `needs`).
pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
    if paired(dst, src) {
        // SAFETY: forwarded contract.
        unsafe { rep::copy_movsb(dst, src, len) }
    } else {
        // SAFETY: forwarded contract, AVX2 included.
        unsafe { avx2::copy(dst, src, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_the_same_offset_in_a_line_whatever_the_order() {
        let base = 0x7000_0000_0000usize;
        let p = |d: usize, s: usize| paired((base + d) as *mut u8, (base + s) as *const u8);
        assert!(p(0, 0) && p(64, 0) && p(0, 4096) && p(7, 71) && p(71, 7));
        assert!(!p(1, 0) && !p(0, 1) && !p(32, 0) && !p(63, 0) && !p(4096, 4095));
    }
}
