//! UFFDIO_MOVE through `bulkmem::uffd::Mover`, on real mappings: content
//! arrives and the source empties, holes, populated and poisoned
//! destinations (partial progress continues past them), bad arguments,
//! transparent huge pages moved whole and split, the copy fallback for pages
//! shared after fork(), and batches. Where the build host's kernel or
//! privileges lack userfaultfd moves, the tests are compiled ignored and
//! `cargo test` says why (see build.rs).
//!
//! Unpopulated pages of a registered destination are never touched: with no
//! fault handler a read there would wait forever. Tests unregister first.

mod common;

use bulkmem::mapping::Mapping;
use bulkmem::uffd::{MoveOptions, Mover};
use bulkmem::Extent;
use bulkmem::PagesError as Error;
use common::require;

const PAGE: usize = 4096;
const HUGE: usize = 2 << 20;

/// An anonymous private mapping, `align`-aligned, with THP advised for or
/// against.
struct Map {
    base: *mut u8,
    len: usize,
    _map: Mapping,
}

impl Map {
    fn new(len: usize, align: usize, thp: bool) -> Map {
        let map = Mapping::options()
            .align(align)
            .huge_pages(thp)
            .map(len)
            .unwrap();
        Map {
            base: map.as_mut_ptr(),
            len,
            _map: map,
        }
    }

    fn at(&self, off: usize) -> *mut u8 {
        assert!(off <= self.len);
        // SAFETY: inside the mapping.
        unsafe { self.base.add(off) }
    }

    /// Writes page `i`'s pattern (populating it).
    fn fill_page(&self, i: usize, seed: u8) {
        // SAFETY: page i lies in the mapping; nothing else references it.
        let p = unsafe { std::slice::from_raw_parts_mut(self.at(i * PAGE), PAGE) };
        for (k, b) in p.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31) ^ (k as u8) ^ seed | 1;
        }
    }

    fn page_ok(&self, i: usize, seed: u8, from: usize) -> bool {
        // SAFETY: page i is populated (or, unregistered, zero-fills).
        let p = unsafe { std::slice::from_raw_parts(self.at(i * PAGE), PAGE) };
        p.iter()
            .enumerate()
            .all(|(k, &b)| b == (from as u8).wrapping_mul(31) ^ (k as u8) ^ seed | 1)
    }

    fn resident(&self, i: usize) -> bool {
        let mut v = [0u8; 1];
        // SAFETY: one page of our mapping; mincore only writes `v`, which
        // has room for the one page asked about.
        let rc = unsafe { libc::mincore(self.at(i * PAGE).cast(), PAGE, v.as_mut_ptr()) };
        assert_eq!(rc, 0);
        v[0] & 1 == 1
    }
}

