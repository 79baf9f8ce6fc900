//! The worker threads: starting and pinning them, handing each batch's job
//! to all of them, and the per-thread marker that refuses re-entrant
//! batches. Separate from the jobs it runs: a pool knows only that a job
//! is something every worker calls once and returns from.

use std::any::Any;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::Engine;
use crate::error::Error;
use crate::latch::Latch;

/// The worker threads of one process. A child made by `fork()` has the
/// engine but none of its threads: [`dispatch`] starts a new pool
/// there (and never waits for or joins the parent's).
pub(super) struct Pool {
    pid: u32,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    pub(super) fn start(cpus: &[usize], pin: bool) -> Result<Pool, Error> {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot {
                generation: 0,
                job: 0,
                shutdown: false,
            }),
            wake: Condvar::new(),
            finished: Latch::new(0),
        });
        let mut pool = Pool {
            pid: std::process::id(),
            shared: Arc::clone(&shared),
            workers: Vec::new(),
        };
        let (tx, rx) = std::sync::mpsc::channel::<Result<(), Error>>();
        for (i, &cpu) in cpus.iter().enumerate() {
            let shared = Arc::clone(&shared);
            let tx = tx.clone();
            let handle = crate::threads::quiet(|| {
                std::thread::Builder::new()
                    .name(format!("bulkmem-{i}@cpu{cpu}"))
                    .spawn(move || {
                        let pinned = if pin {
                            crate::machine::placement::pin_to(cpu)
                        } else {
                            Ok(())
                        };
                        let ok = pinned.is_ok();
                        let _ = tx.send(pinned.map_err(|e| Error::CannotPin {
                            cpu,
                            errno: e.raw_os_error().unwrap_or(libc::EINVAL),
                        }));
                        if ok {
                            worker_loop(&shared);
                        }
                    })
            });
            match handle {
                Ok(h) => pool.workers.push(h),
                Err(e) => {
                    // The workers started so far wait for work that will
                    // never come: stop and join them before failing, so a
                    // failed build leaves no thread behind.
                    pool.stop();
                    return Err(spawn_error(&e));
                }
            }
        }
        drop(tx);
        for _ in 0..cpus.len() {
            let failed = match rx.recv() {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e,
                // A worker ended before it could say: only a panic while
                // pinning can do that. Nothing was written.
                Err(_) => Error::WorkerPanicked {
                    message: "a worker thread panicked while starting".into(),
                    report: Box::new(crate::report::Report::cancelled_before_start(0)),
                },
            };
            pool.stop();
            return Err(failed);
        }
        Ok(pool)
    }

    pub(super) fn stop(&mut self) {
        if self.pid != std::process::id() {
            // A fork's copy: these threads exist only in the parent.
            std::mem::forget(std::mem::take(&mut self.workers));
            return;
        }
        lock(&self.shared.slot).shutdown = true;
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Why a thread could not be started: `pthread_create`'s errno (EAGAIN
/// when the process or user is out of threads, `RLIMIT_NPROC`), so callers
/// can tell a transient shortage from a bad configuration.
pub(super) fn spawn_error(e: &std::io::Error) -> Error {
    Error::Syscall {
        call: "pthread_create",
        errno: e.raw_os_error().unwrap_or(libc::EAGAIN),
    }
}

/// What the workers run: every worker calls it once per generation.
type Task<'w> = &'w (dyn Fn() + Sync);

/// The generation handshake. To hand out a job, the dispatcher (under
/// the slot's lock) stores the job's address, raises `finished` by the
/// number of workers and bumps `generation`, then wakes every worker
/// (`wake`) and waits on `finished` without the lock. A worker sleeps on
/// `wake` until the generation differs from the last one it ran, runs the
/// job once, and counts `finished` down as its last touch of the job, so
/// the dispatcher returns (and the job may be dropped) only after every
/// worker is past it. One dispatch at a time: the engine's pool lock.
struct Shared {
    slot: Mutex<Slot>,
    wake: Condvar,
    /// Workers that have not finished the current generation.
    finished: Latch,
}

struct Slot {
    generation: u64,
    /// Address of the current job's [`Task`] reference; valid until
    /// `finished` is zero.
    job: usize,
    shutdown: bool,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding these locks cannot leave them inconsistent (all
    // updates are single assignments), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn panic_message(e: &(dyn Any + Send)) -> String {
    if let Some(s) = e.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = e.downcast_ref::<String>() {
        s.clone()
    } else {
        "a callback panicked".to_string()
    }
}

thread_local! {
    /// The engine whose job this thread is running callbacks or kernels of
    /// (0: none).
    static INSIDE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Marks this thread as running `engine`'s job until dropped.
pub(super) struct Inside(usize);

impl Inside {
    pub(super) fn enter(engine: usize) -> Inside {
        Inside(INSIDE.with(|c| c.replace(engine)))
    }

    /// The engine this thread is running a job of (0: none).
    pub(super) fn current() -> usize {
        INSIDE.with(|c| c.get())
    }

    /// Clears a mark for `engine` left by a call that never returned (a
    /// callback left it with `longjmp`, skipping the guard's drop).
    pub(super) fn forget(engine: usize) {
        INSIDE.with(|c| {
            if c.get() == engine {
                c.set(0);
            }
        });
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.with(|c| c.set(self.0));
    }
}

fn worker_loop(shared: &Shared) {
    let mut seen = 0u64;
    loop {
        let job = {
            let mut slot = lock(&shared.slot);
            while slot.generation == seen && !slot.shutdown {
                slot = shared.wake.wait(slot).unwrap_or_else(|e| e.into_inner());
            }
            if slot.shutdown {
                return;
            }
            seen = slot.generation;
            slot.job
        };
        // SAFETY: the submitter published the job with this generation and
        // keeps it alive until every worker has counted `finished` down
        // below; this worker does not touch it after that.
        let job: Task<'_> = unsafe { *(job as *const Task<'_>) };
        job();
        shared.finished.count_down();
    }
}

/// Hands `job` to every worker and waits until all have finished it.
/// In a child made by `fork()` the workers are started anew first; if
/// they cannot be, the caller runs the job alone.
pub(super) fn dispatch(engine: &Engine, job: Task<'_>) {
    let mut pool = lock(&engine.pool);
    if pool.pid != std::process::id() {
        match Pool::start(&engine.cpus, engine.pin) {
            Ok(fresh) => {
                let mut parents = std::mem::replace(&mut *pool, fresh);
                parents.stop();
            }
            Err(_) => {
                drop(pool);
                job();
                return;
            }
        }
    }
    let shared = &pool.shared;
    {
        let mut slot = lock(&shared.slot);
        slot.job = &job as *const Task<'_> as usize;
        shared.finished.add(pool.workers.len() as u32);
        slot.generation += 1;
    }
    shared.wake.notify_all();
    shared.finished.wait();
}
