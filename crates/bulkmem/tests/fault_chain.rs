//! bulkmem's SIGBUS handler shares the signal with the application: every
//! SIGBUS that is not a fault inside a checked routine reaches the handler
//! installed before bulkmem's (or the default action), and `reinstall`
//! puts bulkmem back in front of a handler installed after it.
//!
//! One test function: the order of installs is the subject, so nothing may
//! run concurrently in this binary.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use bulkmem::fault;

const PAGE: usize = 4096;

static APP_CALLS: AtomicUsize = AtomicUsize::new(0);
static APP_LAST_CODE: AtomicI32 = AtomicI32::new(i32::MIN);
static LATE_CALLS: AtomicUsize = AtomicUsize::new(0);
/// The file the application's handler grows back after a real fault.
static FILE_FD: AtomicI32 = AtomicI32::new(-1);

/// The application's handler: counts, and repairs a truncated mapping by
/// growing its file back, so the faulting read succeeds when retried.
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
}

extern "C" fn late_handler(_sig: i32) {
    LATE_CALLS.fetch_add(1, Ordering::SeqCst);
}

fn set_handler(h: usize, siginfo: bool) {
    // SAFETY: a zeroed sigaction is valid; we set handler, flags and mask.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = h;
        sa.sa_flags = if siginfo { libc::SA_SIGINFO } else { 0 };
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()), 0);
    }
}

fn raise_bus() {
    // SAFETY: raising a signal whose handler is installed.
    assert_eq!(unsafe { libc::raise(libc::SIGBUS) }, 0);
}

/// A 4-page memfd mapped shared, truncated to 1 page: pages 1.. fault.
fn truncated_map() -> (OwnedFd, *mut u8) {
    // SAFETY: memfd_create, ftruncate and mmap on a fresh fd of our own.
    unsafe {
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
        (fd, p.cast())
    }
}

fn checked_copy_faults(map: *mut u8) {
    let mut dst = vec![0u8; 4 * PAGE];
    // SAFETY: the mapping spans 4 pages; past page 0 only the checked copy
    // reads it.
    let src = unsafe { std::slice::from_raw_parts(map, 4 * PAGE) };
    let f = bulkmem::copy_checked(&mut dst, src).expect_err("page 1 is past EOF");
    assert_eq!(f.offset, PAGE);
}

#[test]
fn sigbus_that_is_not_ours_reaches_the_previous_handler() {
    // 1. The application's handler first, then bulkmem's in front of it.
    set_handler(app_handler as *const () as usize, true);
    fault::install();
    assert!(fault::is_installed());

    // 2. A signal sent to the process is not ours: the app sees it.
    raise_bus();
    assert_eq!(APP_CALLS.load(Ordering::SeqCst), 1);
    assert!(
        APP_LAST_CODE.load(Ordering::SeqCst) <= 0,
        "sent, not a fault"
    );

    // 3. A fault inside a checked copy is ours: the app sees nothing.
    let (fd, map) = truncated_map();
    checked_copy_faults(map);
    assert_eq!(APP_CALLS.load(Ordering::SeqCst), 1);

    // 4. A real fault outside bulkmem goes to the app, whose handler grows
    // the file back; the read is retried and succeeds.
    FILE_FD.store(fd.as_raw_fd(), Ordering::SeqCst);
    // SAFETY: page 2 faults once (past EOF); the app's handler makes it
    // valid again before the read is retried.
    let v = unsafe { map.add(2 * PAGE).read_volatile() };
    assert_eq!(v, 0);
    assert_eq!(APP_CALLS.load(Ordering::SeqCst), 2);
    assert_eq!(APP_LAST_CODE.load(Ordering::SeqCst), libc::BUS_ADRERR);
    FILE_FD.store(-1, Ordering::SeqCst);
    // SAFETY: ftruncate on an fd this test owns (shrinking the file again
    // for the next checked copy); no memory is passed.
    let rc = unsafe { libc::ftruncate(fd.as_raw_fd(), PAGE as libc::off_t) };
    assert_eq!(rc, 0);

    // 5. An application handler installed later displaces bulkmem's ...
    set_handler(late_handler as *const () as usize, false);
    assert!(!fault::is_installed());
    // ... until reinstall puts bulkmem in front and chains to the new one.
    assert!(fault::reinstall());
    assert!(!fault::reinstall(), "already in front");
    assert!(fault::is_installed());
    checked_copy_faults(map);
    raise_bus();
    assert_eq!(LATE_CALLS.load(Ordering::SeqCst), 1);
    assert_eq!(APP_CALLS.load(Ordering::SeqCst), 2);

    // 6. With no handler before bulkmem's, a SIGBUS that is not ours still
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
            set_handler(libc::SIG_DFL, false);
            fault::reinstall();
            let mut dst = [0u8; 2 * PAGE];
            // SAFETY: as in checked_copy_faults.
            let src = unsafe { std::slice::from_raw_parts(map, 2 * PAGE) };
            let survived = bulkmem::copy_checked(&mut dst, src).is_err();
            if !survived {
                // SAFETY: _exit is always safe to call.
                unsafe { libc::_exit(3) };
            }
            if real_fault {
                // SAFETY: page 3 is past EOF: this faults for real.
                unsafe { map.add(3 * PAGE).read_volatile() };
            } else {
                raise_bus();
            }
            // SAFETY: as above.
            unsafe { libc::_exit(4) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGBUS,
            "child (real fault: {real_fault}) should die of SIGBUS, status {status:#x}"
        );
    }
    // SAFETY: unmapping our own mapping.
    unsafe { libc::munmap(map.cast(), 4 * PAGE) };
}
