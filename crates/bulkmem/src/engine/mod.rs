//! The batch engine: the [`Engine`] (whose documentation is the
//! user's account of it) and, in the one `impl Engine` here, every method
//! it has. The modules beside it are the engine's parts, reached as
//! functions of an `&Engine`: `builder` (configuration, CPUs), `pool`
//! (the worker threads), `job` (one batch's chunk stream and the loop that
//! works it), `batch` (the shapes a batch arrives in), `fill_job` (fills
//! on the workers), `submit` with `ticket` (batches run in the background,
//! [`Ticket`]) and `checked` (the batches that survive a bad page: the
//! engine's side of `crate::fault`, whose `log` its workers record faults
//! in). The types a batch reports with live in `crate::report`,
//! `crate::control` and `crate::plan`, so that the rest of the crate can
//! name them without depending on the engine.

mod batch;
mod builder;
#[cfg(target_arch = "x86_64")]
mod checked;
mod fill_job;
mod job;
mod pool;
mod serial;
mod stream;
mod submit;
mod ticket;

use std::sync::Mutex;

use crate::auto::Request;
use crate::error::{BatchError, EngineError, Error};
use crate::extent::validate;
#[cfg(target_arch = "x86_64")]
use crate::fault::CheckedReport;
use crate::handle::{ClearKernel, CopyKernel};
use crate::machine::placement::Placement;
use crate::offload::Offload;
use crate::strategy::Options;
use crate::strategy::{Hint, Op, Strategy};
use batch::{Batch, ClearSlices, CopySlices, Raw};
use job::{request, Work};
use pool::Pool;
use serial::{stack_addr, Serial, SerialGuard};
use stream::Marks;
use submit::Submitter;

pub use builder::EngineBuilder;
pub use ticket::Ticket;
// Defined outside the engine so that errors, faults and `uffd` can name them
// without depending on it; re-exported here, where callers look for them.
pub use crate::control::{CancelToken, Control, Progress};
pub use crate::plan::Extent;
pub use crate::report::Report;

/// Default largest chunk: the kernel's extent-clearing patches' bound on uninterrupted work.
pub(crate) const DEFAULT_CHUNK: usize = 32 << 20;
/// Chunks never get smaller than this when balancing a small batch.
pub(crate) const MIN_CHUNK: usize = 256 << 10;
/// Batches up to this size run on the calling thread: waking a worker costs
/// ~30 us on the VM measured (a 2 MiB batch sent to workers ran at 0.6-0.8x
/// the per-page loop), about what 4 MiB takes to copy.
pub(crate) const INLINE_MAX: usize = 4 << 20;
/// Chunk boundaries inside a run fall on this alignment relative to the run,
/// so pieces keep the run's alignment.
const SPLIT_ALIGN: usize = 4096;

/// A pool of pinned workers that executes batches (the kernel's
/// multi-threaded migration patches): collect the batch, copy it all with
/// several pinned threads spread across cache domains, then finish.
///
/// A batch is validated before anything is written, coalesced into runs,
/// and cut into chunks of at most [`EngineBuilder::chunk`] bytes (32 MiB by
/// default, the kernel's extent-clearing patches' latency bound). Chunks are cut from the batch as one
/// stream, so a chunk may hold thousands of 4 KiB extents or one piece of a
/// 1 GiB extent: both shapes balance, because workers take chunks one at a
/// time from a shared counter. Between chunks a worker checks the cancel
/// token and reports progress (the user-space `cond_resched`).
///
/// Because workers take chunks in increasing order and always finish the one
/// they took, what is done when a batch stops early is always a prefix of
/// the stream: [`Report`] says exactly which extents are complete.
///
/// Workers are created once, pinned, and reused. One batch runs at a time
/// per engine; other callers wait for it. Submitting a batch allocates only
/// when it is larger than every batch before it (the scratch buffers grow).
///
/// Build one once (starting its threads costs far more than a batch) and
/// submit batches to it from any thread; batches run one at a time.
///
/// ```
/// use bulkmem::{Engine, Strategy};
///
/// let engine = Engine::builder().threads(2).chunk(1 << 20).build()?;
/// let src = vec![7u8; 4 << 20];
/// let mut dst = vec![0u8; 4 << 20];
/// // Two extents of one batch: one 1 MiB copy and one 3 MiB copy.
/// let (a, b) = dst.split_at_mut(1 << 20);
/// let mut batch = [(a, &src[..1 << 20]), (b, &src[1 << 20..])];
/// let report = engine.copy_batch(&mut batch)?;
/// assert!(report.is_complete());
/// assert_eq!((report.total, report.extents_done), (4 << 20, 2));
/// assert_ne!(report.strategy, Strategy::Auto); // what `auto` chose
/// assert!(dst.iter().all(|&b| b == 7));
/// # Ok::<(), bulkmem::Error>(())
/// ```
pub struct Engine {
    /// Locked by `dispatch` (inside a batch's `scratch` lock) and by drop.
    pool: Mutex<Pool>,
    cpus: Vec<usize>,
    pin: bool,
    chunk: usize,
    inline_max: usize,
    opts: Options,
    placement: Placement,
    /// The busy marker that runs batches one at a time, and the buffers
    /// its owner uses (see `serial`).
    serial: Serial,
    offload: Option<Offload>,
    offload_only: bool,
    /// Copies four extents at once where they can (`EngineBuilder::gangs`).
    gangs: bool,
    /// The submission thread of [`Engine::submit_copy`] and its kin,
    /// started by the first submission (see `submit`).
    submitter: Mutex<Option<Submitter>>,
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
    marks: Marks,
    /// (start, end, extent index, is_dst) address intervals for validation.
    spans: Vec<(usize, usize, usize, bool)>,
}

