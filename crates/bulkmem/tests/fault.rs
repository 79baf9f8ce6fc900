//! Checked copies and clears against real faults, no mocks: userfaultfd-
//! poisoned pages (SIGBUS BUS_MCEERR_AR at the exact address), file
//! mappings truncated under the reader (BUS_ADRERR), a MAP_SHARED
//! destination past the end of its file, many threads faulting at once.
//! Every case checks the reported side, offset, address and code, that the
//! bytes before the offset are the copy, and that nothing after it (nor
//! outside the buffers: guard pages and canaries) was written. Without
//! faults, every checked routine matches a reference at every edge length
//! and misalignment.

mod common;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use bulkmem::fault;
use bulkmem::fault::Side;
use bulkmem::{Error, Strategy};
use common::poison::*;
use common::require;
use common::*;
use proptest::prelude::*;

const CHECKED_COPY: &[Strategy] = fault::checked_strategies(bulkmem::Op::Copy);
const CHECKED_CLEAR: &[Strategy] = fault::checked_strategies(bulkmem::Op::Clear);

/// `Auto` and the checked strategies of `list` this host runs; those it
/// cannot are named by the ignored `the_checked_*_routines_are_tested`.
fn strategies(list: &[Strategy]) -> Vec<Strategy> {
    require::runnable(list)
}

/// What a UFFDIO_POISON page raises on x86 since Linux 6.10 (the kernel
/// reports it as BUS_ADRERR, unlike a hardware-poisoned page's
/// BUS_MCEERR_AR: see guest_hwpoison.rs for those).
const POISON_CODE: i32 = libc::BUS_ADRERR;