/// fork() makes every private page of the process shared with the child,
/// so a move in another test running meanwhile would see EBUSY: the tests
/// take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The tests that call this are compiled ignored where the build host
/// cannot move pages; one that runs here anyway fails, saying why.
fn mover() -> (std::sync::MutexGuard<'static, ()>, Mover) {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    match Mover::new() {
        Ok(m) => (guard, m),
        Err(e) => panic!(
            "{e}: this test was compiled to move pages (the build host could), but this \
             host cannot: built elsewhere, or a stale build (cargo clean -p bulkmem \
             rebuilds the probe)"
        ),
    }
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-move"),
    ignore = "needs userfaultfd UFFDIO_MOVE (Linux 6.8+, unprivileged userfaultfd allowed), which the build host lacks"
)]
fn content_arrives_and_the_source_empties() {
    let (_serial, mut m) = mover();
    let n = 64;
    let (src, dst) = (
        Map::new(n * PAGE, PAGE, false),
        Map::new(n * PAGE, PAGE, false),
    );
    (0..n).for_each(|i| src.fill_page(i, 7));
    m.register(dst.base, dst.len).unwrap();
    // SAFETY: both are our private anonymous mappings, untouched meanwhile.
    let r = unsafe { m.move_range(dst.base, src.base, n * PAGE, MoveOptions::default()) }.unwrap();
    assert_eq!((r.moved, r.copied, r.holes), (n, 0, 0));
    assert!(r.is_complete() && r.ioctls == 1, "{r:?}");
    assert!((0..n).all(|i| !src.resident(i)), "source pages are gone");
    m.unregister(dst.base, dst.len).unwrap();
    assert!((0..n).all(|i| dst.page_ok(i, 7, i)));
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-move"),
    ignore = "needs userfaultfd UFFDIO_MOVE (Linux 6.8+, unprivileged userfaultfd allowed), which the build host lacks"
)]
fn holes_are_skipped_on_request_and_reported_otherwise() {
    let (_serial, mut m) = mover();
    let n = 16;
    for allow in [true, false] {
        let (src, dst) = (
            Map::new(n * PAGE, PAGE, false),
            Map::new(n * PAGE, PAGE, false),
        );
        (0..n).step_by(2).for_each(|i| src.fill_page(i, 3));
        m.register(dst.base, dst.len).unwrap();
        let opts = MoveOptions::default().allow_src_holes(allow);
        // SAFETY: as above.
        let r = unsafe { m.move_range(dst.base, src.base, n * PAGE, opts) }.unwrap();
        assert_eq!(r.moved, n / 2, "{allow}: {r:?}");
        if allow {
            assert_eq!(r.holes, n / 2);
            assert!(r.is_complete());
        } else {
            assert_eq!(r.failures.len(), n / 2);
            for (k, f) in r.failures.iter().enumerate() {
                assert_eq!(f.errno, libc::ENOENT);
                assert_eq!(f.src, src.at((2 * k + 1) * PAGE) as usize);
            }
        }
        assert!((0..n).all(|i| dst.resident(i) == (i % 2 == 0)));
        m.unregister(dst.base, dst.len).unwrap();
        assert!((0..n).step_by(2).all(|i| dst.page_ok(i, 3, i)));
    }
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-move"),
    ignore = "needs userfaultfd UFFDIO_MOVE (Linux 6.8+, unprivileged userfaultfd allowed), which the build host lacks"
)]
fn populated_and_poisoned_destination_pages_are_reported_and_passed() {
    let (_serial, mut m) = mover();
    let n = 32;
    let (src, dst) = (
        Map::new(n * PAGE, PAGE, false),
        Map::new(n * PAGE, PAGE, false),
    );
    (0..n).for_each(|i| src.fill_page(i, 9));
    dst.fill_page(5, 1); // already populated
    m.register(dst.base, dst.len).unwrap();
    let poisoned = m.supports_poison();
    if !poisoned {
        require::skip("the poisoned destination page: this kernel has no UFFDIO_POISON");
    }
    if poisoned {
        // SAFETY: page 20 of the destination is never read afterwards.
        unsafe { m.poison(dst.at(20 * PAGE), PAGE) }.unwrap();
    }
    // SAFETY: as above.
    let r = unsafe { m.move_range(dst.base, src.base, n * PAGE, MoveOptions::default()) }.unwrap();
    let bad: Vec<(usize, i32)> = r.failures.iter().map(|f| (f.dst, f.errno)).collect();
    let mut want = vec![(dst.at(5 * PAGE) as usize, libc::EEXIST)];
    if poisoned {
        want.push((dst.at(20 * PAGE) as usize, libc::EEXIST));
    }
    assert_eq!(bad, want, "{r:?}");
    assert_eq!(r.moved, n - want.len());
    assert!(r.ioctls > 1, "partial progress was continued");
    assert!(src.resident(5), "the refused source page stays");
    m.unregister(dst.base, dst.len).unwrap();
    assert!(dst.page_ok(5, 1, 5), "the populated page is untouched");
    assert!((0..n)
        .filter(|&i| i != 5 && !(poisoned && i == 20))
        .all(|i| dst.page_ok(i, 9, i)));
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-move"),
    ignore = "needs userfaultfd UFFDIO_MOVE (Linux 6.8+, unprivileged userfaultfd allowed), which the build host lacks"
)]
fn bad_arguments_are_refused_before_any_move() {
    let (_serial, mut m) = mover();
    let (src, dst) = (
        Map::new(8 * PAGE, PAGE, false),
        Map::new(8 * PAGE, PAGE, false),
    );
    (0..8).for_each(|i| src.fill_page(i, 5));
    let unregistered = |e: Error| e.to_string().contains("not registered");
    // SAFETY: every call below is refused before touching memory.
    unsafe {
        let e = m
            .move_range(dst.base, src.base, 8 * PAGE, MoveOptions::default())
            .unwrap_err();
        assert!(unregistered(e));
        m.register(dst.base, dst.len).unwrap();
        let e = m
            .move_range(dst.at(1), src.base, PAGE, MoveOptions::default())
            .unwrap_err();
        assert!(
            e.to_string().contains("destination") && e.to_string().contains("page-aligned"),
            "{e}"
        );
        let e = m
            .move_range(dst.base, src.base, 100, MoveOptions::default())
            .unwrap_err();
        assert!(e.to_string().contains("page-aligned"), "{e}");
        let e = m
            .move_range(src.at(2 * PAGE), src.base, 4 * PAGE, MoveOptions::default())
            .unwrap_err();
        assert!(e.to_string().contains("overlap"), "{e}");
        let batch = [
            Extent {
                dst: dst.base,
                src: src.base,
                len: 2 * PAGE,
            },
            Extent {
                dst: dst.at(PAGE),
                src: src.at(4 * PAGE),
                len: PAGE,
            },
        ];
        let e = m.move_batch(&batch, MoveOptions::default()).unwrap_err();
        assert!(e.to_string().contains("extent 1 overlaps extent 0"), "{e}");
    }
    assert!(
        (0..8).all(|i| src.resident(i) && !dst.resident(i)),
        "nothing moved"
    );
}

