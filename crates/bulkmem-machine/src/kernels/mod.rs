//! The primitives, one family per file, behind one table. Each kernel takes
//! raw pointers and a length, handles any alignment and any length
//! (including 0), and never touches a byte outside the range it was given.
//! Non-temporal kernels end with a store fence.
//!
//! Which kernel belongs to which strategy is the descriptor table's
//! (`descriptor.rs`); callers outside the crate get them through the
//! policy's handles (`CopyKernel`, `ClearKernel`), which check the CPU first.

use std::sync::atomic::{AtomicU8, Ordering};

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
pub mod gang;
#[cfg(target_arch = "x86_64")]
pub mod movsb_or_avx2;
#[cfg(target_arch = "x86_64")]
pub mod rep;
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

/// How a non-temporal copy walks its source: the one choice among the
/// large copies' shapes that no single CPU settles, so it is a fact of the
/// machine ([`nt_copy_shape`]) read by every non-temporal copy, checked
/// or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum NtCopyShape {
    /// One stream, requesting the source 2 KiB ahead (`PREFETCH_AHEAD`).
    Stream = 0,
    /// Four runs a page apart (`NT_COPY_PAGES`), one vector group of
    /// each per step, each page's group stored before the next page's is
    /// loaded. Measured on a 2-vCPU Emerald Rapids VM, cold copies, one
    /// thread (medians of 9-15): 256 MiB 9.6 -> 11.2 GB/s with AVX-512
    /// (glibc 10.7), 2 MiB 9.4 -> 10.7, 1 GiB 9.5 -> 10.4; AVX2 9.5 ->
    /// 11.1 at 256 MiB. Eight pages measured within 2% of four; four
    /// keeps the block (16 KiB) small enough for batches of 16 KiB
    /// extents.
    FourPages = 1,
    /// glibc's large copy (`large_memcpy_2x` in
    /// memmove-vec-unaligned-erms.S): two runs a page apart, both groups
    /// of a step loaded before either is stored, each run requesting its
    /// next two groups. The review's Zen 2 measured glibc so at 12.05 GB/s
    /// against 10.0 for one stream (256 MiB cold).
    TwoPages = 2,
}

impl NtCopyShape {
    /// Every shape, for tests and benchmarks that run each.
    pub const ALL: [NtCopyShape; 3] = [Self::Stream, Self::FourPages, Self::TwoPages];

    /// Its name in benchmark rows and profiles.
    pub fn name(self) -> &'static str {
        match self {
            Self::Stream => "stream",
            Self::FourPages => "four-pages",
            Self::TwoPages => "two-pages",
        }
    }

    /// Bytes one interleaved step covers (0 for one stream).
    pub const fn block(self) -> usize {
        match self {
            Self::Stream => 0,
            Self::FourPages => NT_COPY_PAGES * 4096,
            Self::TwoPages => 2 * 4096,
        }
    }

    fn from_u8(v: u8) -> Option<NtCopyShape> {
        Self::ALL.into_iter().find(|s| *s as u8 == v)
    }
}

/// Pages a [`NtCopyShape::FourPages`] step reads.
pub const NT_COPY_PAGES: usize = 4;

/// The shape this CPU's non-temporal copies take, unless set otherwise
/// ([`set_nt_copy_shape`]: a profile measured by `bulkmem tune`, or a
/// benchmark row): four pages on Intel, two pages (glibc's) on AMD before
/// Zen 3 (family 0x17), one stream on every other CPU.
///
/// Why not one shape: the interleave stores a page's group and then loads
/// the next page's at the same offset within its page; on AMD that load
/// waits on the store before it whenever source and destination share
/// their offset within a page (4 KiB aliasing), which page-aligned
/// buffers always do. Measured on a 2-vCPU Zen 3 VM (EPYC, FSRM, AVX2),
/// hot copies, one thread, medians of 7, C loops of the same shapes:
/// 1 GiB four pages 8.3 GB/s, one stream 11.0, one stream prefetching
/// 2 KiB ahead 13.4, glibc 12.3; 256 MiB with the source 48 bytes into a
/// line 8.1, 10.6, 13.4 and 11.7; 64 MiB 7.7, 9.4, 10.7 and 7.1. Loading
/// all four pages before storing measured 9.9 at 1 GiB: still behind one
/// stream. On the review's Zen 2 it was the other way round (glibc's two
/// pages 1.2x one stream), and Intel keeps the interleave it was measured
/// with.
pub fn nt_copy_shape() -> NtCopyShape {
    match NtCopyShape::from_u8(NT_COPY_SHAPE.load(Ordering::Relaxed)) {
        Some(s) => s,
        None => {
            let cpu = crate::machine::cpu::facts();
            builtin_nt_copy_shape(cpu.vendor, cpu.family)
        }
    }
}

