//! One batch's job: the work, the chunk stream cut from the runs, and
//! the loop every thread runs to take chunks, report progress and stop on
//! cancel or panic; then the report of which extents it completed. Separate
//! from the pool that runs it (pool.rs) and from the entry points that
//! make it (mod.rs, fill_job.rs, checked.rs).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::pool::{dispatch, lock, panic_message, Inside};
use super::serial::{stack_addr, Serial};
use super::stream::Stream;
use super::{Engine, MIN_CHUNK};
use crate::auto::Request;
use crate::chunks::Chunks;
use crate::control::{Control, Progress};
use crate::error::EngineError;
use crate::extent::Batch;
#[cfg(target_arch = "x86_64")]
use crate::fault::log::FaultLog;
#[cfg(target_arch = "x86_64")]
use crate::handle::{CheckedClearKernel, CheckedCopyKernel};
use crate::handle::{ClearKernel, CopyKernel, Fence, Unfenced};
use crate::offload::Offload;
use crate::plan::Extent;
use crate::report::Report;
use crate::strategy::{Hint, Op, Strategy};

/// What a worker runs over each piece of a chunk: a kernel (run unfenced
/// under the chunk's [`Fence`]) or a fill's piece writer.
#[derive(Clone, Copy)]
pub(super) enum Work<'a> {
    Copy(CopyKernel),
    Clear(ClearKernel),
    /// (offset of the piece in its run, piece address, piece length, the
    /// chunk's fence); used by fills, whose pieces start on element
    /// boundaries.
    Each(&'a (dyn Fn(usize, *mut u8, usize, &Fence) + Sync)),
    /// Checked batches: one run per extent, faults recorded in the log.
    #[cfg(target_arch = "x86_64")]
    CopyChecked(CheckedCopyKernel, &'a FaultLog),
    #[cfg(target_arch = "x86_64")]
    ClearChecked(CheckedClearKernel, &'a FaultLog),
}

struct Job<'a, B> {
    work: Work<'a>,
    /// Chunk boundaries fall on multiples of this from a run's start.
    align: usize,
    stream: Stream<'a, B>,
    chunk: usize,
    /// Handed out in order; stopped when a callback (progress, or a fill's
    /// patch) panicked, and failed at the chunk a panic cut short, so the
    /// report's prefix ends before it.
    chunks: Chunks,
    /// Bytes done, for progress.
    done: AtomicUsize,
    panic: Mutex<Option<String>>,
    /// The largest `done` delivered to the progress callback; callbacks run
    /// one at a time under this lock, so `done` only grows.
    reported: Mutex<usize>,
    /// Which engine runs the job, so that a callback submitting to that
    /// same engine is refused instead of deadlocking.
    engine: usize,
    /// Distinct threads that executed at least one chunk.
    workers: AtomicUsize,
    ctl: Control<'a>,
    /// Copy channels for this batch, if the engine has them and the batch
    /// is a plain copy run on threads.
    offload: Option<&'a Offload>,
    offloaded: AtomicUsize,
    redone: AtomicUsize,
    /// The engine's batch marker: heartbeats, and the mark of a batch run
    /// on the submitting thread.
    serial: &'a Serial,
    /// Runs on the submitting thread (callbacks too).
    inline: bool,
    /// Copies four extents at once where they can.
    gangs: bool,
}

// SAFETY: the workers of one batch share its job. Its only non-Sync
// part is the batch, whose pointers name memory the submitter validated
// (or borrowed) and keeps for the whole batch, waiting for the workers,
// and which the workers only read; each piece of that memory is written
// by exactly one worker.
unsafe impl<B> Sync for Job<'_, B> {}

impl<B: Batch> Job<'_, B> {
    /// The stream position where chunk boundary `k` falls. Positions only
    /// grow with `k` because chunks are at least `align` long.
    fn boundary(&self, k: usize) -> usize {
        self.stream
            .boundary(k.saturating_mul(self.chunk), self.align)
    }

    /// Takes chunks until there are none left, the batch is cancelled or a
    /// callback panicked, running each with the CPU kernel.
    fn work(&self) {
        self.work_with(&|p0, p1| self.execute(p0, p1));
    }

    /// As [`Job::work`] on an offload thread: a chunk wholly inside
    /// registered memory goes to `channel`, and is redone on the CPU if the
    /// channel fails; any other chunk is copied here with the CPU kernel.
    /// The channel returns only when its copies are complete and visible,
    /// so the chunk is done when it is reported, as a CPU worker's is.
    fn work_offloaded(&self, o: &Offload, channel: usize) {
        self.work_with(&|p0, p1| {
            let pieces = self.pieces(p0, p1);
            let bytes: usize = pieces.iter().map(|p| p.len).sum();
            let registered = o.0.registry.covers(
                pieces
                    .iter()
                    .flat_map(|p| [(p.src as usize, p.len), (p.dst as usize, p.len)]),
            );
            if registered {
                let mut ch = lock(&o.0.channels[channel]);
                // SAFETY: the pieces lie in runs the submitter validated
                // (disjoint, readable sources, writable destinations) and
                // keeps for the batch; all of them are registered.
                match unsafe { ch.copy(&pieces) } {
                    Ok(()) => {
                        self.offloaded.fetch_add(bytes, Ordering::Relaxed);
                        return;
                    }
                    Err(_) => {
                        self.redone.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            self.execute(p0, p1)
        });
    }

    /// The pieces of stream positions `[p0, p1)`, for a channel.
    fn pieces(&self, p0: usize, p1: usize) -> Vec<Extent> {
        self.stream
            .spans(p0, p1)
            .map(|s| Extent {
                dst: s.dst,
                src: s.src,
                len: s.len,
            })
            .collect()
    }

    fn work_with(&self, run_chunk: &(dyn Fn(usize, usize) + Sync)) {
        if self.inline {
            // Every callback runs below this frame: a submission from this
            // thread at or above it means this call was abandoned.
            self.serial.mark_inline(stack_addr());
        }
        self.take_chunks(run_chunk);
        if self.inline {
            self.serial.mark_inline(0);
        }
    }

    fn take_chunks(&self, run_chunk: &(dyn Fn(usize, usize) + Sync)) {
        let mut took_any = false;
        loop {
            if self.ctl.cancel.is_some_and(|c| c.is_cancelled()) {
                break;
            }
            let Some(k) = self.chunks.claim() else {
                break;
            };
            if !took_any {
                took_any = true;
                self.workers.fetch_add(1, Ordering::Relaxed);
            }
            let (p0, p1) = (self.boundary(k), self.boundary(k + 1));
            let _inside = Inside::enter(self.engine);
            // A fill's patch closure may panic: the worker must survive to
            // report the job finished, or the submitter waits forever. The
            // chunk's fence drains inside, unwinding or not: its stores
            // are ordered before its progress is reported and before this
            // worker reports the job finished.
            let ran = catch_unwind(AssertUnwindSafe(|| run_chunk(p0, p1)));
            if let Err(e) = ran {
                self.fail(&*e);
                self.chunks.fail(k);
                break;
            }
            self.serial.beat();
            let done = self.done.fetch_add(p1 - p0, Ordering::Relaxed) + (p1 - p0);
            if let Some(cb) = self.ctl.progress {
                let total = self.stream.total;
                let mut last = lock(&self.reported);
                if done > *last {
                    *last = done;
                    if let Err(e) = catch_unwind(AssertUnwindSafe(|| cb(Progress { done, total })))
                    {
                        self.fail(&*e);
                    }
                    self.serial.beat();
                }
            }
        }
    }

    fn fail(&self, e: &(dyn Any + Send)) {
        lock(&self.panic).get_or_insert_with(|| panic_message(e));
        self.chunks.stop();
    }

    /// Runs the work over stream positions `[p0, p1)`: one dispatch on the
    /// work per chunk, then a loop over its spans (a chunk of 4 KiB extents
    /// has thousands), with the kernels unfenced and one fence for the
    /// chunk, drained when this returns (or unwinds).
    fn execute(&self, p0: usize, p1: usize) {
        let spans = self.stream.spans(p0, p1);
        let fence = Fence::new();
        // SAFETY (every arm): each span lies in one run of the batch,
        // validated (or borrowed) by the submitter, who waits for the job;
        // the kernel suits this CPU.
        match self.work {
            Work::Copy(k) => {
                let k = Unfenced::new(k, &fence);
                let four = k.gang().filter(|_| self.gangs).map(|gang| {
                    // SAFETY: see above; no destination overlaps another
                    // extent's source or destination (the submitter's
                    // validation, or the borrows).
                    move |g: &_, _: &_| unsafe { gang(g) }
                });
                crate::gangs::walk(
                    spans,
                    // SAFETY: see above.
                    |s| unsafe { k.copy_raw(s.dst, s.src, s.len) },
                    four,
                );
            }
            Work::Clear(k) => {
                let k = Unfenced::new(k, &fence);
                for s in spans {
                    // SAFETY: see above.
                    unsafe { k.clear_raw(s.dst, s.len) }
                }
            }
            // The fill's writer trusts the piece it is given: a span of
            // its one run, the destination it borrows.
            Work::Each(f) => spans.for_each(|s| f(s.from, s.dst, s.len, &fence)),
            // The same prefetch as unchecked copies: a prefetch never
            // faults and does not consume poison (see docs/design.md,
            // "Checked copies"). Runs are extents in checked batches: a
            // span's `run` is its extent.
            #[cfg(target_arch = "x86_64")]
            Work::CopyChecked(k, log) => {
                let k = Unfenced::new(k, &fence);
                let four = k.gang().filter(|_| self.gangs).map(|gang| {
                    // SAFETY: as for unchecked gangs; the routines survive
                    // faults.
                    move |g: &_, s: &_| unsafe { log.copy_gang(k, gang, g, s) }
                });
                crate::gangs::walk(
                    spans,
                    // SAFETY: see above; the routine survives faults.
                    |s| unsafe { log.copy(k, s) },
                    four,
                );
            }
            #[cfg(target_arch = "x86_64")]
            Work::ClearChecked(k, log) => {
                let k = Unfenced::new(k, &fence);
                for s in spans {
                    // SAFETY: see above; the routine survives faults.
                    unsafe { log.clear(k, &s) }
                }
            }
        }
        fence.drain();
    }
}

/// Cuts the stream into chunks (boundaries on multiples of `align`
/// within a run), runs them inline or on the workers, and reports.
pub(super) fn execute<B: Batch>(
    engine: &Engine,
    stream: Stream<'_, B>,
    work: Work<'_>,
    strategy: Strategy,
    align: usize,
    ctl: Control<'_>,
) -> Result<Report, EngineError> {
    let total = stream.total;
    // Small batches are cut finer so every worker gets a share.
    let balanced = (total / (4 * engine.threads())).clamp(MIN_CHUNK, engine.chunk.max(MIN_CHUNK));
    let chunk = balanced.min(engine.chunk).div_ceil(align) * align;
    let job = Job {
        work,
        align,
        stream,
        chunk,
        chunks: Chunks::new(total.div_ceil(chunk)),
        done: AtomicUsize::new(0),
        panic: Mutex::new(None),
        reported: Mutex::new(0),
        engine: engine.id(),
        workers: AtomicUsize::new(0),
        ctl,
        // In a fork's child the channels are the parent's: CPU only.
        offload: match work {
            Work::Copy(_) => engine.offload.as_ref().filter(|o| o.0.usable_here()),
            _ => None,
        },
        offloaded: AtomicUsize::new(0),
        redone: AtomicUsize::new(0),
        serial: &engine.serial,
        inline: total <= engine.inline_max || total.div_ceil(chunk) <= 1,
        gangs: engine.gangs,
    };
    if job.inline {
        job.work();
    } else if let Some(o) = job.offload {
        // Offload threads live for the batch; the CPU workers (unless
        // offload_only) take chunks from the same counter meanwhile.
        // A channel thread that cannot start (RLIMIT_NPROC, memory) is
        // skipped: the others, the CPU workers or, with none of either,
        // this thread take its chunks from the counter.
        std::thread::scope(|s| {
            let job = &job;
            let mut started = 0;
            for c in 0..o.channels() {
                let spawned = crate::threads::quiet(|| {
                    std::thread::Builder::new().spawn_scoped(s, move || job.work_offloaded(o, c))
                });
                started += usize::from(spawned.is_ok());
            }
            if !engine.offload_only {
                dispatch(engine, &|| job.work());
            } else if started == 0 {
                job.work();
            }
        });
    } else {
        dispatch(engine, &|| job.work());
    }
    let bytes_done = job.boundary(job.chunks.done());
    let report = completion(stream.batch, bytes_done, total, strategy, &job);
    match job.panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(message) => Err(EngineError::WorkerPanicked {
            message,
            report: Box::new(report),
        }),
        None => Ok(report),
    }
}

/// The request `auto` decides on for `runs` runs whose stream ends at
/// `total`. One run that `threads` workers share counts as one run per
/// worker: each writes its part and none reads it after, so it is decided
/// as a batch, not as a single call (whose destination its caller reads
/// next: docs/design.md, "The whole use").
pub(super) fn request(op: Op, runs: usize, total: usize, hint: Hint, threads: usize) -> Request {
    Request::batch(
        op,
        total,
        if runs == 1 { threads.max(1) } else { runs },
        hint,
    )
}

/// Which extents the first `bytes_done` bytes of the stream complete.
fn completion<B: Batch>(
    batch: &B,
    bytes_done: usize,
    total: usize,
    strategy: Strategy,
    job: &Job<'_, B>,
) -> Report {
    let mut at = 0usize;
    let mut extents_done = batch.count();
    let mut partial = None;
    // Complete: every extent done, without walking them (a batch of 4 KiB
    // extents has 65536 per 256 MiB).
    let walk = if bytes_done < total { batch.count() } else { 0 };
    for i in 0..walk {
        let len = batch.get(i).len;
        if at + len > bytes_done {
            extents_done = i;
            if bytes_done > at {
                partial = Some((i, bytes_done - at));
            }
            break;
        }
        at += len;
    }
    Report {
        strategy,
        total,
        bytes_done,
        extents_done,
        partial,
        cancelled: bytes_done < total && job.ctl.cancel.is_some_and(|c| c.is_cancelled()),
        chunks: job.chunks.count(),
        workers: job.workers.load(Ordering::Relaxed),
        offloaded: job.offloaded.load(Ordering::Relaxed),
        offload_redone: job.redone.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_shared_by_workers_is_decided_as_a_batch() {
        let r = request(Op::Copy, 1, 1 << 30, Hint::Auto, 4);
        assert_eq!((r.total, r.runs), (1 << 30, 4));
        // One worker: a single call's shape.
        assert_eq!(request(Op::Copy, 1, 1 << 30, Hint::Auto, 1).runs, 1);
        // Several runs are counted as they are.
        let r = request(Op::Clear, 3, 16384, Hint::Stream, 4);
        assert_eq!((r.total, r.runs, r.hint), (16384, 3, Hint::Stream));
        assert_eq!(request(Op::Copy, 0, 0, Hint::Auto, 4).runs, 0);
    }
}
