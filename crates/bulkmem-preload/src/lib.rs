//! `libbulkmem_preload.so`: large `memcpy`, `memmove`, `memset` (zero),
//! `mempcpy` and their fortified forms of unmodified programs go through
//! bulkmem (`LD_PRELOAD=.../libbulkmem_preload.so CMD`, or `bulkmem run`).
//!
//! Calls below `BULKMEM_PRELOAD_MIN` (1 MiB) go straight to the next
//! definition (the C library): one load, one compare and a jump. Larger
//! ones go through bulkmem's `auto` (following the tuned profile when there
//! is one), and those of at least `BULKMEM_PRELOAD_MT_MIN` (16 MiB) to the
//! engine's worker threads. See [`config`] for the variables. Zero-length
//! calls return their destination without touching anything.
//!
//! Where it is safe to be called from, and why:
//! * before `main`, inside the dynamic loader and `dlsym`: until the
//!   constructor has run, every call takes the C library's function, found
//!   with `dlsym(RTLD_NEXT)` without recursion ([`next`]), or a string
//!   instruction while that is unknown;
//! * inside `malloc` and from signal handlers: the small path takes no lock
//!   and allocates nothing; the `auto` path neither once bulkmem is
//!   initialised, which the first large call outside every signal handler
//!   does (until then, a large call inside a handler takes the C library;
//!   glibc's allocator never calls the interposed functions, see the
//!   thread policy); a call made while the thread is already inside
//!   bulkmem takes the C library; the engine is never used (nor created)
//!   inside a signal handler (below);
//! * forked children: the engine starts its own workers in the child on
//!   its first batch there (bulkmem's engine does this for every user);
//! * many threads: one batch on the engine at a time (others copy on their
//!   own thread rather than wait).
//!
//! Overlapping `memmove`s and `memset` of non-zero bytes are left to the C
//! library.
//!
//! # Thread policy
//!
//! The preload adds threads to a process only when it must to be useful,
//! only where starting them is safe, and takes them away where they would
//! change what the program can do:
//!
//! * No thread exists until a copy or clear of at least
//!   `BULKMEM_PRELOAD_MT_MIN` bytes, made outside every signal handler,
//!   creates the engine. `BULKMEM_PRELOAD_THREADS=0` (or `1`) means no
//!   thread, ever.
//! * Inside a signal handler the engine is neither created nor used: large
//!   copies run on the calling thread. `memcpy` and `memset` stay
//!   async-signal-safe (no thread started, nothing allocated, no lock
//!   waited for). Handlers are known by wrapping those the program installs
//!   with `sigaction` and the `signal` family ([`signals`]). This is also
//!   what keeps the engine's creation (which allocates) out of `malloc`:
//!   glibc's own copies inside `malloc`/`realloc` call its internal
//!   `memcpy`, never this one, so the only way into a large copy while this
//!   thread holds the allocator's lock is a handler that interrupted it.
//! * A copy never waits for the engine: when another thread's batch holds
//!   it, the copy runs on its own thread.
//! * `prctl(PR_SET_SECCOMP)` first stops and joins the workers and forbids
//!   threads for the rest of the process (strict mode would leave them
//!   asleep for ever and the process alive after its `_exit`); `unshare`
//!   and `setns` stop and join them first (a new user namespace needs a
//!   single-threaded process), and a later large copy starts them again
//!   ([`sandbox`]).
//!
//! Not covered: handlers installed, and seccomp/namespace requests made,
//! with raw system calls (`syscall(SYS_rt_sigaction, ...)`, libseccomp's
//! `seccomp(2)`); allocators other than glibc's that call the exported
//! `memcpy` with a lock held and at least `MIN` bytes before bulkmem is
//! initialised (the first such call builds its policy, which allocates) or
//! `MT_MIN` bytes before the engine exists; and idle workers
//! are not retired (they sleep until the process exits or one of the calls
//! above stops them). Programs in those cases should run with
//! `BULKMEM_PRELOAD_THREADS=1`.
//!
//! In a set-user-ID or set-group-ID program (`getauxval(AT_SECURE)`), every
//! `BULKMEM_*` variable is ignored.

