//! Every copy and clear strategy against a reference, in guarded memory:
//! each length 0..=8192 at several alignments, every src/dst misalignment
//! pair 0..64 at lengths around the kernels' internal edges, and lengths
//! around 2 MiB. A read or write past either end of the buffers faults
//! (guard pages); a stray write inside shows as a damaged canary.

mod common;

use bulkmem::{Op, Strategy};
use common::require;
use common::*;

/// Lengths around every internal edge: vector widths (16, 32, 64), the
/// unrolled blocks (128, 256), the per-page step and 2-page runs.
const EDGES: &[usize] = &[
    0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 95, 96, 97, 127, 128, 129, 191,
    192, 193, 255, 256, 257, 319, 320, 383, 384, 511, 512, 513, 1023, 1024, 1025, 4095, 4096, 4097,
    4159, 8191, 8192, 8193,
];

const WINDOW: usize = 8192 + 3 * 64;

/// One copy of `len` bytes from `src[s_off..]` to `dst[d_off..]`, checked
/// byte for byte, with the canary around it checked and then restored.
fn copy_case(
    s: Strategy,
    dst: &mut Guarded,
    src: &mut Guarded,
    d_off: usize,
    s_off: usize,
    len: usize,
) {
    let lo = d_off.saturating_sub(64);
    let hi = (d_off + len + 64).min(dst.usable());
    {
        let (d, sr) = (
            dst.slice(d_off, len) as *mut [u8],
            src.slice(s_off, len) as *const [u8],
        );
        // SAFETY: two distinct mappings; the raw pointers only sidestep the
        // borrow of `dst`/`src` for the duration of this call.
        let (d, sr) = unsafe { (&mut *d, &*sr) };
        bulkmem::copy_opts(d, sr, bulkmem::Options::strategy(s)).unwrap();
    }
    let db = dst.bytes();
    let sb = unsafe_src_bytes(src);
    if db[d_off..d_off + len] != sb[s_off..s_off + len] {
        let i = (0..len).find(|&i| db[d_off + i] != sb[s_off + i]).unwrap();
        panic!("{s}: copy len {len} dst+{d_off} src+{s_off}: byte {i} wrong");
    }
    if let Some(i) =
        first_non_canary(db, lo, d_off).or_else(|| first_non_canary(db, d_off + len, hi))
    {
        panic!("{s}: copy len {len} dst+{d_off} src+{s_off}: wrote outside at {i}");
    }
    fill_canary(db, d_off, d_off + len);
}

fn unsafe_src_bytes(src: &mut Guarded) -> &[u8] {
    src.bytes()
}

fn clear_case(s: Strategy, dst: &mut Guarded, d_off: usize, len: usize) {
    let lo = d_off.saturating_sub(64);
    let hi = (d_off + len + 64).min(dst.usable());
    bulkmem::clear_opts(dst.slice(d_off, len), bulkmem::Options::strategy(s)).unwrap();
    let db = dst.bytes();
    if let Some(i) = db[d_off..d_off + len].iter().position(|&b| b != 0) {
        panic!("{s}: clear len {len} dst+{d_off}: byte {i} not zero");
    }
    if let Some(i) =
        first_non_canary(db, lo, d_off).or_else(|| first_non_canary(db, d_off + len, hi))
    {
        panic!("{s}: clear len {len} dst+{d_off}: wrote outside at {i}");
    }
    fill_canary(db, d_off, d_off + len);
}

fn fresh(len: usize) -> (Guarded, Guarded) {
    let mut dst = Guarded::new(len);
    let n = dst.usable();
    fill_canary(dst.bytes(), 0, n);
    let mut src = Guarded::new(len);
    fill_pattern(src.bytes(), len);
    (dst, src)
}

fn assert_all_canary(s: Strategy, dst: &mut Guarded) {
    let n = dst.usable();
    if let Some(i) = first_non_canary(dst.bytes(), 0, n) {
        panic!("{s}: a stray write landed at offset {i}");
    }
}

/// Every length 0..=8192: flush against the leading guard page (offset 0 and
/// a few misalignments) and against the trailing one (end at the guard).
fn copy_every_length(s: Strategy) {
    let (mut dst, mut src) = fresh(WINDOW);
    let end = dst.usable();
    for len in 0..=8192usize {
        for (d, so) in [(0, 0), (1, 63), (33, 7), (61, 32)] {
            copy_case(s, &mut dst, &mut src, d, so, len);
        }
        copy_case(s, &mut dst, &mut src, end - len, end - len, len);
        copy_case(s, &mut dst, &mut src, end - len, (end - len) & !63, len);
    }
    assert_all_canary(s, &mut dst);
}

