//! The calling-thread entry points: single copies and clears, batches of
//! slices and batches of raw extents. Each gets its kernel from the policy
//! (`crate::auto::kernel`), as a CPU-checked [`CopyKernel`] or
//! [`ClearKernel`]: nothing here chooses a strategy or turns one into code.

use crate::auto::{self, Request};
use crate::error::{BatchError, CopyError, EngineError, StrategyError};
use crate::extent::{check_lengths, validate_extents};
use crate::handle::{ClearKernel, CopyKernel, Fence, Unfenced};
use crate::plan::{self, exposed, exposed_mut, Extent};
use crate::report::Report;
use crate::strategy::{Hint, Op, Options, Strategy};

/// Copies `src` into `dst` with the primitive `auto` picks for this size.
///
/// ```
/// let src = b"bulk memory ".repeat(10_000); // 120 000 bytes
/// let mut dst = vec![0u8; src.len()];
/// bulkmem::copy(&mut dst, &src);
/// assert_eq!(dst, src);
/// ```
///
/// # Panics
/// If the lengths differ, like `copy_from_slice`.
#[inline]
pub fn copy(dst: &mut [u8], src: &[u8]) {
    copy_hint(dst, src, Hint::Auto)
}

/// As [`copy`], telling `auto` what happens to `dst` next.
///
/// ```
/// use bulkmem::Hint;
/// let src = vec![3u8; 1 << 20];
/// let mut dst = vec![0u8; 1 << 20];
/// bulkmem::copy_hint(&mut dst, &src, Hint::Stream); // write-once: fenced NT stores
/// assert_eq!(dst, src);
/// ```
///
/// # Panics
/// If the lengths differ.
#[inline]
pub fn copy_hint(dst: &mut [u8], src: &[u8], hint: Hint) {
    if dst.len() != src.len() {
        lengths_differ(dst.len(), src.len());
    }
    if hint == Hint::Auto && auto::direct::copy(dst, src).is_some() {
        return;
    }
    copy_banded(dst, src, hint);
}

// The calls' slow paths stay out of line: inlined, they made the one-load
// path save five registers a call, which at hot 64 B cost as much as the
// copy (see `auto::direct`).

#[cold]
#[inline(never)]
fn lengths_differ(dst: usize, src: usize) -> ! {
    let e = CopyError::LengthMismatch { dst, src };
    panic!("bulkmem::copy: {e}");
}

#[inline(never)]
fn copy_banded(dst: &mut [u8], src: &[u8], hint: Hint) {
    let req = Request::single(Op::Copy, dst.len(), hint);
    auto::chosen::<CopyKernel>(&req).copy(dst, src);
}

/// Copies with options (a named strategy, `Auto` allowed, and a hint);
/// returns the strategy that ran. Refused, with nothing written, when the
/// lengths differ or the strategy cannot copy here: see [`CopyError`],
/// whose example matches on a length mismatch.
#[inline]
pub fn copy_opts(dst: &mut [u8], src: &[u8], opts: Options) -> Result<Strategy, CopyError> {
    if opts == Options::default() {
        if let Some(ran) = auto::direct::copy(dst, src) {
            return Ok(ran.strategy());
        }
    }
    copy_opts_banded(opts, dst, src)
}

#[inline(never)]
fn copy_opts_banded(opts: Options, dst: &mut [u8], src: &[u8]) -> Result<Strategy, CopyError> {
    if dst.len() != src.len() {
        return Err(CopyError::LengthMismatch {
            dst: dst.len(),
            src: src.len(),
        });
    }
    let req = Request::single(Op::Copy, dst.len(), opts.hint);
    let k = auto::kernel::<CopyKernel>(opts.strategy, &req)?;
    k.copy(dst, src);
    Ok(k.strategy())
}

/// Zeroes `dst` with the primitive `auto` picks for this size.
#[inline]
pub fn clear(dst: &mut [u8]) {
    clear_hint(dst, Hint::Auto)
}

/// As [`clear`], telling `auto` what happens to `dst` next.
#[inline]
pub fn clear_hint(dst: &mut [u8], hint: Hint) {
    if hint == Hint::Auto && auto::direct::clear(dst).is_some() {
        return;
    }
    clear_banded(dst, hint);
}

