//! `libbulkmem_preload.so`, the library a program is given in
//! `LD_PRELOAD` (or by `bulkmem run`): the first of the preload's two
//! stages. It defines the interposed functions (`memcpy`, `memmove`,
//! `memset`, `mempcpy`, their fortified forms, the `sigaction` and
//! `signal` family, `prctl`, `unshare`, `setns`) and holds what must exist
//! from the first instruction: the C library's functions, the program's
//! signal handlers behind the trampoline, each thread's state. Everything
//! else, bulkmem itself, is the engine (`libbulkmem_preload_engine.so`,
//! crates/bulkmem-preload-engine), which it opens at the first call that needs it
//! ([`engine`]).
//!
//! Why two: every process a preload is loaded into pays for loading it.
//! A library with the standard library in it costs the dynamic loader its
//! relocations and copy-on-write pages at every exec (`/bin/true` 1.15x
//! plain with fat LTO); this one has no standard library, no allocation
//! and a handful of relocations, and costs what an empty library costs. A
//! process that never copies a large buffer never opens the engine.
//!
//! Built by crates/bulkmem-preload-engine/build.rs with `-C panic=abort` (a
//! `no_std` shared library needs it). So no Rust frame of this library may
//! be on the stack while code that may unwind runs (a program's handler, the
//! C library's copy): those paths are assembly ([`route`], the signal
//! trampoline). The contract the two stages keep together is in
//! crates/bulkmem-preload-engine/src/lib.rs and docs/design.md ("The preload");
//! the interface itself is crates/bulkmem-preload-abi.

#![cfg_attr(not(test), no_std)]

mod c_library;
mod calls;
mod cpu_record;
mod engine;
mod next;
mod opened;
mod own_stack;
mod route;
mod sandbox;
mod services;
mod signals;
mod small;
mod stay_out;
mod thread;

use core::ffi::{c_int, CStr};
use core::sync::atomic::{AtomicBool, Ordering};

use bulkmem_preload_abi::{abi, sys};

/// False when switched off (`BULKMEM_PRELOAD=off`).
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Tells a program (and the tests) that the preload is loaded and active:
/// switched on, its engine opened (now, if it was not).
#[no_mangle]
pub extern "C" fn bulkmem_preload_active() -> c_int {
    c_int::from(ACTIVE.load(Ordering::Relaxed) && engine::get().is_some())
}

/// Fills `out` with what the preload does in this process
/// ([`abi::State`]; docs/guide/preload.md declares it for C): at most
/// `size` bytes, whole fields only, and returns the size of the whole
/// record (a null `out` gets nothing). Switched on, it opens the engine if
/// it is not open, as [`bulkmem_preload_active`] does (never in a signal
/// handler), and at the first ask outside a handler probes the engine's
/// unwinder: a handler gets what an earlier ask found.
///
/// # Safety
/// `out` is null or valid for writes of `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn bulkmem_preload_state(out: *mut u64, size: usize) -> usize {
    let engine = ACTIVE.load(Ordering::Relaxed).then(engine::get).flatten();
    let fields = [
        engine.map_or(0, |e| (e.helpers_started)()),
        small::paths_on(),
        engine.map_or(0, |e| (e.catches_panics)(!thread::in_handler())),
    ];
    const _: () = assert!(size_of::<abi::State>() == 3 * size_of::<u64>());
    if !out.is_null() {
        for (i, v) in fields.iter().enumerate().take(size / size_of::<u64>()) {
            // SAFETY: field `i` ends within the `size` bytes the caller
            // gave; one field at a time (a copy here would be this
            // library's own memcpy), unaligned for a caller's packed copy.
            unsafe { out.add(i).write_unaligned(*v) };
        }
    }
    size_of::<abi::State>()
}

/// The variables the engine reads, besides `BULKMEM_PRELOAD`.
const SETTINGS: [&CStr; 5] = [
    c"BULKMEM_PRELOAD_MIN",
    c"BULKMEM_PRELOAD_MT_MIN",
    c"BULKMEM_PRELOAD_THREADS",
    c"BULKMEM_PRELOAD_STATS",
    c"BULKMEM_PRELOAD_REPORT",
];

fn var(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: a NUL-terminated name; getenv returns null or a
    // NUL-terminated value.
    let v = unsafe { sys::getenv(name.as_ptr()) };
    // SAFETY: as above; the constructor reads it before the program runs.
    (!v.is_null()).then(|| unsafe { CStr::from_ptr(v) }.to_bytes())
}

/// `BULKMEM_PRELOAD`: `Some(false)` off, `Some(true)` on or unset, `None`
/// neither (the engine says so).
fn switch() -> Option<bool> {
    let Some(v) = var(c"BULKMEM_PRELOAD") else {
        return Some(true);
    };
    let v = v.trim_ascii();
    let is = |w: &str| v.eq_ignore_ascii_case(w.as_bytes());
    if is("off") || is("0") || is("no") {
        Some(false)
    } else if is("on") || is("1") || is("yes") || v.is_empty() {
        Some(true)
    } else {
        None
    }
}

/// Resolves the C library's functions and reads the switch; every process
/// the library is loaded into pays this, so it is all. Where a setting is
/// given, the engine is opened now, to read it (and warn about it) as the
/// program starts; otherwise calls from 1 MiB leave the C library, and
/// the engine is opened by the first of them.
extern "C" fn init() {
    next::resolve_all();
    // SAFETY: a plain extern "C" function, run in the child of a fork.
    unsafe { sys::pthread_atfork(None, None, Some(signals::unlock_in_child)) };
    // SAFETY: getauxval has no preconditions.
    let secure = unsafe { sys::getauxval(sys::AT_SECURE) } != 0;
    let (on, eager) = if secure {
        (true, false)
    } else {
        let asked = var(c"BULKMEM_PRELOAD").is_some() || SETTINGS.iter().any(|n| var(n).is_some());
        services::ASKED.store(asked, Ordering::Relaxed);
        match switch() {
            Some(false) => return,
            Some(true) => (true, SETTINGS.iter().any(|n| var(n).is_some())),
            None => (true, true),
        }
    };
    ACTIVE.store(on, Ordering::Relaxed);
    if eager {
        services::READ_ENV.store(true, Ordering::Relaxed);
        // The engine publishes its MIN; if it cannot be opened, every call
        // stays with the C library.
        let _ = engine::get();
    } else {
        calls::MIN.store(abi::DEFAULT_MIN, Ordering::Release);
    }
    small::decide();
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

// The precompiled `core` has unwind tables that name Rust's personality
// routine, which only the standard library defines. Nothing of this library
// unwinds (`panic=abort`); an unwind that passes through one of its frames
// (a thread's cancellation in the few instructions outside assembly) is
// let through it, as through C code: `_URC_CONTINUE_UNWIND`. Hidden: the
// engine has a personality routine of its own.
#[cfg(not(test))]
core::arch::global_asm!(
    ".pushsection .text.rust_eh_personality,\"ax\",@progbits",
    ".globl rust_eh_personality",
    ".hidden rust_eh_personality",
    ".type rust_eh_personality,@function",
    "rust_eh_personality:",
    ".cfi_startproc",
    "mov eax, 8",
    "ret",
    ".cfi_endproc",
    ".size rust_eh_personality, . - rust_eh_personality",
    ".popsection",
);

#[cfg(not(test))]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: abort has no preconditions.
    unsafe { sys::abort() }
}
