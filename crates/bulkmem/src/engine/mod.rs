//! The batch engine (seed 002): collect the batch, copy it all with several
//! pinned threads spread across cache domains, then finish.
//!
//! A batch is validated before anything is written, coalesced into runs,
//! and cut into chunks of at most [`EngineBuilder::chunk`] bytes (32 MiB by
//! default, seed 004's latency bound). Chunks are cut from the batch as one
//! stream, so a chunk may hold thousands of 4 KiB extents or one piece of a
//! 1 GiB extent: both shapes balance, because workers take chunks one at a
//! time from a shared counter. Between chunks a worker checks the cancel
//! token and reports progress (the user-space `cond_resched`).
//!
//! Because workers take chunks in increasing order and always finish the one
//! they took, what is done when a batch stops early is always a prefix of
//! the stream: [`Report`] says exactly which extents are complete.
//!
//! Workers are created once, pinned, and reused. One batch runs at a time
//! per engine; other callers wait for it. Submitting a batch allocates only
//! when it is larger than every batch before it (the scratch buffers grow).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::error::Error;
use crate::fill;
use crate::handle;
use crate::kernels::{self, ClearFn, CopyFn};
use crate::placement::{self, Placement};
use crate::plan::{self, Run};
use crate::strategy::{Hint, Op, Strategy};
use crate::topology::Topology;
use crate::{cpu, resolve, Machine, Options, Request};

#[cfg(target_arch = "x86_64")]
mod checked;
#[cfg(target_arch = "x86_64")]
use checked::FaultLog;
#[cfg(target_arch = "x86_64")]
pub use checked::{CheckedReport, Outcome};

/// Default largest chunk: seed 004's bound on uninterrupted work.
pub const DEFAULT_CHUNK: usize = 32 << 20;
/// Chunks never get smaller than this when balancing a small batch.
pub const MIN_CHUNK: usize = 256 << 10;
/// Batches up to this size run on the calling thread: waking a worker costs
/// ~30 us on the VM measured (a 2 MiB batch sent to workers ran at 0.6-0.8x
/// the per-page loop), about what 4 MiB takes to copy.
pub const INLINE_MAX: usize = 4 << 20;
/// Chunk boundaries inside a run fall on this alignment relative to the run,
/// so pieces keep the run's alignment.
const SPLIT_ALIGN: usize = 4096;

/// One extent given by address, for memory that is not a Rust slice (a
/// mapping of another process's pages, a migration target). `src` is ignored
/// by clears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub dst: *mut u8,
    pub src: *const u8,
    pub len: usize,
}

// SAFETY: an Extent is only a description; whoever passes it to the unsafe
// `*_extents` methods vouches for the memory it names.
unsafe impl Send for Extent {}
// SAFETY: as above; the engine only reads the fields.
unsafe impl Sync for Extent {}

/// Stops a running batch after the chunks in flight. Cheap to clone; all
/// clones share one flag.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Bytes done so far, as reported after each chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
}

/// Optional hooks for one batch.
#[derive(Clone, Copy, Default)]
pub struct Control<'a> {
    pub cancel: Option<&'a CancelToken>,
    /// Called by a worker after each chunk, concurrently from several
    /// workers; `done` only grows. A panic here stops the batch and is
    /// returned as [`Error::WorkerPanicked`].
    pub progress: Option<&'a (dyn Fn(Progress) + Sync)>,
}

/// What a batch did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The primitive every chunk used.
    pub strategy: Strategy,
    /// Bytes in the batch.
    pub total: usize,
    /// Bytes written: always the batch's first `bytes_done` bytes, in
    /// extent order.
    pub bytes_done: usize,
    /// Extents `0..extents_done` are complete; none after them is.
    pub extents_done: usize,
    /// The extent that was cut short, and how many of its leading bytes
    /// were written (the rest are untouched).
    pub partial: Option<(usize, usize)>,
    pub cancelled: bool,
    /// Chunks the batch was cut into, and threads that executed some.
    pub chunks: usize,
    pub workers: usize,
}

impl Report {
    pub fn is_complete(&self) -> bool {
        self.bytes_done == self.total
    }
}

/// Builds an [`Engine`].
#[derive(Clone, Debug)]
pub struct EngineBuilder {
    threads: Option<usize>,
    placement: Placement,
    cpus: Vec<usize>,
    chunk: usize,
    inline_max: usize,
    opts: Options,
    pin: bool,
    topology: Option<Topology>,
}

impl Default for EngineBuilder {
    fn default() -> Self {
        EngineBuilder {
            threads: None,
            placement: Placement::Spread,
            cpus: Vec::new(),
            chunk: DEFAULT_CHUNK,
            inline_max: INLINE_MAX,
            opts: Options::default(),
            pin: true,
            topology: None,
        }
    }
}

impl EngineBuilder {
    /// Worker threads. Default: one per physical core, at most two per LLC
    /// domain ([`placement::default_threads`]).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }

