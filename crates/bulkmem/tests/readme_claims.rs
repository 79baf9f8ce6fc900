//! Behaviour the README and its guides (docs/guide/) promise that no
//! other test pinned down: a
//! cancelled checked batch reports the extent it cut as `Partial(n)`; a
//! SIGSEGV inside a checked copy still kills the process; the SIGBUS
//! handler runs on the thread's alternate signal stack; a page move cut
//! short (the kernel's `EAGAIN`) is continued and counted; engine batches
//! up to 4 MiB run on the calling thread and larger ones on the workers;
//! `copy_hint` / `clear_hint` with `Hint::Stream` write the right bytes
//! with non-temporal kernels.

#![cfg(target_arch = "x86_64")]

mod common;

use std::collections::HashSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

use bulkmem::fault::Outcome;
use bulkmem::fault::Side;
use bulkmem::mapping::Mapping;
use bulkmem::uffd::{MoveOptions, Mover};
use bulkmem::{CancelToken, Control, Engine, Hint, Op, Options, Progress};

const PAGE: usize = 4096;

/// The strategies the README calls non-temporal, by name: an independent
/// list, so a descriptor that lost its flag shows here.
const NON_TEMPORAL: &[&str] = &["avx2-nt", "avx512-nt", "clzero"];

/// A process-wide lock for the tests that start processes or move pages:
/// a fork() while a move runs would make its pages shared (EBUSY).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_cancelled_checked_batch_reports_the_extent_it_cut_as_partial() {
    const CHUNK: usize = 64 << 10;
    // One worker: after its first chunk the callback cancels, and the
    // worker looks at the token before it takes the next one.
    let e = Engine::builder()
        .threads(1)
        .chunk(CHUNK)
        .inline_max(0)
        .build()
        .unwrap();
    let (first, second) = (1 << 20, 3 * PAGE);
    let src = common::pattern_vec(first + second, 21);
    let mut dst = vec![0xEEu8; first + second];
    let (a, b) = dst.split_at_mut(first);
    let token = CancelToken::new();
    let cb = |_: Progress| token.cancel();
    let ctl = Control {
        cancel: Some(&token),
        progress: Some(&cb),
    };
    let r = e
        .copy_batch_checked(&mut [(a, &src[..first]), (b, &src[first..])], ctl)
        .unwrap();
    assert!(r.report.cancelled, "{r:?}");
    assert_eq!(r.extents[0], Outcome::Partial(CHUNK), "{r:?}");
    assert_eq!(r.extents[1], Outcome::NotStarted, "{r:?}");
    assert_eq!(r.report.bytes_done, CHUNK, "{r:?}");
    assert_eq!(dst[..CHUNK], src[..CHUNK], "the partial extent's prefix");
    assert!(
        dst[CHUNK..].iter().all(|&x| x == 0xEE),
        "nothing after the prefix was written"
    );
}

/// An unmapped page inside a checked copy is reported like a bad one:
/// SIGSEGV, `SEGV_MAPERR`, the exact offset, the prefix copied.
#[test]
fn sigsegv_inside_a_checked_copy_is_reported() {
    // SAFETY: a fresh anonymous mapping of two pages, the second then
    // unmapped: an address with nothing behind it.
    let p = unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            2 * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        assert_eq!(libc::munmap(p.cast::<u8>().add(PAGE).cast(), PAGE), 0);
        std::ptr::write_bytes(p.cast::<u8>(), 0x5A, PAGE);
        p.cast::<u8>()
    };
    // SAFETY: the first page is ours; the second is unmapped on purpose
    // and read only by the checked copy.
    let src = unsafe { std::slice::from_raw_parts(p, 2 * PAGE) };
    let mut dst = vec![0u8; 2 * PAGE];
    let f = bulkmem::fault::copy_checked(&mut dst, src).unwrap_err();
    assert_eq!(
        (f.signal, f.code, f.side, f.offset, f.addr),
        (libc::SIGSEGV, 1, Side::Source, PAGE, p as usize + PAGE),
        "{f}"
    );
    assert!(dst[..PAGE].iter().all(|&b| b == 0x5A));
    assert!(dst[PAGE..].iter().all(|&b| b == 0));
    assert!(
        f.to_string().starts_with("SIGSEGV reading the source"),
        "{f}"
    );
    // SAFETY: unmapping the first page, which is ours.
    unsafe { libc::munmap(p.cast(), PAGE) };
}