const N: usize = 6;
const S_OFFS: &[usize] = &[0, 1, 63, 64, 100, 4095];
const D_OFFS: &[usize] = &[0, 7, 64, 2049];
/// How far before the end of the last page the range ends; PAGE - 3 puts
/// the last page's first bytes in the routines' sub-word tails.
const CUTS: &[usize] = &[0, 1, 100, 300, 3000, PAGE - 3];

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-poison"),
    ignore = "needs userfaultfd UFFDIO_MOVE and UFFDIO_POISON (Linux 6.8+), which the build host lacks"
)]
fn poisoned_source_page_first_middle_last() {
    for p in [0, 2, N - 1] {
        let (src, _m) = poisoned(N, p);
        let mut dst = Guarded::new((N + 1) * PAGE);
        let poison = src.start() as usize + p * PAGE;
        for s in strategies(CHECKED_COPY) {
            for &s_off in S_OFFS {
                for &d_off in D_OFFS {
                    for &cut in CUTS {
                        let len = N * PAGE - s_off - cut;
                        let what = format!("{s} page {p} s_off {s_off} d_off {d_off} len {len}");
                        paint(&mut dst, 0..0);
                        // SAFETY: [s_off, s_off + len) is in src's usable
                        // region; the poisoned page is only touched by the
                        // checked copy.
                        let sr = unsafe { std::slice::from_raw_parts(src.start().add(s_off), len) };
                        let f = expect_fault(
                            fault::copy_checked_with(s, dst.slice(d_off, len), sr),
                            &what,
                        );
                        let want = (p * PAGE).saturating_sub(s_off);
                        assert_eq!(f.offset, want, "{what}: {f}");
                        assert_eq!(f.side, Side::Source, "{what}");
                        assert_eq!(f.code, POISON_CODE, "{what}: {f:?}");
                        assert!((poison..poison + PAGE).contains(&f.addr), "{what}: {f}");
                        check_region(
                            &mut dst,
                            d_off..d_off + want,
                            0..0,
                            |i| src_byte(i - d_off + s_off),
                            &what,
                        );
                    }
                }
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-poison"),
    ignore = "needs userfaultfd UFFDIO_MOVE and UFFDIO_POISON (Linux 6.8+), which the build host lacks"
)]
fn poisoned_destination_page_first_middle_last() {
    let mut src = Guarded::new(N * PAGE);
    src.bytes()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = src_byte(i));
    for p in [0, 2, N - 1] {
        let (mut dst, _m) = poisoned(N, p);
        let bad = p * PAGE..(p + 1) * PAGE;
        for s in strategies(CHECKED_COPY) {
            for &d_off in S_OFFS {
                for &s_off in D_OFFS {
                    for &cut in CUTS {
                        let len = N * PAGE - d_off.max(s_off) - cut;
                        let what = format!("{s} page {p} s_off {s_off} d_off {d_off} len {len}");
                        paint(&mut dst, bad.clone());
                        let sr = &src.bytes()[s_off..s_off + len] as *const [u8];
                        // SAFETY: a distinct mapping; only read meanwhile.
                        let sr = unsafe { &*sr };
                        let r = fault::copy_checked_with(s, dst.slice(d_off, len), sr);
                        let want = (p * PAGE).saturating_sub(d_off);
                        if want >= len {
                            // The range ends before the poisoned page.
                            assert!(r.is_ok(), "{what}: {r:?}");
                        } else {
                            let f = expect_fault(r, &what);
                            assert_eq!(f.offset, want, "{what}: {f}");
                            assert_eq!(f.side, Side::Destination, "{what}");
                            assert_eq!(f.code, POISON_CODE, "{what}: {f:?}");
                        }
                        let want = want.min(len);
                        check_region(
                            &mut dst,
                            d_off..d_off + want,
                            bad.clone(),
                            |i| src_byte(i - d_off + s_off),
                            &what,
                        );
                    }
                }
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-poison"),
    ignore = "needs userfaultfd UFFDIO_MOVE and UFFDIO_POISON (Linux 6.8+), which the build host lacks"
)]
fn poisoned_page_stops_a_clear() {
    for p in [0, 2, N - 1] {
        let (mut dst, _m) = poisoned(N, p);
        let bad = p * PAGE..(p + 1) * PAGE;
        for s in strategies(CHECKED_CLEAR) {
            for &d_off in S_OFFS {
                for &cut in CUTS {
                    let len = N * PAGE - d_off - cut;
                    let what = format!("{s} page {p} d_off {d_off} len {len}");
                    paint(&mut dst, bad.clone());
                    let r = fault::clear_checked_with(s, dst.slice(d_off, len));
                    let want = (p * PAGE).saturating_sub(d_off);
                    if want >= len {
                        assert!(r.is_ok(), "{what}: {r:?}");
                    } else {
                        let f = expect_fault(r, &what);
                        assert_eq!((f.offset, f.side), (want, Side::Destination), "{what}");
                        assert_eq!(f.code, POISON_CODE, "{what}: {f:?}");
                    }
                    let want = want.min(len);
                    check_region(&mut dst, d_off..d_off + want, bad.clone(), |_| 0, &what);
                }
            }
        }
    }
}

/// A file of `pages` pattern pages: a memfd, or a real file in the target
/// directory (the two take different paths through the page cache).
fn pattern_file(pages: usize, real_file: bool) -> OwnedFd {
    let fd = if real_file {
        let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "fault-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        OwnedFd::from(f)
    } else {
        // SAFETY: memfd_create takes a NUL-terminated name and flags.
        let fd = unsafe { libc::memfd_create(c"bulkmem-fault".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh fd we own.
        unsafe { OwnedFd::from_raw_fd(fd) }
    };
    let data: Vec<u8> = (0..pages * PAGE).map(src_byte).collect();
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, &data).unwrap();
    OwnedFd::from(file)
}

fn map_file(fd: &OwnedFd, len: usize, prot: i32) -> *mut u8 {
    // SAFETY: a fresh shared mapping of our own file.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    p.cast()
}

fn truncate(fd: &OwnedFd, len: usize) {
    // SAFETY: ftruncate on an fd this test owns; no memory is passed.
    let rc = unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) };
    assert_eq!(rc, 0);
}

#[test]
fn truncated_file_source_faults_at_the_first_page_past_eof() {
    for real_file in [false, true] {
        let n = 8;
        let fd = pattern_file(n, real_file);
        let map = map_file(&fd, n * PAGE, libc::PROT_READ);
        // EOF in the middle of page 3: page 3 reads as data then zeros,
        // page 4 on is past EOF and faults.
        let eof = 3 * PAGE + 100;
        truncate(&fd, eof);
        let mut dst = Guarded::new(n * PAGE);
        for s in strategies(CHECKED_COPY) {
            for &s_off in &[0usize, 5, 64, 4000] {
                let len = n * PAGE - s_off;
                let what = format!("{s} file {real_file} s_off {s_off}");
                paint(&mut dst, 0..0);
                // SAFETY: the mapping spans n pages; bytes past EOF are only
                // touched by the checked copy.
                let sr = unsafe { std::slice::from_raw_parts(map.add(s_off), len) };
                let f = expect_fault(fault::copy_checked_with(s, dst.slice(0, len), sr), &what);
                let want = 4 * PAGE - s_off;
                assert_eq!((f.offset, f.side), (want, Side::Source), "{what}: {f}");
                assert_eq!(f.code, libc::BUS_ADRERR, "{what}");
                assert_eq!(f.addr, map as usize + 4 * PAGE, "{what}");
                check_region(
                    &mut dst,
                    0..want,
                    0..0,
                    |i| {
                        if i + s_off < eof {
                            src_byte(i + s_off)
                        } else {
                            0
                        }
                    },
                    &what,
                );
            }
        }
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(map.cast(), n * PAGE) };
    }
}

#[test]
fn shared_destination_past_eof_faults_and_the_file_holds_the_prefix() {
    let n = 8;
    let src: Vec<u8> = (0..n * PAGE).map(|i| src_byte(i).wrapping_add(1)).collect();
    for s in strategies(CHECKED_COPY) {
        for &d_off in &[0usize, 3, 64, 2000] {
            let what = format!("{s} d_off {d_off}");
            let fd = pattern_file(n, false);
            let map = map_file(&fd, n * PAGE, libc::PROT_READ | libc::PROT_WRITE);
            let eof = 5 * PAGE;
            truncate(&fd, eof);
            let len = n * PAGE - d_off;
            // SAFETY: the mapping spans n pages; past EOF only the checked
            // copy writes.
            let d = unsafe { std::slice::from_raw_parts_mut(map.add(d_off), len) };
            let f = expect_fault(fault::copy_checked_with(s, d, &src[..len]), &what);
            assert_eq!(
                (f.offset, f.side),
                (eof - d_off, Side::Destination),
                "{what}"
            );
            assert_eq!(f.code, libc::BUS_ADRERR, "{what}");
            // The file (read with pread, not the mapping) holds the copy up
            // to EOF and its old bytes before d_off.
            let mut back = vec![0u8; eof];
            let into = back.as_mut_ptr().cast();
            // SAFETY: reading into our own buffer.
            let got = unsafe { libc::pread(fd.as_raw_fd(), into, eof, 0) } as usize;
            assert_eq!(got, eof);
            for (i, &b) in back.iter().enumerate() {
                let want = if i < d_off {
                    src_byte(i)
                } else {
                    src[i - d_off]
                };
                assert_eq!(b, want, "{what}: file byte {i}");
            }
            // SAFETY: unmapping our own mapping.
            unsafe { libc::munmap(map.cast(), n * PAGE) };
        }
    }
}

#[test]
fn file_truncated_while_the_copy_runs() {
    // Which page the copy reaches first is up to the scheduler: either it
    // finished, or it stopped at or past the new EOF, with every byte before
    // the offset copied. Not always at a page boundary: truncation takes
    // the pages away one at a time, so the page being read can go while
    // the copy is inside it (seen once: offset 8789168, 3248 bytes into a
    // page).
    let n = 16 << 8; // 16 MiB
    let fd = pattern_file(n, false);
    let map = map_file(&fd, n * PAGE, libc::PROT_READ);
    let eof = n * PAGE / 2;
    let mut dst = vec![0u8; n * PAGE];
    // SAFETY: the mapping spans n pages; only checked copies read it.
    let sr = unsafe { std::slice::from_raw_parts(map, n * PAGE) };
    let fd_ref = &fd;
    let r = std::thread::scope(|sc| {
        sc.spawn(move || truncate(fd_ref, eof));
        bulkmem::fault::copy_checked(&mut dst, sr)
    });
    let done = match r {
        Ok(()) => n * PAGE,
        Err(f) => {
            assert_eq!(f.side, Side::Source);
            assert_eq!(f.code, libc::BUS_ADRERR);
            assert!(f.offset >= eof, "{f}");
            f.offset
        }
    };
    assert!(dst[..done]
        .iter()
        .enumerate()
        .all(|(i, &b)| b == src_byte(i)));
    assert!(dst[done..].iter().all(|&b| b == 0));
    // SAFETY: unmapping our own mapping.
    unsafe { libc::munmap(map.cast(), n * PAGE) };
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-poison"),
    ignore = "needs userfaultfd UFFDIO_MOVE and UFFDIO_POISON (Linux 6.8+), which the build host lacks"
)]
fn many_threads_fault_at_once() {
    let (src, _m) = poisoned(N, 3);
    let base = src.start() as usize;
    std::thread::scope(|sc| {
        for t in 0..8 {
            sc.spawn(move || {
                let mut dst = vec![0u8; N * PAGE];
                for k in 0..200 {
                    let off = (t * 31 + k * 17) % PAGE;
                    let len = N * PAGE - off;
                    // SAFETY: within src's usable region; the poisoned page
                    // is only touched by the checked copy.
                    let sr = unsafe { std::slice::from_raw_parts((base + off) as *const u8, len) };
                    let f = bulkmem::fault::copy_checked(&mut dst[..len], sr).unwrap_err();
                    assert_eq!((f.offset, f.side), (3 * PAGE - off, Side::Source));
                    assert!(dst[..f.offset]
                        .iter()
                        .enumerate()
                        .all(|(i, &b)| b == src_byte(i + off)));
                }
            });
        }
    });
}