/// Whether the mapping at `addr` is backed by huge pages (smaps).
fn thp_backed(addr: *mut u8) -> bool {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let a = addr as usize;
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((s, e)) = range.split_once('-') {
                if let (Ok(s), Ok(e)) = (usize::from_str_radix(s, 16), usize::from_str_radix(e, 16))
                {
                    inside = s <= a && a < e;
                    continue;
                }
            }
        }
        if inside && line.starts_with("AnonHugePages:") {
            return line
                .split_whitespace()
                .nth(1)
                .and_then(|k| k.parse::<usize>().ok())
                .unwrap_or(0)
                >= 2048;
        }
    }
    false
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-move"),
    ignore = "needs userfaultfd UFFDIO_MOVE (Linux 6.8+, unprivileged userfaultfd allowed), which the build host lacks"
)]
fn huge_pages_move_whole_or_split() {
    let (_serial, mut m) = mover();
    let n = HUGE / PAGE;
    for split in [false, true] {
        let src = Map::new(HUGE, HUGE, true);
        (0..n).for_each(|i| src.fill_page(i, 11));
        if !thp_backed(src.base) {
            require::skip("the source did not get a transparent huge page (THP off?)");
            return;
        }
        let dst = Map::new(HUGE + PAGE, HUGE, true);
        let at = if split { dst.at(PAGE) } else { dst.base };
        m.register(dst.base, dst.len).unwrap();
        let opts = MoveOptions::default().fallback_copy(true);
        // SAFETY: as above.
        let r = unsafe { m.move_range(at, src.base, HUGE, opts) }.unwrap();
        assert!(r.is_complete(), "split {split}: {r:?}");
        assert_eq!(r.moved + r.copied, n, "split {split}: {r:?}");
        assert!((0..n).all(|i| !src.resident(i)));
        m.unregister(dst.base, dst.len).unwrap();
        let off = if split { 1 } else { 0 };
        assert!((0..n).all(|i| dst.page_ok(i + off, 11, i)), "split {split}");
        if !split {
            assert!(thp_backed(dst.base), "a whole PMD moved stays huge");
        }
    }
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-move"),
    ignore = "needs userfaultfd UFFDIO_MOVE (Linux 6.8+, unprivileged userfaultfd allowed), which the build host lacks"
)]
fn pages_shared_after_fork_fall_back_to_copy() {
    let (_serial, mut m) = mover();
    let n = 8;
    let (src, dst) = (
        Map::new(n * PAGE, PAGE, false),
        Map::new(n * PAGE, PAGE, false),
    );
    (0..n).for_each(|i| src.fill_page(i, 13));
    let mut pipe = [0; 2];
    // SAFETY: a plain pipe.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: the child only calls async-signal-safe read() and _exit().
    let child = unsafe { libc::fork() };
    if child == 0 {
        let mut b = [0u8; 1];
        // SAFETY: reading our end of the pipe, then exiting without unwinding.
        unsafe {
            libc::read(pipe[0], b.as_mut_ptr().cast(), 1);
            libc::_exit(0);
        }
    }
    assert!(child > 0);
    m.register(dst.base, dst.len).unwrap();
    // Shared with the child now: MOVE refuses them.
    // SAFETY: as above.
    let r = unsafe { m.move_range(dst.base, src.base, n * PAGE, MoveOptions::default()) }.unwrap();
    assert_eq!(r.moved, 0, "{r:?}");
    assert!(
        r.failures.iter().all(|f| f.errno == libc::EBUSY) && r.failures.len() == n,
        "{r:?}"
    );
    let opts = MoveOptions::default().fallback_copy(true);
    // SAFETY: as above.
    let r = unsafe { m.move_range(dst.base, src.base, n * PAGE, opts) }.unwrap();
    assert_eq!((r.moved, r.copied), (0, n), "{r:?}");
    assert!(r.is_complete());
    assert!(
        (0..n).all(|i| !src.resident(i)),
        "copied pages are dropped from the source"
    );
    // SAFETY: wake the child and reap it.
    unsafe {
        libc::write(pipe[1], b"x".as_ptr().cast(), 1);
        let mut status = 0;
        libc::waitpid(child, &mut status, 0);
        libc::close(pipe[0]);
        libc::close(pipe[1]);
    }
    m.unregister(dst.base, dst.len).unwrap();
    assert!((0..n).all(|i| dst.page_ok(i, 13, i)));
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-move"),
    ignore = "needs userfaultfd UFFDIO_MOVE (Linux 6.8+, unprivileged userfaultfd allowed), which the build host lacks"
)]
fn a_batch_of_scattered_live_pages_is_compacted_in_few_ioctls() {
    let (_serial, mut m) = mover();
    let n = 256;
    let heap = Map::new(n * PAGE, PAGE, false);
    (0..n).for_each(|i| heap.fill_page(i, 17));
    // Live pages: runs of 3 every 8 pages, listed in reverse order.
    let live: Vec<usize> = (0..n).filter(|i| i % 8 < 3).rev().collect();
    let to = Map::new(live.len() * PAGE, PAGE, false);
    m.register(to.base, to.len).unwrap();
    let mut order: Vec<usize> = live.clone();
    order.sort_unstable();
    let extents: Vec<Extent> = live
        .iter()
        .map(|&p| Extent {
            dst: to.at(order.iter().position(|&q| q == p).unwrap() * PAGE),
            src: heap.at(p * PAGE),
            len: PAGE,
        })
        .collect();
    // SAFETY: as above.
    let r = unsafe { m.move_batch(&extents, MoveOptions::default()) }.unwrap();
    assert_eq!(r.moved, live.len());
    assert!(r.is_complete());
    assert_eq!(r.ioctls, n / 8, "one ioctl per contiguous run of 3 pages");
    assert!(live.iter().all(|&p| !heap.resident(p)));
    m.unregister(to.base, to.len).unwrap();
    assert!(order
        .iter()
        .enumerate()
        .all(|(slot, &p)| to.page_ok(slot, 17, p)));
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-move"),
    ignore = "needs userfaultfd UFFDIO_MOVE (Linux 6.8+, unprivileged userfaultfd allowed), which the build host lacks"
)]
fn holes_over_populated_destination_pages_are_counted_once() {
    let (_serial, mut m) = mover();
    let n = 8;
    let (src, dst) = (
        Map::new(n * PAGE, PAGE, false),
        Map::new(n * PAGE, PAGE, false),
    );
    // Source: pages 0..4 populated, 4..8 holes. Destination: 0..4 empty,
    // 4..8 populated.
    (0..4).for_each(|i| src.fill_page(i, 3));
    (4..8).for_each(|i| dst.fill_page(i, 8));
    m.register(dst.base, dst.len).unwrap();
    let opts = MoveOptions::default().allow_src_holes(true);
    // SAFETY: both mappings are ours; no reference points into them.
    let r = unsafe { m.move_range(dst.base, src.base, n * PAGE, opts) }.unwrap();
    // Pages 0..4 moved; the holes 4..8 were not skipped but refused
    // (EEXIST: the destination is populated there): failures, not holes.
    assert_eq!((r.moved, r.copied, r.holes), (4, 0, 0), "{r:?}");
    let failed: Vec<(usize, usize, i32)> =
        r.failures.iter().map(|f| (f.dst, f.src, f.errno)).collect();
    let want: Vec<(usize, usize, i32)> = (4..8)
        .map(|i| {
            (
                dst.at(i * PAGE) as usize,
                src.at(i * PAGE) as usize,
                libc::EEXIST,
            )
        })
        .collect();
    assert_eq!(failed, want, "{r:?}");
    assert_eq!(
        r.moved + r.copied + r.holes + r.failures.len(),
        n,
        "every page counted once: {r:?}"
    );
    assert!(
        (0..4).all(|i| !src.resident(i)),
        "moved pages left the source"
    );
    m.unregister(dst.base, dst.len).unwrap();
    assert!(
        (0..4).all(|i| dst.page_ok(i, 3, i)),
        "the moved pages arrived"
    );
    assert!(
        (4..8).all(|i| dst.page_ok(i, 8, i)),
        "populated pages untouched"
    );
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "uffd-move"),
    ignore = "needs userfaultfd UFFDIO_MOVE (Linux 6.8+, unprivileged userfaultfd allowed), which the build host lacks"
)]
fn ranges_that_wrap_around_are_refused_without_overflow() {
    let (_serial, mut m) = mover();
    let dst = Map::new(4 * PAGE, PAGE, false);
    m.register(dst.base, dst.len).unwrap();
    let huge = usize::MAX & !0xfff;
    let near_end = ((usize::MAX - 2 * PAGE) & !0xfff) as *mut u8;
    for (d, s, len) in [
        (dst.base, dst.at(2 * PAGE), huge),
        (dst.base, near_end, 4 * PAGE),
        (near_end, dst.base, 4 * PAGE),
    ] {
        // SAFETY: refused before any ioctl (this is what is tested).
        let r = unsafe { m.move_range(d, s, len, MoveOptions::default()) };
        match r {
            Err(Error::BadRange { why, .. }) => assert!(why.contains("address space"), "{why}"),
            other => panic!("{d:?} {s:?} {len:#x}: {other:?}"),
        }
    }
    assert!(matches!(
        m.register(near_end, 4 * PAGE),
        Err(Error::BadRange { .. })
    ));
    assert!(matches!(
        m.unregister(near_end, 4 * PAGE),
        Err(Error::BadRange { .. })
    ));
    if m.supports_poison() {
        // SAFETY: refused before any ioctl; nothing is poisoned.
        let r = unsafe { m.poison(near_end, 4 * PAGE) };
        match r {
            Err(Error::BadRange { why, .. }) => assert!(why.contains("address space"), "{why}"),
            other => panic!("poison {near_end:?}: {other:?}"),
        }
    } else {
        require::skip("the wrapping poison range: this kernel has no UFFDIO_POISON");
    }
    m.unregister(dst.base, dst.len).unwrap();
    assert!(!dst.resident(0), "nothing moved into the destination");
}
