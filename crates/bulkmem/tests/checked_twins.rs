//! The checked twins against injected faults: a page made `PROT_NONE`
//! (SIGSEGV) or poisoned with userfaultfd (SIGBUS), on either side of a
//! copy or under a clear, anywhere in a range long enough for the
//! non-temporal copies' four interleaved page streams (so every stream,
//! the heads and the tails take faults), at any alignment. Each case
//! checks the exact offset (the byte pass finished exactly at the bad
//! page), the signal and side, every byte before the offset, that every
//! byte after it is either untouched or its correct copy, and that nothing
//! outside the range changed. Both regions sit between guard pages: a
//! routine that overran would fault outside its range, which the checked
//! path asserts against in test builds.
//!
//! Without faults, every twin matches the reference around the lengths
//! where the interleaved copies change shape (whole 16 KiB blocks).

mod common;

use bulkmem::fault;
use bulkmem::fault::Side;
use bulkmem::{Error, Strategy};
use common::poison::*;
use common::{canary, in_every_nt_shape, require, Guarded, PAGE};
use proptest::prelude::*;

const CHECKED_COPY: &[Strategy] = fault::checked_strategies(bulkmem::Op::Copy);
const CHECKED_CLEAR: &[Strategy] = fault::checked_strategies(bulkmem::Op::Clear);

/// Pages in each region: two whole interleaved blocks and some.
const N: usize = 10;

/// How the bad page faults.
#[derive(Clone, Copy, Debug)]
enum Bad {
    /// `PROT_NONE`: SIGSEGV, `SEGV_ACCERR`.
    Protected,
    /// UFFDIO_POISON: SIGBUS, `BUS_ADRERR`.
    Poisoned,
}

/// A guarded region of `N` pattern pages.
fn plain() -> (Guarded, Option<bulkmem::uffd::Mover>) {
    let mut g = Guarded::new(N * PAGE);
    g.bytes()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = src_byte(i));
    (g, None)
}

/// A guarded region of `N` pattern pages with page `page` bad (kept bad
/// while the returned mover, for poison, lives).
fn region(bad: Bad, page: usize) -> (Guarded, Option<bulkmem::uffd::Mover>) {
    match bad {
        Bad::Poisoned => {
            let (g, m) = poisoned(N, page);
            (g, Some(m))
        }
        Bad::Protected => {
            let (g, _) = plain();
            let at = g.start().wrapping_add(page * PAGE).cast();
            // SAFETY: a page of the guarded mapping, only touched through
            // checked routines (and the checks below skip it).
            let rc = unsafe { libc::mprotect(at, PAGE, libc::PROT_NONE) };
            assert_eq!(rc, 0);
            (g, None)
        }
    }
}