#[test]
fn checked_routines_match_the_reference_without_faults() {
    let mut src = Guarded::new(3 * PAGE);
    src.bytes()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = src_byte(i));
    let mut dst = Guarded::new(3 * PAGE);
    let lens: Vec<usize> = (0..=1100).chain(4000..=4200).chain(8000..=8192).collect();
    for s in strategies(CHECKED_COPY) {
        for &(s_off, d_off) in &[(0, 0), (1, 0), (0, 1), (63, 33), (32, 0), (17, 64)] {
            for &len in &lens {
                let what = format!("copy {s} s_off {s_off} d_off {d_off} len {len}");
                paint(&mut dst, 0..0);
                let sr = &src.bytes()[s_off..s_off + len] as *const [u8];
                // SAFETY: a distinct mapping, only read meanwhile.
                fault::copy_checked_with(s, dst.slice(d_off, len), unsafe { &*sr }).unwrap();
                check_region(
                    &mut dst,
                    d_off..d_off + len,
                    0..0,
                    |i| src_byte(i - d_off + s_off),
                    &what,
                );
            }
        }
    }
    for s in strategies(CHECKED_CLEAR) {
        for &d_off in &[0usize, 1, 31, 63] {
            for &len in &lens {
                let what = format!("clear {s} d_off {d_off} len {len}");
                paint(&mut dst, 0..0);
                fault::clear_checked_with(s, dst.slice(d_off, len)).unwrap();
                check_region(&mut dst, d_off..d_off + len, 0..0, |_| 0, &what);
            }
        }
    }
}