    pub fn placement(mut self, p: Placement) -> Self {
        self.placement = p;
        self
    }

    /// Restrict workers to these CPUs (e.g. a NUMA node's); default: all
    /// online CPUs.
    pub fn cpus(mut self, cpus: &[usize]) -> Self {
        self.cpus = cpus.to_vec();
        self
    }

    /// Largest chunk in bytes (rounded up to 4 KiB).
    pub fn chunk(mut self, bytes: usize) -> Self {
        self.chunk = bytes;
        self
    }

    /// Batches of at most this many bytes run on the calling thread
    /// (default [`INLINE_MAX`]); 0 sends every batch to the workers.
    pub fn inline_max(mut self, bytes: usize) -> Self {
        self.inline_max = bytes;
        self
    }

    pub fn strategy(mut self, s: Strategy) -> Self {
        self.opts.strategy = s;
        self
    }

    pub fn hint(mut self, h: Hint) -> Self {
        self.opts.hint = h;
        self
    }

    /// Pin workers to their CPUs (default true).
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Place workers on this topology instead of the running machine's
    /// (the CPUs must still exist here if pinning).
    pub fn topology(mut self, t: Topology) -> Self {
        self.topology = Some(t);
        self
    }

    /// The CPUs the workers would get, without starting them.
    /// On the running machine (no [`EngineBuilder::topology`]) only CPUs
    /// this thread may run on count (`sched_getaffinity`: taskset, numactl,
    /// cpusets), unless CPUs were named ([`EngineBuilder::cpus`]) and none
    /// of them is: then the named ones are used as given.
    pub fn planned_cpus(&self) -> Vec<usize> {
        let (t, cpus) = match &self.topology {
            Some(t) => (t, self.cpus.clone()),
            None => {
                let t = &cpu::info().topology;
                let from = if self.cpus.is_empty() {
                    &t.online_cpus
                } else {
                    &self.cpus
                };
                let within: Vec<usize> = match allowed_cpus() {
                    Some(allowed) => from
                        .iter()
                        .copied()
                        .filter(|c| allowed.contains(c))
                        .collect(),
                    None => from.clone(),
                };
                // CPUs asked for by name that this thread may not use (it
                // pinned itself elsewhere, say, to first-touch memory on a
                // node) are the caller's choice: used as given.
                let cpus = if within.is_empty() && !self.cpus.is_empty() {
                    self.cpus.clone()
                } else {
                    within
                };
                if cpus.is_empty() {
                    return Vec::new();
                }
                (t, cpus)
            }
        };
        let n = self
            .threads
            .unwrap_or_else(|| placement::default_threads(t, &cpus));
        placement::place(t, &cpus, n, self.placement)
    }

    pub fn build(self) -> Result<Engine, Error> {
        let bad = |what: String| Err(Error::Config(what));
        if self.threads == Some(0) {
            return bad("an engine needs at least one thread".into());
        }
        if self.chunk == 0 {
            return bad("the chunk size must be greater than zero".into());
        }
        let Some(chunk) = self
            .chunk
            .checked_next_multiple_of(SPLIT_ALIGN)
            .filter(|&c| c <= isize::MAX as usize)
        else {
            return bad(format!("the chunk size {} is too large", self.chunk));
        };
        if self.opts.strategy != Strategy::Auto {
            if let Some(needs) = self.opts.strategy.missing_feature(&cpu::info().features) {
                return Err(Error::Unavailable {
                    strategy: self.opts.strategy,
                    needs,
                });
            }
        }
        let cpus = self.planned_cpus();
        if cpus.is_empty() {
            let allowed = format!("{:?}", allowed_cpus().unwrap_or_default());
            return bad(if self.cpus.is_empty() {
                format!("this process may run on no online CPU (affinity: {allowed})")
            } else {
                format!(
                    "none of the CPUs {:?} is online and allowed to this process (affinity: {allowed})",
                    self.cpus
                )
            });
        }
        let pool = Pool::start(&cpus, self.pin)?;
        Ok(Engine {
            pool: Mutex::new(pool),
            cpus,
            pin: self.pin,
            chunk,
            inline_max: self.inline_max,
            opts: self.opts,
            placement: self.placement,
            scratch: Mutex::new(Scratch::default()),
        })
    }
}

/// The CPUs this thread may run on (`sched_getaffinity`: taskset, numactl,
/// container cpusets), ascending; `None` if the kernel will not say.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data (zeroed = empty); sched_getaffinity
    // writes at most its size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some(
            (0..8 * std::mem::size_of::<libc::cpu_set_t>())
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect(),
        )
    }
}

