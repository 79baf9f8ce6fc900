//! `libbulkmem_preload.so`: large `memcpy`, `memmove`, `memset` (zero),
//! `mempcpy` and their fortified forms of unmodified programs go through
//! bulkmem (`LD_PRELOAD=.../libbulkmem_preload.so CMD`, or `bulkmem run`).
//!
//! Calls below `BULKMEM_PRELOAD_MIN` (1 MiB) go straight to the next
//! definition (the C library): one load, one compare and a jump. Larger
//! ones go through bulkmem's `auto` (following the tuned profile when there
//! is one), and those of at least `BULKMEM_PRELOAD_MT_MIN` (16 MiB) to the
//! engine's worker threads. See [`config`] for the variables.
//!
//! Where it is safe to be called from, and why:
//! * before `main`, inside the dynamic loader and `dlsym`: until the
//!   constructor has run, every call takes the C library's function, found
//!   with `dlsym(RTLD_NEXT)` without recursion ([`next`]), or a string
//!   instruction while that is unknown;
//! * inside `malloc` and from signal handlers: the small path takes no lock
//!   and allocates nothing; the `auto` path neither (the constructor did
//!   bulkmem's lazy initialisation); a call made while the thread is already
//!   inside bulkmem takes the C library;
//! * forked children: the engine starts its own workers in the child on
//!   its first batch there (bulkmem's engine does this for every user);
//! * many threads: one batch on the engine at a time (others copy on their
//!   own thread rather than wait).
//!
//! Overlapping `memmove`s, `memset` of non-zero bytes, and the engine's
//! creation (which starts threads) are left to the C library or to calls
//! of at least `MT_MIN` bytes, which never happen inside `malloc` (glibc
//! maps allocations that large).

mod accel;
pub mod config;
mod next;
mod stats;

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

use bulkmem::Op;
use stats::Path;

/// Tells a program (and the tests) that the preload is loaded and active.
#[no_mangle]
pub extern "C" fn bulkmem_preload_active() -> c_int {
    c_int::from(config::ACTIVE.load(Ordering::Relaxed))
}

#[inline(always)]
fn small(n: usize) -> bool {
    n < config::MIN.load(Ordering::Relaxed)
}

fn overlap(d: *const c_void, s: *const c_void, n: usize) -> bool {
    let (d, s) = (d as usize, s as usize);
    d < s.wrapping_add(n) && s < d.wrapping_add(n)
}

// The small path of each function is two loads, a compare, a test and a
// jump to the C library's function: nothing else may share its frame (a
// shared slow branch made the compiler save three registers on every call:
// small copies ran 9% slower). Everything else is one cold tail call.

/// # Safety
/// `memcpy`'s contract.
#[no_mangle]
pub unsafe extern "C" fn memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    let f = next::MEMCPY.known();
    if small(n) && !f.is_null() {
        // SAFETY: the C library's memcpy; forwarded contract.
        return unsafe { std::mem::transmute::<*mut c_void, next::CopyFn>(f)(d, s, n) };
    }
    // SAFETY: forwarded contract.
    unsafe { slow_memcpy(d, s, n) }
}

/// # Safety
/// `memmove`'s contract.
#[no_mangle]
pub unsafe extern "C" fn memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    let f = next::MEMMOVE.known();
    if small(n) && !f.is_null() {
        // SAFETY: the C library's memmove; forwarded contract.
        return unsafe { std::mem::transmute::<*mut c_void, next::CopyFn>(f)(d, s, n) };
    }
    // SAFETY: forwarded contract.
    unsafe { slow_memmove(d, s, n) }
}

/// # Safety
/// `memset`'s contract.
#[no_mangle]
pub unsafe extern "C" fn memset(d: *mut c_void, c: c_int, n: usize) -> *mut c_void {
    let f = next::MEMSET.known();
    if small(n) && !f.is_null() {
        // SAFETY: the C library's memset; forwarded contract.
        return unsafe { std::mem::transmute::<*mut c_void, next::SetFn>(f)(d, c, n) };
    }
    // SAFETY: forwarded contract.
    unsafe { slow_set(d, c, n) }
}

