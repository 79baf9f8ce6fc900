//! Opening the engine (`libbulkmem_preload_engine.so`, beside this
//! library) at the first call that needs it: a large copy or clear outside
//! every signal handler and outside bulkmem's own code, a seccomp request,
//! or, at start-up, a `BULKMEM_PRELOAD_*` variable to act on.
//!
//! One thread opens it, by a compare-and-swap; every other call meanwhile
//! (another thread's, a handler's, the opening thread's own nested ones, or
//! one in a child forked mid-way, where it never finishes) goes to the C
//! library rather than wait. Cancellation is blocked while it opens: an
//! unwind through this `panic=abort` code would abort, and one through the
//! dynamic loader would leave its lock taken. It opens on a stack of the
//! loader's ([`crate::own_stack`]), never in a process the preload must
//! stay out of ([`crate::stay_out`]), and says why it could not only
//! where a `BULKMEM_*` variable asked for the preload
//! ([`crate::services::warn`]): a daemon's stderr may be its data file.
//! The engine once open is `opened.rs`'s, which code below this (the
//! signal handlers) reads without reaching the code that opens it.

use core::ffi::{c_char, c_void, CStr};
use core::sync::atomic::{AtomicU8, Ordering};

use crate::{opened, thread};
use bulkmem_preload_abi::abi::{self, Engine, Loader};
use bulkmem_preload_abi::sys;

const CLOSED: u8 = 0;
const OPENING: u8 = 1;
const OPEN: u8 = 2;
/// It failed to open, or may not be opened any more.
const NEVER: u8 = 3;
static STATE: AtomicU8 = AtomicU8::new(CLOSED);

/// The engine, opened now if it is not and this thread may.
#[inline]
pub fn get() -> Option<&'static Engine> {
    opened::loaded().or_else(open)
}

/// No opening from now on (a sandbox that may forbid opening files).
pub fn never_open() {
    let _ = STATE.compare_exchange(CLOSED, NEVER, Ordering::AcqRel, Ordering::Relaxed);
}

#[cold]
#[inline(never)]
fn open() -> Option<&'static Engine> {
    if STATE.load(Ordering::Acquire) != CLOSED || thread::in_handler() || thread::inside() {
        return None;
    }
    if STATE
        .compare_exchange(CLOSED, OPENING, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return None;
    }
    // Before any system call the C library would not have made.
    if crate::stay_out::now() {
        STATE.store(NEVER, Ordering::Release);
        return None;
    }
    // Every asynchronous signal waits while the engine opens (cancellation
    // too): a handler's siglongjmp out of `dlopen` would leave the dynamic
    // loader's lock taken for good.
    let old = sys::sigprocmask_raw(sys::SIG_BLOCK, sys::ASYNCHRONOUS);
    let mut e: *const Engine = core::ptr::null();
    crate::own_stack::on_own_stack(open_on_stack, (&mut e as *mut *const Engine).cast());
    if !e.is_null() {
        opened::ENGINE.store(e.cast_mut(), Ordering::Release);
        // The engine has stored its MIN.
        crate::small::publish();
    }
    STATE.store(if e.is_null() { NEVER } else { OPEN }, Ordering::Release);
    sys::sigprocmask_raw(sys::SIG_SETMASK, old);
    opened::loaded()
}

type AttachFn = unsafe extern "C" fn(*const Loader) -> *const Engine;

/// [`open_now`] on the set-up stack, into `*out` (a `*const Engine`).
extern "C" fn open_on_stack(out: *mut c_void) {
    // SAFETY: `open` passes its local, alive for this call.
    unsafe { *out.cast::<*const Engine>() = open_now(&crate::services::LOADER) };
}

fn open_now(loader: &'static Loader) -> *const Engine {
    let flags = sys::RTLD_NOW | sys::RTLD_LOCAL | sys::RTLD_NODELETE;
    // SAFETY: a NUL-terminated file name; `$ORIGIN` is this library's
    // folder (the dynamic loader expands it for the calling object).
    let h = unsafe { sys::dlopen(abi::ENGINE_FILE.as_ptr(), flags) };
    if h.is_null() {
        cannot(b"cannot open its engine");
        return core::ptr::null();
    }
    // SAFETY: a handle dlopen returned and a NUL-terminated name.
    let f = unsafe { sys::dlsym(h, abi::ATTACH.as_ptr()) };
    if f.is_null() {
        cannot(b"its engine has no entry point");
        return core::ptr::null();
    }
    // SAFETY: the engine's entry point has this signature (abi.rs, shared).
    let attach = unsafe { core::mem::transmute::<*mut c_void, AttachFn>(f) };
    // SAFETY: the loader's table lives as long as the process; the engine
    // catches its own panics.
    let e = unsafe { attach(loader) };
    // SAFETY: null or the engine's static table.
    if unsafe { e.as_ref() }.is_none_or(|e| e.version != abi::VERSION) {
        crate::services::warn(&[
            b"bulkmem preload: warning: its engine did not attach (built from another ",
            b"interface, or its start failed); ",
            b"every call goes to the C library\n",
        ]);
        return core::ptr::null();
    }
    e
}

/// Says why the engine is not there (the dynamic loader's message names
/// the file), once: the opening is never tried again.
fn cannot(what: &[u8]) {
    // SAFETY: dlerror returns null or a NUL-terminated message.
    let why = unsafe { sys::dlerror() };
    let why: &[u8] = if why.is_null() {
        b"unknown reason"
    } else {
        // SAFETY: a NUL-terminated string owned by the C library.
        unsafe { CStr::from_ptr(why.cast_const() as *const c_char) }.to_bytes()
    };
    crate::services::warn(&[
        b"bulkmem preload: warning: ",
        what,
        b" (",
        why,
        b"); every call goes to the C library\n",
    ]);
}
