//! bulkmem's SIGBUS and SIGSEGV handler shares the signals with the
//! application: every signal that is not a fault inside a checked routine
//! reaches the handler installed before bulkmem's (or the default action),
//! and `reinstall` puts bulkmem back in front of a handler installed after
//! it.
//!
//! One test function: the order of installs is the subject, so nothing may
//! run concurrently in this binary. It plays the same story for SIGBUS (a
//! shared mapping past the end of its file) and SIGSEGV (a `PROT_NONE`
//! page).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use bulkmem::fault;

const PAGE: usize = 4096;

static APP_CALLS: AtomicUsize = AtomicUsize::new(0);
static APP_LAST_CODE: AtomicI32 = AtomicI32::new(i32::MIN);
static LATE_CALLS: AtomicUsize = AtomicUsize::new(0);
/// What the application's handler repairs after a real fault: the file it
/// grows back (SIGBUS) or the page it makes accessible again (SIGSEGV).
static FILE_FD: AtomicI32 = AtomicI32::new(-1);
static PROTECTED: AtomicUsize = AtomicUsize::new(0);

/// The application's handler: counts, and repairs the mapping so that the
/// faulting access succeeds when retried.
extern "C" fn app_handler(_sig: i32, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    APP_CALLS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: the kernel passed a valid siginfo.
    let code = unsafe { (*info).si_code };
    APP_LAST_CODE.store(code, Ordering::SeqCst);
    let fd = FILE_FD.load(Ordering::SeqCst);
    if code > 0 && fd >= 0 {
        // SAFETY: ftruncate is async-signal-safe; fd is the test's file.
        unsafe { libc::ftruncate(fd, (4 * PAGE) as libc::off_t) };
    }
    let page = PROTECTED.load(Ordering::SeqCst);
    if code > 0 && page != 0 {
        // SAFETY: a raw system call on the test's own page.
        unsafe { libc::mprotect(page as *mut libc::c_void, PAGE, libc::PROT_READ) };
    }
}

extern "C" fn late_handler(_sig: i32) {
    LATE_CALLS.fetch_add(1, Ordering::SeqCst);
}

fn set_handler(sig: i32, h: usize, siginfo: bool) {
    // SAFETY: a zeroed sigaction is valid; we set handler, flags and mask.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = h;
        sa.sa_flags = if siginfo { libc::SA_SIGINFO } else { 0 };
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(sig, &sa, std::ptr::null_mut()), 0);
    }
}

fn raise(sig: i32) {
    // SAFETY: raising a signal whose handler is installed.
    assert_eq!(unsafe { libc::raise(sig) }, 0);
}

