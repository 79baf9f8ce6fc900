//! The interface between the preload's two stages, compiled into both:
//! the loader (`libbulkmem_preload.so`, this crate) and the engine
//! (`libbulkmem_preload_engine.so`, crates/bulkmem-preload), which the
//! loader opens at the first call that needs it. Plain C layouts only: the
//! two are separate shared objects, each with its own copy of everything
//! Rust.

use core::cell::Cell;
use core::ffi::{c_int, c_ulong, c_void, CStr};
use core::sync::atomic::{AtomicBool, AtomicUsize};

/// Both tables start with it: a hash of this file's text, which the
/// preload's build script gives both compilations
/// (`BULKMEM_PRELOAD_ABI`). A loader and an engine built from different
/// interfaces (a hand-copied file, an old one left beside a new one)
/// refuse each other, and the calls go to the C library. (0 where cargo
/// builds the loader's crate alone, for its lints: never loaded.)
pub const VERSION: u32 = match option_env!("BULKMEM_PRELOAD_ABI") {
    Some(v) => decimal(v),
    None => 0,
};

const fn decimal(s: &str) -> u32 {
    let b = s.as_bytes();
    let mut v: u32 = 0;
    let mut i = 0;
    while i < b.len() {
        v = v.wrapping_mul(10).wrapping_add((b[i] - b'0') as u32);
        i += 1;
    }
    v
}

/// Calls from this size on leave the C library unless
/// `BULKMEM_PRELOAD_MIN` says otherwise.
pub const DEFAULT_MIN: usize = 1 << 20;

/// The engine, found beside the loader (`$ORIGIN` is the loader's folder).
pub const ENGINE_FILE: &CStr = c"$ORIGIN/libbulkmem_preload_engine.so";

/// The engine's one exported function: `extern "C" fn(*const Loader) ->
/// *const Engine` (null: it refuses).
pub const ATTACH: &CStr = c"bulkmem_preload_engine_attach";

/// One thread's state, in the loader's static TLS block (initial-exec), so
/// that reading or writing it never allocates or locks, in a signal
/// handler or inside `malloc` alike. The engine, opened later, would get a
/// dynamic TLS block, allocated at each thread's first use.
#[repr(C)]
pub struct PerThread {
    /// Signal handlers of the program's this thread is inside (or left
    /// with `longjmp`).
    pub depth: Cell<u32>,
    /// Whether this thread runs bulkmem's own code, whose calls of the
    /// interposed functions go to the C library.
    pub inside: Cell<bool>,
    /// The engine's job of this thread's call while helper threads may
    /// run it (null: none).
    pub current: Cell<*mut c_void>,
}

/// `memcpy`, `memmove`, `mempcpy`. `C-unwind`: a program's fault handler
/// may throw or exit the thread from inside the C library's copy.
pub type CopyFn = unsafe extern "C-unwind" fn(*mut c_void, *const c_void, usize) -> *mut c_void;
/// `memset`.
pub type SetFn = unsafe extern "C-unwind" fn(*mut c_void, c_int, usize) -> *mut c_void;

/// What the loader gives the engine; static for the life of the process.
#[repr(C)]
pub struct Loader {
    pub version: u32,
    /// Whether the engine reads the `BULKMEM_PRELOAD_*` variables. The
    /// loader reads them at start-up: where one is set it opens the engine
    /// in its constructor and this is true; otherwise the engine takes the
    /// defaults, whatever the environment holds by the time it is opened.
    pub read_env: &'static AtomicBool,
    /// This thread's [`PerThread`].
    pub thread: extern "C" fn() -> *mut PerThread,
    /// The size from which calls leave the C library; the engine stores
    /// its setting here.
    pub min: &'static AtomicUsize,
    /// The C library's `memcpy`, `memmove`, `memset` ([`C_MEMCPY`]...),
    /// or the loader's string-instruction stand-in for one it lacks: to be
    /// cast to [`CopyFn`] or [`SetFn`].
    pub c_library: extern "C" fn(u32) -> *const c_void,
    /// Puts the engine's fault handler in front of SIGSEGV and SIGBUS,
    /// keeping the program's actions as its view (the loader's `sigaction`
    /// keeps that view).
    pub take_faults: extern "C" fn(),
    /// Whether the fault handler is in front and still installed.
    pub faults_ours: extern "C" fn() -> bool,
}

// SAFETY: every field is immutable after construction; the pointers name
// functions and a static atomic.
unsafe impl Sync for Loader {}

pub const C_MEMCPY: u32 = 0;
pub const C_MEMMOVE: u32 = 1;
pub const C_MEMSET: u32 = 2;
/// (The loader's own use.)
pub const C_MEMPCPY: u32 = 3;

/// What the engine gives the loader; static once given.
#[repr(C)]
pub struct Engine {
    pub version: u32,
    /// The large calls: bulkmem where it can, the C library for the rest.
    pub memcpy: CopyFn,
    pub memmove: CopyFn,
    pub mempcpy: CopyFn,
    pub memset: SetFn,
    /// From the signal trampoline, before a program's handler runs:
    /// stops the helper threads of this thread's call, if any
    /// (async-signal-safe). The argument is the handler's `ucontext_t`.
    pub stop_for_handler: extern "C" fn(*mut c_void),
    /// bulkmem's fault handler: install it, is it installed, and put a
    /// program's action (a `struct sigaction`) behind it (0, or -1).
    pub fault_install: extern "C" fn(),
    pub fault_is_installed: extern "C" fn() -> bool,
    pub fault_chain_to: unsafe extern "C" fn(c_int, *const c_void) -> c_int,
    /// `prctl(PR_SET_SECCOMP, ...)`, `unshare`, `setns` with the helper
    /// threads stopped; the first argument is the C library's function.
    pub prctl:
        unsafe extern "C" fn(*mut c_void, c_int, c_ulong, c_ulong, c_ulong, c_ulong) -> c_int,
    pub unshare: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    pub setns: unsafe extern "C" fn(*mut c_void, c_int, c_int) -> c_int,
    /// For the test suite: helper threads started so far, and whether a
    /// panic inside the engine is caught there (1).
    pub helpers_started: extern "C" fn() -> u64,
    pub selftest_unwind: extern "C" fn() -> c_int,
}

// SAFETY: immutable function pointers.
unsafe impl Sync for Engine {}
