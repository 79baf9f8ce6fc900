//! x86 string instructions: `rep movsb`, `rep movsq`, `rep stosb`,
//! `rep stosq`. With ERMS/FSRM the byte forms are the fastest temporal copy
//! on many CPUs; without them (the kernel's batched folio-copy patches' Zen 3) they lose to the per-page
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

/// Whether `dst` is 1 to 63 bytes ahead of `src` within a page. The
/// string copies then leave their fast path: on a Zen 4 VM an 8 MiB
/// `rep movsb` ran 3.2 GB/s with the destination 1 or 8 bytes ahead
/// (11-18 GB/s at 16-63 bytes), against 21-27 aligned, and `rep movsq`
/// half speed; glibc's `memcpy`, whose vector loop takes over above the
/// L2 on AMD, kept 23 (docs/measurements.md, "Strategies"). Common in
/// practice: Python places a `bytes` object's data 32 bytes into its
/// allocation, so copying one buffer into a new object meets it.
#[inline(always)]
pub fn near_ahead(dst: *const u8, src: *const u8) -> bool {
    ((dst as usize).wrapping_sub(src as usize) & 4095).wrapping_sub(1) < 63
}

/// What the string copies run when [`near_ahead`]: the `avx2` loop where
/// the CPU has AVX2 (a preloaded sqlite3 read of 8 MiB blobs into Python
/// ran 0.99x glibc with it, 0.92x with 16-byte moves), else
/// `copy_sse2`.
///
/// # Safety
/// As [`copy_movsb`].
#[cold]
#[inline(never)]
pub unsafe fn copy_near_ahead(dst: *mut u8, src: *const u8, len: usize) {
    if crate::machine::cpu::features().avx2 {
        // SAFETY: the CPU has AVX2; forwarded contract.
        unsafe { super::avx2::copy(dst, src, len) }
    } else {
        // SAFETY: forwarded contract.
        unsafe { copy_sse2(dst, src, len) }
    }
}

/// 64 bytes per step in four unaligned 16-byte moves (SSE2, which every
/// x86-64 has), then `rep movsb` over the last 0-63 bytes.
///
/// # Safety
/// As [`copy_movsb`].
unsafe fn copy_sse2(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: the caller guarantees both ranges; every access is within
    // [0, len) of them (the loop runs while 64 bytes are left, the tail
    // moves exactly the rest); DF is clear by the ABI.
    unsafe {
        asm!(
            "2:",
            "cmp rcx, 64",
            "jb 3f",
            "movdqu {a}, xmmword ptr [rsi]",
            "movdqu {b}, xmmword ptr [rsi + 16]",
            "movdqu {c}, xmmword ptr [rsi + 32]",
            "movdqu {d}, xmmword ptr [rsi + 48]",
            "movdqu xmmword ptr [rdi], {a}",
            "movdqu xmmword ptr [rdi + 16], {b}",
            "movdqu xmmword ptr [rdi + 32], {c}",
            "movdqu xmmword ptr [rdi + 48], {d}",
            "add rsi, 64",
            "add rdi, 64",
            "sub rcx, 64",
            "jmp 2b",
            "3:",
            "rep movsb",
            inout("rcx") len => _,
            a = out(xmm_reg) _,
            b = out(xmm_reg) _,
            c = out(xmm_reg) _,
            d = out(xmm_reg) _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            options(nostack),
        );
    }
}

/// `rep movsb` over the whole range ([`copy_near_ahead`] where it would
/// leave its fast path).
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes, not overlapping.
pub unsafe fn copy_movsb(dst: *mut u8, src: *const u8, len: usize) {
    if near_ahead(dst, src) {
        // SAFETY: forwarded contract.
        return unsafe { copy_near_ahead(dst, src, len) };
    }
    // SAFETY: forwarded contract.
    unsafe { movsb(dst, src, len) }
}

/// `rep movsq` over the 8-byte words, `rep movsb` for the last 0-7 bytes
/// ([`copy_near_ahead`] where they would leave their fast path).
///
/// # Safety
/// As [`copy_movsb`].
pub unsafe fn copy_movsq(dst: *mut u8, src: *const u8, len: usize) {
    if near_ahead(dst, src) {
        // SAFETY: forwarded contract.
        return unsafe { copy_near_ahead(dst, src, len) };
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_ahead_is_one_to_sixty_three_bytes_within_a_page() {
        let p = |a: usize| a as *const u8;
        for (dst, src, want) in [
            (0x1001, 0x1000, true),
            (0x103f, 0x1000, true),
            (0x1040, 0x1000, false),
            (0x1000, 0x1000, false),
            (0x1000, 0x1001, false),
            // 4 KiB apart and more: the page offset decides.
            (0x9008, 0x1000, true),
            (0x1000, 0x9fff, true),
            (0x1800, 0x1000, false),
        ] {
            assert_eq!(near_ahead(p(dst), p(src)), want, "{dst:#x} {src:#x}");
        }
    }

    #[test]
    fn the_sse2_loop_copies_exactly() {
        let src: Vec<u8> = (0..700u32).map(|i| (i * 13 + 5) as u8).collect();
        for len in [0, 1, 15, 63, 64, 65, 127, 128, 129, 200, 640] {
            for d_off in [0, 1, 8, 33] {
                let mut dst = vec![0xEEu8; 704];
                // SAFETY: both ranges lie in their vectors, apart.
                unsafe { copy_sse2(dst.as_mut_ptr().add(d_off), src.as_ptr(), len) };
                assert_eq!(&dst[d_off..d_off + len], &src[..len], "{len} +{d_off}");
                assert!(dst[..d_off]
                    .iter()
                    .chain(&dst[d_off + len..])
                    .all(|&b| b == 0xEE));
            }
        }
    }
}