/// The checked routines the tests above loop over include the vector
/// ones; where the build host lacks the feature, these are listed as
/// ignored, naming what the loops above left out.
#[test]
#[cfg_attr(
    not(bulkmem_host = "avx2"),
    ignore = "the checked AVX2 routines need AVX2, which the build host lacks"
)]
fn the_checked_avx2_routines_are_tested() {
    for s in [Strategy::Avx2, Strategy::Avx2Nt] {
        assert!(CHECKED_COPY.contains(&s), "{s} has no checked copy");
        if require::strategy(s).is_some() {
            assert!(strategies(CHECKED_COPY).contains(&s), "{s} is left out");
        }
    }
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "avx512"),
    ignore = "the checked AVX-512 routine needs AVX-512 (avx512f and avx512bw), which the build host lacks"
)]
fn the_checked_avx512_routine_is_tested() {
    assert!(CHECKED_COPY.contains(&Strategy::Avx512));
    if require::strategy(Strategy::Avx512).is_some() {
        assert!(strategies(CHECKED_COPY).contains(&Strategy::Avx512));
    }
}

#[test]
fn unchecked_strategies_and_bad_lengths_are_refused() {
    let (mut d, s) = (vec![0u8; 8], vec![1u8; 9]);
    assert!(matches!(
        fault::copy_checked_with(Strategy::Auto, &mut d, &s),
        Err(Error::LengthMismatch { dst: 8, src: 9, .. })
    ));
    // glibc's routines and the portable loops have no exception table:
    // named, they are refused (auto stands in for them by size).
    let e = fault::copy_checked_with(Strategy::Libc, &mut d, &s[..8]).unwrap_err();
    assert!(matches!(e, Error::NotChecked { .. }));
    assert!(e.to_string().contains("rep-movsb"), "{e}");
    assert!(matches!(
        fault::clear_checked_with(Strategy::Portable, &mut d),
        Err(Error::NotChecked { .. })
    ));
    assert_eq!(d, vec![0u8; 8], "a refused call writes nothing");
    // The handle's own refusal names the same failure, in the same words.
    let k = bulkmem::CheckedCopyKernel::new(Strategy::Libc).unwrap_err();
    assert_eq!(
        k,
        bulkmem::CheckedStrategyError::NotChecked {
            strategy: Strategy::Libc,
            op: bulkmem::Op::Copy
        }
    );
    assert_eq!(k.to_string(), e.to_string());
    assert_eq!(Error::from(k), e);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Any length, alignment and poisoned page: the fault lands exactly at
    /// the poisoned page and the prefix is the copy.
    #[test]
    #[cfg_attr(not(bulkmem_host = "uffd-poison"), ignore = "needs userfaultfd UFFDIO_MOVE and UFFDIO_POISON (Linux 6.8+), which the build host lacks")]
    fn fault_offset_is_exact(s_off in 0usize..4096, len in 1usize..(5 * 4096), page in 0usize..5, idx in 0usize..5) {
        let all = strategies(CHECKED_COPY);
        let s = all[idx % all.len()];
        let (src, _m) = poisoned(5, page);
        let len = len.min(5 * PAGE - s_off);
        let mut dst = vec![0u8; len];
        // SAFETY: within src's usable region.
        let sr = unsafe { std::slice::from_raw_parts(src.start().add(s_off), len) };
        let r = fault::copy_checked_with(s, &mut dst, sr);
        let start = page * PAGE;
        if s_off + len <= start {
            prop_assert!(r.is_ok());
            prop_assert!(dst.iter().enumerate().all(|(i, &b)| b == src_byte(i + s_off)));
        } else {
            let f = expect_fault(r, "prop");
            prop_assert_eq!(f.offset, start.saturating_sub(s_off));
            prop_assert!(dst[..f.offset].iter().enumerate().all(|(i, &b)| b == src_byte(i + s_off)));
            prop_assert!(dst[f.offset..].iter().all(|&b| b == 0));
        }
    }
}

