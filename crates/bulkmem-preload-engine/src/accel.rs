//! The accelerated path: bulkmem's checked twin of what `auto` picks for
//! the call, on the calling thread, or with helper threads for the largest
//! calls ([`crate::helpers`]). The bytes from the first fault on (or those
//! a handler's interruption left undone) go back to the caller, which
//! copies them with the C library's routine, so the program meets the
//! fault on its own thread at the address glibc's copy touches.
//!
//! bulkmem is initialised by the first large call outside a signal handler
//! ([`ready`]), on the loader's set-up stack: its policy (CPU facts,
//! profile, bands), and the loader's trampoline in front of a SIGSEGV or
//! SIGBUS handler the loader did not see installed
//! ([`crate::loader::take_faults`]).
//! That is the only code on this path that can panic: it runs once, with
//! cancellation blocked, under `catch_unwind`. Every later call runs only
//! code that holds no value to drop and catches no unwind, so an unwind
//! that starts in it (a program's handler that throws or calls
//! `pthread_exit`, a cancellation) passes through without meeting a
//! personality routine of ours: the preload's unwinder is not the
//! process's (build.rs), and one that met the other's unwind state
//! aborted. The C library answers every call it must (re-entered from
//! bulkmem's own code, bulkmem not initialised and not to be here, or
//! under a sanitizer or valgrind: [`crate::tools`]).

use std::panic::catch_unwind;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use bulkmem::Op;
use bulkmem_policy::handle::CheckedKernel;

use crate::config::MT_MIN;
use crate::stats::{now_ns, Path};
use crate::{helpers, loader, once, tools};

/// bulkmem for this process: 0 not built, 1 being built by one thread, 2
/// built, 3 not to be used (a sanitizer, valgrind, or the build failed).
static POLICY: AtomicU8 = AtomicU8::new(0);

/// Whether this thread is inside bulkmem (its own calls of the interposed
/// functions go to the C library).
pub fn inside() -> bool {
    loader::thread().inside()
}

/// What an accelerated call did.
pub struct Done {
    /// Bytes from the start that are done; the caller does the rest with
    /// the C library's routine.
    pub upto: usize,
    pub path: Path,
    /// Whether bulkmem's part went out with non-temporal stores (the
    /// destination is in memory, not in the cache).
    pub streamed: bool,
}

/// Whether bulkmem is initialised, doing it on this thread if none has
/// begun it and this is not a signal handler. Nobody waits for it: a call
/// that finds it being built (on another thread, or in a child forked
/// meanwhile, where it never finishes) goes to the C library.
#[inline]
fn ready() -> bool {
    match POLICY.load(Ordering::Acquire) {
        2 => true,
        0 => once::build(&POLICY, build),
        _ => false,
    }
}

/// The one-time state, built under `catch_unwind` (a panic in it means
/// the C library answers for good). Never inlined: its landing pads stay
/// in its own frame, which cancellation cannot reach. The helpers' count
/// waits for the first call that may use them (`helpers::set_up`): a
/// program whose copies stay below `BULKMEM_PRELOAD_MT_MIN` never reads
/// the cgroups and sysfs it needs.
#[inline(never)]
fn build() -> bool {
    catch_unwind(|| {
        if let Some(tool) = tools::present() {
            crate::stats::set_inert(tool);
            return false;
        }
        for op in [Op::Copy, Op::Clear] {
            for h in bulkmem::Hint::ALL {
                let _ = bulkmem_policy::auto::bands(op, *h);
            }
            let _ = bulkmem_policy::auto::chosen_twin(&bulkmem_policy::auto::Request::single(
                op,
                0,
                bulkmem::Hint::Auto,
            ));
        }
        let _ = bulkmem_policy::auto::Policy::here().decide(
            &bulkmem_policy::auto::Request::single(Op::Copy, 0, bulkmem::Hint::Auto),
        );
        loader::take_faults();
        true
    })
    .unwrap_or(false)
}

