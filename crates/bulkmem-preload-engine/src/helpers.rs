//! The multi-threaded copy: helper threads started for one large call and
//! joined before it returns, so that to the program the call is the C
//! library's on its own thread, only faster (see the crate docs'
//! contract).
//!
//! * **Nothing a helper reaches is on the caller's stack**: the job is on
//!   the heap, freed by the caller once its helpers are gone; a caller
//!   that never comes back (a handler left with `siglongjmp`) leaves it to
//!   its thread's next large call, which joins them and frees it.
//! * **Helpers are invisible**: threads of the kernel's alone
//!   ([`RawThread`]), so the C library's thread state (its SIGSETXID
//!   handler, `__libc_single_threaded`) stays as the program left it; they
//!   start with every asynchronous signal blocked (inherited from the
//!   starting thread), and run only checked routines, whose faults the
//!   loader's trampoline hands to bulkmem first, which turns them into a
//!   failed chunk: the bytes from that chunk on are copied afterwards by
//!   the caller with the C library's routine, so the fault
//!   happens again on the calling thread, where glibc's copy would take it.
//!   (Where the program has no handler for the fault, the kernel has its
//!   `SIG_DFL`, and a fault on a helper kills the process as the C
//!   library's fault would.)
//! * **Leaving early leaves no work behind**: a program's handler that runs
//!   on the caller while helpers work first stops them (each ends its
//!   current chunk, at most 4 MiB) and waits until none runs
//!   ([`stop_for_handler`], called by the signal trampoline). If the
//!   handler returns, the caller finishes the copy itself. Cancellation
//!   (glibc's SIGCANCEL) is kept blocked on the caller while helpers run
//!   ([`crate::cancel`]): it arrives once the copy is complete.
//! * **No thread outlives its call**: helpers are joined before the call
//!   returns (one abandoned by a `siglongjmp` out of its handler is joined
//!   by the thread's next large call); none start where the program keeps
//!   a budget of its own or runs in real time ([`crate::thread_budget`]),
//!   where threads are forbidden
//!   ([`without_threads`]), inside a signal handler, or when the kernel's
//!   SIGSEGV or SIGBUS action is not the loader's (a handler installed
//!   with a raw system call displaced it); one that cannot start leaves
//!   its share to the others and the caller.
//!
//! Nothing on the caller's path from the exported function to here holds a
//! value to drop or catches an unwind: an unwind that starts in it (a
//! program's handler that throws or calls `pthread_exit`) passes through
//! without touching code of ours (see `lib.rs`).

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize, Ordering};

use bulkmem_machine::{chunks::Chunks, latch::Latch};
use bulkmem_policy::handle::CheckedKernel;

use crate::config::THREADS;
use crate::raw_thread::{self, RawThread};
use crate::stats::now_ns;
use crate::{cancel, loader};

/// Most helpers one call starts (a call also works itself).
const MAX_HELPERS: usize = 63;
/// Largest chunk: what a helper finishes after being told to stop.
const CHUNK_MAX: usize = 4 << 20;
const CHUNK_MIN: usize = 1 << 20;
/// Each helper's stack: it runs a short loop and the checked routines.
const STACK: usize = 256 << 10;

/// Helper threads alive in the process (started, not yet past their last
/// touch of a job): what [`without_threads`] waits for.
static ACTIVE: Latch = Latch::new(0);
/// When a helper last left (CLOCK_MONOTONIC, ns): a joined thread is still
/// in its thread group for a moment, and a call that needs a
/// single-threaded process may have to try again.
static LAST_EXIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Helper threads started since the process began (`bulkmem_preload_state`
/// tells a program: none outlives its call, so a count of threads cannot
/// tell whether a call had helpers).
pub static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// Helpers the calls running now have started, against the budget
/// (`THREADS` - 1 by default, the CPUs the process may use - 1).
static IN_USE: AtomicUsize = AtomicUsize::new(0);
/// Threads forbidden (for a while, or for good after seccomp).
static FORBID: AtomicU32 = AtomicU32::new(0);

/// This thread's job while helpers may run it (in the loader's per-thread
/// state, which the trampoline reaches without allocating); left set by a
/// caller that a handler took away with `siglongjmp` (its next call joins
/// it).
fn current() -> &'static Cell<*mut c_void> {
    &loader::thread().current
}

