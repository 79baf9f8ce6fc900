//! 256-bit AVX2 loops. The temporal copy suits hot data (the kernel's batched folio-copy patches' cache-hot
//! table); the non-temporal forms stream whole 64-byte lines past the cache,
//! which wins once the data is write-once or larger than the LLC, because no
//! destination line is read for ownership first.
//!
//! Shape of every kernel: unaligned head, a body whose stores are aligned
//! (32 bytes temporal, 64 bytes non-temporal so that streaming stores fill
//! whole write-combining lines), unaligned tail. No access leaves the range.

use core::arch::x86_64::*;

use super::small::{copy_upto_64, to_line, zero_upto_64};
use super::{nt_copy_interleaves, prefetch_ahead, NT_COPY_BLOCK, NT_COPY_PAGES, PREFETCH_AHEAD};

/// # Safety
/// The CPU has AVX2; `src` readable and `dst` writable for `len` bytes, not
/// overlapping.
#[target_feature(enable = "avx2")]
pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
    if len <= 64 {
        // SAFETY: forwarded contract.
        return unsafe { copy_upto_64(dst, src, len) };
    }
    // SAFETY: (whole block) len > 64. head covers [0, 32), tail covers
    // [len - 32, len); the body starts at k in 1..=32, where dst + k is
    // 32-aligned, and each iteration stays below len by its loop condition.
    unsafe {
        let head = _mm256_loadu_si256(src.cast());
        let tail = _mm256_loadu_si256(src.add(len - 32).cast());
        let mut k = 32 - (dst as usize & 31);
        while k + 128 <= len {
            let a = _mm256_loadu_si256(src.add(k).cast());
            let b = _mm256_loadu_si256(src.add(k + 32).cast());
            let c = _mm256_loadu_si256(src.add(k + 64).cast());
            let d = _mm256_loadu_si256(src.add(k + 96).cast());
            _mm256_store_si256(dst.add(k).cast(), a);
            _mm256_store_si256(dst.add(k + 32).cast(), b);
            _mm256_store_si256(dst.add(k + 64).cast(), c);
            _mm256_store_si256(dst.add(k + 96).cast(), d);
            k += 128;
        }
        while k + 32 <= len {
            _mm256_store_si256(dst.add(k).cast(), _mm256_loadu_si256(src.add(k).cast()));
            k += 32;
        }
        _mm256_storeu_si256(dst.cast(), head);
        _mm256_storeu_si256(dst.add(len - 32).cast(), tail);
    }
}

/// Non-temporal copy without the closing fence: the caller must
/// [`drain`](super::drain) before the data is published to anyone.
///
/// # Safety
/// As [`copy`].
#[target_feature(enable = "avx2")]
pub unsafe fn copy_nt_unfenced(dst: *mut u8, src: *const u8, len: usize) {
    let head = to_line(dst).min(len);
    let interleave = nt_copy_interleaves();
    // Bounds: the head is [0, head) with head <= len; each interleaved
    // block is [k, k + NT_COPY_BLOCK) with k + NT_COPY_BLOCK <= len by its
    // loop condition, every access in it below k + NT_COPY_BLOCK; the body
    // starts 64-aligned at `head` and each iteration ends at or before len;
    // the tail is exactly [k, len) with len - k < 64.
    // SAFETY: (whole block) every access lies in [0, len) (bounds above),
    // which the caller's contract makes readable/writable.
    unsafe {
        copy_upto_64(dst, src, head);
        let mut k = head;
        while interleave && k + NT_COPY_BLOCK <= len {
            let mut i = 0;
            while i < 4096 {
                for p in 0..NT_COPY_PAGES {
                    let at = k + p * 4096 + i;
                    let mut v = [_mm256_setzero_si256(); 4];
                    for (j, v) in v.iter_mut().enumerate() {
                        *v = _mm256_loadu_si256(src.add(at + 32 * j).cast());
                    }
                    for (j, v) in v.iter().enumerate() {
                        _mm256_stream_si256(dst.add(at + 32 * j).cast(), *v);
                    }
                }
                i += 128;
            }
            k += NT_COPY_BLOCK;
        }
        while k + 256 <= len {
            if !interleave && k + 256 + PREFETCH_AHEAD <= len {
                prefetch_ahead(src.add(k + PREFETCH_AHEAD), 256);
            }
            // Load a whole 256-byte block before streaming it out, as
            // Linux's memcpy_orig does, so loads run ahead of the stores.
            let mut v = [_mm256_setzero_si256(); 8];
            for (i, v) in v.iter_mut().enumerate() {
                *v = _mm256_loadu_si256(src.add(k + 32 * i).cast());
            }
            for (i, v) in v.iter().enumerate() {
                _mm256_stream_si256(dst.add(k + 32 * i).cast(), *v);
            }
            k += 256;
        }
        while k + 64 <= len {
            let a = _mm256_loadu_si256(src.add(k).cast());
            let b = _mm256_loadu_si256(src.add(k + 32).cast());
            _mm256_stream_si256(dst.add(k).cast(), a);
            _mm256_stream_si256(dst.add(k + 32).cast(), b);
            k += 64;
        }
        copy_upto_64(dst.add(k), src.add(k), len - k);
    }
}