/// Small calls before the C library's function is known, and every large
/// call (C ABI, the signature of the caller: a jump, not a call).
///
/// # Safety
/// `memcpy`'s contract.
#[cold]
#[inline(never)]
unsafe extern "C" fn slow_memcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    if small(n) {
        // SAFETY: forwarded contract (resolves, or uses the stand-in).
        return unsafe { next::memcpy(d, s, n) };
    }
    // SAFETY: forwarded contract.
    unsafe { big_copy(d, s, n, false) }
}

/// # Safety
/// `memmove`'s contract.
#[cold]
#[inline(never)]
unsafe extern "C" fn slow_memmove(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    if small(n) {
        // SAFETY: forwarded contract (resolves, or uses the stand-in).
        return unsafe { next::memmove(d, s, n) };
    }
    // SAFETY: forwarded contract.
    unsafe { big_copy(d, s, n, true) }
}

/// # Safety
/// `memset`'s contract.
#[cold]
#[inline(never)]
unsafe extern "C" fn slow_set(d: *mut c_void, c: c_int, n: usize) -> *mut c_void {
    if small(n) {
        // SAFETY: forwarded contract.
        return unsafe { next::memset(d, c, n) };
    }
    // SAFETY: forwarded contract.
    unsafe { big_set(d, c, n) }
}

/// # Safety
/// `mempcpy`'s contract.
#[no_mangle]
pub unsafe extern "C" fn mempcpy(d: *mut c_void, s: *const c_void, n: usize) -> *mut c_void {
    // SAFETY: forwarded contract; the result is one past the copy.
    unsafe { memcpy(d, s, n).cast::<u8>().add(n).cast() }
}

/// # Safety
/// `__memcpy_chk`'s contract: aborts (in the C library) if `n > destlen`.
#[no_mangle]
pub unsafe extern "C" fn __memcpy_chk(
    d: *mut c_void,
    s: *const c_void,
    n: usize,
    destlen: usize,
) -> *mut c_void {
    if n > destlen || small(n) {
        // SAFETY: the C library's checking function: it reports the
        // overflow and aborts, as without the preload.
        return unsafe { chk(&next::MEMCPY_CHK, d, s, n, destlen) };
    }
    // SAFETY: forwarded contract, the length checked.
    unsafe { big_copy(d, s, n, false) }
}

/// # Safety
/// `__memmove_chk`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __memmove_chk(
    d: *mut c_void,
    s: *const c_void,
    n: usize,
    destlen: usize,
) -> *mut c_void {
    if n > destlen || small(n) {
        // SAFETY: as in __memcpy_chk.
        return unsafe { chk(&next::MEMMOVE_CHK, d, s, n, destlen) };
    }
    // SAFETY: forwarded contract, the length checked.
    unsafe { big_copy(d, s, n, true) }
}

/// # Safety
/// `__memset_chk`'s contract.
#[no_mangle]
pub unsafe extern "C" fn __memset_chk(
    d: *mut c_void,
    c: c_int,
    n: usize,
    destlen: usize,
) -> *mut c_void {
    if n > destlen || small(n) {
        let p = next::MEMSET_CHK.get();
        if !p.is_null() {
            // SAFETY: the C library's __memset_chk; forwarded contract.
            return unsafe {
                std::mem::transmute::<*mut c_void, next::SetChkFn>(p)(d, c, n, destlen)
            };
        }
        if n > destlen {
            std::process::abort();
        }
        // SAFETY: length checked; forwarded contract.
        return unsafe { next::memset(d, c, n) };
    }
    // SAFETY: forwarded contract, the length checked.
    unsafe { big_set(d, c, n) }
}