/// One multi-threaded call.
struct Job {
    kernel: CheckedKernel,
    dst: *mut u8,
    src: *const u8,
    len: usize,
    chunk: usize,
    /// Handed out in order (the engine's workers take theirs the same
    /// way); stopped by a handler on the caller, failed at the first chunk
    /// that faulted, which the caller then copies from its start with the
    /// C library, faulting again at the same byte.
    chunks: Chunks,
    /// Helpers inside the chunk loop.
    running: Latch,
    helpers: [Option<RawThread>; MAX_HELPERS],
    started: usize,
}

// SAFETY: the raw pointers name memory the calling thread lent for the
// call, which it does not touch while helpers run; everything else is
// atomic or written before the helpers start.
unsafe impl Sync for Job {}

impl Job {
    /// Takes and runs chunks until none is left, the job is stopped, or
    /// the next would come after a fault (the C library copies from the
    /// fault on anyway).
    fn work(&self) {
        while let Some(c) = self.chunks.claim() {
            let from = c * self.chunk;
            let n = self.chunk.min(self.len - from);
            // SAFETY: [from, from + n) lies in the call's ranges, valid
            // (or faulting, which the checked routine survives) and
            // disjoint: the caller's contract, checked by `run`.
            let r = unsafe {
                match self.kernel {
                    CheckedKernel::Copy(k) => k.copy_raw(self.dst.add(from), self.src.add(from), n),
                    CheckedKernel::Clear(k) => k.clear_raw(self.dst.add(from), n),
                }
            };
            if r.is_err() {
                self.chunks.fail(c);
            }
        }
    }

    /// The bytes from 0 that are certainly done, once no helper runs: the
    /// chunks claimed, each finished, up to the first that faulted.
    fn prefix(&self) -> usize {
        self.chunks.done().saturating_mul(self.chunk).min(self.len)
    }
}

/// Joins the helpers of `job` and frees it (the caller is the only one
/// that frees: a helper never allocates or frees, see [`RawThread`]).
/// Never inlined: the landing pads of the free stay in its own frame.
///
/// # Safety
/// `job` came from `Box::into_raw`, and no one else frees it.
#[inline(never)]
unsafe fn join_and_free(job: *mut Job) {
    // SAFETY: alive until freed here.
    let j = unsafe { &mut *job };
    for t in j.helpers[..j.started].iter_mut() {
        if let Some(t) = t.take() {
            t.join();
        }
    }
    IN_USE.fetch_sub(j.started, Ordering::AcqRel);
    // SAFETY: every helper is gone; no one else holds it.
    drop(unsafe { Box::from_raw(job) });
}

/// A helper thread's whole life: chunks until none is left or the job is
/// stopped. Runs without a C library thread of its own ([`RawThread`]):
/// atomics, checked routines and latches (raw `futex` calls) only.
extern "C" fn helper(arg: *mut c_void) {
    cancel::unblock_raw(!cancel::all_but_faults());
    // SAFETY: the job outlives every helper: its caller frees it after
    // joining them.
    let j = unsafe { &*arg.cast::<Job>() };
    j.work();
    j.running.count_down();
    LAST_EXIT.store(now_ns(), Ordering::Relaxed);
    ACTIVE.count_down();
}

/// Helpers a call would like: none where threads are off, forbidden, or
/// the call runs in a signal handler. No system call once [`set_up`] has
/// run, and none before it where threads are off: seccomp's strict mode
/// turns them off first, and this is all a call may ask after it.
pub fn wanted() -> usize {
    let threads = THREADS.load(Ordering::Relaxed);
    if threads == 1 || FORBID.load(Ordering::Acquire) != 0 || loader::in_handler() || !set_up() {
        return 0;
    }
    match threads {
        0 => default_threads(),
        t => t,
    }
    .saturating_sub(1)
    .min(MAX_HELPERS)
}