#[inline(never)]
fn clear_banded(dst: &mut [u8], hint: Hint) {
    let req = Request::single(Op::Clear, dst.len(), hint);
    auto::chosen::<ClearKernel>(&req).clear(dst);
}

/// Zeroes with options (a named strategy, `Auto` allowed, and a hint);
/// returns the strategy that ran. Refused, with nothing written, when the
/// strategy cannot clear here.
#[inline]
pub fn clear_opts(dst: &mut [u8], opts: Options) -> Result<Strategy, StrategyError> {
    if opts == Options::default() {
        if let Some(ran) = auto::direct::clear(dst) {
            return Ok(ran.strategy());
        }
    }
    clear_opts_banded(opts, dst)
}

#[inline(never)]
fn clear_opts_banded(opts: Options, dst: &mut [u8]) -> Result<Strategy, StrategyError> {
    let req = Request::single(Op::Clear, dst.len(), opts.hint);
    let k = auto::kernel::<ClearKernel>(opts.strategy, &req)?;
    k.clear(dst);
    Ok(k.strategy())
}

/// Copies every `(dst, src)` pair on the calling thread, choosing one
/// primitive for the whole batch from its total size (see [`auto`]):
/// [`Engine::copy_batch`](crate::Engine::copy_batch) with no workers, the
/// same arguments, [`Report`] and errors. Adjacent extents are merged
/// first. On a length mismatch nothing is written and the error names the
/// first bad extent.
pub fn copy_batch(ops: &mut [(&mut [u8], &[u8])]) -> Result<Report, EngineError> {
    copy_batch_opts(ops, Options::default())
}

/// As [`copy_batch`] with a strategy or hint. A strategy this CPU cannot
/// run is refused ([`BatchError::Unavailable`]) before anything is written.
pub fn copy_batch_opts(
    ops: &mut [(&mut [u8], &[u8])],
    opts: Options,
) -> Result<Report, EngineError> {
    check_lengths(ops)?;
    let shape = plan::shape(ops.iter().map(|(d, s)| Extent {
        dst: d.as_ptr() as *mut u8,
        src: s.as_ptr(),
        len: d.len(),
    }));
    let extents = ops.len();
    let runs = ops.iter_mut().map(|(d, s)| Extent {
        dst: exposed_mut(d.as_mut_ptr()),
        src: exposed(s.as_ptr()),
        len: d.len(),
    });
    // SAFETY: the runs lie inside slices lent mutably (dst) and shared
    // (src), disjoint by the borrow rules.
    unsafe { copy_inline(runs, shape, extents, opts) }
}

/// Zeroes every extent on the calling thread, choosing one primitive for
/// the whole batch: [`Engine::clear_batch`](crate::Engine::clear_batch)
/// with no workers.
pub fn clear_batch(ops: &mut [&mut [u8]]) -> Result<Report, EngineError> {
    clear_batch_opts(ops, Options::default())
}

/// As [`clear_batch`] with a strategy or hint.
pub fn clear_batch_opts(ops: &mut [&mut [u8]], opts: Options) -> Result<Report, EngineError> {
    let shape = plan::shape(ops.iter().map(|d| Extent {
        dst: d.as_ptr() as *mut u8,
        src: core::ptr::null(),
        len: d.len(),
    }));
    let extents = ops.len();
    let runs = ops.iter_mut().map(|d| Extent {
        dst: exposed_mut(d.as_mut_ptr()),
        src: core::ptr::null(),
        len: d.len(),
    });
    // SAFETY: each run lies inside a mutably borrowed slice.
    unsafe { clear_inline(runs, shape, extents, opts) }
}

/// Copies extents given by address on the calling thread, choosing one
/// primitive for the batch as [`copy_batch`] does. The batch is checked
/// first, as [`Engine::copy_extents`](crate::Engine::copy_extents) checks
/// it (no null pointer, no destination overlapping another extent or its
/// own source), and nothing is written when it fails. This is what C
/// callers' batches go through.
///
/// # Safety
/// Every `src` readable and every `dst` writable for its `len` for the
/// duration of the call, and nothing else accessing the destinations.
pub unsafe fn copy_extents(ops: &[Extent], opts: Options) -> Result<Report, EngineError> {
    validate_extents(Op::Copy, ops)?;
    let shape = plan::shape(ops.iter().copied());
    // SAFETY: the caller vouches for each extent; validation found no null
    // pointer and no destination overlapping anything else.
    unsafe { copy_inline(ops.iter().copied(), shape, ops.len(), opts) }
}