/// A 4-page memfd mapped shared and truncated to 1 page: reading page 1
/// on raises SIGBUS (BUS_ADRERR).
fn truncated_map() -> (OwnedFd, *mut u8) {
    // SAFETY: memfd_create, ftruncate and mmap on a fresh fd of our own.
    unsafe {
        let fd = libc::memfd_create(c"altstack".as_ptr(), libc::MFD_CLOEXEC);
        assert!(fd >= 0);
        let fd = OwnedFd::from_raw_fd(fd);
        assert_eq!(libc::ftruncate(fd.as_raw_fd(), PAGE as libc::off_t), 0);
        let p = libc::mmap(
            std::ptr::null_mut(),
            4 * PAGE,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        (fd, p.cast())
    }
}

#[test]
fn a_sigbus_in_a_checked_copy_is_handled_on_a_small_alternate_stack() {
    const MARK: u8 = 0xA5;
    let (_fd, map) = truncated_map();
    let map = map as usize;
    let (fault, used, size) = std::thread::spawn(move || {
        // The kernel's own minimum for a signal frame on this CPU (AVX-512
        // state included), and a few pages for the handler's frames.
        // SAFETY: getauxval only reads the auxiliary vector.
        let min = unsafe { libc::getauxval(libc::AT_MINSIGSTKSZ) } as usize;
        let size = (min.max(libc::MINSIGSTKSZ) + 3 * PAGE).div_ceil(PAGE) * PAGE;
        // Guard pages: an overflow faults instead of corrupting memory.
        let mut stack = Mapping::options().guard_pages(true).map(size).unwrap();
        stack.as_mut_slice().fill(MARK);
        let new = libc::stack_t {
            ss_sp: stack.as_mut_ptr().cast(),
            ss_flags: 0,
            ss_size: size,
        };
        // SAFETY: a zeroed stack_t is valid for sigaltstack to fill.
        let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
        // SAFETY: `stack` outlives its use: the old stack is restored below
        // before it is unmapped.
        assert_eq!(unsafe { libc::sigaltstack(&new, &mut old) }, 0);
        let mut dst = vec![0u8; 4 * PAGE];
        // SAFETY: the mapping spans 4 pages; past page 0 only the checked
        // copy reads it.
        let src = unsafe { std::slice::from_raw_parts(map as *const u8, 4 * PAGE) };
        let r = bulkmem::fault::copy_checked(&mut dst, src);
        // SAFETY: puts back the stack this thread had (std's).
        assert_eq!(unsafe { libc::sigaltstack(&old, std::ptr::null_mut()) }, 0);
        // The stack grows down: the deepest byte the frame reached.
        let used = stack
            .as_slice()
            .iter()
            .position(|&b| b != MARK)
            .map_or(0, |lowest| size - lowest);
        (r, used, size)
    })
    .join()
    .unwrap();
    let f = fault.expect_err("page 1 is past the end of the file");
    assert_eq!((f.offset, f.side), (PAGE, Side::Source), "{f}");
    assert!(
        used > 0,
        "the handler's signal frame never touched the {size}-byte alternate stack"
    );
    // SAFETY: unmapping our own mapping.
    unsafe { libc::munmap(map as *mut libc::c_void, 4 * PAGE) };
}

#[test]
fn a_move_cut_short_by_a_populated_page_is_continued_and_counted() {
    let _serial = serial();
    let mut m = match Mover::new() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("skipped: no userfaultfd moves here: {e}");
            return;
        }
    };
    let n = 16;
    let mut src = Mapping::options().map(n * PAGE).unwrap();
    let mut dst = Mapping::options().map(n * PAGE).unwrap();
    let want = common::pattern_vec(n * PAGE, 5);
    src.as_mut_slice().copy_from_slice(&want);
    // Populated before registering (a read of an unpopulated registered
    // page would wait for a fault handler that does not exist).
    dst.as_mut_slice()[5 * PAGE..6 * PAGE].fill(0x11);
    m.register(dst.as_mut_ptr(), n * PAGE).unwrap();
    // SAFETY: both are this test's private anonymous mappings, and no
    // reference into them is live across the call.
    let r = unsafe {
        m.move_range(
            dst.as_mut_ptr(),
            src.as_mut_ptr(),
            n * PAGE,
            MoveOptions::default(),
        )
    }
    .unwrap();
    let bad: Vec<(usize, i32)> = r.failures.iter().map(|f| (f.dst, f.errno)).collect();
    let at5 = dst.as_ptr() as usize + 5 * PAGE;
    assert_eq!(bad, vec![(at5, libc::EEXIST)], "{r:?}");
    assert_eq!(r.moved, n - 1, "{r:?}");
    // The first ioctl moved pages 0..5 and the kernel said EAGAIN (moved
    // less than asked); the mover retried from page 5, was refused there
    // (EEXIST), and moved the rest with a third.
    assert!(r.retries >= 1, "the partial move was not retried: {r:?}");
    assert_eq!(r.ioctls, r.retries + 2, "{r:?}");
    m.unregister(dst.as_mut_ptr(), n * PAGE).unwrap();
    let got = dst.as_slice();
    for i in (0..n).filter(|&i| i != 5) {
        assert_eq!(
            got[i * PAGE..(i + 1) * PAGE],
            want[i * PAGE..(i + 1) * PAGE],
            "page {i}"
        );
    }
    assert!(got[5 * PAGE..6 * PAGE].iter().all(|&b| b == 0x11));
}

