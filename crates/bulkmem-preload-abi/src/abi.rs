//! The interface between the preload's two stages, compiled into both:
//! the loader (`libbulkmem_preload.so`, crates/bulkmem-preload) and the
//! engine (`libbulkmem_preload_engine.so`, crates/bulkmem-preload-engine),
//! which the loader opens at the first call that needs it. Plain C layouts
//! only: the two are separate shared objects, each with its own copy of
//! everything Rust.

use core::cell::Cell;
use core::ffi::{c_int, c_ulong, c_void, CStr};
use core::sync::atomic::{AtomicBool, AtomicUsize};

/// Both tables start with it: a hash (FNV-1a, never 0) of this file's
/// text, computed where each stage is compiled. A loader and an engine
/// built from different interfaces (a hand-copied file, an old one left
/// beside a new one) refuse each other, and the calls go to the C library.
/// `BULKMEM_PRELOAD_ABI` at compile time overrides it (the test of a
/// mismatched pair builds a loader so).
pub const VERSION: u32 = match option_env!("BULKMEM_PRELOAD_ABI") {
    Some(v) => decimal(v),
    None => fnv1a(include_bytes!("abi.rs")),
};

const fn fnv1a(text: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let mut i = 0;
    while i < text.len() {
        h = (h ^ text[i] as u32).wrapping_mul(0x0100_0193);
        i += 1;
    }
    if h == 0 {
        1
    } else {
        h
    }
}

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

/// The stack bulkmem's one-time set-up (opening the engine, building its
/// policy) runs on: it needs 64-96 KiB, more than a small thread stack, a
/// coroutine's or `ulimit -s 64` leaves a caller.
pub const SETUP_STACK: usize = 1 << 20;

/// The engine, found beside the loader (`$ORIGIN` is the loader's folder).
pub const ENGINE_FILE: &CStr = c"$ORIGIN/libbulkmem_preload_engine.so";

/// The engine's one exported function: `extern "C" fn(*const Loader) ->
/// *const Engine` (null: it refuses).
pub const ATTACH: &CStr = c"bulkmem_preload_engine_attach";

/// One thread's state, in the loader's static TLS block (initial-exec), so
/// that reading or writing it never allocates or locks, in a signal
/// handler or inside `malloc` alike. The engine, opened later, would get a
/// dynamic TLS block, allocated at each thread's first use.
///
/// Both of its answers, "inside a handler of the program's" and "inside
/// bulkmem's own code", are kept as stack addresses and read against the
/// stack pointer of the moment, not as counters raised and lowered around
/// the code: a program's handler is entered by a jump, so that it runs
/// in the frame the kernel made (docs/design.md, "What the program sees of
/// signals"), and nothing of ours runs when it returns or leaves with
/// `siglongjmp`. A frame the stack has since climbed above is gone.
#[repr(C)]
pub struct PerThread {
    /// Where this thread entered bulkmem's own code (a stack address; 0:
    /// outside), whose calls of the interposed functions go to the C
    /// library.
    pub inside_at: Cell<usize>,
    /// The engine's job of this thread's call while helper threads may
    /// run it (null: none).
    pub current: Cell<*mut c_void>,
    /// Signal frames of the program's handlers entered on this thread:
    /// [`HandlerFrame`]s, a free one with `top` 0.
    pub frames: [HandlerFrame; FRAMES],
    /// More handlers nested than [`FRAMES`]: this thread counts as inside
    /// one for good (the safe side: it copies alone).
    pub overflow: Cell<bool>,
}

/// Handler frames one thread tracks at once (nesting, or handlers left
/// with `siglongjmp` whose frames the stack has not yet climbed past).
pub const FRAMES: usize = 6;

/// One program handler's frame: it runs while the stack pointer is in
/// `[bottom, top)`, `top` the signal frame the kernel made, `bottom` the
/// start of the alternate signal stack it is on, or [`HANDLER_REACH`]
/// below `top` on any other.
#[repr(C)]
pub struct HandlerFrame {
    pub top: Cell<usize>,
    pub bottom: Cell<usize>,
    /// Whether it is on an alternate signal stack.
    pub on_alt: Cell<bool>,
}

/// How deep below its signal frame a handler on the thread's own stack is
/// taken to reach: a handler deeper than this would be taken as returned.
pub const HANDLER_REACH: usize = 256 << 20;

/// The stack address of the caller's frame (near the stack pointer).
#[inline(always)]
pub fn stack_here() -> usize {
    let marker = 0u8;
    core::hint::black_box(&marker) as *const u8 as usize
}

impl PerThread {
    /// Whether this thread is inside a handler of the program's: a
    /// recorded frame whose range holds the stack pointer. A frame left by
    /// `siglongjmp` or returned from reads as gone as soon as the stack is
    /// above it; a handler that switches to another stack (a coroutine)
    /// reads as gone there.
    #[inline]
    pub fn in_handler(&self) -> bool {
        if self.overflow.get() {
            return true;
        }
        let sp = stack_here();
        self.frames.iter().any(|f| {
            let top = f.top.get();
            top != 0 && sp < top && sp >= f.bottom.get()
        })
    }