/// The worker threads of one process. A child made by `fork()` has the
/// engine but none of its threads: [`Engine::dispatch`] starts a new pool
/// there (and never waits for or joins the parent's).
struct Pool {
    pid: u32,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    fn start(cpus: &[usize], pin: bool) -> Result<Pool, Error> {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot {
                generation: 0,
                job: 0,
                active: 0,
                shutdown: false,
            }),
            wake: Condvar::new(),
            idle: Condvar::new(),
        });
        let mut pool = Pool {
            pid: std::process::id(),
            shared: Arc::clone(&shared),
            workers: Vec::new(),
        };
        let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
        for (i, &cpu) in cpus.iter().enumerate() {
            let shared = Arc::clone(&shared);
            let tx = tx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("bulkmem-{i}@cpu{cpu}"))
                .spawn(move || {
                    let pinned = if pin {
                        crate::placement::pin_to(cpu)
                    } else {
                        Ok(())
                    };
                    let ok = pinned.is_ok();
                    let _ = tx
                        .send(pinned.map_err(|e| format!("cannot pin a worker to CPU {cpu}: {e}")));
                    if ok {
                        worker_loop(&shared);
                    }
                })
                .map_err(|e| Error::Config(format!("cannot start a worker thread: {e}")))?;
            pool.workers.push(handle);
        }
        drop(tx);
        for _ in 0..cpus.len() {
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(Error::Config(e)),
                Err(_) => return Err(Error::Config("a worker thread died while starting".into())),
            }
        }
        Ok(pool)
    }

    fn stop(&mut self) {
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

/// A pool of pinned workers that executes batches. See the module docs.
pub struct Engine {
    /// Locked by `dispatch` (inside a batch's `scratch` lock) and by drop.
    pool: Mutex<Pool>,
    cpus: Vec<usize>,
    pin: bool,
    chunk: usize,
    inline_max: usize,
    opts: Options,
    placement: Placement,
    scratch: Mutex<Scratch>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("cpus", &self.cpus)
            .field("placement", &self.placement)
            .field("chunk", &self.chunk)
            .field("opts", &self.opts)
            .finish()
    }
}

/// Buffers reused from batch to batch (so steady-state submission does not
/// allocate), guarded by the lock that also serialises batches.
#[derive(Default)]
struct Scratch {
    runs: Vec<Run>,
    /// Stream offset at which each run ends.
    ends: Vec<usize>,
    /// (start, end, extent index, is_dst) address intervals for validation.
    spans: Vec<(usize, usize, usize, bool)>,
}

// SAFETY: the runs' pointers are only dereferenced during the batch that
// stored them, by the batch's own workers, while the submitter holds this
// scratch's lock; between batches they are stale data, never read.
unsafe impl Send for Scratch {}

struct Shared {
    slot: Mutex<Slot>,
    wake: Condvar,
    idle: Condvar,
}

