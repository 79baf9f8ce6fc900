//! The preload's engine, `libbulkmem_preload_engine.so`: large `memcpy`,
//! `memmove`, `memset` (zero), `mempcpy` and their fortified forms of
//! unmodified programs go through bulkmem (`LD_PRELOAD=.../libbulkmem_preload.so
//! CMD`, or `bulkmem run`).
//!
//! The preload has two stages. Programs load the first,
//! `libbulkmem_preload.so` (crates/bulkmem-preload: no standard
//! library, so loading it costs every process what an empty library
//! costs). It defines the interposed functions and keeps what must exist
//! from the start: the C library's functions, the program's signal
//! handlers behind its trampoline, each thread's state. It opens this
//! library, built beside it, at the first call that needs bulkmem
//! ([`bulkmem_preload_engine_attach`]; the interface is `abi.rs`, compiled
//! into both).
//!
//! Copies up to 4 KiB and sets up to 512 bytes are done by the loader's
//! interposed function itself, as the C library's AVX2 routine does them
//! (where AVX2 is usable and the next definition is the C library's, not
//! an interceptor's); other calls below `BULKMEM_PRELOAD_MIN` (1 MiB) go
//! straight to the next definition (the C library), from the loader: a
//! load, a compare, a load, a test and a jump. Larger
//! ones run bulkmem's checked twin of what `auto` picks (following the
//! tuned profile when there is one), and those of at least
//! `BULKMEM_PRELOAD_MT_MIN` (16 MiB) with helper threads beside the
//! calling thread. See [`config`] for the variables. Zero-length calls
//! return their destination without touching anything; overlapping
//! `memmove`s and `memset` of non-zero bytes are left to the C library.
//!
//! # The contract
//!
//! For any program, what it can observe of these functions is what the C
//! library gives on the calling thread: results, faults, signals,
//! unwinding, early exits, its thread budget and its tools alike, only
//! faster. How each part is kept:
//!
//! * **Faults stay on the caller.** The kernel's actions for SIGSEGV and
//!   SIGBUS are the program's: its `SIG_DFL` or `SIG_IGN` as it set them,
//!   or the loader's trampoline with its handler's flags and mask, which
//!   asks the engine first whether a fault is a checked routine's
//!   ([`bulkmem::fault::resume`]; the engine installs nothing itself,
//!   [`bulkmem::fault::host`]). Every byte bulkmem copies goes through a
//!   checked routine, whose fault the trampoline turns into a stop at an
//!   exact offset; the calling thread then copies from there with the C
//!   library's routine, so the program's handler runs on the calling
//!   thread, with its thread-local values, for the address glibc's copy
//!   touches, and may repair and return, `siglongjmp`, throw or exit the
//!   thread. Without a handler the fault kills, as glibc's would.
//! * **Signals, stacks, resources and scheduling look as without it**
//!   (docs/design.md, "What the program sees"): dispositions in the kernel
//!   and in `sigaction` are the program's; handlers are jumped to, in the
//!   kernel's frame; the one-time set-up runs on a stack of the loader's;
//!   no engine under a seccomp filter or near an address-space limit; no
//!   warning unless a `BULKMEM_*` variable asked.
//! * **Helper threads are invisible** ([`helpers`]): threads of the
//!   kernel's alone ([`raw_thread`]), started for one call with every
//!   asynchronous signal blocked (a process-directed SIGTERM goes to the
//!   program's threads), joined before it returns, none where the program
//!   keeps a budget of its own or runs in real time ([`thread_budget`]),
//!   inside a signal handler, after seccomp, or when a raw system call
//!   displaced the loader's SIGSEGV or SIGBUS action; the job they share
//!   is on the heap.
//! * **Leaving early leaves no work behind**: before a program's handler
//!   runs on a thread whose call has helpers, they stop (each ends its
//!   chunk, at most 4 MiB) and the handler runs outside bulkmem; if it
//!   returns, the caller finishes the copy itself. Cancellation is held
//!   off while helpers run ([`cancel`]) and arrives when the copy is
//!   complete.
//! * **Unwinding passes through**: the engine's entries are `C-unwind`,
//!   and nothing on a call's path holds a value to drop or catches an
//!   unwind, so an exception or a thread's cancellation that starts inside
//!   a call never meets a personality routine of ours (the engine's
//!   unwinder is not the process's: build.rs). The loader is `panic=abort`
//!   and keeps no Rust frame on the stack while a copy or a program's
//!   handler runs: its routers and trampoline are assembly with
//!   call-frame information, which an unwind passes as it passes C. What
//!   can panic (bulkmem's one-time initialisation, [`accel`]) runs once,
//!   with cancellation blocked, under `catch_unwind`. The checked routines
//!   carry call-frame information.
//! * **Inert under tools**: under a sanitizer or valgrind every call goes
//!   to the C library ([`tools`]), and the stats line says so.
//!
//! Where it is safe to be called from, and why:
//! * before `main`, inside the dynamic loader and `dlsym`: until the
//!   loader's constructor has run, every call takes the C library's
//!   function, found with `dlsym(RTLD_NEXT)` without recursion, or a string
//!   instruction while that is unknown;
//! * inside `malloc` and from signal handlers: the small path takes no lock
//!   and allocates nothing; the large path neither once the engine is open
//!   and bulkmem initialised, which the first large call outside every
//!   signal handler does (until then, a large call inside a handler takes
//!   the C library; glibc's allocator never calls the interposed
//!   functions); the per-thread state is in the loader's static TLS block
//!   (the engine's own would be allocated at each thread's first use); a
//!   call made while the thread is inside bulkmem takes the C library; no
//!   helper is started inside a signal handler;
//! * forked children: no helper outlives its call, so a child has none to
//!   lose;
//! * many threads: each large call has its own helpers, within one budget
//!   for the process (the CPUs it may use); a call that finds the budget
//!   taken copies on its own thread rather than wait.
//!
//! `prctl(PR_SET_SECCOMP)` initialises bulkmem first (no file can be
//! opened afterwards) and forbids helpers for good; `unshare` and `setns`
//! wait until no helper is alive ([`sandbox`]).
//!
//! Not covered: handlers installed, and seccomp or namespace requests
//! made, with raw system calls (a handler so installed for SIGSEGV or
//! SIGBUS is detected and the call copies on its own thread; one for an
//! asynchronous signal, that leaves its handler with `siglongjmp` during a
//! call with helpers, leaves them running until they finish); allocators
//! other than glibc's that call the exported `memcpy` with a lock held and
//! at least `MIN` bytes before bulkmem is initialised (the first such call
//! opens the engine and builds its policy, which allocates); a library
//! constructor that waits for a lock which a thread making its first
//! large call holds (that call opens the engine, which waits for the
//! dynamic loader's lock, held while constructors run).
//!
//! In a set-user-ID or set-group-ID program (`getauxval(AT_SECURE)`), every
//! `BULKMEM_*` variable is ignored.