impl Scratch {
    /// The request `auto` decides on for the batch marked, which `threads`
    /// workers share (see `job::request`).
    fn request(&self, op: Op, hint: Hint, threads: usize) -> Request {
        request(op, self.marks.runs, self.marks.total, hint, threads)
    }
}

impl Engine {
    /// A builder with every default: one worker per physical core (at most
    /// two per LLC domain), spread placement, 32 MiB chunks, pinned.
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

    /// Number of worker threads (one per entry of [`Engine::cpus`]).
    pub fn threads(&self) -> usize {
        self.cpus.len()
    }

    /// The placement policy the workers' CPUs were chosen with.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// Largest chunk in bytes (a multiple of 4 KiB): the most work a worker
    /// does between two looks at the cancel token.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Copies every `(dst, src)` pair. Lengths are checked first (an error
    /// names the first bad extent and nothing is written); the borrows
    /// already guarantee that no destination overlaps anything.
    pub fn copy_batch(&self, ops: &mut [(&mut [u8], &[u8])]) -> Result<Report, EngineError> {
        self.copy_batch_with_control(ops, Control::default())
    }

    /// As [`Engine::copy_batch`], with a cancel token and a progress
    /// callback (see [`Control`] for what the callback is promised). A
    /// cancelled batch is `Ok`, its report `cancelled` and exact about
    /// what was written (see [`CancelToken`] for why it is not an error).
    pub fn copy_batch_with_control(
        &self,
        ops: &mut [(&mut [u8], &[u8])],
        ctl: Control<'_>,
    ) -> Result<Report, EngineError> {
        crate::extent::check_lengths(ops)?;
        self.run(Op::Copy, &CopySlices(ops), false, ctl)
    }

    /// Zeroes every extent; the borrows guarantee that none overlaps
    /// another.
    pub fn clear_batch(&self, ops: &mut [&mut [u8]]) -> Result<Report, EngineError> {
        self.clear_batch_with_control(ops, Control::default())
    }

    /// As [`Engine::clear_batch`], with a cancel token and a progress
    /// callback (see [`Control`]).
    pub fn clear_batch_with_control(
        &self,
        ops: &mut [&mut [u8]],
        ctl: Control<'_>,
    ) -> Result<Report, EngineError> {
        self.run(Op::Clear, &ClearSlices(ops), false, ctl)
    }

    /// Copies extents given by address. Before anything is written the
    /// batch is checked: no destination may overlap another destination or
    /// any source ([`BatchError::Overlap`]
    /// names the first offending extent), and
    /// no non-empty extent may have a null pointer.
    ///
    /// # Safety
    /// Every `src` must be readable and every `dst` writable for `len` bytes
    /// for the duration of the call, and nothing else may access the
    /// destinations meanwhile.
    pub unsafe fn copy_extents(
        &self,
        ops: &[Extent],
        ctl: Control<'_>,
    ) -> Result<Report, EngineError> {
        self.run(Op::Copy, &Raw(ops, Op::Copy), true, ctl)
    }

    /// Zeroes extents given by address (`src` ignored); checked as
    /// [`Engine::copy_extents`] checks destinations.
    ///
    /// # Safety
    /// Every `dst` must be writable for `len` bytes for the duration of the
    /// call, and nothing else may access them meanwhile.
    pub unsafe fn clear_extents(
        &self,
        ops: &[Extent],
        ctl: Control<'_>,
    ) -> Result<Report, EngineError> {
        self.run(Op::Clear, &Raw(ops, Op::Clear), true, ctl)
    }

