//! Asynchronous batches: [`Engine::submit_copy`], [`Engine::submit_clear`]
//! and [`Engine::submit_fill`] check a batch, queue it and return a
//! [`Ticket`] at once; one submission thread per engine runs the queue.
//!
//! Tickets are served one at a time in submission order (FIFO). An engine
//! runs one batch at a time anyway (see `serial`), so a second submission
//! thread would only wait for the first; FIFO makes completion order
//! predictable (a ticket is done no later than every ticket submitted
//! after it on the same engine) and starves nobody. The thread is just
//! another caller of the engine: it takes the batch marker for each
//! ticket as any thread does, so synchronous batches from other threads
//! interleave with tickets, between two of them.
//!
//! The thread starts with the first submission, not with the engine: most
//! engines never submit. A child made by `fork()` has none of its parent's
//! threads; its first submission starts its own.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::job::request;
use super::pool::{lock, panic_message, spawn_error};
use super::stream::Marks;
use super::ticket::{Shared, Ticket};
use super::Engine;
use crate::control::{CancelToken, Control, Progress};
use crate::error::Error;
use crate::extent::{validate, Raw};
use crate::fill::Plan;
use crate::plan::Extent;
use crate::report::Report;
use crate::strategy::Op;

/// The engine's submission thread and its queue (in the process that
/// started them).
pub(super) struct Submitter {
    pid: u32,
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
}

struct Queue {
    state: Mutex<QueueState>,
    wake: Condvar,
}

#[derive(Default)]
struct QueueState {
    entries: VecDeque<Entry>,
    /// The token of the ticket the thread is running, for the engine's drop.
    running: Option<CancelToken>,
    shutdown: bool,
}

/// What a ticket asks for.
enum Queued {
    Copy(Vec<Extent>),
    Clear(Vec<Extent>),
    Fill {
        dst: *mut u8,
        len: usize,
        template: Vec<u8>,
    },
}

struct Entry {
    engine: *const Engine,
    work: Queued,
    ticket: Arc<Shared>,
}

// SAFETY: an entry names memory and an engine that its submitter vouched
// for (the `submit_*` contracts) until its ticket is done; the ticket
// borrows the engine, and both the ticket's drop and the engine's drop
// wait for the entry to finish. Only the submission thread uses it.
unsafe impl Send for Entry {}

impl Entry {
    fn run(&self) -> Result<Report, Error> {
        let t = &*self.ticket;
        if t.cancel.is_cancelled() {
            return Ok(Report::cancelled_before_start(t.total));
        }
        let progress = |p: Progress| t.done_bytes.store(p.done, Ordering::Relaxed);
        let ctl = Control {
            cancel: Some(&t.cancel),
            progress: Some(&progress),
        };
        // SAFETY: the engine outlives the entry (see the Send impl).
        let engine = unsafe { &*self.engine };
        match &self.work {
            // Not checked again: the extents were validated at submission
            // (`check_extents`) and have not changed since; the submitter
            // keeps their memory valid and untouched until the ticket is
            // done (the `submit_copy` contract).
            Queued::Copy(x) => engine
                .run(Op::Copy, &Raw(x, Op::Copy), false, ctl)
                .map_err(Error::from),
            // As above (`submit_clear`).
            Queued::Clear(x) => engine
                .run(Op::Clear, &Raw(x, Op::Clear), false, ctl)
                .map_err(Error::from),
            Queued::Fill { dst, len, template } => {
                let p = if *len == 0 {
                    std::ptr::NonNull::dangling().as_ptr()
                } else {
                    *dst
                };
                // SAFETY: `dst` (non-null when `len` > 0, checked at
                // submission) is writable for `len` bytes and untouched by
                // anyone else until the ticket is done (`submit_fill`).
                let dst = unsafe { std::slice::from_raw_parts_mut(p, *len) };
                engine.fill_with_control(dst, template, ctl)
            }
        }
    }
}

