//! Non-temporal copies of four extents at once, for batches of scattered
//! folios (docs/design.md, "Where the 4 KiB time went").
//!
//! One core reading one 4 KiB page after another waits, at every page, for
//! the hardware prefetcher to find the new stream: on a 2-vCPU Zen 4 VM one
//! stream read randomly ordered 4 KiB pages at 11 GB/s, 32 sequentially.
//! Reading four pages at once keeps four streams in flight (22), and
//! requesting the next four pages into L2 while the current ones are
//! copied adds the rest. Each step loads one cache line of every extent and
//! only then stores them: a load never follows a store at the same offset
//! within a page, which on AMD waits on that store (4 KiB aliasing).
//!
//! The caller hands four extents of one length, a multiple of 64, whose
//! destinations start on a cache line: every store is a whole line, so
//! the write-combining buffers drain full.

use core::arch::x86_64::*;

use super::avx2::Ymm;
use super::avx512::Zmm;
use super::vector::Vector;

/// Extents a gang copies at once.
pub const GANG: usize = 4;

/// Bytes of each of the next gang's sources requested while the first
/// bytes of the current gang are copied: one line per line copied, so the
/// requests keep pace with the copy. Past the first page the hardware
/// prefetcher has the stream (measured on the Zen 4 VM: 4 KiB ahead beat
/// 2 KiB and matched 8 KiB at every folio size from 4 KiB to 2 MiB).
pub const GANG_PREFETCH: usize = 4096;

/// The longest extents gangs take. Past it each extent is a stream long
/// enough for the hardware prefetcher, and four at once measured level
/// with one at a time (0.92x-1.04x at 1 and 2 MiB, one and two threads,
/// on the Zen 4 VM), so batches of large folios keep the loop they had.
pub const GANG_MAX: usize = 256 << 10;

/// Four extents: destinations, sources, their common length, and the next
/// gang's sources with how many of their bytes to request. `repr(C)`: the
/// checked twins (`checked::mc::copy_mc_gang`) read it by offset.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Gang {
    pub dst: [*mut u8; GANG],
    pub src: [*const u8; GANG],
    pub len: usize,
    pub next: [*const u8; GANG],
    /// Bytes of each `next` source requested, one line per step, at most
    /// [`GANG_PREFETCH`] (0: none).
    pub requests: usize,
}

impl Gang {
    /// Whether a gang of this length and these destinations suits the
    /// loops below (whole lines, each destination on a line) and pays
    /// (at most [`GANG_MAX`]).
    #[inline]
    pub fn fits(len: usize, dst: &[*mut u8; GANG]) -> bool {
        (64..=GANG_MAX).contains(&len)
            && len.is_multiple_of(64)
            && dst.iter().all(|d| (*d as usize).is_multiple_of(64))
    }

    /// Requests line `i` of every next source into L2, while `i` is among
    /// the bytes to request.
    #[inline(always)]
    fn request(&self, i: usize) {
        if i < self.requests {
            for n in self.next {
                // SAFETY: a prefetch neither faults nor changes memory,
                // whatever the address; wrapping_add keeps the arithmetic
                // defined.
                unsafe { _mm_prefetch::<_MM_HINT_T1>(n.wrapping_add(i).cast()) };
            }
        }
    }
}

/// Copies the gang's four extents with `V`'s non-temporal stores, a line
/// of each extent per step (all four loaded before any is stored), without
/// the closing fence (the caller drains). One body for both widths, as
/// the single-extent loops (`vector.rs`).
///
/// # Safety
/// The CPU has `V`'s features; [`Gang::fits`] holds; each `src[k]` is
/// readable and each `dst[k]` writable for `len` bytes, and no destination
/// overlaps any source or other destination.
#[inline(always)]
unsafe fn copy_nt<V: Vector>(g: &Gang) {
    let (w, per_line) = (V::BYTES, 64 / V::BYTES);
    let mut i = 0;
    // Bounds: i + 64 <= len at every step (len is a multiple of 64).
    while i < g.len {
        g.request(i);
        // SAFETY: [i, i + 64) lies in every extent (bounds above), each
        // destination line-aligned by `fits`, as the caller promised.
        unsafe {
            let mut v = [V::zero(); 2 * GANG];
            for k in 0..GANG {
                for j in 0..per_line {
                    v[per_line * k + j] = V::load(g.src[k].add(i + w * j));
                }
            }
            for k in 0..GANG {
                for j in 0..per_line {
                    V::stream(g.dst[k].add(i + w * j), v[per_line * k + j]);
                }
            }
        }
        i += 64;
    }
}

/// `copy_nt` with AVX2.
///
/// # Safety
/// As `copy_nt`, with AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn copy_nt_avx2(g: &Gang) {
    // SAFETY: forwarded contract.
    unsafe { copy_nt::<Ymm>(g) }
}

/// `copy_nt` with AVX-512.
///
/// # Safety
/// As `copy_nt`, with AVX-512F and BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn copy_nt_avx512(g: &Gang) {
    // SAFETY: forwarded contract.
    unsafe { copy_nt::<Zmm>(g) }
}
