//! The calling-thread entry points: single copies and clears, batches of
//! slices and batches of raw extents. Each gets its kernel from the policy
//! (`crate::auto::kernel`), as a CPU-checked [`CopyKernel`] or
//! [`ClearKernel`]: nothing here chooses a strategy or turns one into code.

use crate::auto::{self, Request};
use crate::error::{BatchError, CopyError, StrategyError};
use crate::extent::{check_lengths, validate_extents};
use crate::handle::{ClearKernel, CopyKernel, Fence};
use crate::plan::{self, exposed, exposed_mut, Extent};
use crate::strategy::{Hint, Op, Options, Strategy};

/// The concrete strategy `opts` means for `req`, or why it cannot run.
#[inline]
pub fn resolve(opts: Options, req: &Request) -> Result<Strategy, StrategyError> {
    match req.op {
        Op::Copy => auto::kernel::<CopyKernel>(opts.strategy, req).map(|k| k.strategy()),
        Op::Clear => auto::kernel::<ClearKernel>(opts.strategy, req).map(|k| k.strategy()),
    }
}

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

/// [`copy`] on its fastest path only: true if `auto` has already settled
/// the kernel for every length of this one's bit count (a slot of a static
/// table, filled when the first calls compile this process's policy), and
/// then the copy is done exactly as [`copy`] does it; false, with nothing
/// written, if the slot is empty or the lengths differ.
///
/// Never panics, allocates, locks or reads a profile: for a caller that
/// keeps set-up off its hot path (the C interface's `bm_copy` calls it
/// before entering its panic guard, which costs a C caller about 15 ns)
/// and calls [`copy`] when this says false.
///
/// ```
/// let src = vec![1u8; 4096];
/// let mut dst = vec![0u8; 4096];
/// if !bulkmem::copy_if_direct(&mut dst, &src) {
///     bulkmem::copy(&mut dst, &src); // settles the table for next time
/// }
/// assert_eq!(dst, src);
/// ```
#[inline]
pub fn copy_if_direct(dst: &mut [u8], src: &[u8]) -> bool {
    auto::direct::copy(dst, src).is_some()
}

