//! The primitives, one family per file, behind one table. Each kernel takes
//! raw pointers and a length, handles any alignment and any length
//! (including 0), and never touches a byte outside the range it was given.
//! Non-temporal kernels end with a store fence.
//!
//! Which kernel belongs to which strategy is the descriptor table's
//! (`descriptor.rs`); callers outside the crate get them through
//! [`crate::Kernel`], which checks the CPU first.

pub(crate) mod libc_mem;
pub(crate) mod per_page;
pub(crate) mod portable;
pub(crate) mod small;

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512;
#[cfg(target_arch = "x86_64")]
pub(crate) mod clzero;
#[cfg(target_arch = "x86_64")]
pub(crate) mod rep;

/// `dst`, `src`, `len`. Safety: `src` readable and `dst` writable for `len`
/// bytes, the ranges do not overlap, and the CPU has the kernel's features.
pub type CopyFn = unsafe fn(*mut u8, *const u8, usize);

/// `dst`, `len`. Safety: `dst` writable for `len` bytes, and the CPU has the
/// kernel's features.
pub type ClearFn = unsafe fn(*mut u8, usize);

/// Orders every non-temporal store issued so far by this thread before any
/// later store (`sfence`). Batches run the `*_unfenced` kernels over all
/// their extents and drain once, instead of fencing after every extent:
/// on scattered 4 KiB clears that fence per extent cost 2.5x.
#[inline]
pub fn drain() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no preconditions; SSE is part of x86_64.
    unsafe {
        core::arch::x86_64::_mm_sfence()
    };
}

/// Pages a non-temporal copy reads at once: its body walks `NT_COPY_PAGES`
/// runs a page apart, 256 bytes of each per step, as glibc's large
/// `memcpy` does (`large_memcpy_2x/4x`). Several read streams keep more
/// DRAM reads in flight than one, and the store side does not care (the
/// same interleave gains nothing for a non-temporal clear). Measured on a
/// 2-vCPU Emerald Rapids VM, cold copies, one thread (medians of 9-15):
/// 256 MiB 9.6 -> 11.2 GB/s with AVX-512 (glibc 10.7), 2 MiB 9.4 -> 10.7,
/// 1 GiB 9.5 -> 10.4; AVX2 9.5 -> 11.1 at 256 MiB. Eight pages measured
/// within 2% of four; four keeps the block (16 KiB) small enough for
/// batches of 16 KiB extents.
pub(crate) const NT_COPY_PAGES: usize = 4;

/// The span one interleaved step covers: [`NT_COPY_PAGES`] pages.
pub(crate) const NT_COPY_BLOCK: usize = NT_COPY_PAGES * 4096;

/// Bytes of the next run's source a batch requests before copying the
/// current run. Scattered 4 KiB extents are latency-bound (each one a fresh
/// DRAM page the hardware prefetcher has not seen); asking early overlaps
/// that latency with the current copy. Measured on Zen 5, cold scattered 4K:
/// 1.22x over no prefetch; a whole page ahead was no better than half.
pub const PREFETCH_AHEAD: usize = 2048;

/// Requests the first [`PREFETCH_AHEAD`] bytes (at most `len`) of `src`.
/// Never faults, whatever `src` is: a prefetch is only a hint.
#[inline]
pub fn prefetch_ahead(src: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let mut off = 0;
        while off < len.min(PREFETCH_AHEAD) {
            // SAFETY: prefetch instructions do not fault and do not change
            // memory, whatever the address; wrapping_add keeps the pointer
            // arithmetic defined.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(src.wrapping_add(off).cast()) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (src, len);
}