mod accel;
pub mod config;
mod next;
mod sandbox;
mod signals;
mod stats;

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use bulkmem::Op;
use stats::Path;

/// Tells a program (and the tests) that the preload is loaded and active.
#[no_mangle]
pub extern "C" fn bulkmem_preload_active() -> c_int {
    c_int::from(config::ACTIVE.load(Ordering::Relaxed))
}

/// Unwinds through a frame of this library and says whether the unwind was
/// caught (1): the proof, for the test suite, that the unwinder linked into
/// the library (build.rs) finds its frames, so a panic inside bulkmem is
/// caught at the boundary instead of aborting the host. `resume_unwind`
/// runs no panic hook: nothing is printed.
#[no_mangle]
pub extern "C" fn bulkmem_preload_selftest_unwind() -> c_int {
    let caught = std::panic::catch_unwind(|| std::panic::resume_unwind(Box::new(0u8)));
    c_int::from(caught.is_err())
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
    // Null pointers are valid with no bytes: no slice may be made of them.
    if n == 0 {
        stats::count(Path::Small, 0);
        return d;
    }
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
    if n == 0 {
        stats::count(Path::Small, 0);
        return d;
    }
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

/// Reads the environment and resolves the C library's functions, outside
/// any copy; then turns the accelerated paths on. Every process the
/// library is loaded into pays this, so it is all: bulkmem's own lazy
/// initialisation (CPU facts, profile, bands) waits for the first large
/// call ([`accel`]), and the sysfs topology for the engine's build.
extern "C" fn init() {
    next::resolve_all();
    // SAFETY: getauxval has no preconditions.
    let secure = unsafe { libc::getauxval(libc::AT_SECURE) } != 0;
    let s = config::parse(|k| if secure { None } else { std::env::var(k).ok() });
    for w in &s.warnings {
        warn(&format!("bulkmem preload: warning: {w}\n"));
    }
    config::apply(&s);
    if s.stats {
        // Programs close stderr in their own exit handlers (coreutils'
        // close_stdout does, and runs before ours): keep a descriptor, and
        // which file it is, since a program may close it too and open one
        // of its own under the same number.
        // SAFETY: dup has no memory preconditions.
        let fd = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
        if let Some(id) = file_id(fd) {
            let _ = REPORT_TO.set((fd, id));
            // SAFETY: atexit with a plain extern "C" function.
            unsafe { libc::atexit(report) };
        }
    }
}

/// A warning on stderr, best effort: a full disk, a closed or broken pipe
/// (with SIGPIPE ignored) lose it, as they would any program's message,
/// and change nothing else.
fn warn(msg: &str) {
    let mut b = msg.as_bytes();
    while !b.is_empty() {
        // SAFETY: a valid buffer of b.len() bytes.
        let n = unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
        if n <= 0 {
            return;
        }
        b = &b[n as usize..];
    }
}

/// The device and inode of the file open as `fd`.
fn file_id(fd: c_int) -> Option<(u64, u64)> {
    if fd < 0 {
        return None;
    }
    // SAFETY: stat is plain data; fstat writes at most its size.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid stat buffer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return None;
    }
    Some((st.st_dev, st.st_ino))
}

/// The descriptor kept for the stats line, and the file it was.
static REPORT_TO: OnceLock<(c_int, (u64, u64))> = OnceLock::new();

extern "C" fn report() {
    let Some(&(fd, id)) = REPORT_TO.get() else {
        return;
    };
    // The kept descriptor if it is still the stderr it was, else stderr if
    // it is that file, else nowhere: never into a file of the program's.
    let Some(fd) = [fd, 2].into_iter().find(|&f| file_id(f) == Some(id)) else {
        return;
    };
    let line = stats::report();
    // SAFETY: a valid buffer of line.len() bytes; a short or failed write
    // at exit is not worth more than losing the line.
    unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;
