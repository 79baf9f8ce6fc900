//! The primitives, one family per file, behind one table. Each kernel takes
//! raw pointers and a length, handles any alignment and any length
//! (including 0), and never touches a byte outside the range it was given.
//! Non-temporal kernels end with a store fence.
//!
//! Callers must check availability (`Strategy::missing_feature`) first: the
//! table hands out AVX/CLZERO kernels without looking at the CPU.

pub mod libc_mem;
pub mod per_page;
pub mod portable;
pub mod small;

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "x86_64")]
pub mod clzero;
#[cfg(target_arch = "x86_64")]
pub mod rep;

use crate::strategy::Strategy;

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

/// The copy kernel of a concrete strategy compiled for this architecture.
#[inline]
pub fn copy_kernel(s: Strategy) -> Option<CopyFn> {
    Some(match s {
        Strategy::PerPage => per_page::copy,
        Strategy::Libc => libc_mem::copy,
        Strategy::Portable => portable::copy,
        #[cfg(target_arch = "x86_64")]
        Strategy::RepMovsq => rep::copy_movsq,
        #[cfg(target_arch = "x86_64")]
        Strategy::RepMovsb => rep::copy_movsb,
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx2 => avx2::copy,
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx2Nt => avx2::copy_nt,
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx512 => avx512::copy,
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx512Nt => avx512::copy_nt,
        _ => return None,
    })
}

/// As [`copy_kernel`], but non-temporal kernels skip their closing fence:
/// the caller must [`drain`] before publishing the data.
pub fn copy_kernel_unfenced(s: Strategy) -> Option<CopyFn> {
    match s {
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx2Nt => Some(avx2::copy_nt_unfenced),
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx512Nt => Some(avx512::copy_nt_unfenced),
        _ => copy_kernel(s),
    }
}

/// As [`clear_kernel`], but non-temporal kernels skip their closing fence:
/// the caller must [`drain`] before publishing the data.
pub fn clear_kernel_unfenced(s: Strategy) -> Option<ClearFn> {
    match s {
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx2Nt => Some(avx2::clear_nt_unfenced),
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx512Nt => Some(avx512::clear_nt_unfenced),
        #[cfg(target_arch = "x86_64")]
        Strategy::Clzero => Some(clzero::clear_unfenced),
        _ => clear_kernel(s),
    }
}

/// The clear kernel of a concrete strategy compiled for this architecture.
#[inline]
pub fn clear_kernel(s: Strategy) -> Option<ClearFn> {
    Some(match s {
        Strategy::PerPage => per_page::clear,
        Strategy::Libc => libc_mem::clear,
        Strategy::Portable => portable::clear,
        #[cfg(target_arch = "x86_64")]
        Strategy::RepStosq => rep::clear_stosq,
        #[cfg(target_arch = "x86_64")]
        Strategy::RepStosb => rep::clear_stosb,
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx2 => avx2::clear,
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx2Nt => avx2::clear_nt,
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx512 => avx512::clear,
        #[cfg(target_arch = "x86_64")]
        Strategy::Avx512Nt => avx512::clear_nt,
        #[cfg(target_arch = "x86_64")]
        Strategy::Clzero => clzero::clear,
        _ => return None,
    })
}
