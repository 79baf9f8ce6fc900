//! 256-bit AVX2 loops (the bodies are `vector.rs`'s). The temporal copy
//! suits hot data (the kernel's batched folio-copy patches' cache-hot
//! table); the non-temporal forms stream whole 64-byte lines past the
//! cache, which wins once the data is write-once or larger than the LLC,
//! because no destination line is read for ownership first. Heads and
//! tails of up to 64 bytes use overlapping word moves (`small.rs`).

use core::arch::x86_64::*;

use super::small::{copy_upto_64, zero_upto_64};
use super::vector::{vector_kernels, Vector};

/// A YMM register.
#[derive(Clone, Copy)]
pub(super) struct Ymm(__m256i);

// SAFETY (every method): the caller runs with AVX2 and owns the bytes
// named, as `Vector` requires.
impl Vector for Ymm {
    const BYTES: usize = 32;

    #[inline(always)]
    fn zero() -> Ymm {
        // SAFETY: see above.
        Ymm(unsafe { _mm256_setzero_si256() })
    }
    #[inline(always)]
    unsafe fn load(src: *const u8) -> Ymm {
        // SAFETY: see above.
        Ymm(unsafe { _mm256_loadu_si256(src.cast()) })
    }
    #[inline(always)]
    unsafe fn store(dst: *mut u8, v: Ymm) {
        // SAFETY: see above.
        unsafe { _mm256_store_si256(dst.cast(), v.0) }
    }
    #[inline(always)]
    unsafe fn store_unaligned(dst: *mut u8, v: Ymm) {
        // SAFETY: see above.
        unsafe { _mm256_storeu_si256(dst.cast(), v.0) }
    }
    #[inline(always)]
    unsafe fn stream(dst: *mut u8, v: Ymm) {
        // SAFETY: see above.
        unsafe { _mm256_stream_si256(dst.cast(), v.0) }
    }
    #[inline(always)]
    unsafe fn copy_small(dst: *mut u8, src: *const u8, n: usize) {
        // SAFETY: see above.
        unsafe { copy_upto_64(dst, src, n) }
    }
    #[inline(always)]
    unsafe fn zero_small(dst: *mut u8, n: usize) {
        // SAFETY: see above.
        unsafe { zero_upto_64(dst, n) }
    }
}

vector_kernels!(Ymm, "avx2");