struct Slot {
    generation: u64,
    /// Address of the current `Job`; valid while `active > 0`.
    job: usize,
    /// Workers that have not yet finished the current generation.
    active: usize,
    shutdown: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding these locks cannot leave them inconsistent (all
    // updates are single assignments), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a worker runs over each piece of a chunk.
#[derive(Clone, Copy)]
enum Kernel<'a> {
    Copy(CopyFn),
    Clear(ClearFn),
    /// (offset of the piece in its run, piece address, piece length); used
    /// by fills, whose pieces start on element boundaries.
    Each(&'a (dyn Fn(usize, *mut u8, usize) + Sync)),
    /// Checked batches: one run per extent, faults recorded in the log.
    #[cfg(target_arch = "x86_64")]
    CopyChecked(crate::fault::McCopy, &'a FaultLog),
    #[cfg(target_arch = "x86_64")]
    ClearChecked(crate::fault::McClear, &'a FaultLog),
}

struct Job<'a> {
    kernel: Kernel<'a>,
    /// Chunk boundaries fall on multiples of this from a run's start.
    align: usize,
    runs: &'a [Run],
    ends: &'a [usize],
    total: usize,
    chunk: usize,
    nchunks: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    /// Set when a callback (progress, or a fill's patch) panicked: everyone
    /// stops.
    stop: AtomicBool,
    panic: Mutex<Option<String>>,
    /// The first chunk a panic cut short (`usize::MAX`: none): chunks before
    /// it are complete, so the report's prefix ends there.
    failed: AtomicUsize,
    /// The largest `done` delivered to the progress callback; callbacks run
    /// one at a time under this lock, so `done` only grows.
    reported: Mutex<usize>,
    /// Which engine runs the job, so that a callback submitting to that
    /// same engine is refused instead of deadlocking.
    engine: usize,
    /// Distinct threads that executed at least one chunk.
    workers: AtomicUsize,
    ctl: Control<'a>,
}

impl Job<'_> {
    /// Where chunk boundary `k` falls: (run index, offset in run), and its
    /// stream position. Positions only grow with `k` because chunks are at
    /// least `align` long.
    fn boundary(&self, k: usize) -> ((usize, usize), usize) {
        let p = k.saturating_mul(self.chunk);
        if p >= self.total {
            return ((self.runs.len(), 0), self.total);
        }
        let i = self.ends.partition_point(|&e| e <= p);
        let len = self.runs[i].len;
        let start = self.ends[i] - len;
        let r = (p - start).div_ceil(self.align) * self.align;
        if r >= len {
            ((i + 1, 0), self.ends[i])
        } else {
            ((i, r), start + r)
        }
    }

    /// Takes chunks until there are none left, the batch is cancelled or a
    /// callback panicked.
    fn work(&self) {
        let mut took_any = false;
        loop {
            if self.stop.load(Ordering::Relaxed)
                || self.ctl.cancel.is_some_and(|c| c.is_cancelled())
            {
                break;
            }
            let k = self.next.fetch_add(1, Ordering::Relaxed);
            if k >= self.nchunks {
                break;
            }
            if !took_any {
                took_any = true;
                self.workers.fetch_add(1, Ordering::Relaxed);
            }
            let ((r0, o0), p0) = self.boundary(k);
            let ((r1, o1), p1) = self.boundary(k + 1);
            let _inside = Inside::enter(self.engine);
            // A fill's patch closure may panic: the worker must survive to
            // report the job finished, or the submitter waits forever.
            let ran = catch_unwind(AssertUnwindSafe(|| self.execute(r0, o0, r1, o1)));
            // The chunk's non-temporal stores are ordered before its progress
            // is reported and before this worker reports the job finished.
            kernels::drain();
            if let Err(e) = ran {
                self.fail(&*e);
                self.failed.fetch_min(k, Ordering::Relaxed);
                break;
            }
            let done = self.done.fetch_add(p1 - p0, Ordering::Relaxed) + (p1 - p0);
            if let Some(cb) = self.ctl.progress {
                let total = self.total;
                let mut last = lock(&self.reported);
                if done > *last {
                    *last = done;
                    if let Err(e) = catch_unwind(AssertUnwindSafe(|| cb(Progress { done, total })))
                    {
                        self.fail(&*e);
                    }
                }
            }
        }
    }

    fn fail(&self, e: &(dyn Any + Send)) {
        lock(&self.panic).get_or_insert_with(|| panic_message(e));
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Runs the kernel over the stream from (r0, o0) up to (r1, o1).
    fn execute(&self, r0: usize, o0: usize, r1: usize, o1: usize) {
        let last = r1.min(self.runs.len().saturating_sub(1));
        for i in r0..=last {
            let run = self.runs[i];
            let from = if i == r0 { o0 } else { 0 };
            let to = if i == r1 { o1 } else { run.len };
            if to <= from {
                continue;
            }
            // The kernel is unfenced: `work` drains after the chunk.
            // SAFETY: [from, to) lies in run i, validated (or borrowed) by the
            // submitter, who waits for the job; the kernel suits this CPU.
            unsafe {
                match self.kernel {
                    Kernel::Copy(k) => {
                        if let Some(next) = self.runs.get(i + 1) {
                            kernels::prefetch_ahead(next.src, next.len);
                        }
                        k(run.dst.add(from), run.src.add(from), to - from)
                    }
                    Kernel::Clear(k) => k(run.dst.add(from), to - from),
                    Kernel::Each(f) => f(from, run.dst.add(from), to - from),
                    // No prefetch of the next run here: prefetching a
                    // poisoned line can itself raise a machine check.
                    #[cfg(target_arch = "x86_64")]
                    Kernel::CopyChecked(k, log) => log.copy(k, i, run, from, to),
                    #[cfg(target_arch = "x86_64")]
                    Kernel::ClearChecked(k, log) => log.clear(k, i, run, from, to),
                }
            }
        }
    }
}

fn panic_message(e: &(dyn Any + Send)) -> String {
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
struct Inside(usize);

impl Inside {
    fn enter(engine: usize) -> Inside {
        Inside(INSIDE.with(|c| c.replace(engine)))
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
        // SAFETY: the submitter keeps the Job alive until every worker has
        // decremented `active` below, published it with this generation, and
        // this worker does not touch it after that.
        let job: &Job<'_> = unsafe { &*(job as *const Job<'_>) };
        job.work();
        let mut slot = lock(&shared.slot);
        slot.active -= 1;
        if slot.active == 0 {
            shared.idle.notify_all();
        }
    }
}

/// A batch as the caller gave it: extent `i` as a run (src null for clears).
trait Batch {
    fn count(&self) -> usize;
    fn get(&self, i: usize) -> Run;
}

/// A fill's destination seen as a batch of one extent, for the report.
struct FillShape(usize);

impl Batch for FillShape {
    fn count(&self) -> usize {
        1
    }
    fn get(&self, _: usize) -> Run {
        Run {
            dst: core::ptr::null_mut(),
            src: core::ptr::null(),
            len: self.0,
        }
    }
}

struct CopySlices<'s, 'a>(&'s [(&'a mut [u8], &'a [u8])]);
struct ClearSlices<'s, 'a>(&'s [&'a mut [u8]]);
struct Raw<'s>(&'s [Extent], Op);

// Pointers for writing are rebuilt from exposed addresses: a merged run
// spans several borrows (see lib.rs).
use crate::{exposed, exposed_mut};

impl Batch for CopySlices<'_, '_> {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn get(&self, i: usize) -> Run {
        let (d, s) = &self.0[i];
        Run {
            dst: exposed_mut(d.as_ptr()),
            src: exposed(s.as_ptr()),
            len: d.len(),
        }
    }
}

impl Batch for ClearSlices<'_, '_> {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn get(&self, i: usize) -> Run {
        Run {
            dst: exposed_mut(self.0[i].as_ptr()),
            src: core::ptr::null(),
            len: self.0[i].len(),
        }
    }
}

impl Batch for Raw<'_> {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn get(&self, i: usize) -> Run {
        let e = self.0[i];
        Run {
            dst: e.dst,
            src: if self.1 == Op::Copy {
                e.src
            } else {
                core::ptr::null()
            },
            len: e.len,
        }
    }
}

