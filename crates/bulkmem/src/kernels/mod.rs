//! The primitives, one family per file, behind one table. Each kernel takes
//! raw pointers and a length, handles any alignment and any length
//! (including 0), and never touches a byte outside the range it was given.
//! Non-temporal kernels end with a store fence.
//!
//! Which kernel belongs to which strategy is the descriptor table's
//! (`descriptor.rs`); callers outside the crate get them through
//! [`crate::Kernel`], which checks the CPU first.

use std::sync::atomic::{AtomicU8, Ordering};

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
pub(crate) mod gang;
#[cfg(target_arch = "x86_64")]
pub(crate) mod movsb_or_avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod rep;
#[cfg(target_arch = "x86_64")]
mod vector;

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

/// Pages a non-temporal copy reads at once on Intel
/// ([`nt_copy_interleaves`]): its body walks `NT_COPY_PAGES` runs a page
/// apart, one vector group of each per step, as glibc's large `memcpy`
/// does (`large_memcpy_2x/4x`). Several read streams keep more DRAM reads
/// in flight than one, and the store side does not care (the same
/// interleave gains nothing for a non-temporal clear). Measured on a
/// 2-vCPU Emerald Rapids VM, cold copies, one thread (medians of 9-15):
/// 256 MiB 9.6 -> 11.2 GB/s with AVX-512 (glibc 10.7), 2 MiB 9.4 -> 10.7,
/// 1 GiB 9.5 -> 10.4; AVX2 9.5 -> 11.1 at 256 MiB. Eight pages measured
/// within 2% of four; four keeps the block (16 KiB) small enough for
/// batches of 16 KiB extents.
pub(crate) const NT_COPY_PAGES: usize = 4;

/// Whether this CPU's non-temporal copies read [`NT_COPY_PAGES`] pages at
/// once (Intel) or one stream, requesting the source [`PREFETCH_AHEAD`]
/// bytes ahead (every other CPU).
///
/// The interleave stores a page's group and then loads the next page's
/// at the same offset within its page: on AMD that load waits on the
/// store before it whenever source and destination share their offset
/// within a page (4 KiB aliasing), which page-aligned buffers always do.
/// Measured on a 2-vCPU Zen 3 VM (EPYC, FSRM, AVX2), hot copies, one
/// thread, medians of 7, C loops of the same shapes: 1 GiB
/// interleaved 8.3 GB/s, one stream 11.0, one stream prefetching 2 KiB
/// ahead 13.4, glibc 12.3; 256 MiB with the source 48 bytes into a line
/// 8.1, 10.6, 13.4 and 11.7; 64 MiB 7.7, 9.4, 10.7 and 7.1. Loading all
/// four pages before storing (glibc's order) measured 9.9 at 1 GiB:
/// still behind one stream. Intel keeps the interleave it was measured
/// with.
pub(crate) fn nt_copy_interleaves() -> bool {
    match NT_COPY_SHAPE.load(Ordering::Relaxed) {
        FORCED_STREAM => false,
        FORCED_INTERLEAVE => true,
        _ => crate::machine::cpu::facts().vendor == crate::machine::cpu::Vendor::Intel,
    }
}

/// [`nt_copy_interleaves`]' answer when a test forced one: 0 none.
static NT_COPY_SHAPE: AtomicU8 = AtomicU8::new(0);
const FORCED_STREAM: u8 = 1;
const FORCED_INTERLEAVE: u8 = 2;

/// Makes non-temporal copies take one shape whatever the CPU (`None`: the
/// CPU's own), so that tests run both shapes on every machine. Both are
/// correct everywhere; only their speed differs. Checked kernels made
/// after the call follow it. (Feature `test-hooks`.)
#[cfg(feature = "test-hooks")]
pub fn force_nt_copy_shape(interleave: Option<bool>) {
    let v = match interleave {
        None => 0,
        Some(false) => FORCED_STREAM,
        Some(true) => FORCED_INTERLEAVE,
    };
    NT_COPY_SHAPE.store(v, Ordering::Relaxed);
}

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
