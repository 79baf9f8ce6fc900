//! Helpers for the fault tests: a source pattern, regions with poisoned
//! pages, and whole-region checks that leave out unreadable pages.

use bulkmem::fault::Fault;
use bulkmem::uffd::Mover;
use bulkmem::Error;

use super::{canary, Guarded, PAGE};

/// Source byte `i`: position-dependent and never 0 (the high bit is set).
pub fn src_byte(i: usize) -> u8 {
    (i.wrapping_mul(7) ^ (i >> 9)) as u8 | 0x80
}

/// `n` pattern-filled pages between guard pages, page `p` replaced by a
/// userfaultfd-poisoned page. The tests that call this are compiled ignored
/// where the build host cannot poison (see build.rs); one that runs here
/// anyway (built elsewhere, or run with `--ignored`) fails, saying why.
pub fn poisoned(n: usize, p: usize) -> (Guarded, Mover) {
    poisoned_pages(n, &[p])
}

pub fn poisoned_pages(n: usize, pages: &[usize]) -> (Guarded, Mover) {
    let mut g = Guarded::new(n * PAGE);
    g.bytes()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = src_byte(i));
    let mut m = match Mover::new() {
        Ok(m) if m.supports_poison() => m,
        Ok(_) => panic!("{NO_POISON}: this kernel has no UFFDIO_POISON (Linux 6.6+)"),
        Err(e) => panic!("{NO_POISON}: {e}"),
    };
    for &p in pages {
        let page = g.start().wrapping_add(p * PAGE);
        // SAFETY: page p lies in g's usable region; dropping it only makes
        // the next access a missing-page fault, which the poison answers.
        let rc = unsafe { libc::madvise(page.cast(), PAGE, libc::MADV_DONTNEED) };
        assert_eq!(rc, 0);
        m.register(page, PAGE).unwrap();
        // SAFETY: the test never reads page p except through checked copies.
        unsafe { m.poison(page, PAGE) }.unwrap();
    }
    (g, m)
}

const NO_POISON: &str = "this test was compiled to poison pages (the build host could), \
     but this host cannot: built elsewhere, or a stale build (cargo clean -p bulkmem \
     rebuilds the probe)";

pub fn expect_fault(r: Result<(), Error>, what: &str) -> Fault {
    match r {
        Err(Error::Fault(f)) => f,
        other => panic!("{what}: expected a fault, got {other:?}"),
    }
}

/// `dst` must hold `want(i)` at `i in copied` and the canary everywhere
/// else, except inside `skip` (a poisoned page that cannot be read).
pub fn check_region(
    dst: &mut Guarded,
    copied: std::ops::Range<usize>,
    skip: std::ops::Range<usize>,
    want: impl Fn(usize) -> u8,
    what: &str,
) {
    let b = dst.bytes().as_ptr();
    for i in 0..dst.usable() {
        if skip.contains(&i) {
            continue;
        }
        // SAFETY: i is in the usable region and not in the poisoned page.
        let got = unsafe { b.add(i).read_volatile() };
        let expect = if copied.contains(&i) {
            want(i)
        } else {
            canary(i)
        };
        assert_eq!(got, expect, "{what}: byte {i} (copied {copied:?})");
    }
}

pub fn paint(dst: &mut Guarded, skip: std::ops::Range<usize>) {
    let b = dst.start();
    for i in (0..dst.usable()).filter(|i| !skip.contains(i)) {
        // SAFETY: in the usable region, outside the poisoned page.
        unsafe { b.add(i).write_volatile(canary(i)) };
    }
}