mod accel;
mod cancel;
pub mod config;
mod helpers;
mod loader;
mod next;
mod once;
mod raw_thread;
mod sandbox;
mod stats;
mod thread_budget;
mod tools;

use std::ffi::{c_int, c_void, CString};
use std::panic::catch_unwind;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use bulkmem::Op;
use bulkmem_preload_abi::abi;
use stats::{Kind, Path};

/// The engine's entry point, its only exported function: takes the
/// loader's table and gives the engine's (null: refused, a loader of
/// another interface version, or attached already). Reads the environment and sets up
/// the exit record first ([`init`]); a panic there is caught, and refuses.
///
/// # Safety
/// `l` is null or the loader's table, alive as long as the process.
#[no_mangle]
pub unsafe extern "C" fn bulkmem_preload_engine_attach(
    l: *const abi::Loader,
) -> *const abi::Engine {
    // SAFETY: null or the loader's table, which lives as long as the
    // process.
    let Some(l) = (unsafe { l.as_ref() }) else {
        return std::ptr::null();
    };
    if l.version != abi::VERSION || !loader::attach(l) {
        return std::ptr::null();
    }
    next::attach(l);
    match catch_unwind(|| init(l.read_env.load(Ordering::Relaxed))) {
        Ok(()) => &ENGINE,
        Err(_) => std::ptr::null(),
    }
}

static ENGINE: abi::Engine = abi::Engine {
    version: abi::VERSION,
    memcpy: engine_memcpy,
    memmove: engine_memmove,
    mempcpy: engine_mempcpy,
    memset: engine_memset,
    stop_for_handler: helpers::stop_for_handler,
    fault_resume,
    helper_owner,
    prctl: sandbox::prctl,
    unshare: sandbox::unshare,
    setns: sandbox::setns,
    helpers_started,
    catches_panics,
};

// The large calls, as the loader sends them (`n` at least its MIN; in
// the fortified forms, at most the object's size). "C-unwind": a
// program's fault handler may throw, or exit the thread, from inside the C
// library's part; nothing here holds a value to drop on the way.

