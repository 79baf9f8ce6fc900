//! The accelerated paths: bulkmem's `auto` on the calling thread, and the
//! multi-threaded engine for the largest calls. Both are entered only
//! after the constructor initialised bulkmem (nothing here allocates or
//! reads files on the way, except the engine's creation) and never
//! re-entered on a thread: bulkmem's own copies (its `libc` kernel, the
//! engine's bookkeeping) go to the C library.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

use bulkmem::{Control, Engine, Extent, Op, Options};

use crate::config::{MT_MIN, THREADS};
use crate::stats::Path;

thread_local! {
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Built on the first call that needs it; after `fork()` the engine starts
/// its own workers in the child (see bulkmem's engine).
static ENGINE: Mutex<Option<Engine>> = Mutex::new(None);

/// Runs `op` over `n` bytes through bulkmem, or returns `None` when the C
/// library must do it (re-entered, or bulkmem failed).
///
/// # Safety
/// `d` writable (and for copies `s` readable) for `n` bytes, not
/// overlapping.
pub unsafe fn run(op: Op, d: *mut u8, s: *const u8, n: usize) -> Option<Path> {
    if INSIDE.with(|i| i.replace(true)) {
        return None;
    }
    let done = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: forwarded contract.
        if n >= MT_MIN.load(Ordering::Relaxed) && unsafe { on_engine(op, d, s, n) } {
            return Path::Engine;
        }
        // SAFETY: the caller's contract: valid, non-overlapping ranges.
        unsafe {
            match op {
                Op::Copy => {
                    let _ = bulkmem::copy_opts(
                        Options::default(),
                        std::slice::from_raw_parts_mut(d, n),
                        std::slice::from_raw_parts(s, n),
                    );
                }
                Op::Clear => {
                    let _ = bulkmem::clear_opts(
                        Options::default(),
                        std::slice::from_raw_parts_mut(d, n),
                    );
                }
            }
        }
        Path::Cpu
    }));
    INSIDE.with(|i| i.set(false));
    done.ok()
}

/// # Safety
/// As [`run`].
unsafe fn on_engine(op: Op, d: *mut u8, s: *const u8, n: usize) -> bool {
    if THREADS.load(Ordering::Relaxed) == 1 {
        return false;
    }
    // Busy (another thread's batch, or a lock a fork left held): the
    // calling thread copies alone.
    let Ok(mut slot) = ENGINE.try_lock() else {
        return false;
    };
    if slot.is_none() {
        let mut b = Engine::builder();
        let t = THREADS.load(Ordering::Relaxed);
        if t > 0 {
            b = b.threads(t);
        }
        match b.build() {
            Ok(engine) if engine.threads() > 1 => *slot = Some(engine),
            _ => {
                THREADS.store(1, Ordering::Relaxed);
                return false;
            }
        }
    }
    let engine = slot.as_ref().expect("just built");
    let ext = [Extent {
        dst: d,
        src: s,
        len: n,
    }];
    // SAFETY: forwarded contract; the engine validates before writing.
    let r = unsafe {
        match op {
            Op::Copy => engine.copy_extents(&ext, Control::default()),
            Op::Clear => engine.clear_extents(&ext, Control::default()),
        }
    };
    r.is_ok_and(|r| r.is_complete())
}