    /// As [`Engine::copy_batch_with_control`], surviving SIGBUS: a fault ends only
    /// the extent it hit (see [`Outcome`](crate::fault::Outcome)). Uses the checked form of the
    /// engine's strategy (for `auto`, of the kernel it picks); a strategy without one
    /// is refused ([`Error::NotChecked`]) before anything is written.
    #[cfg(target_arch = "x86_64")]
    pub fn copy_batch_checked(
        &self,
        ops: &mut [(&mut [u8], &[u8])],
        ctl: Control<'_>,
    ) -> Result<CheckedReport, Error> {
        crate::extent::check_lengths(ops)?;
        checked::run(self, Op::Copy, &CopySlices(ops), false, ctl)
    }

    /// As [`Engine::clear_batch_with_control`], surviving SIGBUS.
    #[cfg(target_arch = "x86_64")]
    pub fn clear_batch_checked(
        &self,
        ops: &mut [&mut [u8]],
        ctl: Control<'_>,
    ) -> Result<CheckedReport, Error> {
        checked::run(self, Op::Clear, &ClearSlices(ops), false, ctl)
    }

    /// As [`Engine::copy_extents`], surviving SIGBUS.
    ///
    /// # Safety
    /// As [`Engine::copy_extents`], except that a range may raise SIGBUS
    /// (poisoned, past the end of its file): such extents are reported.
    #[cfg(target_arch = "x86_64")]
    pub unsafe fn copy_extents_checked(
        &self,
        ops: &[Extent],
        ctl: Control<'_>,
    ) -> Result<CheckedReport, Error> {
        checked::run(self, Op::Copy, &Raw(ops, Op::Copy), true, ctl)
    }

    /// As [`Engine::clear_extents`], surviving SIGBUS.
    ///
    /// # Safety
    /// As [`Engine::copy_extents_checked`].
    #[cfg(target_arch = "x86_64")]
    pub unsafe fn clear_extents_checked(
        &self,
        ops: &[Extent],
        ctl: Control<'_>,
    ) -> Result<CheckedReport, Error> {
        checked::run(self, Op::Clear, &Raw(ops, Op::Clear), true, ctl)
    }

    /// Repeats `template` across `dst` on the workers (see
    /// the `fill` module): chunks are whole windows of elements, so each
    /// element is written by one worker. A cancelled fill reports how many
    /// bytes (a whole number of elements) were written, from the start.
    pub fn fill(&self, dst: &mut [u8], template: &[u8]) -> Result<Report, Error> {
        self.fill_with_control(dst, template, Control::default())
    }

    /// As [`Engine::fill`], with a cancel token and a progress callback
    /// (see [`Control`]).
    pub fn fill_with_control(
        &self,
        dst: &mut [u8],
        template: &[u8],
        ctl: Control<'_>,
    ) -> Result<Report, Error> {
        fill_job::fill(self, dst, template, ctl)
    }

    /// As [`Engine::fill`], with `patch(index, element)` applied to every
    /// element before it is stored (from several workers at once, each index
    /// exactly once).
    pub fn fill_patched<P: Fn(usize, &mut [u8]) + Sync>(
        &self,
        dst: &mut [u8],
        template: &[u8],
        patch: &P,
        ctl: Control<'_>,
    ) -> Result<Report, Error> {
        fill_job::fill_patched(self, dst, template, patch, ctl)
    }