/// # Safety
/// `memcpy`'s contract.
unsafe extern "C-unwind" fn engine_memcpy(
    d: *mut c_void,
    s: *const c_void,
    n: usize,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { big_copy(d, s, n, false) }
}

/// # Safety
/// `memmove`'s contract.
unsafe extern "C-unwind" fn engine_memmove(
    d: *mut c_void,
    s: *const c_void,
    n: usize,
) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { big_copy(d, s, n, true) }
}

/// # Safety
/// `mempcpy`'s contract.
unsafe extern "C-unwind" fn engine_mempcpy(
    d: *mut c_void,
    s: *const c_void,
    n: usize,
) -> *mut c_void {
    // SAFETY: forwarded contract; the result is one past the copy.
    unsafe { big_copy(d, s, n, false).cast::<u8>().add(n).cast() }
}

/// # Safety
/// `memset`'s contract.
unsafe extern "C-unwind" fn engine_memset(d: *mut c_void, c: c_int, n: usize) -> *mut c_void {
    // SAFETY: forwarded contract.
    unsafe { big_set(d, c, n) }
}

/// Whether a SIGSEGV or SIGBUS the loader's trampoline got is a checked
/// routine's fault, now resuming at its fixup (async-signal-safe).
///
/// # Safety
/// The kernel's arguments for a handler of this signal.
unsafe extern "C" fn fault_resume(sig: c_int, info: *mut c_void, ctx: *mut c_void) -> bool {
    // SAFETY: forwarded contract.
    unsafe { bulkmem::fault::resume(sig, info.cast(), ctx) }
}

/// The thread that started the helper whose stack holds `addr` (0: no
/// helper's does).
extern "C" fn helper_owner(addr: usize) -> u32 {
    raw_thread::owner_of_stack(addr).unwrap_or(0)
}

/// Helper threads large calls have started in this process
/// (`bulkmem_preload_state`).
extern "C" fn helpers_started() -> u64 {
    helpers::STARTED.load(Ordering::Relaxed)
}

/// Whether an unwind through a frame of this library is caught (1): that
/// the unwinder linked into it (build.rs) finds its frames, so a panic
/// inside bulkmem is caught at the boundary instead of aborting the host
/// (`bulkmem_preload_state`). Probed once, at the first ask where
/// `may_probe` (not in a signal handler: an unwind allocates and takes the
/// unwinder's lock), not at start-up: the first unwind reads the unwind
/// tables. `resume_unwind` runs no panic hook: nothing is printed.
extern "C" fn catches_panics(may_probe: bool) -> u64 {
    static CAUGHT: OnceLock<bool> = OnceLock::new();
    let caught = if may_probe {
        CAUGHT.get_or_init(|| catch_unwind(|| std::panic::resume_unwind(Box::new(0u8))).is_err())
    } else {
        CAUGHT.get().unwrap_or(&false)
    };
    u64::from(*caught)
}

fn overlap(d: *const c_void, s: *const c_void, n: usize) -> bool {
    let (d, s) = (d as usize, s as usize);
    d < s.wrapping_add(n) && s < d.wrapping_add(n)
}

/// # Safety
/// `memcpy`'s (`memmove`'s when `moving`) contract.
unsafe fn big_copy(d: *mut c_void, s: *const c_void, n: usize, moving: bool) -> *mut c_void {
    // Null pointers are valid with no bytes: no slice may be made of them.
    if n == 0 {
        stats::count(Kind::Copy, Path::Small, 0);
        return d;
    }
    let mut from = 0;
    if n < config::MIN_REAL.load(Ordering::Relaxed) {
        stats::count(Kind::Copy, Path::Small, n);
    } else if !overlap(d, s, n) {
        // (An overlapping memmove keeps the C library's semantics and is
        // never split across threads; an overlapping memcpy is undefined
        // and behaves as the C library makes it.)
        let t = stats::clock();
        // SAFETY: forwarded contract; the ranges are disjoint.
        from = unsafe { through_bulkmem(Op::Copy, d, s, n) };
        if from == n {
            stats::took(Kind::Copy, t);
            return d;
        }
    } else {
        stats::count(Kind::Copy, Path::Passed, n);
    }
    // The C library's routine: for all of it, or from where bulkmem met a
    // fault (which happens again here, on the caller's thread) or was
    // interrupted by a handler that returned.
    // SAFETY: forwarded contract; `from` <= n.
    unsafe {
        let (dd, ss) = (
            d.cast::<u8>().add(from).cast(),
            s.cast::<u8>().add(from).cast(),
        );
        if moving {
            next::memmove(dd, ss, n - from);
        } else {
            next::memcpy(dd, ss, n - from);
        }
    }
    d
}

