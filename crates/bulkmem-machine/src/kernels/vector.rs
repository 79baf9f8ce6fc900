//! The vector loops, one body for both widths: `avx2.rs` and `avx512.rs`
//! each give a [`Vector`] (its moves, and how it copies or zeroes up to 64
//! bytes) and instantiate these bodies with [`vector_kernels!`] under
//! their target features, as memchr's generic searchers are. Every body
//! and every method is `#[inline(always)]`, so each width's kernel is one
//! function with its own instructions, as when the two were written out
//! by hand.
//!
//! Shape of every kernel: a head that ends where the stores can be
//! aligned, a body of aligned stores (one vector temporal; a whole 64-byte
//! line non-temporal, so that streaming stores fill write-combining
//! lines), and a tail. No access leaves the range.

use super::small::to_line;
use super::{nt_copy_shape, prefetch_ahead, NtCopyShape, NT_COPY_PAGES, PREFETCH_AHEAD};

/// One vector register's moves. Methods are unsafe to call: the caller
/// runs with the vector's CPU features and owns the bytes named.
pub(super) trait Vector: Copy {
    /// Bytes in a vector: 32 or 64, a divisor of a cache line or a line.
    const BYTES: usize;
    fn zero() -> Self;
    /// # Safety
    /// `src` readable for `BYTES` bytes, any alignment.
    unsafe fn load(src: *const u8) -> Self;
    /// # Safety
    /// `dst` writable for `BYTES` bytes and `BYTES`-aligned.
    unsafe fn store(dst: *mut u8, v: Self);
    /// # Safety
    /// `dst` writable for `BYTES` bytes, any alignment.
    unsafe fn store_unaligned(dst: *mut u8, v: Self);
    /// A non-temporal store.
    ///
    /// # Safety
    /// As [`Vector::store`].
    unsafe fn stream(dst: *mut u8, v: Self);
    /// Copies `n <= 64` bytes, touching nothing else.
    ///
    /// # Safety
    /// `src` readable and `dst` writable for `n` bytes, not overlapping.
    unsafe fn copy_small(dst: *mut u8, src: *const u8, n: usize);
    /// Zeroes `n <= 64` bytes, touching nothing else.
    ///
    /// # Safety
    /// `dst` writable for `n` bytes.
    unsafe fn zero_small(dst: *mut u8, n: usize);
}

/// Vectors in 256 bytes (the most any width needs: 8 of 32).
const MAX_PER_256: usize = 8;

/// Temporal copy.
///
/// # Safety
/// The CPU has `V`'s features; `src` readable and `dst` writable for
/// `len` bytes, not overlapping.
#[inline(always)]
pub(super) unsafe fn copy<V: Vector>(dst: *mut u8, src: *const u8, len: usize) {
    let w = V::BYTES;
    if len <= 64 {
        // SAFETY: forwarded contract.
        return unsafe { V::copy_small(dst, src, len) };
    }
    // Bounds: len > 64 >= w. The head covers [0, w), the tail
    // [len - w, len); the body starts at k in 1..=w, where dst + k is
    // w-aligned, and each iteration ends at or before len by its loop
    // condition.
    // SAFETY: (whole block) every access lies in [0, len) (bounds above),
    // which the caller's contract makes readable/writable.
    unsafe {
        let head = V::load(src);
        let tail = V::load(src.add(len - w));
        let mut k = w - (dst as usize & (w - 1));
        while k + 4 * w <= len {
            // Four named loads, then four stores: as an array LLVM turned
            // the AVX2 stores into a reversed unaligned block move.
            let a = V::load(src.add(k));
            let b = V::load(src.add(k + w));
            let c = V::load(src.add(k + 2 * w));
            let d = V::load(src.add(k + 3 * w));
            V::store(dst.add(k), a);
            V::store(dst.add(k + w), b);
            V::store(dst.add(k + 2 * w), c);
            V::store(dst.add(k + 3 * w), d);
            k += 4 * w;
        }
        while k + w <= len {
            V::store(dst.add(k), V::load(src.add(k)));
            k += w;
        }
        V::store_unaligned(dst, head);
        V::store_unaligned(dst.add(len - w), tail);
    }
}