/// As [`copy_if_direct`], zeroing: [`clear`]'s fastest path only.
#[inline]
pub fn clear_if_direct(dst: &mut [u8]) -> bool {
    auto::direct::clear(dst).is_some()
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

/// Copies with the named strategy (`Auto` allowed). Refused, with nothing
/// written, when the lengths differ or the strategy cannot copy here: see
/// [`CopyError`], whose example matches on a length mismatch.
pub fn copy_with(strategy: Strategy, dst: &mut [u8], src: &[u8]) -> Result<(), CopyError> {
    copy_opts(Options::strategy(strategy), dst, src).map(drop)
}

/// Copies with full options; returns the strategy that ran. Fails as
/// [`copy_with`].
#[inline]
pub fn copy_opts(opts: Options, dst: &mut [u8], src: &[u8]) -> Result<Strategy, CopyError> {
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

/// Zeroes with the named strategy (`Auto` allowed); refused, with nothing
/// written, when the strategy cannot clear here.
pub fn clear_with(strategy: Strategy, dst: &mut [u8]) -> Result<(), StrategyError> {
    clear_opts(Options::strategy(strategy), dst).map(drop)
}

/// Zeroes with full options; returns the strategy that ran.
#[inline]
pub fn clear_opts(opts: Options, dst: &mut [u8]) -> Result<Strategy, StrategyError> {
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

/// Copies every `(dst, src)` pair, choosing one primitive for the whole batch
/// from its total size (see [`auto`]). Adjacent extents are merged first.
/// Returns the strategy used. On a length mismatch nothing is written and the
/// error names the first bad extent.
pub fn copy_batch(ops: &mut [(&mut [u8], &[u8])]) -> Result<Strategy, BatchError> {
    copy_batch_with(Options::default(), ops)
}

/// As [`copy_batch`] with a strategy or hint.
pub fn copy_batch_with(
    opts: Options,
    ops: &mut [(&mut [u8], &[u8])],
) -> Result<Strategy, BatchError> {
    check_lengths(ops)?;
    let (total, count) = plan::shape(ops.iter().map(|(d, s)| Extent {
        dst: d.as_ptr() as *mut u8,
        src: s.as_ptr(),
        len: d.len(),
    }));
    let k = auto::kernel::<CopyKernel>(
        opts.strategy,
        &Request::batch(Op::Copy, total, count, opts.hint),
    )?;
    let runs = ops.iter_mut().map(|(d, s)| Extent {
        dst: exposed_mut(d.as_mut_ptr()),
        src: exposed(s.as_ptr()),
        len: d.len(),
    });
    // SAFETY: the runs lie inside slices lent mutably (dst) and shared
    // (src), disjoint by the borrow rules.
    unsafe { copy_runs(k, runs) };
    Ok(k.strategy())
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
    let kernel = k.unfenced(&fence);
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
    let kernel = k.unfenced(&fence);
    for r in plan::coalesce(runs) {
        // SAFETY: the caller's contract; `k` was checked against this CPU.
        unsafe { kernel.clear_raw(r.dst, r.len) };
    }
    fence.drain();
}

/// Zeroes every extent, choosing one primitive for the whole batch.
pub fn clear_batch(ops: &mut [&mut [u8]]) -> Result<Strategy, BatchError> {
    clear_batch_with(Options::default(), ops)
}

/// As [`clear_batch`] with a strategy or hint.
pub fn clear_batch_with(opts: Options, ops: &mut [&mut [u8]]) -> Result<Strategy, BatchError> {
    let (total, count) = plan::shape(ops.iter().map(|d| Extent {
        dst: d.as_ptr() as *mut u8,
        src: core::ptr::null(),
        len: d.len(),
    }));
    let k = auto::kernel::<ClearKernel>(
        opts.strategy,
        &Request::batch(Op::Clear, total, count, opts.hint),
    )?;
    let runs = ops.iter_mut().map(|d| Extent {
        dst: exposed_mut(d.as_mut_ptr()),
        src: core::ptr::null(),
        len: d.len(),
    });
    // SAFETY: each run lies inside mutably borrowed extents (merged only
    // where they continue each other).
    unsafe { clear_runs(k, runs) };
    Ok(k.strategy())
}

/// Copies extents given by address on the calling thread, choosing one
/// primitive for the batch as [`copy_batch`] does. The batch is checked
/// first, as [`crate::Engine::copy_extents`] checks it (no null pointer, no
/// destination overlapping another extent or its own source), and nothing is
/// written when it fails. This is what C callers' batches go through.
///
/// # Safety
/// Every `src` readable and every `dst` writable for its `len` for the
/// duration of the call, and nothing else accessing the destinations.
pub unsafe fn copy_extents(opts: Options, ops: &[Extent]) -> Result<Strategy, BatchError> {
    validate_extents(Op::Copy, ops)?;
    let runs = ops.iter().map(|e| Extent {
        dst: e.dst,
        src: e.src,
        len: e.len,
    });
    let (total, count) = plan::shape(runs.clone());
    let k = auto::kernel::<CopyKernel>(
        opts.strategy,
        &Request::batch(Op::Copy, total, count, opts.hint),
    )?;
    // SAFETY: the caller vouches for each extent; validation found no null
    // pointer and no destination overlapping anything else.
    unsafe { copy_runs(k, runs) };
    Ok(k.strategy())
}

/// Zeroes extents given by address (`src` ignored); checked and chosen as
/// [`copy_extents`].
///
/// # Safety
/// Every `dst` writable for its `len` for the duration of the call, and
/// nothing else accessing them.
pub unsafe fn clear_extents(opts: Options, ops: &[Extent]) -> Result<Strategy, BatchError> {
    validate_extents(Op::Clear, ops)?;
    let runs = ops.iter().map(|e| Extent {
        dst: e.dst,
        src: core::ptr::null(),
        len: e.len,
    });
    let (total, count) = plan::shape(runs.clone());
    let k = auto::kernel::<ClearKernel>(
        opts.strategy,
        &Request::batch(Op::Clear, total, count, opts.hint),
    )?;
    // SAFETY: as in copy_extents.
    unsafe { clear_runs(k, runs) };
    Ok(k.strategy())
}