/// One injected fault: `op` (copy or clear) of `len` bytes at `s_off` /
/// `d_off` into the regions, page `page` of the source (`on_src`) or the
/// destination bad.
#[allow(clippy::too_many_arguments)]
fn case(
    bad: Bad,
    s: Strategy,
    clear: bool,
    on_src: bool,
    page: usize,
    s_off: usize,
    d_off: usize,
    len: usize,
) -> Result<(), TestCaseError> {
    let on_src = on_src && !clear;
    let (src, _ms) = if on_src { region(bad, page) } else { plain() };
    let (mut dst, _md) = if on_src { plain() } else { region(bad, page) };
    let bad_dst = if on_src {
        0..0
    } else {
        page * PAGE..(page + 1) * PAGE
    };
    paint(&mut dst, bad_dst.clone());
    let what = format!(
        "{bad:?} {s} {} page {page} on the {} s_off {s_off} d_off {d_off} len {len}",
        if clear { "clear" } else { "copy" },
        if on_src { "source" } else { "destination" }
    );
    // The bad page in the range's coordinates, on its side.
    let off = if on_src { s_off } else { d_off };
    let (lo, hi) = (
        (page * PAGE).saturating_sub(off),
        ((page + 1) * PAGE).saturating_sub(off),
    );
    let faults = page * PAGE < off + len && lo < hi;
    // SAFETY: the ranges lie in the two regions' usable bytes; bad pages
    // are only touched by the checked routine.
    let r = unsafe {
        let d = std::slice::from_raw_parts_mut(dst.start().add(d_off), len);
        if clear {
            fault::clear_checked_with(s, d)
        } else {
            let sr = std::slice::from_raw_parts(src.start().add(s_off), len);
            fault::copy_checked_with(s, d, sr)
        }
    };
    let want = |i: usize| {
        if clear {
            0
        } else {
            src_byte(i - d_off + s_off)
        }
    };
    let done = if faults {
        let f = match r {
            Err(Error::Fault(f)) => f,
            other => return Err(TestCaseError::fail(format!("{what}: {other:?}"))),
        };
        let (signal, code) = match bad {
            Bad::Protected => (libc::SIGSEGV, 2),
            Bad::Poisoned => (libc::SIGBUS, libc::BUS_ADRERR),
        };
        let side = if on_src {
            Side::Source
        } else {
            Side::Destination
        };
        prop_assert_eq!(f.offset, lo, "{}: {}", what, f);
        prop_assert_eq!((f.signal, f.code, f.side), (signal, code, side), "{}", what);
        let base = if on_src { src.start() } else { dst.start() } as usize;
        prop_assert!(
            (base + page * PAGE..base + (page + 1) * PAGE).contains(&f.addr),
            "{}: {}",
            what,
            f
        );
        f.offset
    } else {
        prop_assert!(r.is_ok(), "{}: {:?}", what, r);
        len
    };
    let b = dst.start();
    for i in (0..dst.usable()).filter(|i| !bad_dst.contains(i)) {
        // SAFETY: in the usable region, outside the bad page.
        let got = unsafe { b.add(i).read_volatile() };
        let inside = (d_off..d_off + len).contains(&i);
        if inside && i < d_off + done {
            prop_assert_eq!(got, want(i), "{}: byte {} (before the fault)", what, i);
        } else if inside {
            // Past the fault: untouched, or already its copy (the
            // interleaved streams run up to three pages ahead).
            prop_assert!(
                got == canary(i) || got == want(i),
                "{}: byte {} past the fault is {:#x}",
                what,
                i,
                got
            );
        } else {
            prop_assert_eq!(got, canary(i), "{}: byte {} outside the range", what, i);
        }
    }
    Ok(())
}

fn strategies(clear: bool) -> Vec<Strategy> {
    require::runnable(if clear { CHECKED_CLEAR } else { CHECKED_COPY })
}

/// Arguments of one case: strategy index, clear, bad page on the source,
/// the bad page, offsets and a length long enough to reach past two
/// interleaved blocks.
type Args = (usize, bool, bool, usize, usize, usize, usize);

fn cases() -> impl proptest::strategy::Strategy<Value = Args> {
    (
        0usize..32,
        any::<bool>(),
        any::<bool>(),
        0..N,
        prop_oneof![0usize..128, 0usize..PAGE],
        prop_oneof![0usize..128, 0usize..PAGE],
        1usize..N * PAGE,
    )
}