/// A multi-threaded engine batch with faults in three extents (a source
/// page, a destination page, and mid-way through an extent that spans
/// several chunks): those three report their exact offsets, every other
/// extent is complete, and nothing outside the faulted extents' tails
/// changed.
#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-poison"),
    ignore = "needs userfaultfd UFFDIO_MOVE and UFFDIO_POISON (Linux 6.8+), which the build host lacks"
)]
fn engine_batch_fault_ends_only_its_extent() {
    const EXT: usize = 16 * PAGE;
    const COUNT: usize = 12;
    const BIG: usize = 64 * PAGE; // 4 chunks of 64 KiB
    let src_pages = (COUNT * EXT + BIG) / PAGE;
    // Extent 3: source page 2 of the extent; the big extent (the last one):
    // source page 40 of it, which is in its third chunk.
    let big_at = COUNT * EXT;
    let (src, _ms) = poisoned_pages(src_pages, &[(3 * EXT) / PAGE + 2, (big_at / PAGE) + 40]);
    // Extent 7: destination page 5 of the extent.
    let (mut dst, _md) = poisoned_pages(src_pages, &[(7 * EXT) / PAGE + 5]);
    let bad_dst = 7 * EXT + 5 * PAGE..7 * EXT + 6 * PAGE;
    for threads in [1, 2] {
        for s in require::runnable(&[Strategy::RepMovsb, Strategy::Avx2Nt]) {
            let engine = bulkmem::Engine::builder()
                .threads(threads)
                .chunk(64 << 10)
                .inline_max(0)
                .strategy(s)
                .build()
                .unwrap();
            paint(&mut dst, bad_dst.clone());
            // Extents in a shuffled order, 100 bytes in from each slot so
            // nothing is page-aligned; the big one last.
            let order = [5usize, 0, 3, 9, 7, 1, 11, 2, 8, 4, 10, 6];
            let len = EXT - 200;
            let mut extents: Vec<bulkmem::Extent> = order
                .iter()
                .map(|&k| bulkmem::Extent {
                    dst: dst.start().wrapping_add(k * EXT + 100),
                    src: src.start().wrapping_add(k * EXT + 100) as *const u8,
                    len,
                })
                .collect();
            extents.push(bulkmem::Extent {
                dst: dst.start().wrapping_add(big_at),
                src: src.start().wrapping_add(big_at) as *const u8,
                len: BIG,
            });
            // SAFETY: every extent lies in the two guarded mappings, which
            // outlive the call; poisoned pages only raise SIGBUS.
            let r = unsafe { engine.copy_extents_checked(&extents, Default::default()) }.unwrap();
            let what = format!("{threads} threads {s}");
            assert!(r.report.is_complete(), "{what}: {:?}", r.report);
            for (i, o) in r.extents.iter().enumerate() {
                let slot = order.get(i).copied();
                let want_fault = match slot {
                    Some(3) => Some((2 * PAGE - 100, Side::Source)),
                    Some(7) => Some((5 * PAGE - 100, Side::Destination)),
                    None => Some((40 * PAGE, Side::Source)),
                    _ => None,
                };
                match (o, want_fault) {
                    (bulkmem::fault::Outcome::Done, None) => {}
                    (bulkmem::fault::Outcome::Faulted(f), Some(w)) => {
                        assert_eq!((f.offset, f.side), w, "{what}: extent {i}")
                    }
                    _ => panic!("{what}: extent {i}: {o:?}, expected fault {want_fault:?}"),
                }
            }
            assert_eq!(r.faults().count(), 3);
            // Content: every done extent copied; the faulted ones up to the
            // fault (the rest of a faulted small extent untouched).
            let base = dst.start() as usize;
            let copied = |i: usize| {
                extents.iter().zip(&r.extents).any(|(e, o)| {
                    let (a, n) = (e.dst as usize - base, e.len);
                    let upto = match o {
                        bulkmem::fault::Outcome::Faulted(f) => f.offset,
                        _ => n,
                    };
                    (a..a + upto).contains(&i)
                })
            };
            let b = dst.start();
            for i in (0..dst.usable()).filter(|i| !bad_dst.contains(i)) {
                // SAFETY: in the usable region, outside the poisoned page.
                let got = unsafe { b.add(i).read_volatile() };
                if copied(i) {
                    assert_eq!(got, src_byte(i), "{what}: byte {i}");
                } else if !(big_at + 40 * PAGE..big_at + BIG).contains(&i) {
                    // The big extent's chunks after its fault may have run.
                    assert_eq!(got, canary(i), "{what}: byte {i} written");
                }
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-poison"),
    ignore = "needs userfaultfd UFFDIO_MOVE and UFFDIO_POISON (Linux 6.8+), which the build host lacks"
)]
fn engine_checked_clear_and_cancelled_batches() {
    let (mut dst, _m) = poisoned(8, 3);
    let engine = bulkmem::Engine::builder()
        .threads(2)
        .chunk(64 << 10)
        .inline_max(0)
        .build()
        .unwrap();
    paint(&mut dst, 3 * PAGE..4 * PAGE);
    let (a, rest) = dst.bytes().split_at_mut(2 * PAGE);
    let ext = |p: &mut [u8]| bulkmem::Extent {
        dst: p.as_mut_ptr(),
        src: std::ptr::null(),
        len: p.len(),
    };
    let extents = [ext(a), ext(&mut rest[..4 * PAGE])];
    // SAFETY: both extents are in the guarded mapping.
    let r = unsafe { engine.clear_extents_checked(&extents, Default::default()) }.unwrap();
    assert_eq!(r.extents[0], bulkmem::fault::Outcome::Done);
    match r.extents[1] {
        bulkmem::fault::Outcome::Faulted(f) => {
            assert_eq!((f.offset, f.side), (PAGE, Side::Destination))
        }
        o => panic!("{o:?}"),
    }
    assert!(dst.bytes()[..3 * PAGE].iter().all(|&b| b == 0));
    // A batch cancelled before it starts touches nothing, and says so.
    let cancel = bulkmem::CancelToken::new();
    cancel.cancel();
    let ctl = bulkmem::Control {
        cancel: Some(&cancel),
        progress: None,
    };
    let mut v = [vec![1u8; 1 << 20], vec![2u8; 1 << 20]];
    let [x, y] = &mut v;
    let r = engine
        .clear_batch_checked(&mut [&mut x[..], &mut y[..]], ctl)
        .unwrap();
    assert_eq!(r.extents, vec![bulkmem::fault::Outcome::NotStarted; 2]);
    assert!(v[0].iter().all(|&b| b == 1) && v[1].iter().all(|&b| b == 2));
    // Without faults everything is done, with checked strategies only.
    let src = vec![9u8; 3 << 20];
    let mut out = vec![0u8; 3 << 20];
    let r = engine
        .copy_batch_checked(&mut [(&mut out[..], &src[..])], Default::default())
        .unwrap();
    assert!(r.all_done() && out == src);
    assert!(CHECKED_COPY.contains(&r.report.strategy));
    // The C library's memset runs on every CPU and has no checked clear.
    let e = bulkmem::Engine::builder()
        .strategy(Strategy::Libc)
        .build()
        .unwrap();
    assert!(matches!(
        e.clear_batch_checked(&mut [&mut out[..]], Default::default()),
        Err(Error::NotChecked { .. })
    ));
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-poison"),
    ignore = "needs userfaultfd UFFDIO_MOVE and UFFDIO_POISON (Linux 6.8+), which the build host lacks"
)]
fn inline_checked_batches_end_only_the_faulted_extent() {
    let (src, _m) = poisoned(8, 5);
    let all = src.start();
    for s in strategies(CHECKED_COPY) {
        let mut dst = vec![0u8; 8 * PAGE];
        let (d0, rest) = dst.split_at_mut(2 * PAGE);
        let (d1, d2) = rest.split_at_mut(4 * PAGE);
        // SAFETY: three disjoint pieces of src's usable region: pages 0-1,
        // 2-5 (page 5 poisoned) and 6-7.
        let (s0, s1, s2) = unsafe {
            (
                std::slice::from_raw_parts(all, 2 * PAGE),
                std::slice::from_raw_parts(all.add(2 * PAGE), 4 * PAGE),
                std::slice::from_raw_parts(all.add(6 * PAGE), 2 * PAGE),
            )
        };
        let mut ops = [(d1, s1), (d0, s0), (d2, s2)];
        let out = fault::copy_batch_checked(s, &mut ops).unwrap();
        assert_eq!(out[1], bulkmem::fault::Outcome::Done, "{s}");
        assert_eq!(out[2], bulkmem::fault::Outcome::Done, "{s}");
        match out[0] {
            bulkmem::fault::Outcome::Faulted(f) => {
                assert_eq!((f.offset, f.side), (3 * PAGE, Side::Source), "{s}")
            }
            o => panic!("{s}: {o:?}"),
        }
        let ok = |r: std::ops::Range<usize>| {
            dst[r.clone()].iter().zip(r).all(|(&b, i)| b == src_byte(i))
        };
        assert!(ok(0..5 * PAGE) && ok(6 * PAGE..8 * PAGE), "{s}");
        assert!(
            dst[5 * PAGE..6 * PAGE].iter().all(|&b| b == 0),
            "{s}: past the fault"
        );
    }
    let mut z = [vec![1u8; 3000], vec![2u8; 5000]];
    let [a, b] = &mut z;
    let out = fault::clear_batch_checked(Strategy::Auto, &mut [&mut a[..], &mut b[..]]).unwrap();
    assert_eq!(out, vec![bulkmem::fault::Outcome::Done; 2]);
    assert!(z.iter().all(|v| v.iter().all(|&x| x == 0)));
    let (mut d, s) = (vec![0u8; 4], vec![0u8; 5]);
    assert!(matches!(
        fault::copy_batch_checked(Strategy::Auto, &mut [(&mut d[..], &s[..])]),
        Err(Error::LengthMismatch { index: Some(0), .. })
    ));
}

/// Every source/destination misalignment pair 0..64 at lengths around the
/// routines' internal edges (vector widths, unrolled blocks, the sizes at
/// which each routine changes shape), checked byte for byte, with the 64
/// bytes either side of the destination checked untouched.
#[test]
fn checked_routines_at_every_misalignment_pair() {
    const LENS: &[usize] = &[
        0, 1, 7, 8, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023,
        4095, 4096, 4097,
    ];
    let mut src = Guarded::new(2 * PAGE);
    src.bytes()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = src_byte(i));
    let mut dst = Guarded::new(2 * PAGE);
    let usable = dst.usable();
    for s in strategies(CHECKED_COPY) {
        for s_off in 0..64 {
            for d_off in 0..64 {
                for &len in LENS {
                    let (d0, d1) = (64 + d_off, 64 + d_off + len);
                    let lo = d0 - 64;
                    let hi = (d1 + 64).min(usable);
                    let b = dst.bytes();
                    for (i, x) in b[lo..hi].iter_mut().enumerate() {
                        *x = canary(lo + i);
                    }
                    let sr = &src.bytes()[s_off..s_off + len] as *const [u8];
                    // SAFETY: a distinct mapping, only read meanwhile.
                    fault::copy_checked_with(s, &mut dst.bytes()[d0..d1], unsafe { &*sr }).unwrap();
                    for (i, &got) in dst.bytes().iter().enumerate().take(hi).skip(lo) {
                        let want = if (d0..d1).contains(&i) {
                            src_byte(i - d0 + s_off)
                        } else {
                            canary(i)
                        };
                        assert_eq!(
                            got, want,
                            "{s} s_off {s_off} d_off {d_off} len {len}: byte {i}"
                        );
                    }
                }
            }
        }
    }
    for s in strategies(CHECKED_CLEAR) {
        for d_off in 0..64 {
            for &len in LENS {
                let (d0, d1) = (64 + d_off, 64 + d_off + len);
                let (lo, hi) = (d0 - 64, (d1 + 64).min(usable));
                let b = dst.bytes();
                for (i, x) in b[lo..hi].iter_mut().enumerate() {
                    *x = canary(lo + i);
                }
                fault::clear_checked_with(s, &mut dst.bytes()[d0..d1]).unwrap();
                for (i, &got) in dst.bytes().iter().enumerate().take(hi).skip(lo) {
                    let want = if (d0..d1).contains(&i) { 0 } else { canary(i) };
                    assert_eq!(got, want, "clear {s} d_off {d_off} len {len}: byte {i}");
                }
            }
        }
    }
}