fn clear_every_length(s: Strategy) {
    let (mut dst, _) = fresh(WINDOW);
    let end = dst.usable();
    for len in 0..=8192usize {
        for d in [0, 1, 33, 63] {
            clear_case(s, &mut dst, d, len);
        }
        clear_case(s, &mut dst, end - len, len);
    }
    assert_all_canary(s, &mut dst);
}

/// Every (dst, src) misalignment pair in 0..64 at each edge length, at the
/// front of the buffers and ending flush against the trailing guard.
fn copy_every_alignment(s: Strategy) {
    let (mut dst, mut src) = fresh(WINDOW);
    let end = dst.usable();
    for &len in EDGES {
        for d in 0..64 {
            for so in 0..64 {
                copy_case(s, &mut dst, &mut src, d, so, len);
                let (de, se) = (end - len - d, end - len - so);
                copy_case(s, &mut dst, &mut src, de, se, len);
            }
        }
    }
    assert_all_canary(s, &mut dst);
}

fn clear_every_alignment(s: Strategy) {
    let (mut dst, _) = fresh(WINDOW);
    let end = dst.usable();
    for &len in EDGES {
        for d in 0..64 {
            clear_case(s, &mut dst, d, len);
            clear_case(s, &mut dst, end - len - d, len);
        }
    }
    assert_all_canary(s, &mut dst);
}

const TWO_MIB: usize = 2 << 20;

fn copy_around_2mib(s: Strategy) {
    let (mut dst, mut src) = fresh(TWO_MIB + 2 * PAGE);
    let end = dst.usable();
    for len in [
        TWO_MIB - 65,
        TWO_MIB - 1,
        TWO_MIB,
        TWO_MIB + 1,
        TWO_MIB + 63,
        TWO_MIB + 4095,
    ] {
        for (d, so) in [(0, 0), (7, 3), (32, 0), (0, 33)] {
            copy_case(s, &mut dst, &mut src, d, so, len);
        }
        copy_case(s, &mut dst, &mut src, end - len, end - len, len);
    }
    assert_all_canary(s, &mut dst);
}

fn clear_around_2mib(s: Strategy) {
    let (mut dst, _) = fresh(TWO_MIB + 2 * PAGE);
    let end = dst.usable();
    for len in [
        TWO_MIB - 65,
        TWO_MIB - 1,
        TWO_MIB,
        TWO_MIB + 1,
        TWO_MIB + 63,
        TWO_MIB + 4095,
    ] {
        for d in [0, 7, 32, 63] {
            clear_case(s, &mut dst, d, len);
        }
        clear_case(s, &mut dst, end - len, len);
    }
    assert_all_canary(s, &mut dst);
}

/// Lengths around the page blocks of the non-temporal copies' interleaved
/// bodies (two pages, 8 KiB, or four, 16 KiB, at once: `NtCopyShape`),
/// with the remainders that fall to the 256-byte and 64-byte loops and the
/// tail, and a head of 1..63 bytes before the first aligned line.
const BLOCK_EDGES: &[usize] = &[
    8191, 8192, 8193, 8255, 8256, 8447, 8448, 12287, 16383, 16384, 16385, 16447, 16448, 16639,
    16640, 20479, 24575, 24576, 32767, 32768, 33025, 49153, 69695,
];

fn copy_around_page_blocks(s: Strategy) {
    let (mut dst, mut src) = fresh(69695 + 2 * 64);
    let end = dst.usable();
    for &len in BLOCK_EDGES {
        for d in [0, 1, 31, 63] {
            for so in [0, 5, 32, 63] {
                copy_case(s, &mut dst, &mut src, d, so, len);
            }
        }
        copy_case(s, &mut dst, &mut src, end - len, end - len, len);
        copy_case(s, &mut dst, &mut src, end - len, (end - len) & !63, len);
    }
    assert_all_canary(s, &mut dst);
}

fn clear_around_page_blocks(s: Strategy) {
    let (mut dst, _) = fresh(69695 + 2 * 64);
    let end = dst.usable();
    for &len in BLOCK_EDGES {
        for d in [0, 1, 31, 63] {
            clear_case(s, &mut dst, d, len);
        }
        clear_case(s, &mut dst, end - len, len);
    }
    assert_all_canary(s, &mut dst);
}