/// Builds bulkmem's state now, if it is not built and this is not a signal
/// handler: for the calls after which the process may no longer open
/// files (seccomp). Returns whether it is built.
pub fn prepare_for_sandbox() -> bool {
    let t = loader::thread();
    let Some(was) = t.enter() else {
        return POLICY.load(Ordering::Acquire) == 2;
    };
    let r = ready();
    t.leave(was);
    r
}

/// Runs `op` over `n` bytes through bulkmem, or returns `None` when the C
/// library must do all of it.
///
/// # Safety
/// `d` writable (and for copies `s` readable) for `n` bytes, not
/// overlapping; bytes that fault are the program's business, as with the
/// C library.
#[inline]
pub unsafe fn run(op: Op, d: *mut u8, s: *const u8, n: usize) -> Option<Done> {
    let t = loader::thread();
    let was = t.enter()?;
    let done = if ready() {
        // SAFETY: forwarded contract.
        Some(unsafe { execute(op, d, s, n) })
    } else {
        None
    };
    t.leave(was);
    done
}

/// # Safety
/// As [`run`], and bulkmem is initialised.
unsafe fn execute(op: Op, d: *mut u8, s: *const u8, n: usize) -> Done {
    if n >= MT_MIN.load(Ordering::Relaxed) {
        let threads = helpers::wanted() + 1;
        if kept_off(n, threads) {
            // SAFETY: forwarded contract.
            return unsafe { on_this_thread(op, d, s, n) };
        }
        // Past the stream threshold, shared by threads that will not read
        // it: decided as the engine decides a split extent (a preloaded
        // 1 GiB copy on two threads ran 18.2 GB/s streamed, 14.0 with
        // `rep movsb`, Zen 4 VM). Below it, as the single call it is,
        // whose caller reads it next: as a batch, Intel's rule for
        // batches past L2 streamed a stream of 4 MiB copies on two
        // threads at 0.63x the C library, against 0.85-0.95x temporal
        // (Xeon, CPUID model 0xa7, `preload-workload stream-64K-4M`).
        let req = if n >= bulkmem_policy::auto::Machine::this().stream_from() {
            bulkmem_policy::auto::Request::batch(op, n, threads.max(1), bulkmem::Hint::Auto)
        } else {
            bulkmem_policy::auto::Request::single(op, n, bulkmem::Hint::Auto)
        };
        let k = bulkmem_policy::auto::chosen_twin(&req);
        // SAFETY: forwarded contract.
        let worth = unsafe { worth_helpers(k, n, threads) };
        // SAFETY: forwarded contract.
        if let Some(upto) = worth.then(|| unsafe { helpers::run(k, d, s, n) }).flatten() {
            return Done {
                upto,
                path: Path::Helpers,
                streamed: k.strategy().is_non_temporal(),
            };
        }
    }
    // SAFETY: forwarded contract.
    unsafe { on_this_thread(op, d, s, n) }
}

/// The call on the calling thread, with the single call's kernel.
///
/// # Safety
/// As [`run`], and bulkmem is initialised.
#[inline]
unsafe fn on_this_thread(op: Op, d: *mut u8, s: *const u8, n: usize) -> Done {
    let k = bulkmem_policy::auto::chosen_twin(&bulkmem_policy::auto::Request::single(
        op,
        n,
        bulkmem::Hint::Auto,
    ));
    let streamed = k.strategy().is_non_temporal();
    // SAFETY: forwarded contract; the routine survives faults, which the
    // caller meets again with the C library.
    let r = unsafe {
        match k {
            CheckedKernel::Copy(k) => k.copy_raw(d, s, n),
            CheckedKernel::Clear(k) => k.clear_raw(d, n),
        }
    };
    Done {
        upto: r.map_or_else(|f| f.offset, |()| n),
        path: Path::Cpu,
        streamed,
    }
}

/// One core's copy rate at its fastest, bytes per nanosecond (32 GB/s:
/// above what one core of any machine measured reaches from memory). A
/// call that one core would finish faster than helper threads start gains
/// nothing from them.
const ONE_CORE_MAX: u64 = 32;