    /// Queues a copy of `ops` and returns at once with a [`Ticket`] for it;
    /// the batch runs on the engine's submission thread and workers, as
    /// [`Engine::copy_extents`] would run it. Tickets of one engine run one
    /// at a time, in submission order (see the module docs of `submit`).
    ///
    /// The batch is checked before it is queued, with the errors
    /// [`Engine::copy_extents`] returns (and [`Error::Syscall`] when no
    /// eventfd or thread can be made): an `Err` means nothing was queued
    /// or written. `cancel`, if given, stops the batch as
    /// [`Ticket::cancel`] does (the token may be shared by many tickets;
    /// cancelling or dropping one ticket leaves it alone).
    ///
    /// # Safety
    /// Every `src` must stay readable and every `dst` writable for `len`
    /// bytes until the ticket is done (waited on or dropped), and nothing
    /// else may access the destinations, or write the sources, meanwhile.
    /// The ticket must not be leaked (`mem::forget`): dropping it is what
    /// guarantees the batch has stopped before the memory goes.
    pub unsafe fn submit_copy(
        &self,
        ops: &[Extent],
        cancel: Option<&CancelToken>,
    ) -> Result<Ticket<'_>, Error> {
        // SAFETY: the caller's contract, passed on.
        unsafe { submit::submit(self, Op::Copy, ops, cancel) }
    }

    /// As [`Engine::submit_copy`] for a clear of `ops` (`src` ignored), as
    /// [`Engine::clear_extents`] would run it.
    ///
    /// # Safety
    /// Every `dst` must stay writable for `len` bytes until the ticket is
    /// done, and nothing else may access them meanwhile; the ticket must
    /// not be leaked.
    pub unsafe fn submit_clear(
        &self,
        ops: &[Extent],
        cancel: Option<&CancelToken>,
    ) -> Result<Ticket<'_>, Error> {
        // SAFETY: the caller's contract, passed on.
        unsafe { submit::submit(self, Op::Clear, ops, cancel) }
    }

    /// As [`Engine::submit_copy`] for [`Engine::fill`] of the `len` bytes
    /// at `dst` with `template` (copied: the caller may drop it at once).
    /// [`Error::BadFill`] and [`Error::BadExtent`] (null `dst`) are
    /// returned before anything is queued.
    ///
    /// # Safety
    /// `dst` must stay writable for `len` bytes until the ticket is done,
    /// and nothing else may access them meanwhile; the ticket must not be
    /// leaked.
    pub unsafe fn submit_fill(
        &self,
        dst: *mut u8,
        len: usize,
        template: &[u8],
        cancel: Option<&CancelToken>,
    ) -> Result<Ticket<'_>, Error> {
        // SAFETY: the caller's contract, passed on.
        unsafe { submit::submit_fill(self, dst, len, template, cancel) }
    }

    fn run<B: Batch>(
        &self,
        op: Op,
        batch: &B,
        check_overlap: bool,
        ctl: Control<'_>,
    ) -> Result<Report, EngineError> {
        let strategy = self.opts.strategy;
        let plain = |req: &Request| -> Result<_, EngineError> {
            Ok(match op {
                Op::Copy => {
                    let k = crate::auto::kernel::<CopyKernel>(strategy, req)?;
                    (Work::Copy(k), k.strategy())
                }
                Op::Clear => {
                    let k = crate::auto::kernel::<ClearKernel>(strategy, req)?;
                    (Work::Clear(k), k.strategy())
                }
            })
        };
        self.run_with(op, batch, check_overlap, true, plain, ctl)
    }

    /// What every batch, checked or not, goes through: the batch marker,
    /// the check of a raw batch, the marks (runs coalesced where
    /// `coalesce`), the request `work` chooses its kernel for, and the
    /// job.
    fn run_with<'w, B: Batch, E: From<EngineError> + From<BatchError>>(
        &self,
        op: Op,
        batch: &B,
        check_overlap: bool,
        coalesce: bool,
        work: impl FnOnce(&Request) -> Result<(Work<'w>, Strategy), E>,
        ctl: Control<'_>,
    ) -> Result<Report, E> {
        let mut guard = self.serial()?;
        let scratch = &mut *guard;
        if check_overlap {
            validate(op, batch, &mut scratch.spans).map_err(BatchError::from)?;
        }
        scratch.marks.mark(batch, coalesce);
        let (work, strategy) = work(&scratch.request(op, self.opts.hint, self.threads()))?;
        let stream = scratch.marks.stream(batch, coalesce);
        Ok(job::execute(
            self,
            stream,
            work,
            strategy,
            SPLIT_ALIGN,
            ctl,
        )?)
    }

    /// This engine's identity for [`Inside`](pool::Inside): its address is stable while
    /// a batch runs (it is borrowed).
    fn id(&self) -> usize {
        self as *const Engine as usize
    }

    /// Takes the batch marker, unless this thread is running one of this
    /// engine's callbacks or kernels ([`EngineError::Reentrant`]: that batch holds
    /// the marker and waits for this thread, so waiting here would never
    /// end), or another thread's inline batch has stalled for
    /// a second ([`EngineError::Busy`]). A marker left by a call of this thread
    /// that a callback abandoned (`longjmp`) is taken over: see `serial`.
    /// Called first thing by every batch entry point, so that its stack
    /// address is that of the entry point's frame.
    fn serial(&self) -> Result<SerialGuard<'_>, EngineError> {
        self.serial.acquire(self.id(), stack_addr())
    }

    /// The engine's offload, if it was built with one.
    pub fn offload(&self) -> Option<&Offload> {
        self.offload.as_ref()
    }

    /// [`Offload::register`] on this engine's offload.
    ///
    /// # Safety
    /// As [`Offload::register`].
    pub unsafe fn register(&self, addr: *const u8, len: usize) -> Result<(), Error> {
        // SAFETY: the caller's contract.
        unsafe { self.offload_or_refuse()?.register(addr, len) }
    }

    /// [`Offload::unregister`] on this engine's offload.
    pub fn unregister(&self, addr: *const u8, len: usize) -> Result<(), Error> {
        self.offload_or_refuse()?.unregister(addr, len)
    }

    fn offload_or_refuse(&self) -> Result<&Offload, Error> {
        self.offload.as_ref().ok_or(Error::NoOffload)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Before the workers: a ticket left running (only a leaked one can
        // be, as a ticket borrows the engine) needs them to stop.
        if let Some(s) = self
            .submitter
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            s.stop();
        }
        self.pool
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .stop();
    }
}