/// Runs a large call through bulkmem where it can, and counts it; returns
/// the offset from which the C library must do the rest (`n`: nothing is
/// left; 0: bulkmem did not take it).
///
/// # Safety
/// As `accel::run`.
#[inline]
unsafe fn through_bulkmem(op: Op, d: *mut c_void, s: *const c_void, n: usize) -> usize {
    let kind = match op {
        Op::Copy => Kind::Copy,
        Op::Clear => Kind::Set,
    };
    // SAFETY: forwarded contract.
    match unsafe { accel::run(op, d.cast(), s.cast(), n) } {
        Some(done) => {
            stats::count(kind, done.path, n);
            if done.streamed {
                stats::streamed(done.upto);
            }
            done.upto
        }
        None => {
            stats::count(kind, Path::Passed, n);
            0
        }
    }
}

/// # Safety
/// `memset`'s contract.
unsafe fn big_set(d: *mut c_void, c: c_int, n: usize) -> *mut c_void {
    if n == 0 {
        stats::count(Kind::Set, Path::Small, 0);
        return d;
    }
    let mut from = 0;
    if n < config::MIN_REAL.load(Ordering::Relaxed) {
        stats::count(Kind::Set, Path::Small, n);
    } else if c as u8 == 0 {
        let t = stats::clock();
        // SAFETY: forwarded contract.
        from = unsafe { through_bulkmem(Op::Clear, d, std::ptr::null(), n) };
        if from == n {
            stats::took(Kind::Set, t);
            return d;
        }
    } else {
        stats::count(Kind::Set, Path::Passed, n);
    }
    // SAFETY: forwarded contract; `from` <= n.
    unsafe { next::memset(d.cast::<u8>().add(from).cast(), c, n - from) };
    d
}

/// Reads the environment (where the loader says to: it ignores it in
/// set-user-ID programs, and leaves it unread where no variable was set
/// at start-up) and turns the accelerated paths on. bulkmem's own lazy
/// initialisation (CPU facts, profile, bands) waits for the first large
/// call ([`accel`]), and the helpers' count (cgroups, sysfs) for the first
/// call that may start them ([`helpers`]).
fn init(read_env: bool) {
    // The loader keeps the kernel's SIGSEGV and SIGBUS actions as the
    // program set them and asks `fault_resume` first: bulkmem installs
    // nothing of its own.
    bulkmem::fault::host();
    let s = config::parse(|k| {
        if read_env {
            std::env::var(k).ok()
        } else {
            None
        }
    });
    for w in &s.warnings {
        warn(&format!("bulkmem preload: warning: {w}\n"));
    }
    config::apply(&s);
    // SAFETY: a plain extern "C" function, run in the child of a fork.
    unsafe { libc::pthread_atfork(None, None, Some(helpers::after_fork_in_child)) };
    if s.stats || s.report.is_some() {
        // SAFETY: a plain extern "C" function, run in the child of a fork.
        unsafe { libc::pthread_atfork(None, None, Some(stats::reset_in_child)) };
    }
    if let Some(dir) = s.report.and_then(|d| CString::new(d).ok()) {
        // The counts go to a record file at once, so that a process that
        // skips its exit handlers (a Go program, _exit, a crash) is
        // counted too; the exit handler writes one only where that file
        // could not be made.
        stats::go_live(&dir);
        let _ = RECORD_IN.set(dir);
        // SAFETY: atexit with a plain extern "C" function.
        unsafe { libc::atexit(record) };
    } else if s.stats {
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

/// The directory `bulkmem run` collects the processes' records in.
static RECORD_IN: OnceLock<CString> = OnceLock::new();

/// Writes this process's record into `RECORD_IN` as a new file of its own
/// (named by its pid; exclusive, never following a link), so no record
/// lands in a file of the program's and none overwrites another's.
extern "C" fn record() {
    let Some(dir) = RECORD_IN.get() else {
        return;
    };
    if stats::is_live() {
        return; // the live record holds every count already
    }
    let line = stats::record();
    let Some((fd, _)) = stats::new_record_file(dir, "", libc::O_WRONLY) else {
        return;
    };
    // SAFETY: a valid buffer of line.len() bytes; a short write at exit
    // loses (part of) the record, which `run` reads as missing.
    unsafe {
        libc::write(fd, line.as_ptr().cast(), line.len());
        libc::close(fd);
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