/// A 4-page mapping whose pages 1.. fault with `sig`: a memfd mapped
/// shared and truncated to 1 page (SIGBUS), or anonymous memory with pages
/// 1.. `PROT_NONE` (SIGSEGV). Returns the file for SIGBUS.
fn faulting_map(sig: i32) -> (Option<OwnedFd>, *mut u8) {
    // SAFETY: memfd_create, ftruncate, mmap and mprotect on a fresh fd or
    // mapping of our own.
    unsafe {
        if sig == libc::SIGSEGV {
            let p = libc::mmap(
                std::ptr::null_mut(),
                4 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            protect(p.cast());
            return (None, p.cast());
        }
        let fd = libc::memfd_create(c"chain".as_ptr(), libc::MFD_CLOEXEC);
        assert!(fd >= 0);
        let fd = OwnedFd::from_raw_fd(fd);
        assert_eq!(libc::ftruncate(fd.as_raw_fd(), PAGE as libc::off_t), 0);
        let p = libc::mmap(
            std::ptr::null_mut(),
            4 * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        (Some(fd), p.cast())
    }
}

/// Makes pages 1..4 of `map` fault again.
fn protect(map: *mut u8) {
    // SAFETY: pages of the test's own anonymous mapping.
    let rc = unsafe { libc::mprotect(map.add(PAGE).cast(), 3 * PAGE, libc::PROT_NONE) };
    assert_eq!(rc, 0);
}

fn checked_copy_faults(map: *mut u8, sig: i32) {
    let mut dst = vec![0u8; 4 * PAGE];
    // SAFETY: the mapping spans 4 pages; past page 0 only the checked copy
    // reads it.
    let src = unsafe { std::slice::from_raw_parts(map, 4 * PAGE) };
    let f = bulkmem::fault::copy_checked(&mut dst, src).expect_err("page 1 faults");
    assert_eq!((f.offset, f.signal), (PAGE, sig), "{f}");
}

#[test]
fn signals_that_are_not_ours_reach_the_previous_handler() {
    for sig in [libc::SIGBUS, libc::SIGSEGV] {
        story(sig);
    }
}

fn story(sig: i32) {
    APP_CALLS.store(0, Ordering::SeqCst);
    LATE_CALLS.store(0, Ordering::SeqCst);
    // 1. The application's handler first, then bulkmem's in front of it
    // (reinstall: the first story already installed bulkmem's).
    set_handler(sig, app_handler as *const () as usize, true);
    fault::reinstall();
    assert!(fault::is_installed());

    // 2. A signal sent to the process is not ours: the app sees it.
    raise(sig);
    assert_eq!(APP_CALLS.load(Ordering::SeqCst), 1);
    assert!(
        APP_LAST_CODE.load(Ordering::SeqCst) <= 0,
        "sent, not a fault"
    );

    // 3. A fault inside a checked copy is ours: the app sees nothing.
    let (fd, map) = faulting_map(sig);
    checked_copy_faults(map, sig);
    assert_eq!(APP_CALLS.load(Ordering::SeqCst), 1);

    // 4. A real fault outside bulkmem goes to the app, whose handler
    // repairs the mapping; the read is retried and succeeds.
    match &fd {
        Some(fd) => FILE_FD.store(fd.as_raw_fd(), Ordering::SeqCst),
        None => PROTECTED.store(map as usize + 2 * PAGE, Ordering::SeqCst),
    }
    // SAFETY: page 2 faults once; the app's handler makes it valid again
    // before the read is retried.
    let v = unsafe { map.add(2 * PAGE).read_volatile() };
    assert_eq!(v, 0);
    assert_eq!(APP_CALLS.load(Ordering::SeqCst), 2);
    let code = if sig == libc::SIGBUS {
        libc::BUS_ADRERR
    } else {
        2 // SEGV_ACCERR
    };
    assert_eq!(APP_LAST_CODE.load(Ordering::SeqCst), code);
    FILE_FD.store(-1, Ordering::SeqCst);
    PROTECTED.store(0, Ordering::SeqCst);
    match &fd {
        Some(fd) => {
            // SAFETY: ftruncate on an fd this test owns (shrinking the
            // file again for the next checked copy); no memory is passed.
            let rc = unsafe { libc::ftruncate(fd.as_raw_fd(), PAGE as libc::off_t) };
            assert_eq!(rc, 0);
        }
        None => protect(map),
    }

    // 5. An application handler installed later displaces bulkmem's ...
    set_handler(sig, late_handler as *const () as usize, false);
    assert!(!fault::is_installed());
    // ... until reinstall puts bulkmem in front and chains to the new one.
    assert!(fault::reinstall());
    assert!(!fault::reinstall(), "already in front");
    assert!(fault::is_installed());
    checked_copy_faults(map, sig);
    raise(sig);
    assert_eq!(LATE_CALLS.load(Ordering::SeqCst), 1);
    assert_eq!(APP_CALLS.load(Ordering::SeqCst), 2);

    // 6. With no handler before bulkmem's, a signal that is not ours still
    // kills the process (default action), sent or a real fault, while
    // checked copies still survive.
    for real_fault in [false, true] {
        // SAFETY: the child only makes async-signal-safe calls and a
        // checked copy (no lock it needs is held by another thread of this
        // one-test binary), then exits or dies.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: setrlimit with a valid struct; no core file litters
            // the crate directory when the child dies as expected.
            unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) };
            set_handler(sig, libc::SIG_DFL, false);
            fault::reinstall();
            let mut dst = [0u8; 2 * PAGE];
            // SAFETY: as in checked_copy_faults.
            let src = unsafe { std::slice::from_raw_parts(map, 2 * PAGE) };
            let survived = bulkmem::fault::copy_checked(&mut dst, src).is_err();
            if !survived {
                // SAFETY: _exit is always safe to call.
                unsafe { libc::_exit(3) };
            }
            if real_fault {
                // SAFETY: page 3 faults for real.
                unsafe { map.add(3 * PAGE).read_volatile() };
            } else {
                raise(sig);
            }
            // SAFETY: as above.
            unsafe { libc::_exit(4) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == sig,
            "child (signal {sig}, real fault: {real_fault}) should die of it, status {status:#x}"
        );
    }
    // SAFETY: unmapping our own mapping.
    unsafe { libc::munmap(map.cast(), 4 * PAGE) };
}