impl Engine {
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// An engine with every default (see [`EngineBuilder`]).
    pub fn new() -> Result<Engine, Error> {
        EngineBuilder::default().build()
    }

    /// The CPU of each worker, in worker order.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    pub fn threads(&self) -> usize {
        self.cpus.len()
    }

    pub fn placement(&self) -> Placement {
        self.placement
    }

    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Copies every `(dst, src)` pair. Lengths are checked first (an error
    /// names the first bad extent and nothing is written); the borrows
    /// already guarantee that no destination overlaps anything.
    pub fn copy_batch(&self, ops: &mut [(&mut [u8], &[u8])]) -> Result<Report, Error> {
        self.copy_batch_with(ops, Control::default())
    }

    pub fn copy_batch_with(
        &self,
        ops: &mut [(&mut [u8], &[u8])],
        ctl: Control<'_>,
    ) -> Result<Report, Error> {
        crate::check_lengths(ops)?;
        self.run(Op::Copy, &CopySlices(ops), false, ctl)
    }

    pub fn clear_batch(&self, ops: &mut [&mut [u8]]) -> Result<Report, Error> {
        self.clear_batch_with(ops, Control::default())
    }

    pub fn clear_batch_with(
        &self,
        ops: &mut [&mut [u8]],
        ctl: Control<'_>,
    ) -> Result<Report, Error> {
        self.run(Op::Clear, &ClearSlices(ops), false, ctl)
    }

    /// Copies extents given by address. Before anything is written the
    /// batch is checked: no destination may overlap another destination or
    /// any source ([`Error::Overlap`] names the first offending extent), and
    /// no non-empty extent may have a null pointer.
    ///
    /// # Safety
    /// Every `src` must be readable and every `dst` writable for `len` bytes
    /// for the duration of the call, and nothing else may access the
    /// destinations meanwhile.
    pub unsafe fn copy_extents(&self, ops: &[Extent], ctl: Control<'_>) -> Result<Report, Error> {
        self.run(Op::Copy, &Raw(ops, Op::Copy), true, ctl)
    }

    /// Zeroes extents given by address (`src` ignored); checked as
    /// [`Engine::copy_extents`] checks destinations.
    ///
    /// # Safety
    /// Every `dst` must be writable for `len` bytes for the duration of the
    /// call, and nothing else may access them meanwhile.
    pub unsafe fn clear_extents(&self, ops: &[Extent], ctl: Control<'_>) -> Result<Report, Error> {
        self.run(Op::Clear, &Raw(ops, Op::Clear), true, ctl)
    }

    fn run(
        &self,
        op: Op,
        batch: &dyn Batch,
        check_overlap: bool,
        ctl: Control<'_>,
    ) -> Result<Report, Error> {
        let mut guard = self.serial()?;
        let scratch = &mut *guard;
        if check_overlap {
            validate(op, batch, &mut scratch.spans)?;
        }
        scratch.runs.clear();
        scratch
            .runs
            .extend(plan::coalesce((0..batch.count()).map(|i| batch.get(i))));
        let req = stream(op, &scratch.runs, &mut scratch.ends, self.opts.hint);
        let strategy = resolve(self.opts, &req)?;
        let kernel = match op {
            Op::Copy => Kernel::Copy(handle::copy_fn_unfenced(strategy)),
            Op::Clear => Kernel::Clear(handle::clear_fn_unfenced(strategy)),
        };
        self.execute(
            &scratch.runs,
            &scratch.ends,
            kernel,
            strategy,
            SPLIT_ALIGN,
            batch,
            ctl,
        )
    }

    /// Cuts the runs into chunks (boundaries on multiples of `align` within
    /// a run), runs them inline or on the workers, and reports.
    #[allow(clippy::too_many_arguments)]
    fn execute(
        &self,
        runs: &[Run],
        ends: &[usize],
        kernel: Kernel<'_>,
        strategy: Strategy,
        align: usize,
        batch: &dyn Batch,
        ctl: Control<'_>,
    ) -> Result<Report, Error> {
        let total = ends.last().copied().unwrap_or(0);
        // Small batches are cut finer so every worker gets a share.
        let balanced = (total / (4 * self.threads())).clamp(MIN_CHUNK, self.chunk.max(MIN_CHUNK));
        let chunk = balanced.min(self.chunk).div_ceil(align) * align;
        let job = Job {
            kernel,
            align,
            runs,
            ends,
            total,
            chunk,
            nchunks: total.div_ceil(chunk),
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            panic: Mutex::new(None),
            failed: AtomicUsize::new(usize::MAX),
            reported: Mutex::new(0),
            engine: self.id(),
            workers: AtomicUsize::new(0),
            ctl,
        };
        if total <= self.inline_max || job.nchunks <= 1 {
            job.work();
        } else {
            self.dispatch(&job);
        }
        let taken = job
            .next
            .load(Ordering::Relaxed)
            .min(job.nchunks)
            .min(job.failed.load(Ordering::Relaxed));
        let (_, bytes_done) = job.boundary(taken);
        let report = completion(batch, bytes_done, total, strategy, &job);
        match job.panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(message) => Err(Error::WorkerPanicked {
                message,
                report: Box::new(report),
            }),
            None => Ok(report),
        }
    }

    /// Repeats `template` across `dst` on the workers (see
    /// [`crate::fill`]): chunks are whole windows of elements, so each
    /// element is written by one worker. A cancelled fill reports how many
    /// bytes (a whole number of elements) were written, from the start.
    pub fn fill(&self, dst: &mut [u8], template: &[u8]) -> Result<Report, Error> {
        self.fill_with_control(dst, template, Control::default())
    }

    pub fn fill_with_control(
        &self,
        dst: &mut [u8],
        template: &[u8],
        ctl: Control<'_>,
    ) -> Result<Report, Error> {
        fill::check(dst.len(), template.len())?;
        let mode = fill::choose(Machine::this(), dst.len(), self.opts.hint);
        let l = template.len();
        let each = |off: usize, p: *mut u8, n: usize| {
            // SAFETY: the piece lies in `dst` (exclusively borrowed for the
            // whole batch) and starts and ends on element boundaries.
            unsafe { fill::fill_range(p, n, template, off / l, mode, &mut fill::NoPatch) }
        };
        self.run_fill(dst, l, mode, &each, ctl)
    }

    /// As [`Engine::fill`], with `patch(index, element)` applied to every
    /// element before it is stored (from several workers at once, each index
    /// exactly once).
    pub fn fill_with<P: Fn(usize, &mut [u8]) + Sync>(
        &self,
        dst: &mut [u8],
        template: &[u8],
        patch: &P,
        ctl: Control<'_>,
    ) -> Result<Report, Error> {
        fill::check(dst.len(), template.len())?;
        let mode = fill::choose(Machine::this(), dst.len(), self.opts.hint);
        let l = template.len();
        let each = |off: usize, p: *mut u8, n: usize| {
            let mut f = |i: usize, e: &mut [u8]| patch(i, e);
            // SAFETY: as in fill_with_control.
            unsafe { fill::fill_range(p, n, template, off / l, mode, &mut fill::Patcher(&mut f)) }
        };
        self.run_fill(dst, l, mode, &each, ctl)
    }

    fn run_fill(
        &self,
        dst: &mut [u8],
        element: usize,
        mode: fill::Mode,
        each: &(dyn Fn(usize, *mut u8, usize) + Sync),
        ctl: Control<'_>,
    ) -> Result<Report, Error> {
        let _serial = self.serial()?;
        let run = [Run {
            dst: dst.as_mut_ptr(),
            src: core::ptr::null(),
            len: dst.len(),
        }];
        let ends = [dst.len()];
        let runs: &[Run] = if dst.is_empty() { &[] } else { &run };
        let ends: &[usize] = if dst.is_empty() { &[] } else { &ends };
        // Whole staging windows per chunk: line-aligned boundaries too.
        let align = element * fill::window_elements(element);
        self.execute(
            runs,
            ends,
            Kernel::Each(each),
            mode.strategy(),
            align,
            &FillShape(dst.len()),
            ctl,
        )
    }

    /// This engine's identity for [`Inside`]: its address is stable while
    /// a batch runs (it is borrowed).
    fn id(&self) -> usize {
        self as *const Engine as usize
    }

    /// Takes the batch lock, unless this thread is running one of this
    /// engine's callbacks or kernels: that batch holds the lock and waits
    /// for this thread, so waiting here would never end.
    fn serial(&self) -> Result<MutexGuard<'_, Scratch>, Error> {
        if INSIDE.with(|c| c.get()) == self.id() {
            return Err(Error::Reentrant);
        }
        Ok(lock(&self.scratch))
    }

    /// Hands `job` to every worker and waits until all have finished it.
    /// In a child made by `fork()` the workers are started anew first; if
    /// they cannot be, the caller runs the job alone.
    fn dispatch(&self, job: &Job<'_>) {
        let mut pool = lock(&self.pool);
        if pool.pid != std::process::id() {
            match Pool::start(&self.cpus, self.pin) {
                Ok(fresh) => {
                    let mut parents = std::mem::replace(&mut *pool, fresh);
                    parents.stop();
                }
                Err(_) => {
                    drop(pool);
                    job.work();
                    return;
                }
            }
        }
        let shared = &pool.shared;
        let mut slot = lock(&shared.slot);
        slot.job = job as *const Job<'_> as usize;
        slot.generation += 1;
        slot.active = pool.workers.len();
        shared.wake.notify_all();
        while slot.active > 0 {
            slot = shared.idle.wait(slot).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.pool
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .stop();
    }
}