    /// Records the frame of a handler about to run (`top`, on an alternate
    /// signal stack or not). A recorded frame is freed when the new one is
    /// above it on the same kind of stack: the stack has climbed past it,
    /// so that handler returned or was left. Any other is kept, live or
    /// not: a handler on the alternate stack may interrupt one on the
    /// thread's stack, and a frame kept too long only makes its thread copy
    /// alone while the stack is below it.
    pub fn enter_handler(&self, top: usize, bottom: usize, on_alt: bool) {
        let mut free = None;
        for f in &self.frames {
            let t = f.top.get();
            if t != 0 && f.on_alt.get() == on_alt && top >= t {
                f.top.set(0);
            }
            if f.top.get() == 0 && free.is_none() {
                free = Some(f);
            }
        }
        match free {
            Some(f) => {
                f.bottom.set(bottom);
                f.on_alt.set(on_alt);
                f.top.set(top);
            }
            None => self.overflow.set(true),
        }
    }

    /// Whether this thread runs bulkmem's own code: entered, and the stack
    /// is still below where it entered (a handler that left bulkmem's code
    /// with `siglongjmp` left it).
    #[inline]
    pub fn inside(&self) -> bool {
        let at = self.inside_at.get();
        at != 0 && stack_here() < at
    }

    /// Enters bulkmem's own code, unless this thread is in it already
    /// (`None`); gives what [`PerThread::leave`] restores. The mark is
    /// taken where the check is made, so a call entered again at the same
    /// depth (after a `siglongjmp` out of the last) is not nested.
    #[inline(never)]
    pub fn enter(&self) -> Option<usize> {
        let here = stack_here();
        let at = self.inside_at.get();
        if at != 0 && here < at {
            return None;
        }
        self.inside_at.set(here);
        Some(at)
    }

    /// Leaves what [`PerThread::enter`] entered.
    #[inline]
    pub fn leave(&self, was: usize) {
        self.inside_at.set(was);
    }
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
    /// Puts the trampoline (which asks the engine's
    /// [`Engine::fault_resume`] first) in front of a handler the program
    /// installed for SIGSEGV or SIGBUS without the loader seeing it (a raw
    /// system call, or before the preload was loaded).
    pub take_faults: extern "C" fn(),
    /// Whether the kernel's actions for SIGSEGV and SIGBUS are the ones
    /// the loader keeps for the program: the trampoline in front of its
    /// handler, or its own `SIG_DFL` or `SIG_IGN` (then a fault in a
    /// checked routine kills the process, as the C library's fault would).
    pub faults_ours: extern "C" fn() -> bool,
    /// Runs `f(arg)` on a stack of the loader's (mapped for the call, at
    /// least [`SETUP_STACK`] bytes): bulkmem's one-time set-up needs more
    /// stack than a caller may have. False, without running `f`, when
    /// the stack cannot be mapped.
    pub on_own_stack: extern "C" fn(extern "C" fn(*mut c_void), *mut c_void) -> bool,
    /// Whether the process runs under valgrind (its RUNNING_ON_VALGRIND
    /// client request), which the loader asks too: its small path is off
    /// there.
    pub on_valgrind: extern "C" fn() -> bool,
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
    /// From the trampoline, for SIGSEGV and SIGBUS: whether the fault is a
    /// checked routine's, in which case the context (a `ucontext_t`) now
    /// resumes at the routine's fixup. Async-signal-safe.
    pub fault_resume: unsafe extern "C" fn(c_int, *mut c_void, *mut c_void) -> bool,
    /// From the trampoline: the thread that started the helper thread
    /// whose stack holds this address (a signal frame's), or 0 when none
    /// does. Async-signal-safe.
    pub helper_owner: extern "C" fn(usize) -> u32,
    /// `prctl(PR_SET_SECCOMP, ...)`, `unshare`, `setns` with the helper
    /// threads stopped; the first argument is the C library's function.
    pub prctl:
        unsafe extern "C" fn(*mut c_void, c_int, c_ulong, c_ulong, c_ulong, c_ulong) -> c_int,
    pub unshare: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    pub setns: unsafe extern "C" fn(*mut c_void, c_int, c_int) -> c_int,
    /// For [`State`]: helper threads started so far, and whether a panic
    /// inside the engine is caught there (1). The argument says whether it
    /// may be probed now (the first time: it allocates and takes the
    /// unwinder's lock); false, from a signal handler, answers what an
    /// earlier probe found, 0 before any.
    pub helpers_started: extern "C" fn() -> u64,
    pub catches_panics: extern "C" fn(bool) -> u64,
}

/// What `bulkmem_preload_state` tells a program about the preload in its
/// process (docs/guide/preload.md declares it for C). Fields are only ever
/// appended, each a `u64`: a program built against fewer gets the ones it
/// knows.
#[repr(C)]
pub struct State {
    /// Helper threads large calls have started since the process began
    /// (none outlives its call, so counting threads cannot tell).
    pub helpers_started: u64,
    /// Bit `n` set: call `n`'s inline small path is on (0 `memcpy`, 1
    /// `memmove`, 2 `memset`, 3 `mempcpy`, 4-6 their fortified forms).
    pub small_paths: u64,
    /// 1: a panic inside the engine is caught at its boundary (the
    /// unwinder linked into it finds its frames); 0 also without an engine,
    /// and in a signal handler before the first ask outside one.
    pub catches_panics: u64,
}

// SAFETY: immutable function pointers.
unsafe impl Sync for Engine {}