#[test]
fn batches_up_to_4_mib_run_on_the_caller_and_larger_ones_on_the_workers() {
    // The default inline limit and chunk; only the thread count is set.
    let e = Engine::builder().threads(2).build().unwrap();
    let me = std::thread::current().id();
    for (len, inline) in [(4 << 20, true), ((4 << 20) + PAGE, false)] {
        let src = common::pattern_vec(len, len);
        let mut dst = vec![0u8; len];
        let ran_on = Mutex::new(HashSet::new());
        let cb = |_: Progress| {
            ran_on.lock().unwrap().insert(std::thread::current().id());
        };
        let ctl = Control {
            cancel: None,
            progress: Some(&cb),
        };
        let r = e
            .copy_batch_with_control(&mut [(&mut dst, &src)], ctl)
            .unwrap();
        assert!(r.is_complete() && dst == src, "{len}: {r:?}");
        let ran_on = ran_on.into_inner().unwrap();
        assert!(!ran_on.is_empty(), "{len}: no progress reported");
        if inline {
            assert_eq!(ran_on, HashSet::from([me]), "{len} bytes left the caller");
            assert_eq!(r.workers, 1, "{r:?}");
        } else {
            assert!(!ran_on.contains(&me), "{len} bytes ran on the caller");
        }
    }
}

#[test]
fn copy_hint_and_clear_hint_stream_with_non_temporal_kernels() {
    let n = (1 << 20) + 123;
    let src = common::pattern_vec(n, 77);
    let mut dst = vec![0u8; n];
    bulkmem::copy_hint(&mut dst, &src, Hint::Stream);
    assert_eq!(dst, src);
    bulkmem::clear_hint(&mut dst, Hint::Stream);
    assert!(dst.iter().all(|&b| b == 0));
    let forced = bulkmem_policy::auto::Overrides::from_env().any();
    if !bulkmem::Strategy::Avx2Nt.available() || forced {
        eprintln!("skipped the kernel check: no non-temporal kernel here, or BULKMEM_* overrides");
        return;
    }
    // The strategy the same single-call path runs for this length and hint
    // (copy_hint and copy_opts both ask the compiled bands).
    dst.fill(0xEE);
    let copy = bulkmem::copy_opts(&mut dst, &src, Options::hint(Hint::Stream)).unwrap();
    assert_eq!(dst, src);
    let clear = bulkmem::clear_opts(&mut dst, Options::hint(Hint::Stream)).unwrap();
    assert!(dst.iter().all(|&b| b == 0));
    let here = bulkmem_policy::auto::Policy::here().decide(&bulkmem_policy::auto::Request::single(
        Op::Copy,
        n,
        Hint::Stream,
    ));
    for s in [copy, clear, here.strategy] {
        assert!(NON_TEMPORAL.contains(&s.name()), "stream ran {s}");
    }
}