/// The C library's checking copy, or (while unknown) the check and a copy.
///
/// # Safety
/// The `_chk` function's contract.
unsafe fn chk(
    f: &next::Next,
    d: *mut c_void,
    s: *const c_void,
    n: usize,
    destlen: usize,
) -> *mut c_void {
    let p = f.get();
    if !p.is_null() {
        // SAFETY: the C library's __memcpy_chk / __memmove_chk.
        return unsafe { std::mem::transmute::<*mut c_void, next::CopyChkFn>(p)(d, s, n, destlen) };
    }
    if n > destlen {
        std::process::abort();
    }
    // SAFETY: length checked; memmove semantics cover both callers.
    unsafe { next::move_bytes(d, s, n) }
}

/// # Safety
/// `memcpy`'s (`memmove`'s when `moving`) contract.
unsafe fn big_copy(d: *mut c_void, s: *const c_void, n: usize, moving: bool) -> *mut c_void {
    if n < config::MIN_REAL.load(Ordering::Relaxed) {
        stats::count(Path::Small, n);
    } else if !overlap(d, s, n) {
        // (An overlapping memmove keeps the C library's semantics and is
        // never split across threads; an overlapping memcpy is undefined
        // and behaves as the C library makes it.)
        // SAFETY: forwarded contract; the ranges are disjoint.
        if let Some(path) = unsafe { accel::run(Op::Copy, d.cast(), s.cast(), n) } {
            stats::count(path, n);
            return d;
        }
        stats::count(Path::Passed, n);
    } else {
        stats::count(Path::Passed, n);
    }
    // SAFETY: forwarded contract.
    unsafe {
        if moving {
            next::memmove(d, s, n)
        } else {
            next::memcpy(d, s, n)
        }
    }
}

/// # Safety
/// `memset`'s contract.
unsafe fn big_set(d: *mut c_void, c: c_int, n: usize) -> *mut c_void {
    if n < config::MIN_REAL.load(Ordering::Relaxed) {
        stats::count(Path::Small, n);
        // SAFETY: forwarded contract.
        return unsafe { next::memset(d, c, n) };
    }
    if c as u8 == 0 {
        // SAFETY: forwarded contract.
        if let Some(path) = unsafe { accel::run(Op::Clear, d.cast(), std::ptr::null(), n) } {
            stats::count(path, n);
            return d;
        }
    }
    stats::count(Path::Passed, n);
    // SAFETY: forwarded contract.
    unsafe { next::memset(d, c, n) }
}

/// Reads the environment, resolves the C library's functions and runs
/// bulkmem's lazy initialisation (CPU, caches, profile, overrides, bands),
/// all outside any copy; then turns the accelerated paths on.
extern "C" fn init() {
    next::resolve_all();
    let s = config::parse(|k| std::env::var(k).ok());
    for w in &s.warnings {
        eprintln!("bulkmem preload: warning: {w}");
    }
    if !s.off {
        for op in [Op::Copy, Op::Clear] {
            for h in bulkmem::Hint::ALL {
                let _ = bulkmem::auto::bands(op, *h);
            }
        }
        let _ = bulkmem::auto::here(&bulkmem::Request::single(Op::Copy, 0, bulkmem::Hint::Auto));
    }
    config::apply(&s);
    if s.stats {
        // Programs close stderr in their own exit handlers (coreutils'
        // close_stdout does, and runs before ours): keep a descriptor.
        // SAFETY: dup has no memory preconditions.
        let fd = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
        REPORT_FD.store(fd, Ordering::Relaxed);
        // SAFETY: atexit with a plain extern "C" function.
        unsafe { libc::atexit(report) };
    }
}

static REPORT_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn report() {
    let fd = REPORT_FD.load(Ordering::Relaxed);
    if fd < 0 {
        return;
    }
    let line = stats::report();
    // SAFETY: a valid buffer of line.len() bytes; a short or failed write
    // at exit is not worth more than losing the line.
    unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