/// How many of `want` helpers this call may start: its share of the
/// budget, none where the program keeps a thread budget of its own.
fn budget(want: usize) -> usize {
    if crate::thread_budget::programs_own() {
        return 0;
    }
    let mut in_use = IN_USE.load(Ordering::Relaxed);
    loop {
        let take = want.saturating_sub(in_use);
        if take == 0 {
            return 0;
        }
        match IN_USE.compare_exchange_weak(
            in_use,
            in_use + take,
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => return take,
            Err(now) => in_use = now,
        }
    }
}

/// Threads a call may use by default: the workers the engine would have
/// (one per core, at most two per LLC domain, on the CPUs this process
/// may use). Set once by [`set_up`]; 1 (no helper) until then.
static DEFAULT_THREADS: AtomicUsize = AtomicUsize::new(1);

fn default_threads() -> usize {
    DEFAULT_THREADS.load(Ordering::Relaxed)
}

/// Whether the helpers' one-time state is read (the cgroups of the
/// thread budget, the count from sysfs), reading it now if no thread has
/// begun to and this is not a signal handler: by the first call that may
/// use helpers, not the first large call, so that a program whose copies
/// stay below `MT_MIN` never pays for it (0.4-0.5 ms in a VM with the
/// whole sysfs layout, which the count no longer reads). A call that finds
/// it being read copies alone.
fn set_up() -> bool {
    static STATE: AtomicU8 = AtomicU8::new(0);
    match STATE.load(Ordering::Acquire) {
        2 => true,
        0 => crate::once::build(&STATE, read_set_up),
        _ => false,
    }
}

/// [`set_up`]'s reading, under `catch_unwind` (a panic in it leaves the
/// process without helpers); never inlined, as `accel`'s build.
#[inline(never)]
fn read_set_up() -> bool {
    std::panic::catch_unwind(|| {
        crate::thread_budget::init();
        let n = bulkmem::placement::default_threads_here();
        DEFAULT_THREADS.store(n.max(1), Ordering::Relaxed);
        true
    })
    .unwrap_or(false)
}

/// Joins the helpers of a job this thread's earlier call left behind (its
/// handler left with `siglongjmp`) and drops that call's reference.
fn reap_abandoned() {
    let job = current().replace(std::ptr::null_mut()).cast::<Job>();
    if job.is_null() {
        return;
    }
    // SAFETY: the abandoned call never freed it; its helpers were stopped
    // before the handler ran.
    unsafe { join_and_free(job) };
}

/// Runs `op` over `len` bytes with helper threads, returning the bytes
/// from 0 that are done (the caller finishes the rest with the C
/// library), or `None` when no helper may start (the caller copies alone).
///
/// Cancellation is blocked from the first step to the last, and every
/// other asynchronous signal outside the work itself: everything that
/// allocates, frees or may unwind happens inside, in frames of its own,
/// and this frame holds nothing to drop, so a cancellation that arrives
/// as the mask comes back unwinds through it cleanly.
///
/// # Safety
/// `dst` writable (and `src` readable) for `len` bytes, or faulting; the
/// ranges do not overlap.
pub unsafe fn run(
    kernel: CheckedKernel,
    dst: *mut u8,
    src: *const u8,
    len: usize,
) -> Option<usize> {
    let want = wanted();
    if want == 0 {
        return None;
    }
    // What runs before and after the work (the allocator, the budget,
    // the starts and joins) must not be left by a handler's siglongjmp:
    // every asynchronous signal waits there (a few microseconds).
    let old_mask = cancel::block_raw(cancel::all_but_synchronous());
    reap_abandoned();
    let take = budget(want);
    if take == 0 {
        cancel::set_raw(old_mask);
        return None;
    }
    if !loader::faults_ours() {
        IN_USE.fetch_sub(take, Ordering::AcqRel);
        cancel::set_raw(old_mask);
        return None;
    }
    let job = new_job(kernel, dst, src, len, take + 1);
    current().set(job.cast());
    // SAFETY: the job is alive (this call frees it) and only this thread
    // writes `helpers`/`started`, before each helper may read them.
    let j = unsafe { &mut *job };
    start(j, job, take);
    if j.started < take {
        IN_USE.fetch_sub(take - j.started, Ordering::AcqRel);
    }
    // The work: signals come in again, a handler stopping the helpers
    // first; all but SIGCANCEL, which waits until the copy is complete.
    cancel::set_raw(old_mask | cancel::CANCEL);
    j.work();
    j.running.wait();
    let done = j.prefix();
    cancel::block_raw(cancel::all_but_synchronous());
    current().set(std::ptr::null_mut());
    // SAFETY: this call's job; `j` is not used after.
    unsafe { join_and_free(job) };
    cancel::set_raw(old_mask);
    Some(done)
}