fn run(bad: Bad, args: Args) -> Result<(), TestCaseError> {
    let (idx, clear, on_src, page, s_off, d_off, len) = args;
    let all = strategies(clear);
    let s = all[idx % all.len()];
    let len = len.min(N * PAGE - s_off.max(d_off)).max(1);
    case(bad, s, clear, on_src, page, s_off, d_off, len)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// SIGSEGV: a `PROT_NONE` page anywhere, either side.
    #[test]
    fn a_protected_page_stops_the_twin_exactly_there(args in cases()) {
        run(Bad::Protected, args)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// SIGBUS: a poisoned page anywhere, either side.
    #[test]
    #[cfg_attr(not(bulkmem_host = "uffd-poison"), ignore = "needs userfaultfd UFFDIO_MOVE and UFFDIO_POISON (Linux 6.8+), which the build host lacks")]
    fn a_poisoned_page_stops_the_twin_exactly_there(args in cases()) {
        run(Bad::Poisoned, args)?;
    }
}

/// Every stream of the interleaved copies, at its first and its last
/// step, on both sides: for each bad page of two whole blocks, the
/// non-temporal twins (and every other one) stop exactly there. The
/// destination 37 bytes ahead of the source takes the string twins'
/// 16-byte path (`near_ahead`).
/// The non-temporal copies run in each of their shapes
/// (`bulkmem::set_nt_copy_shape`), whichever this CPU takes.
#[test]
fn every_page_of_the_interleaved_blocks_faults_exactly() {
    in_every_nt_shape(|shape| {
        for clear in [false, true] {
            for s in strategies(clear) {
                for page in 0..N {
                    for on_src in [true, false] {
                        for (s_off, d_off) in [(0, 0), (64, 0), (100, 3000), (4000, 17), (3, 40)] {
                            let len = N * PAGE - 4096;
                            if let Err(e) =
                                case(Bad::Protected, s, clear, on_src, page, s_off, d_off, len)
                            {
                                panic!("{shape}: {e}");
                            }
                        }
                    }
                }
            }
        }
    });
}

/// Lengths around the interleaved copies' block edges (and the vector
/// loops' steps past them), each misalignment pair of a few, byte for
/// byte, with the bytes around the destination untouched.
#[test]
fn twins_match_the_reference_around_block_edges() {
    const BLOCK: usize = 4 * PAGE;
    let mut lens = Vec::new();
    // The two-page blocks' edges, then the four-page blocks'.
    for edge in [2 * PAGE, 3 * PAGE, BLOCK, 2 * BLOCK] {
        for d in [0usize, 1, 63, 64, 65, 255, 256, 257] {
            lens.push(edge - d);
            lens.push(edge + d);
        }
    }
    let mut src = Guarded::new(3 * BLOCK);
    src.bytes()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = src_byte(i));
    let mut dst = Guarded::new(3 * BLOCK);
    in_every_nt_shape(|shape| {
        for clear in [false, true] {
            for s in strategies(clear) {
                for &(s_off, d_off) in &[(0, 0), (1, 0), (0, 1), (63, 33), (4000, 96), (17, 4095)] {
                    for &len in &lens {
                        paint(&mut dst, 0..0);
                        let what = format!(
                            "{shape}: {s} clear {clear} s_off {s_off} d_off {d_off} len {len}"
                        );
                        let d = &mut dst.bytes()[d_off..d_off + len];
                        let r = if clear {
                            fault::clear_checked_with(s, d)
                        } else {
                            fault::copy_checked_with(s, d, &src.bytes()[s_off..s_off + len])
                        };
                        assert!(r.is_ok(), "{what}: {r:?}");
                        check_region(
                            &mut dst,
                            d_off..d_off + len,
                            0..0,
                            |i| {
                                if clear {
                                    0
                                } else {
                                    src_byte(i - d_off + s_off)
                                }
                            },
                            &what,
                        );
                    }
                }
            }
        }
    });
}

/// A call several threads share is decided as a batch of one run per
/// thread (the engine's rule for a split extent); on one thread it is a
/// single call.
#[test]
fn a_shared_call_is_decided_as_a_batch_of_one_run_per_thread() {
    use bulkmem::{CheckedClearKernel, CheckedCopyKernel, Hint, Op};
    use bulkmem_policy::auto::{kernel, Request};
    // The checked twin `auto` runs for `req`, as the engine's workers ask.
    let checked_kernel = |req: &Request| match req.op {
        Op::Copy => kernel::<CheckedCopyKernel>(Strategy::Auto, req)
            .unwrap()
            .strategy(),
        Op::Clear => kernel::<CheckedClearKernel>(Strategy::Auto, req)
            .unwrap()
            .strategy(),
    };
    let auto = checked_kernel;
    let shared = |op, len, threads| auto(&Request::batch(op, len, threads, Hint::Auto));
    for op in [Op::Copy, Op::Clear] {
        for len in [1 << 20, 64 << 20, 1 << 30] {
            let alone = shared(op, len, 1);
            let single = auto(&Request::single(op, len, Hint::Auto));
            assert_eq!(alone, single, "{op} {len}");
            let req = Request {
                op,
                total: len,
                runs: 4,
                hint: Hint::Auto,
            };
            let batch = checked_kernel(&req);
            assert_eq!(shared(op, len, 4), batch, "{op} {len}");
        }
    }
}