/// Four tests per strategy. One that needs a capability carries
/// `#[cfg_attr(not(bulkmem_host = ...), ignore = ...)]`: where the build
/// host lacks it, `cargo test` lists the four as ignored, with the reason.
macro_rules! per_strategy {
    ($($(#[$attr:meta])* $name:ident: $strategy:expr;)*) => {
        /// The strategies that have tests here.
        const TESTED: &[Strategy] = &[$($strategy),*];
        $(mod $name {
            use super::*;

            $(#[$attr])*
            #[test]
            fn every_length() {
                let Some(s) = require::strategy($strategy) else { return };
                if s.supports(Op::Copy) { copy_every_length(s) }
                if s.supports(Op::Clear) { clear_every_length(s) }
            }

            $(#[$attr])*
            #[test]
            fn every_alignment_pair_at_edges() {
                let Some(s) = require::strategy($strategy) else { return };
                if s.supports(Op::Copy) { copy_every_alignment(s) }
                if s.supports(Op::Clear) { clear_every_alignment(s) }
            }

            $(#[$attr])*
            #[test]
            fn around_page_blocks() {
                let Some(s) = require::strategy($strategy) else { return };
                if s.supports(Op::Copy) { copy_around_page_blocks(s) }
                if s.supports(Op::Clear) { clear_around_page_blocks(s) }
            }

            $(#[$attr])*
            #[test]
            fn around_two_mib() {
                let Some(s) = require::strategy($strategy) else { return };
                if s.supports(Op::Copy) { copy_around_2mib(s) }
                if s.supports(Op::Clear) { clear_around_2mib(s) }
            }
        })*
    };
}

per_strategy! {
    auto: Strategy::Auto;
    per_page: Strategy::PerPage;
    rep_movsq: Strategy::RepMovsq;
    rep_movsb: Strategy::RepMovsb;
    #[cfg_attr(not(bulkmem_host = "avx2"), ignore = "needs AVX2, which the build host lacks")]
    rep_movsb_or_avx2: Strategy::RepMovsbOrAvx2;
    rep_stosq: Strategy::RepStosq;
    rep_stosb: Strategy::RepStosb;
    libc: Strategy::Libc;
    #[cfg_attr(not(bulkmem_host = "avx2"), ignore = "needs AVX2, which the build host lacks")]
    avx2: Strategy::Avx2;
    #[cfg_attr(not(bulkmem_host = "avx2"), ignore = "needs AVX2, which the build host lacks")]
    avx2_nt: Strategy::Avx2Nt;
    #[cfg_attr(
        not(bulkmem_host = "avx512"),
        ignore = "needs AVX-512 (avx512f and avx512bw), which the build host lacks"
    )]
    avx512: Strategy::Avx512;
    #[cfg_attr(
        not(bulkmem_host = "avx512"),
        ignore = "needs AVX-512 (avx512f and avx512bw), which the build host lacks"
    )]
    avx512_nt: Strategy::Avx512Nt;
    #[cfg_attr(not(bulkmem_host = "clzero"), ignore = "needs CLZERO (AMD), which the build host lacks")]
    clzero: Strategy::Clzero;
    portable: Strategy::Portable;
}

/// The non-temporal copies in each of their shapes, whichever this CPU
/// takes (`bulkmem::set_nt_copy_shape`): the interleaved blocks' edges,
/// every misalignment pair at the loops' edges, and around 2 MiB, where
/// the stream's prefetch stops 2 KiB before the end.
#[test]
fn nt_copies_in_every_shape() {
    for s in require::runnable(&[Strategy::Avx2Nt, Strategy::Avx512Nt]) {
        if s == Strategy::Auto {
            continue;
        }
        in_every_nt_shape(|_| {
            copy_around_page_blocks(s);
            copy_every_alignment(s);
            copy_around_2mib(s);
        });
    }
}

/// Every strategy of either operation has its own tests above, and a
/// capability for each feature it may need (or the macro's `ignore` could
/// not name why it did not run).
#[test]
fn every_strategy_has_tests_and_a_capability() {
    for op in [Op::Copy, Op::Clear] {
        for &s in Strategy::for_op(op) {
            assert!(TESTED.contains(&s), "{op} {s} has no tests here");
            // Panics for a feature no capability stands for.
            let _ = require::Capability::of(s);
        }
    }
}