/// Non-temporal copy without the closing fence: the caller must
/// [`drain`](super::drain) before the data is published to anyone.
///
/// # Safety
/// As [`copy`].
#[inline(always)]
pub(super) unsafe fn copy_nt_unfenced<V: Vector>(dst: *mut u8, src: *const u8, len: usize) {
    let w = V::BYTES;
    let per_256 = 256 / w;
    let head = to_line(dst).min(len);
    let shape = nt_copy_shape();
    let block = shape.block();
    // Bounds: the head is [0, head) with head <= len; each interleaved
    // block is [k, k + block) with k + block <= len by its loop condition,
    // every access in it at k + p * 4096 + i + w * j below k + block; the
    // body starts 64-aligned at `head` and each iteration ends at or
    // before len; the tail is exactly [k, len) with len - k < 64.
    // Prefetches may name bytes past the range: they never fault.
    // SAFETY: (whole block) every access lies in [0, len) (bounds above),
    // which the caller's contract makes readable/writable.
    unsafe {
        V::copy_small(dst, src, head);
        let mut k = head;
        while shape == NtCopyShape::FourPages && k + block <= len {
            let mut i = 0;
            while i < 4096 {
                for p in 0..NT_COPY_PAGES {
                    let at = k + p * 4096 + i;
                    let mut v = [V::zero(); 4];
                    for (j, v) in v.iter_mut().enumerate() {
                        *v = V::load(src.add(at + w * j));
                    }
                    for (j, &v) in v.iter().enumerate() {
                        V::stream(dst.add(at + w * j), v);
                    }
                }
                i += 4 * w;
            }
            k += block;
        }
        while shape == NtCopyShape::TwoPages && k + block <= len {
            let mut i = 0;
            while i < 4096 {
                let (a, b) = (k + i, k + 4096 + i);
                prefetch_ahead(src.wrapping_add(a + 4 * w), 8 * w);
                prefetch_ahead(src.wrapping_add(b + 4 * w), 8 * w);
                let mut v = [V::zero(); 8];
                for (j, v) in v[..4].iter_mut().enumerate() {
                    *v = V::load(src.add(a + w * j));
                }
                for (j, v) in v[4..].iter_mut().enumerate() {
                    *v = V::load(src.add(b + w * j));
                }
                for (j, &v) in v[..4].iter().enumerate() {
                    V::stream(dst.add(a + w * j), v);
                }
                for (j, &v) in v[4..].iter().enumerate() {
                    V::stream(dst.add(b + w * j), v);
                }
                i += 4 * w;
            }
            k += block;
        }
        while k + 256 <= len {
            if shape == NtCopyShape::Stream && k + 256 + PREFETCH_AHEAD <= len {
                prefetch_ahead(src.add(k + PREFETCH_AHEAD), 256);
            }
            // Load a whole 256-byte block before streaming it out, as
            // Linux's memcpy_orig does, so loads run ahead of the stores.
            let mut v = [V::zero(); MAX_PER_256];
            for (i, v) in v[..per_256].iter_mut().enumerate() {
                *v = V::load(src.add(k + w * i));
            }
            for (i, &v) in v[..per_256].iter().enumerate() {
                V::stream(dst.add(k + w * i), v);
            }
            k += 256;
        }
        while k + 64 <= len {
            let mut v = [V::zero(); MAX_PER_256];
            for (i, v) in v[..64 / w].iter_mut().enumerate() {
                *v = V::load(src.add(k + w * i));
            }
            for (i, &v) in v[..64 / w].iter().enumerate() {
                V::stream(dst.add(k + w * i), v);
            }
            k += 64;
        }
        V::copy_small(dst.add(k), src.add(k), len - k);
    }
}

/// Temporal clear: for small or soon-read destinations, where `rep stosb`
/// still pays its start-up cost (3x slower at 1 KiB on Zen 5).
///
/// # Safety
/// The CPU has `V`'s features; `dst` writable for `len` bytes.
#[inline(always)]
pub(super) unsafe fn clear<V: Vector>(dst: *mut u8, len: usize) {
    let w = V::BYTES;
    if len <= 64 {
        // SAFETY: forwarded contract.
        return unsafe { V::zero_small(dst, len) };
    }
    let z = V::zero();
    // SAFETY: (whole block) len > 64 >= w; the head [0, w) and the tail
    // [len - w, len) are in range, and the aligned body starts at k in
    // 1..=w and stays below len by its loop conditions.
    unsafe {
        V::store_unaligned(dst, z);
        let mut k = w - (dst as usize & (w - 1));
        while k + 4 * w <= len {
            for i in 0..4 {
                V::store(dst.add(k + w * i), z);
            }
            k += 4 * w;
        }
        while k + w <= len {
            V::store(dst.add(k), z);
            k += w;
        }
        V::store_unaligned(dst.add(len - w), z);
    }
}

/// Non-temporal clear without the closing fence: the caller must
/// [`drain`](super::drain) before the data is published to anyone.
///
/// # Safety
/// As [`clear`].
#[inline(always)]
pub(super) unsafe fn clear_nt_unfenced<V: Vector>(dst: *mut u8, len: usize) {
    let w = V::BYTES;
    let head = to_line(dst).min(len);
    let z = V::zero();
    // SAFETY: (whole block) as in copy_nt_unfenced: the head is [0, head)
    // with head <= len, the streamed body is 64-aligned from `head` and ends
    // at or before len, and the tail is exactly [k, len) with len - k < 64.
    unsafe {
        V::zero_small(dst, head);
        let mut k = head;
        while k + 256 <= len {
            for i in 0..256 / w {
                V::stream(dst.add(k + w * i), z);
            }
            k += 256;
        }
        while k + 64 <= len {
            for i in 0..64 / w {
                V::stream(dst.add(k + w * i), z);
            }
            k += 64;
        }
        V::zero_small(dst.add(k), len - k);
    }
}

