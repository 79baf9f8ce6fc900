//! 256-bit AVX2 loops (the bodies are `vector.rs`'s). The temporal copy
//! suits hot data (the kernel's batched folio-copy patches' cache-hot
//! table); the non-temporal forms stream whole 64-byte lines past the
//! cache, which wins once the data is write-once or larger than the LLC,
//! because no destination line is read for ownership first. Heads and
//! tails of up to 64 bytes use overlapping word moves (`small.rs`).

use core::arch::x86_64::*;

use super::small::{copy_upto_64, zero_upto_64};
use super::vector::{vector_kernels, vector_register, Vector};

vector_register!(
    Ymm(__m256i),
    32,
    [
        _mm256_setzero_si256,
        _mm256_loadu_si256,
        _mm256_store_si256,
        _mm256_storeu_si256,
        _mm256_stream_si256
    ],
    [copy_upto_64, zero_upto_64]
);

vector_kernels!(Ymm, "avx2");
