//! Checked copies against real hardware-poison semantics: `MADV_HWPOISON`
//! runs the kernel's memory-failure path on a page (needs
//! CONFIG_MEMORY_FAILURE, which this project's host lacks), and the next
//! access raises SIGBUS with `BUS_MCEERR_AR` and `si_addr_lsb` 12, as a
//! machine check on a bad DIMM would. These tests run in the qemu guest
//! (`scripts/guest/test`), as root there.

mod common;

use bulkmem::fault;
use bulkmem::fault::Side;
use bulkmem::{Error, Strategy};
use common::poison::*;
use common::*;

const CHECKED_COPY: &[Strategy] = fault::checked_strategies(bulkmem::Op::Copy);
const CHECKED_CLEAR: &[Strategy] = fault::checked_strategies(bulkmem::Op::Clear);

/// `n` pattern pages between guard pages with `pages` hardware-poisoned.
fn hwpoisoned(n: usize, pages: &[usize]) -> Guarded {
    let mut g = Guarded::new(n * PAGE);
    g.bytes()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = src_byte(i));
    for &p in pages {
        let page = g.start().wrapping_add(p * PAGE);
        // SAFETY: page p lies in g's usable region; after this call it is
        // only touched by checked routines, which survive its SIGBUS.
        let rc = unsafe { libc::madvise(page.cast(), PAGE, libc::MADV_HWPOISON) };
        assert_eq!(
            rc,
            0,
            "MADV_HWPOISON failed ({}): needs CONFIG_MEMORY_FAILURE and CAP_SYS_ADMIN",
            std::io::Error::last_os_error()
        );
    }
    g
}

/// `auto` and every strategy of `list` the guest's CPU runs (qemu's TCG
/// `-cpu max`, not the build host's model: no AVX-512 there); each one
/// left out is named in a visible skip.
fn strategies(list: &[Strategy]) -> Vec<Strategy> {
    let mut v = vec![Strategy::Auto];
    for &s in list {
        if s.available() {
            v.push(s);
        } else {
            require::skip(&format!("{s}: this CPU cannot run it"));
        }
    }
    v
}

const N: usize = 6;

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn hwpoisoned_source_reports_mceerr_ar_at_the_exact_page() {
    for p in [0, 2, N - 1] {
        let src = hwpoisoned(N, &[p]);
        let mut dst = Guarded::new(N * PAGE);
        let bad = src.start() as usize + p * PAGE;
        for s in strategies(CHECKED_COPY) {
            for &s_off in &[0usize, 1, 100, 4095] {
                for &cut in &[0usize, 300, PAGE - 3] {
                    let len = N * PAGE - s_off - cut;
                    let what = format!("{s} page {p} s_off {s_off} len {len}");
                    paint(&mut dst, 0..0);
                    // SAFETY: within src's usable region; the poisoned page
                    // is only read by the checked copy.
                    let sr = unsafe { std::slice::from_raw_parts(src.start().add(s_off), len) };
                    let f = expect_fault(fault::copy_checked_with(s, dst.slice(0, len), sr), &what);
                    let want = (p * PAGE).saturating_sub(s_off);
                    assert_eq!((f.offset, f.side), (want, Side::Source), "{what}: {f}");
                    assert_eq!(f.code, libc::BUS_MCEERR_AR, "{what}: {f:?}");
                    assert_eq!(f.addr_lsb, 12, "{what}: {f:?}");
                    assert!((bad..bad + PAGE).contains(&f.addr), "{what}: {f:?}");
                    check_region(&mut dst, 0..want, 0..0, |i| src_byte(i + s_off), &what);
                }
            }
        }
    }
}

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn hwpoisoned_destination_stops_copies_and_clears() {
    let mut src = Guarded::new(N * PAGE);
    src.bytes()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = src_byte(i));
    let p = 3;
    let mut dst = hwpoisoned(N, &[p]);
    let bad = p * PAGE..(p + 1) * PAGE;
    for s in strategies(CHECKED_COPY) {
        for &d_off in &[0usize, 7, 2049] {
            let len = N * PAGE - d_off;
            let what = format!("copy {s} d_off {d_off}");
            paint(&mut dst, bad.clone());
            let sr = &src.bytes()[..len] as *const [u8];
            // SAFETY: a distinct mapping, only read meanwhile.
            let r = fault::copy_checked_with(s, dst.slice(d_off, len), unsafe { &*sr });
            let f = expect_fault(r, &what);
            let want = p * PAGE - d_off;
            assert_eq!((f.offset, f.side), (want, Side::Destination), "{what}");
            assert_eq!((f.code, f.addr_lsb), (libc::BUS_MCEERR_AR, 12), "{what}");
            check_region(
                &mut dst,
                d_off..d_off + want,
                bad.clone(),
                |i| src_byte(i - d_off),
                &what,
            );
        }
    }
    for s in strategies(CHECKED_CLEAR) {
        let what = format!("clear {s}");
        paint(&mut dst, bad.clone());
        let f = expect_fault(
            fault::clear_checked_with(s, dst.slice(5, N * PAGE - 5)),
            &what,
        );
        assert_eq!(
            (f.offset, f.side),
            (p * PAGE - 5, Side::Destination),
            "{what}"
        );
        assert_eq!(f.code, libc::BUS_MCEERR_AR, "{what}");
        check_region(&mut dst, 5..p * PAGE, bad.clone(), |_| 0, &what);
    }
}

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn hwpoisoned_extent_in_a_two_thread_batch_ends_only_that_extent() {
    let ext = 8 * PAGE;
    let count = 8;
    let src = hwpoisoned(count * 8, &[5 * 8 + 3]);
    let mut dst = vec![0u8; count * ext];
    let engine = bulkmem::Engine::builder()
        .threads(2)
        .chunk(64 << 10)
        .inline_max(0)
        .build()
        .unwrap();
    let extents: Vec<bulkmem::Extent> = (0..count)
        .map(|k| bulkmem::Extent {
            dst: dst.as_mut_ptr().wrapping_add(k * ext),
            src: src.start().wrapping_add(k * ext) as *const u8,
            len: ext,
        })
        .collect();
    // SAFETY: the extents tile dst and src's usable region.
    let r = unsafe { engine.copy_extents_checked(&extents, Default::default()) }.unwrap();
    let faults: Vec<(usize, usize, i32)> = r.faults().map(|(i, f)| (i, f.offset, f.code)).collect();
    assert_eq!(faults, vec![(5, 3 * PAGE, libc::BUS_MCEERR_AR)]);
    for (k, o) in r.extents.iter().enumerate().filter(|&(k, _)| k != 5) {
        assert_eq!(*o, bulkmem::fault::Outcome::Done, "extent {k}");
        let got = &dst[k * ext..(k + 1) * ext];
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, &b)| b == src_byte(k * ext + i)),
            "extent {k}"
        );
    }
    // glibc's memcpy has no exception table: named, it is refused.
    assert!(matches!(
        fault::copy_checked_with(Strategy::Libc, &mut dst[..1], &[0]),
        Err(Error::NotChecked { .. })
    ));
}