/// One width's register and its [`Vector`] impl: `name(raw)`, its bytes,
/// the intrinsics `[zero, load, store, store_unaligned, stream]` and the
/// routines for up to 64 bytes `[copy, zero]`. The only lines a width
/// writes (`avx2.rs`, `avx512.rs`) beside [`vector_kernels`].
macro_rules! vector_register {
    (
        $name:ident($raw:ty), $bytes:literal,
        [$zero:ident, $load:ident, $store:ident, $storeu:ident, $stream:ident],
        [$copy_small:path, $zero_small:path] $(,)?
    ) => {
        /// A vector register of this width.
        #[derive(Clone, Copy)]
        pub(super) struct $name($raw);

        // SAFETY (every method): the caller runs with the width's features
        // and owns the bytes named, as `Vector` requires.
        impl Vector for $name {
            const BYTES: usize = $bytes;

            #[inline(always)]
            fn zero() -> $name {
                // SAFETY: see above.
                $name(unsafe { $zero() })
            }
            #[inline(always)]
            unsafe fn load(src: *const u8) -> $name {
                // SAFETY: see above.
                $name(unsafe { $load(src.cast()) })
            }
            #[inline(always)]
            unsafe fn store(dst: *mut u8, v: $name) {
                // SAFETY: see above.
                unsafe { $store(dst.cast(), v.0) }
            }
            #[inline(always)]
            unsafe fn store_unaligned(dst: *mut u8, v: $name) {
                // SAFETY: see above.
                unsafe { $storeu(dst.cast(), v.0) }
            }
            #[inline(always)]
            unsafe fn stream(dst: *mut u8, v: $name) {
                // SAFETY: see above.
                unsafe { $stream(dst.cast(), v.0) }
            }
            #[inline(always)]
            unsafe fn copy_small(dst: *mut u8, src: *const u8, n: usize) {
                // SAFETY: see above.
                unsafe { $copy_small(dst, src, n) }
            }
            #[inline(always)]
            unsafe fn zero_small(dst: *mut u8, n: usize) {
                // SAFETY: see above.
                unsafe { $zero_small(dst, n) }
            }
        }
    };
}
pub(super) use vector_register;

/// The six kernels of one width: the four bodies above for `$v`, and the
/// non-temporal ones again with their closing fence, each a function
/// compiled with `$features`.
macro_rules! vector_kernels {
    ($v:ty, $features:literal) => {
        /// Temporal copy (`vector::copy`).
        ///
        /// # Safety
        /// The CPU has this width's features; `src` readable and `dst`
        /// writable for `len` bytes, not overlapping.
        #[target_feature(enable = $features)]
        pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
            // SAFETY: forwarded contract.
            unsafe { super::vector::copy::<$v>(dst, src, len) }
        }

        /// Non-temporal copy without the closing fence
        /// (`vector::copy_nt_unfenced`).
        ///
        /// # Safety
        /// As [`copy`].
        #[target_feature(enable = $features)]
        pub unsafe fn copy_nt_unfenced(dst: *mut u8, src: *const u8, len: usize) {
            // SAFETY: forwarded contract.
            unsafe { super::vector::copy_nt_unfenced::<$v>(dst, src, len) }
        }

        /// Temporal clear (`vector::clear`).
        ///
        /// # Safety
        /// The CPU has this width's features; `dst` writable for `len`
        /// bytes.
        #[target_feature(enable = $features)]
        pub unsafe fn clear(dst: *mut u8, len: usize) {
            // SAFETY: forwarded contract.
            unsafe { super::vector::clear::<$v>(dst, len) }
        }

        /// Non-temporal clear without the closing fence
        /// (`vector::clear_nt_unfenced`).
        ///
        /// # Safety
        /// As [`clear`].
        #[target_feature(enable = $features)]
        pub unsafe fn clear_nt_unfenced(dst: *mut u8, len: usize) {
            // SAFETY: forwarded contract.
            unsafe { super::vector::clear_nt_unfenced::<$v>(dst, len) }
        }

        /// As [`copy_nt_unfenced`], then a store fence: the data is
        /// ordered before anything the caller does next.
        ///
        /// # Safety
        /// As [`copy_nt_unfenced`].
        #[target_feature(enable = $features)]
        pub unsafe fn copy_nt(dst: *mut u8, src: *const u8, len: usize) {
            // SAFETY: forwarded contract.
            unsafe {
                copy_nt_unfenced(dst, src, len);
                core::arch::x86_64::_mm_sfence();
            }
        }

        /// As [`clear_nt_unfenced`], then a store fence: the data is
        /// ordered before anything the caller does next.
        ///
        /// # Safety
        /// As [`clear_nt_unfenced`].
        #[target_feature(enable = $features)]
        pub unsafe fn clear_nt(dst: *mut u8, len: usize) {
            // SAFETY: forwarded contract.
            unsafe {
                clear_nt_unfenced(dst, len);
                core::arch::x86_64::_mm_sfence();
            }
        }
    };
}

pub(super) use vector_kernels;