fn serve(queue: &Queue) {
    loop {
        let entry = {
            let mut st = lock(&queue.state);
            loop {
                if let Some(e) = st.entries.pop_front() {
                    st.running = Some(e.ticket.cancel.clone());
                    break e;
                }
                if st.shutdown {
                    return;
                }
                st = queue.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        };
        // The engine catches callback and kernel panics itself; this only
        // keeps a bug from leaving the ticket's waiters blocked for ever.
        let outcome = catch_unwind(AssertUnwindSafe(|| entry.run())).unwrap_or_else(|e| {
            Err(Error::WorkerPanicked {
                message: panic_message(&*e),
                report: Box::new(Report::cancelled_before_start(entry.ticket.total)),
            })
        });
        lock(&queue.state).running = None;
        entry.ticket.finish(outcome);
    }
}

impl Submitter {
    fn start() -> Result<Submitter, Error> {
        let queue = Arc::new(Queue {
            state: Mutex::new(QueueState::default()),
            wake: Condvar::new(),
        });
        let q = Arc::clone(&queue);
        let thread = crate::threads::quiet(|| {
            std::thread::Builder::new()
                .name("bulkmem-submit".into())
                .spawn(move || serve(&q))
        })
        .map_err(|e| spawn_error(&e))?;
        Ok(Submitter {
            pid: std::process::id(),
            queue,
            thread: Some(thread),
        })
    }

    /// Cancels every queued and running ticket (their batches stop after
    /// the chunks in flight) and joins the thread once the queue is empty.
    /// In a fork's child, forgets the parent's thread and queue: neither
    /// may be touched there (a lock held at the fork stays held).
    pub(super) fn stop(mut self) {
        if self.pid != std::process::id() {
            std::mem::forget(self);
            return;
        }
        let mut st = lock(&self.queue.state);
        st.shutdown = true;
        for e in &st.entries {
            e.ticket.cancel.cancel();
        }
        if let Some(c) = &st.running {
            c.cancel();
        }
        drop(st);
        self.queue.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// [`Engine::submit_copy`] and [`Engine::submit_clear`]: checked, then
/// queued.
///
/// # Safety
/// As [`Engine::submit_copy`].
pub(super) unsafe fn submit<'e>(
    engine: &'e Engine,
    op: Op,
    ops: &[Extent],
    cancel: Option<&CancelToken>,
) -> Result<Ticket<'e>, Error> {
    let total = check_extents(engine, op, ops)?;
    let work = match op {
        Op::Copy => Queued::Copy(ops.to_vec()),
        Op::Clear => Queued::Clear(ops.to_vec()),
    };
    enqueue(engine, work, total, cancel)
}

/// [`Engine::submit_fill`]: checked, then queued.
///
/// # Safety
/// As [`Engine::submit_fill`].
pub(super) unsafe fn submit_fill<'e>(
    engine: &'e Engine,
    dst: *mut u8,
    len: usize,
    template: &[u8],
    cancel: Option<&CancelToken>,
) -> Result<Ticket<'e>, Error> {
    Plan::new(len, template.len(), engine.opts.hint)?;
    if len > 0 && (dst.is_null() || (dst as usize).checked_add(len).is_none()) {
        return Err(Error::BadExtent {
            index: 0,
            reason: "null or wrapping destination",
        });
    }
    let work = Queued::Fill {
        dst,
        len,
        template: template.to_vec(),
    };
    enqueue(engine, work, len, cancel)
}

/// What the synchronous path checks before it writes anything, once:
/// the extents (the queued batch runs without checking them again),
/// and that the engine's strategy can do `op`, for the request `run`
/// will make. Returns the batch's bytes.
fn check_extents(engine: &Engine, op: Op, ops: &[Extent]) -> Result<usize, Error> {
    let batch = Raw(ops, op);
    validate(op, &batch, &mut Vec::new())?;
    let mut marks = Marks::default();
    marks.mark(&batch, true);
    let req = request(
        op,
        marks.runs,
        marks.total,
        engine.opts.hint,
        engine.threads(),
    );
    // Refused here, before anything is queued, as `run` would refuse it.
    crate::auto::resolve(engine.opts, &req)?;
    Ok(marks.total)
}

fn enqueue<'e>(
    engine: &'e Engine,
    work: Queued,
    total: usize,
    cancel: Option<&CancelToken>,
) -> Result<Ticket<'e>, Error> {
    let shared = Shared::new(total, cancel)?;
    let entry = Entry {
        engine,
        work,
        ticket: Arc::clone(&shared),
    };
    let me = std::process::id();
    let mut sub = lock(&engine.submitter);
    if sub.as_ref().is_none_or(|s| s.pid != me) {
        if let Some(parents) = sub.take() {
            parents.stop();
        }
        *sub = Some(Submitter::start()?);
    }
    let queue = &sub.as_ref().expect("started above").queue;
    lock(&queue.state).entries.push_back(entry);
    queue.wake.notify_one();
    Ok(Ticket {
        shared,
        engine,
        pid: me,
    })
}
