//! AMD `clzero`: zeroes a whole cache line without reading it (no RFO) and
//! without polluting the cache, like a non-temporal store. Its stores are
//! weakly ordered, so the clear ends with a store fence.

use core::arch::asm;
use core::arch::x86_64::_mm_sfence;

use super::small::{to_line, zero_upto_64};

/// Without the closing fence: the caller must [`drain`](super::drain)
/// before the data is published to anyone.
///
/// # Safety
/// The CPU has CLZERO; `dst` writable for `len` bytes.
pub unsafe fn clear_unfenced(dst: *mut u8, len: usize) {
    let head = to_line(dst).min(len);
    let lines = (len - head) / 64;
    // SAFETY: the head is [0, head); `lines` whole lines start 64-aligned at
    // `head` and end at or before len (clzero writes exactly the aligned line
    // containing rax); the tail is exactly the rest, under 64 bytes.
    unsafe {
        zero_upto_64(dst, head);
        if lines > 0 {
            // `clzero` is spelled as bytes: not every assembler knows it.
            // Its 12 bytes start a 16-byte block, as the checked twin's
            // do: where the linker put them across a 64-byte line (one
            // build of an unrelated change), clears of 2-32 MiB ran at
            // 0.86-0.95x of the same loop within one, on Zen 3.
            asm!(
                ".p2align 4",
                "2:",
                ".byte 0x0f, 0x01, 0xfc",
                "add rax, 64",
                "dec rcx",
                "jnz 2b",
                inout("rax") dst.add(head) => _,
                inout("rcx") lines => _,
                options(nostack),
            );
        }
        let k = head + lines * 64;
        zero_upto_64(dst.add(k), len - k);
    }
}

/// As [`clear_unfenced`], then a store fence.
///
/// # Safety
/// As [`clear_unfenced`].
pub unsafe fn clear(dst: *mut u8, len: usize) {
    // SAFETY: forwarded contract.
    unsafe {
        clear_unfenced(dst, len);
        _mm_sfence();
    }
}
