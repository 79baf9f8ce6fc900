//! The engine once it is open: set once by `engine.rs`, which opens it,
//! and read by everything that only uses an open engine (the signal
//! handlers, the sandbox, the exported queries) without opening one.

use core::sync::atomic::{AtomicPtr, Ordering};

use bulkmem_preload_abi::abi::Engine;

/// The engine's table, null until it is open.
pub static ENGINE: AtomicPtr<Engine> = AtomicPtr::new(core::ptr::null_mut());

/// The engine, if it is open.
#[inline]
pub fn loaded() -> Option<&'static Engine> {
    let e = ENGINE.load(Ordering::Acquire);
    // SAFETY: set once to the engine's static table, never unloaded
    // (RTLD_NODELETE).
    unsafe { e.as_ref() }
}