/// Zeroes extents given by address (`src` ignored); checked and chosen as
/// [`copy_extents`].
///
/// # Safety
/// Every `dst` writable for its `len` for the duration of the call, and
/// nothing else accessing them.
pub unsafe fn clear_extents(ops: &[Extent], opts: Options) -> Result<Report, EngineError> {
    validate_extents(Op::Clear, ops)?;
    let runs = ops.iter().map(|e| Extent {
        src: core::ptr::null(),
        ..*e
    });
    let shape = plan::shape(runs.clone());
    // SAFETY: as in copy_extents.
    unsafe { clear_inline(runs, shape, ops.len(), opts) }
}

/// The calling thread's batch copy: the kernel for the batch's shape
/// (`total` bytes in `count` coalesced runs), the runs, and the report of
/// a batch of `extents` one thread ran whole.
///
/// # Safety
/// As [`copy_runs`].
unsafe fn copy_inline(
    runs: impl Iterator<Item = Extent>,
    (total, count): (usize, usize),
    extents: usize,
    opts: Options,
) -> Result<Report, EngineError> {
    let req = Request::batch(Op::Copy, total, count, opts.hint);
    let k = auto::kernel::<CopyKernel>(opts.strategy, &req).map_err(BatchError::from)?;
    // SAFETY: the caller's contract, passed on.
    unsafe { copy_runs(k, runs) };
    Ok(inline_report(k.strategy(), total, extents))
}

/// As [`copy_inline`], zeroing.
///
/// # Safety
/// As [`clear_runs`].
unsafe fn clear_inline(
    runs: impl Iterator<Item = Extent>,
    (total, count): (usize, usize),
    extents: usize,
    opts: Options,
) -> Result<Report, EngineError> {
    let req = Request::batch(Op::Clear, total, count, opts.hint);
    let k = auto::kernel::<ClearKernel>(opts.strategy, &req).map_err(BatchError::from)?;
    // SAFETY: the caller's contract, passed on.
    unsafe { clear_runs(k, runs) };
    Ok(inline_report(k.strategy(), total, extents))
}

/// A batch of `extents` and `total` bytes, done whole by the calling
/// thread in one chunk (none for an empty batch).
fn inline_report(strategy: Strategy, total: usize, extents: usize) -> Report {
    let ran = usize::from(total > 0);
    Report {
        strategy,
        total,
        bytes_done: total,
        extents_done: extents,
        partial: None,
        cancelled: false,
        chunks: ran,
        workers: ran,
        offloaded: 0,
        offload_redone: 0,
    }
}

/// Runs `k` unfenced over the coalesced `runs` (four at a time where
/// `crate::gangs` groups them), asking for each next run's source while
/// copying the current one, then fences once for the whole batch, before
/// the caller can see it returned.
///
/// # Safety
/// Every run's `src` readable and `dst` writable for its `len`, no
/// destination overlapping anything else.
unsafe fn copy_runs(k: CopyKernel, runs: impl Iterator<Item = Extent>) {
    let fence = Fence::new();
    let kernel = Unfenced::new(k, &fence);
    let four = kernel.gang().map(|gang| {
        // SAFETY: four runs of the caller's contract, whose destinations
        // overlap nothing else.
        move |g: &_, _: &_| unsafe { gang(g) }
    });
    crate::gangs::walk(
        plan::coalesce(runs).map(|r| plan::Span::of(0, r, 0, r.len)),
        // SAFETY: a run is one extent or several continuing ones (the
        // caller's contract); `k` was checked against this CPU.
        |s| unsafe { kernel.copy_raw(s.dst, s.src, s.len) },
        four,
    );
    fence.drain();
}

/// As [`copy_runs`], zeroing.
///
/// # Safety
/// Every run's `dst` writable for its `len`.
unsafe fn clear_runs(k: ClearKernel, runs: impl Iterator<Item = Extent>) {
    let fence = Fence::new();
    let kernel = Unfenced::new(k, &fence);
    for r in plan::coalesce(runs) {
        // SAFETY: the caller's contract; `k` was checked against this CPU.
        unsafe { kernel.clear_raw(r.dst, r.len) };
    }
    fence.drain();
}