/// What a call with helpers costs on this machine beyond its copying,
/// nanoseconds: starting them, waiting for them to run, joining them,
/// measured with a job of nothing, the least of [`MEASURES`] tries (one
/// that lands in a busy spell of a shared machine says too much). 0 until
/// measured.
static HELPER_COST: AtomicU64 = AtomicU64::new(0);
/// Calls kept off the helpers since the cost was last measured: after
/// [`REMEASURE`] of them, then four times as many each time, it is
/// measured again (and the least kept), so that one unlucky spell does not
/// keep helpers away for the process's life, nor do the measurements
/// (threads started for nothing) cost a stream of calls anything.
static KEPT_OFF: AtomicU64 = AtomicU64::new(0);
static NEXT_MEASURE: AtomicU64 = AtomicU64::new(REMEASURE);
const MEASURES: usize = 3;
const REMEASURE: u64 = 1024;

/// Whether helpers can speed up a call of `n` bytes on `threads` threads
/// here: whether the part of the copy they take off the caller, at one
/// core's fastest rate, is at least twice what they cost. Whatever
/// `BULKMEM_PRELOAD_MT_MIN` says, a smaller call stays on the calling
/// thread, so no setting makes a stream of calls slower than the C
/// library (ZGC's 64 KiB copies took 5x longer with helpers per call).
/// The first time, the cost is measured with an empty job.
///
/// # Safety
/// As [`run`] (the empty job touches no memory).
unsafe fn worth_helpers(k: CheckedKernel, n: usize, threads: usize) -> bool {
    if threads < 2 {
        return false;
    }
    let mut cost = HELPER_COST.load(Ordering::Relaxed);
    let kept = KEPT_OFF.load(Ordering::Relaxed);
    if cost == 0 || kept >= NEXT_MEASURE.load(Ordering::Relaxed) {
        KEPT_OFF.store(0, Ordering::Relaxed);
        if cost != 0 {
            NEXT_MEASURE.store(kept.saturating_mul(4), Ordering::Relaxed);
        }
        for _ in 0..MEASURES {
            let t0 = now_ns();
            // SAFETY: a job of no bytes.
            if unsafe { helpers::run(k, core::ptr::null_mut(), core::ptr::null(), 0) }.is_none() {
                return true; // no helpers now: `run` will say so again
            }
            let took = now_ns().saturating_sub(t0).max(1);
            cost = if cost == 0 { took } else { cost.min(took) };
        }
        HELPER_COST.store(cost, Ordering::Relaxed);
    }
    let worth = saves_twice(n, threads, cost);
    if !worth {
        KEPT_OFF.fetch_add(1, Ordering::Relaxed);
    }
    worth
}

/// Whether a call of `n` bytes stays on the calling thread by what is
/// already known of the helpers' cost, before any kernel is decided for
/// them: a stream of calls below the line pays one comparison, not the
/// batch decision [`worth_helpers`] needs (about 10% of a 64 KiB copy).
/// Counts it kept off, as `worth_helpers` does.
#[inline]
fn kept_off(n: usize, threads: usize) -> bool {
    if threads < 2 {
        return true;
    }
    let cost = HELPER_COST.load(Ordering::Relaxed);
    if cost == 0 || KEPT_OFF.load(Ordering::Relaxed) >= NEXT_MEASURE.load(Ordering::Relaxed) {
        return false; // to be measured by worth_helpers
    }
    if saves_twice(n, threads, cost) {
        return false;
    }
    KEPT_OFF.fetch_add(1, Ordering::Relaxed);
    true
}

/// Whether the part of an `n`-byte call that `threads - 1` helpers take
/// off the caller, at one core's fastest rate, is at least twice their
/// `cost` (ns).
fn saves_twice(n: usize, threads: usize, cost: u64) -> bool {
    let saved = n as u64 / ONE_CORE_MAX * (threads as u64 - 1) / threads as u64;
    saved >= cost.saturating_mul(2)
}