/// A job for `threads` threads, on the heap, with the caller's reference.
#[inline(never)]
fn new_job(
    kernel: CheckedKernel,
    dst: *mut u8,
    src: *const u8,
    len: usize,
    threads: usize,
) -> *mut Job {
    let chunk = (len / (threads * 8))
        .clamp(CHUNK_MIN, CHUNK_MAX)
        .next_multiple_of(4096);
    Box::into_raw(Box::new(Job {
        kernel,
        dst,
        src,
        len,
        chunk,
        chunks: Chunks::new(len.div_ceil(chunk)),
        running: Latch::new(0),
        helpers: [const { None }; MAX_HELPERS],
        started: 0,
    }))
}

/// Starts up to `take` helpers on `job`, each with every signal blocked
/// (inherited: the mask is set here, with the raw system call, around the
/// starts) but SIGSEGV and SIGBUS, which each unblocks first thing
/// ([`helper`]): a process-directed signal goes to one of the program's
/// threads, and the faults of the checked routines reach the trampoline.
/// The starting thread takes no signal meanwhile: a handler of the
/// program's would stop the job and wait for helpers counted as running
/// that only this thread, stopped in the handler, could start.
fn start(j: &mut Job, job: *mut Job, take: usize) {
    let old = cancel::block_raw(!0);
    for _ in 0..take {
        j.running.add(1);
        ACTIVE.add(1);
        let Some(t) = RawThread::spawn(STACK, helper, job.cast()) else {
            j.running.count_down();
            ACTIVE.count_down();
            break;
        };
        j.helpers[j.started] = Some(t);
        j.started += 1;
        STARTED.fetch_add(1, Ordering::Relaxed);
    }
    cancel::set_raw(old);
}

/// Called by the signal trampoline before a program's handler runs on
/// this thread: if this thread's call has helpers working, stops them and
/// waits until none runs, and lets cancellation in again (in the thread's
/// mask and in the one `sigreturn` restores, `uc`). Async-signal-safe.
pub extern "C" fn stop_for_handler(uc: *mut c_void) {
    let job = current().get().cast::<Job>();
    if job.is_null() {
        return;
    }
    // SAFETY: the call that set CURRENT holds its reference until it
    // clears CURRENT, and it cannot run while this handler does.
    let j = unsafe { &*job };
    j.chunks.stop();
    j.running.wait();
    cancel::allow_in_handler(uc);
}

/// In a child of `fork`: no helper of the parent's exists here, and no
/// call is starting or stopping them.
pub extern "C" fn after_fork_in_child() {
    ACTIVE.forget();
    IN_USE.store(0, Ordering::Relaxed);
    FORBID.store(0, Ordering::Relaxed);
    raw_thread::forget_all();
}

/// Stops every helper and waits until none is alive, runs `f` (told
/// whether helpers were working or left within the last 50 ms: they may
/// still be leaving their thread group), and lets calls start helpers
/// again, or with `forbid` never again. From a signal handler, or while
/// this thread is inside a call, it does not wait: `f` runs whatever is
/// there.
pub fn without_threads<R>(forbid: bool, careful: bool, f: impl FnOnce(bool) -> R) -> R {
    if forbid {
        THREADS.store(1, Ordering::Relaxed);
    }
    FORBID.fetch_add(1, Ordering::AcqRel);
    let recent = now_ns().saturating_sub(LAST_EXIT.load(Ordering::Relaxed)) < 50_000_000;
    let had = ACTIVE.count() != 0 || recent;
    if !careful {
        ACTIVE.wait();
    }
    let r = f(had);
    FORBID.fetch_sub(1, Ordering::AcqRel);
    r
}