/// Temporal clear: for small or soon-read destinations, where `rep stosb`
/// still pays its start-up cost (3x slower at 1 KiB on Zen 5).
///
/// # Safety
/// The CPU has AVX2; `dst` writable for `len` bytes.
#[target_feature(enable = "avx2")]
pub unsafe fn clear(dst: *mut u8, len: usize) {
    if len <= 64 {
        // SAFETY: forwarded contract.
        return unsafe { zero_upto_64(dst, len) };
    }
    let z = _mm256_setzero_si256();
    // SAFETY: (whole block) len > 64; the head [0, 32) and tail
    // [len - 32, len) are in range, and the aligned body starts at k in 1..=32
    // and stays below len by its loop conditions.
    unsafe {
        _mm256_storeu_si256(dst.cast(), z);
        let mut k = 32 - (dst as usize & 31);
        while k + 128 <= len {
            for i in 0..4 {
                _mm256_store_si256(dst.add(k + 32 * i).cast(), z);
            }
            k += 128;
        }
        while k + 32 <= len {
            _mm256_store_si256(dst.add(k).cast(), z);
            k += 32;
        }
        _mm256_storeu_si256(dst.add(len - 32).cast(), z);
    }
}

/// Non-temporal clear without the closing fence: the caller must
/// [`drain`](super::drain) before the data is published to anyone.
///
/// # Safety
/// The CPU has AVX2; `dst` writable for `len` bytes.
#[target_feature(enable = "avx2")]
pub unsafe fn clear_nt_unfenced(dst: *mut u8, len: usize) {
    let head = to_line(dst).min(len);
    let z = _mm256_setzero_si256();
    // SAFETY: (whole block) as in copy_nt_unfenced: the head is [0, head)
    // with head <= len, the streamed body is 64-aligned from `head` and ends
    // at or before len, and the tail is exactly [k, len) with len - k < 64.
    unsafe {
        zero_upto_64(dst, head);
        let mut k = head;
        while k + 256 <= len {
            for i in 0..8 {
                _mm256_stream_si256(dst.add(k + 32 * i).cast(), z);
            }
            k += 256;
        }
        while k + 64 <= len {
            _mm256_stream_si256(dst.add(k).cast(), z);
            _mm256_stream_si256(dst.add(k + 32).cast(), z);
            k += 64;
        }
        zero_upto_64(dst.add(k), len - k);
    }
}

/// As [`copy_nt_unfenced`], then a store fence: the data is ordered before
/// anything the caller does next.
///
/// # Safety
/// As [`copy_nt_unfenced`].
#[target_feature(enable = "avx2")]
pub unsafe fn copy_nt(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: forwarded contract.
    unsafe {
        copy_nt_unfenced(dst, src, len);
        _mm_sfence();
    }
}

/// As [`clear_nt_unfenced`], then a store fence: the data is ordered before
/// anything the caller does next.
///
/// # Safety
/// As [`clear_nt_unfenced`].
#[target_feature(enable = "avx2")]
pub unsafe fn clear_nt(dst: *mut u8, len: usize) {
    // SAFETY: forwarded contract.
    unsafe {
        clear_nt_unfenced(dst, len);
        _mm_sfence();
    }
}
