//! The accelerated paths: bulkmem's `auto` on the calling thread, and the
//! multi-threaded engine for the largest calls. Both are entered only
//! once bulkmem is initialised, which the first large call outside a
//! signal handler does ([`policy_ready`]; nothing else here allocates or
//! reads files on the way, except the engine's creation), and never
//! re-entered on a thread: bulkmem's own copies (its `libc` kernel, the
//! engine's bookkeeping) go to the C library.
//!
//! The engine (and so any thread of the preload's) is used, and created,
//! only by a copy outside every signal handler ([`signals::in_handler`]),
//! while threads are allowed (`config::THREADS` is not 1), and never waited
//! for: a copy that finds it busy runs on its own thread. [`without_threads`]
//! stops and joins the workers for the calls that need a process without
//! them (see the crate docs' thread policy).

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use bulkmem::{Control, Engine, Extent, Op, Options};

use crate::config::{MT_MIN, THREADS};
use crate::signals;
use crate::stats::Path;

thread_local! {
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Built on the first call that needs it; after `fork()` the engine starts
/// its own workers in the child (see bulkmem's engine).
static ENGINE: Mutex<Option<Engine>> = Mutex::new(None);
/// The process whose thread took [`ENGINE`] last (0: none yet), kept after
/// it is released: a lock held in a parent when it forked is never released
/// in the child, and is told from one held by a thread of this process by
/// this pid.
static HOLDER: AtomicU32 = AtomicU32::new(0);

/// bulkmem's policy for this process (CPU facts, profile, overrides,
/// bands): 0 not built, 1 being built by one thread, 2 built.
static POLICY: AtomicU8 = AtomicU8::new(0);

/// Whether bulkmem's lazy initialisation is done, doing it on this thread
/// if none has begun it and this is not a signal handler.
///
/// It is built by the first large call, not by the library's constructor:
/// every process the library is loaded into runs the constructor, most
/// never copy a MiB, and the profile's parse alone cost 0.4-0.6 ms per
/// exec (a 2-CPU VM). Building allocates and reads files, so never inside
/// a handler (which may have interrupted `malloc`); and nobody waits for
/// it: a call that finds it being built (on another thread, or in a child
/// forked meanwhile, where it never finishes) goes to the C library.
fn policy_ready() -> bool {
    match POLICY.load(Ordering::Acquire) {
        2 => true,
        0 if !signals::in_handler()
            && POLICY
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok() =>
        {
            for op in [Op::Copy, Op::Clear] {
                for h in bulkmem::Hint::ALL {
                    let _ = bulkmem::auto::bands(op, *h);
                }
            }
            let _ =
                bulkmem::auto::here(&bulkmem::Request::single(Op::Copy, 0, bulkmem::Hint::Auto));
            POLICY.store(2, Ordering::Release);
            true
        }
        _ => false,
    }
}

/// Builds bulkmem's policy now, if it is not built and this is not a
/// signal handler: for the calls after which the process may no longer
/// open files (seccomp: strict mode leaves read, write, _exit and
/// sigreturn, and the first large copy after it would have read the CPU
/// facts and the profile, and been killed). Returns whether it is built.
pub fn prepare_for_sandbox() -> bool {
    if INSIDE.with(|i| i.get()) {
        return POLICY.load(Ordering::Acquire) == 2;
    }
    catch_unwind(policy_ready).unwrap_or(false)
}

/// Runs `op` over `n` bytes through bulkmem, or returns `None` when the C
/// library must do it (re-entered, bulkmem not initialised and not to be
/// initialised here, or bulkmem failed).
///
/// # Safety
/// `d` writable (and for copies `s` readable) for `n` bytes, not
/// overlapping.
pub unsafe fn run(op: Op, d: *mut u8, s: *const u8, n: usize) -> Option<Path> {
    if INSIDE.with(|i| i.replace(true)) {
        return None;
    }
    let done = catch_unwind(AssertUnwindSafe(|| {
        if !policy_ready() {
            return None;
        }
        // SAFETY: forwarded contract.
        if n >= MT_MIN.load(Ordering::Relaxed) && unsafe { on_engine(op, d, s, n) } {
            return Some(Path::Engine);
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
        Some(Path::Cpu)
    }));
    INSIDE.with(|i| i.set(false));
    done.ok().flatten()
}

/// # Safety
/// As [`run`].
unsafe fn on_engine(op: Op, d: *mut u8, s: *const u8, n: usize) -> bool {
    if THREADS.load(Ordering::Relaxed) == 1 || signals::in_handler() {
        return false;
    }
    // Busy (another thread's batch, or a lock a fork left held): the
    // calling thread copies alone.
    let Ok(mut slot) = ENGINE.try_lock() else {
        return false;
    };
    HOLDER.store(std::process::id(), Ordering::Relaxed);
    (|| {
        // Threads may have been forbidden between the check above and
        // taking the lock (`without_threads` forbids, then takes it).
        if THREADS.load(Ordering::Relaxed) == 1 {
            return false;
        }
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
        let Some(engine) = slot.as_ref() else {
            return false;
        };
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
    })()
}

/// Stops the engine's workers and waits until they have exited, runs `f`
/// (told whether there were workers to stop) while no copy can start them
/// again, and then lets copies start them again on demand, or with
/// `forbid` never again.
///
/// Called from a signal handler, or while this thread is inside a copy,
/// it does not wait for the engine: if another batch holds it, `f` runs
/// with the workers still there.
pub fn without_threads<R>(forbid: bool, f: impl FnOnce(bool) -> R) -> R {
    if forbid {
        THREADS.store(1, Ordering::Relaxed);
    }
    let mut guard = lock_engine();
    let stopped = match guard.as_mut() {
        Some(slot) => {
            let had = slot.as_ref().is_some_and(|e| e.threads() > 0);
            // Dropping the engine joins its workers (in a forked child,
            // whose copy of the engine has none, it only forgets them).
            let engine = slot.take();
            drop(engine);
            had
        }
        None => false,
    };
    let r = f(stopped);
    drop(guard);
    r
}

/// The engine's lock when it can be had without a wait that may never end.
fn lock_engine() -> Option<MutexGuard<'static, Option<Engine>>> {
    let me = std::process::id();
    let careful = signals::in_handler() || INSIDE.with(|i| i.get());
    let g = match ENGINE.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        // Held by a thread of this process: wait for its batch to end,
        // unless that thread may be this one.
        Err(TryLockError::WouldBlock) if !careful && HOLDER.load(Ordering::Relaxed) == me => {
            Some(ENGINE.lock().unwrap_or_else(|e| e.into_inner()))
        }
        // Held in the parent when it forked: no worker of this process
        // exists (a batch would have needed the lock to start them).
        Err(TryLockError::WouldBlock) => None,
    };
    if g.is_some() {
        HOLDER.store(me, Ordering::Relaxed);
    }
    g
}