/// Fills `ends` with the stream offset at which each run ends; returns the
/// request `auto` decides on.
fn stream(op: Op, runs: &[Run], ends: &mut Vec<usize>, hint: Hint) -> Request {
    ends.clear();
    let mut total = 0usize;
    for r in runs {
        total += r.len;
        ends.push(total);
    }
    Request {
        op,
        total,
        runs: runs.len(),
        hint,
    }
}

/// Which extents the first `bytes_done` bytes of the stream complete.
fn completion(
    batch: &dyn Batch,
    bytes_done: usize,
    total: usize,
    strategy: Strategy,
    job: &Job<'_>,
) -> Report {
    let mut at = 0usize;
    let mut extents_done = batch.count();
    let mut partial = None;
    for i in 0..batch.count() {
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
        chunks: job.nchunks,
        workers: job.workers.load(Ordering::Relaxed),
    }
}

/// [`validate`] for a slice of extents (used by `uffd::Mover::move_batch`).
pub(crate) fn validate_extents(op: Op, extents: &[Extent]) -> Result<(), Error> {
    validate(op, &Raw(extents, op), &mut Vec::new())
}

/// Checks a raw batch: non-null pointers, and no destination overlapping
/// another destination or any source. The error names the first extent that
/// conflicts with itself or an earlier one (as if the extents were checked
/// one by one in order). `spans` is reusable scratch.
fn validate(
    op: Op,
    batch: &dyn Batch,
    spans: &mut Vec<(usize, usize, usize, bool)>,
) -> Result<(), Error> {
    for i in 0..batch.count() {
        let r = batch.get(i);
        if r.len == 0 {
            continue;
        }
        let ok = |p: usize| p != 0 && p.checked_add(r.len).is_some();
        if !ok(r.dst as usize) {
            return Err(Error::BadExtent {
                index: i,
                reason: "null or wrapping destination",
            });
        }
        if op == Op::Copy && !ok(r.src as usize) {
            return Err(Error::BadExtent {
                index: i,
                reason: "null or wrapping source",
            });
        }
    }
    if !conflicts(op, batch, batch.count(), spans) {
        return Ok(());
    }
    // Only on the error path: the shortest conflicting prefix ends at the
    // first bad extent (conflict in a prefix is monotone in its length).
    let (mut lo, mut hi) = (0, batch.count());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if conflicts(op, batch, mid, spans) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let index = hi - 1;
    let with = (0..=index)
        .find(|&j| conflicts_pair(op, batch.get(index), batch.get(j), index == j))
        .unwrap_or(index);
    Err(Error::Overlap { index, with })
}

fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

fn conflicts_pair(op: Op, a: Run, b: Run, same: bool) -> bool {
    if a.len == 0 || b.len == 0 {
        return false;
    }
    let span = |p: *const u8, len: usize| (p as usize, p as usize + len);
    let (ad, bd) = (span(a.dst, a.len), span(b.dst, b.len));
    if op == Op::Clear {
        return !same && overlaps(ad, bd);
    }
    let (as_, bs) = (span(a.src, a.len), span(b.src, b.len));
    (!same && overlaps(ad, bd)) || overlaps(ad, bs) || overlaps(as_, bd)
}

/// Whether extents `0..n` hold any conflict. Sweeps intervals in address
/// order remembering the furthest-reaching destination and source so far:
/// an interval conflicts with an earlier-starting one iff it starts before
/// the furthest reach (one of the two being a destination).
fn conflicts(
    op: Op,
    batch: &dyn Batch,
    n: usize,
    spans: &mut Vec<(usize, usize, usize, bool)>,
) -> bool {
    spans.clear();
    for i in 0..n {
        let r = batch.get(i);
        if r.len == 0 {
            continue;
        }
        spans.push((r.dst as usize, r.dst as usize + r.len, i, true));
        if op == Op::Copy {
            spans.push((r.src as usize, r.src as usize + r.len, i, false));
        }
    }
    spans.sort_unstable();
    let mut reach_dst = 0usize;
    let mut reach_src = 0usize;
    for &(start, end, _, is_dst) in spans.iter() {
        if start < reach_dst || (is_dst && start < reach_src) {
            return true;
        }
        if is_dst {
            reach_dst = reach_dst.max(end);
        } else {
            reach_src = reach_src.max(end);
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(dst: usize, src: usize, len: usize) -> Extent {
        Extent {
            dst: dst as *mut u8,
            src: src as *const u8,
            len,
        }
    }

    fn check(op: Op, v: &[Extent]) -> Result<(), Error> {
        validate(op, &Raw(v, op), &mut Vec::new())
    }

    #[test]
    fn validation_finds_overlaps_and_names_the_first_extent() {
        // Disjoint, with a source read twice: fine.
        assert_eq!(
            check(
                Op::Copy,
                &[ext(0x1000, 0x9000, 0x100), ext(0x2000, 0x9000, 0x100)]
            ),
            Ok(())
        );
        // dst 1 overlaps dst 2.
        let e = check(
            Op::Copy,
            &[
                ext(0x1000, 0x9000, 0x100),
                ext(0x2000, 0xa000, 0x100),
                ext(0x20ff, 0xb000, 0x10),
            ],
        );
        assert_eq!(e, Err(Error::Overlap { index: 2, with: 1 }));
        // dst 2 overlaps src 0.
        let e = check(
            Op::Copy,
            &[
                ext(0x1000, 0x9000, 0x100),
                ext(0x2000, 0xa000, 0x100),
                ext(0x9080, 0xb000, 0x100),
            ],
        );
        assert_eq!(e, Err(Error::Overlap { index: 2, with: 0 }));
        // An extent copying onto itself overlaps itself.
        assert!(check(Op::Copy, &[ext(0x1000, 0x1800, 0x1000)]).is_err());
        // Clears ignore src; touching (not overlapping) is fine.
        assert_eq!(
            check(
                Op::Clear,
                &[ext(0x1000, 0x1000, 0x100), ext(0x1100, 0, 0x100)]
            ),
            Ok(())
        );
        // A long early destination swallowing a later one is still found.
        let e = check(
            Op::Clear,
            &[
                ext(0x5000, 0, 0x10),
                ext(0x1000, 0, 0x3000),
                ext(0x2000, 0, 0x10),
                ext(0x7000, 0, 0x10),
            ],
        );
        assert_eq!(e, Err(Error::Overlap { index: 2, with: 1 }));
        // Empty extents never conflict, even null ones.
        assert_eq!(
            check(Op::Copy, &[ext(0, 0, 0), ext(0x1000, 0x2000, 0x10)]),
            Ok(())
        );
        assert_eq!(
            check(Op::Copy, &[ext(0x1000, 0, 0x10)]),
            Err(Error::BadExtent {
                index: 0,
                reason: "null or wrapping source"
            })
        );
    }

    #[test]
    fn self_overlap_is_reported_against_itself() {
        let e = check(Op::Copy, &[ext(0x1000, 0x1800, 0x1000)]);
        assert_eq!(e, Err(Error::Overlap { index: 0, with: 0 }));
    }

    /// The sweep against every pair: it must report the first extent that
    /// conflicts with itself or an earlier one.
    #[test]
    fn validation_agrees_with_brute_force() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n) as usize
        };
        for _ in 0..3000 {
            let n = 1 + rnd(8);
            let op = if rnd(2) == 0 { Op::Copy } else { Op::Clear };
            let v: Vec<Extent> = (0..n)
                .map(|_| ext(0x1000 + 16 * rnd(64), 0x1000 + 16 * rnd(64), 16 * rnd(6)))
                .collect();
            let spans = |e: &Extent| {
                let mut s = vec![(e.dst as usize, e.dst as usize + e.len, true)];
                if op == Op::Copy {
                    s.push((e.src as usize, e.src as usize + e.len, false));
                }
                s
            };
            let mut lowest: Option<usize> = None;
            for i in 0..n {
                for j in 0..n {
                    let conflict = spans(&v[i]).iter().any(|a| {
                        spans(&v[j]).iter().enumerate().any(|(k, b)| {
                            let same = i == j && ((a.2 && k == 0) || (!a.2 && k == 1));
                            !same
                                && v[i].len > 0
                                && v[j].len > 0
                                && (a.2 || b.2)
                                && a.0 < b.1
                                && b.0 < a.1
                        })
                    });
                    if conflict {
                        lowest = Some(lowest.map_or(i.max(j), |l| l.min(i.max(j))));
                    }
                }
            }
            match (check(op, &v), lowest) {
                (Ok(()), None) => {}
                (Err(Error::Overlap { index, .. }), Some(l)) => assert_eq!(index, l, "{op} {v:?}"),
                (got, want) => panic!("{op} {v:?}: got {got:?}, brute force says {want:?}"),
            }
        }
    }
}