/// Empty extents among the rest of a checked engine batch keep their
/// places: a fault (here SIGSEGV, a protected page) is attributed to its
/// own extent, the empty ones are done, on one worker and two.
#[test]
fn empty_extents_keep_their_places_in_a_checked_engine_batch() {
    let mut src = Guarded::new(8 * PAGE);
    src.bytes()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = src_byte(i));
    // SAFETY: page 5 of the guarded source, only read by checked copies.
    let rc = unsafe { libc::mprotect(src.start().add(5 * PAGE).cast(), PAGE, libc::PROT_NONE) };
    assert_eq!(rc, 0);
    let mut dst = vec![0u8; 8 * PAGE];
    for threads in [1, 2] {
        let engine = bulkmem::Engine::builder()
            .threads(threads)
            .chunk(64 << 10)
            .inline_max(0)
            .build()
            .unwrap();
        dst.fill(0);
        let (s, d) = (src.start() as *const u8, dst.as_mut_ptr());
        let ext = |off: usize, len: usize| bulkmem::Extent {
            dst: d.wrapping_add(off),
            src: s.wrapping_add(off),
            len,
        };
        // Extents: empty, pages 0-3, empty, pages 4-7 (page 5 protected),
        // empty.
        let extents = [
            ext(0, 0),
            ext(0, 4 * PAGE),
            ext(4 * PAGE, 0),
            ext(4 * PAGE, 4 * PAGE),
            ext(8 * PAGE, 0),
        ];
        // SAFETY: the extents lie in the guarded source and `dst`, which
        // outlive the call; the protected page only raises SIGSEGV.
        let r = unsafe { engine.copy_extents_checked(&extents, Default::default()) }.unwrap();
        use bulkmem::fault::Outcome::{Done, Faulted};
        assert!(matches!(r.extents[..3], [Done, Done, Done]), "{r:?}");
        assert_eq!(r.extents[4], Done, "{r:?}");
        match r.extents[3] {
            Faulted(f) => assert_eq!(
                (f.offset, f.side, f.signal),
                (PAGE, Side::Source, libc::SIGSEGV),
                "{threads} threads"
            ),
            o => panic!("{threads} threads: {o:?}"),
        }
        assert!(dst[..5 * PAGE]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == src_byte(i)));
    }
}