/// The shape for a CPU (its vendor and CPUID display family) when nothing
/// set one. Family 0x17 is Zen to Zen 2 (0x18 Hygon's Zen), 0x19 Zen 3
/// and 4, 0x1a Zen 5.
pub fn builtin_nt_copy_shape(vendor: crate::machine::cpu::Vendor, family: u32) -> NtCopyShape {
    use crate::machine::cpu::Vendor;
    match vendor {
        Vendor::Intel => NtCopyShape::FourPages,
        Vendor::Amd if family < 0x19 => NtCopyShape::TwoPages,
        _ => NtCopyShape::Stream,
    }
}

/// [`nt_copy_shape`]'s answer when set: [`UNSET`] none.
static NT_COPY_SHAPE: AtomicU8 = AtomicU8::new(UNSET);
const UNSET: u8 = u8::MAX;

/// Makes non-temporal copies take one shape whatever the CPU (`None`: the
/// CPU's own again). Every shape is correct everywhere; only their speed
/// differs. Checked kernels handed out after the call follow it. For a
/// profile that measured the shapes, for `bench copy --nt-shapes`, and
/// for tests that run every shape on every machine; a program has no
/// reason to call it.
pub fn set_nt_copy_shape(shape: Option<NtCopyShape>) {
    NT_COPY_SHAPE.store(shape.map_or(UNSET, |s| s as u8), Ordering::Relaxed);
}

/// Takes the shape a profile measured, unless one was set already (a
/// program's or a benchmark's choice stands).
pub fn adopt_nt_copy_shape(shape: NtCopyShape) {
    let _ =
        NT_COPY_SHAPE.compare_exchange(UNSET, shape as u8, Ordering::Relaxed, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::cpu::Vendor;

    #[test]
    fn each_cpu_family_streams_its_copies_in_the_shape_measured_on_it() {
        let of = builtin_nt_copy_shape;
        // Emerald Rapids (family 6) and any Intel: four pages.
        assert_eq!(of(Vendor::Intel, 6), NtCopyShape::FourPages);
        // The review's Zen 2 (0x17) and Hygon's Zen (0x18): glibc's two.
        assert_eq!(of(Vendor::Amd, 0x17), NtCopyShape::TwoPages);
        assert_eq!(of(Vendor::Amd, 0x18), NtCopyShape::TwoPages);
        // Zen 3 and 4 (0x19), Zen 5 (0x1a), later AMD, and the rest.
        assert_eq!(of(Vendor::Amd, 0x19), NtCopyShape::Stream);
        assert_eq!(of(Vendor::Amd, 0x1a), NtCopyShape::Stream);
        assert_eq!(of(Vendor::Other, 0), NtCopyShape::Stream);
    }

    #[test]
    fn a_set_shape_stands_until_cleared_and_a_profile_fills_only_a_gap() {
        // The process's shape is shared with every other test of this
        // crate; each value is correct, only this test reads it back.
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        set_nt_copy_shape(Some(NtCopyShape::TwoPages));
        adopt_nt_copy_shape(NtCopyShape::FourPages);
        assert_eq!(nt_copy_shape(), NtCopyShape::TwoPages);
        set_nt_copy_shape(None);
        let cpu = crate::machine::cpu::facts();
        assert_eq!(
            nt_copy_shape(),
            builtin_nt_copy_shape(cpu.vendor, cpu.family)
        );
        adopt_nt_copy_shape(NtCopyShape::FourPages);
        assert_eq!(nt_copy_shape(), NtCopyShape::FourPages);
        set_nt_copy_shape(None);
    }

    #[test]
    fn every_shape_has_a_name_its_byte_and_a_block_of_whole_pages() {
        for s in NtCopyShape::ALL {
            assert_eq!(NtCopyShape::from_u8(s as u8), Some(s));
            assert_eq!(s.block() % 4096, 0);
            assert!(!s.name().is_empty());
        }
        assert_eq!(NtCopyShape::from_u8(UNSET), None);
    }
}
