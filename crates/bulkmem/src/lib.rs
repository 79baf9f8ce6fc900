//! bulkmem copies and clears large runs of memory at the speed of the
//! hardware, choosing the CPU primitive per machine, size and batch.
//!
//! ```
//! let src = vec![7u8; 1 << 20];
//! let mut dst = vec![0u8; 1 << 20];
//! bulkmem::copy(&mut dst, &src);             // auto: primitive chosen for this CPU
//! bulkmem::clear(&mut dst);                  // zero it again
//!
//! // A batch is chosen for as a whole: 128 separate 2 MiB copies are one
//! // 256 MiB stream, which a per-call memcpy cannot know.
//! let (a, b) = dst.split_at_mut(4096);
//! let mut batch = [(a, &src[..4096]), (b, &src[4096..])];
//! let chose = bulkmem::copy_batch(&mut batch).unwrap();
//! assert!(chose.supports(bulkmem::Op::Copy));
//!
//! // Or name the primitive; unavailable ones are refused, never executed.
//! use bulkmem::{Hint, Strategy};
//! if Strategy::Avx2Nt.available() {
//!     bulkmem::copy_with(Strategy::Avx2Nt, &mut dst, &src).unwrap();
//! }
//! bulkmem::copy_hint(&mut dst, &src, Hint::Stream); // write-once data
//! ```
//!
//! Template fills repeat a prepared element across a region, patching each
//! copy, with non-temporal stores for write-once data:
//!
//! ```
//! let mut pages = vec![0u8; 64 * 1024];
//! let template = [0xABu8; 64];
//! bulkmem::fill_with(&mut pages, &template, |i, elem| {
//!     elem[..8].copy_from_slice(&(i as u64).to_le_bytes()); // per-element field
//! })
//! .unwrap();
//! assert_eq!(pages[64..72], 1u64.to_le_bytes());
//! ```
//!
//! Every strategy handles any length and alignment and touches nothing
//! outside the slices it is given. Non-temporal strategies end with a store
//! fence, so their data is ordered before anything the caller does next.

#![warn(missing_docs)]

pub mod auto;
pub mod cpu;
mod descriptor;
pub mod engine;
mod error;
mod extent;
#[cfg(target_arch = "x86_64")]
pub mod fault;
mod fill;
mod handle;
mod kernels;
pub mod mapping;
#[cfg(target_arch = "x86_64")]
mod mc;
mod move_report;
pub mod numa;
pub mod offload;
pub mod placement;
pub(crate) mod plan;
mod report;
mod strategy;
pub mod topology;
pub mod uffd;

pub use auto::{Choice, Machine, Request};
pub use engine::{CancelToken, Control, Engine, EngineBuilder, Extent, Progress, Report};
pub use error::Error;
#[cfg(target_arch = "x86_64")]
pub use fault::{clear_checked, clear_checked_with, copy_checked, copy_checked_with, Fault, Side};
pub use fill::{fill, fill_hint, fill_with, fill_with_hint, nt_drain, Mode as FillMode, NtWriter};
pub use handle::Kernel;
pub use placement::Placement;
pub use strategy::{Hint, Op, ParseNameError, Strategy};

use plan::Run;

/// How a batch (or a single call) should be executed.
///
/// Build it with [`Options::default`] (auto, no hint), [`Options::strategy`]
/// or [`Options::hint`]; it may gain fields, so it cannot be written as a
/// struct literal outside the crate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// `Auto` (the default) or a concrete strategy.
    pub strategy: Strategy,
    /// Only consulted by `Auto`.
    pub hint: Hint,
}

impl Options {
    /// Runs `strategy` as named: `Auto` chooses, a concrete one is checked
    /// (supported for the operation, available on this CPU) and then used
    /// for every byte. The hint is `Auto`, which a concrete strategy ignores.
    pub fn strategy(strategy: Strategy) -> Options {
        Options {
            strategy,
            hint: Hint::Auto,
        }
    }

    /// Lets `auto` choose (strategy `Auto`), told what happens to the
    /// destination next.
    pub fn hint(hint: Hint) -> Options {
        Options {
            strategy: Strategy::Auto,
            hint,
        }
    }
}

/// The concrete strategy `opts` means for `req`, or why it cannot run.
#[inline]
pub fn resolve(opts: Options, req: &Request) -> Result<Strategy, Error> {
    let s = opts.strategy;
    if s == Strategy::Auto {
        return Ok(auto::here(req).strategy);
    }
    if !s.supports(req.op) {
        return Err(Error::Unsupported {
            strategy: s,
            op: req.op,
        });
    }
    if let Some(needs) = s.missing_feature(&cpu::info().features) {
        return Err(Error::Unavailable { strategy: s, needs });
    }
    Ok(s)
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
/// # Panics
/// If the lengths differ.
#[inline]
pub fn copy_hint(dst: &mut [u8], src: &[u8], hint: Hint) {
    if let Err(e) = copy_opts(Options::hint(hint), dst, src) {
        panic!("bulkmem::copy: {e}");
    }
}

/// Copies with the named strategy (`Auto` allowed).
pub fn copy_with(strategy: Strategy, dst: &mut [u8], src: &[u8]) -> Result<(), Error> {
    copy_opts(Options::strategy(strategy), dst, src).map(drop)
}

/// Copies with full options; returns the strategy that ran.
#[inline]
pub fn copy_opts(opts: Options, dst: &mut [u8], src: &[u8]) -> Result<Strategy, Error> {
    if dst.len() != src.len() {
        return Err(Error::LengthMismatch {
            index: None,
            dst: dst.len(),
            src: src.len(),
        });
    }
    let s = if opts.strategy == Strategy::Auto {
        auto::bands(Op::Copy, opts.hint).lookup(dst.len())
    } else {
        resolve(opts, &Request::single(Op::Copy, dst.len(), opts.hint))?
    };
    // SAFETY: the slices are valid, equally long, and cannot overlap (one is
    // borrowed mutably); `resolve` checked the CPU has what `s` needs.
    unsafe { run_copy(s, dst.as_mut_ptr(), src.as_ptr(), dst.len()) };
    Ok(s)
}

/// Zeroes `dst` with the primitive `auto` picks for this size.
#[inline]
pub fn clear(dst: &mut [u8]) {
    clear_hint(dst, Hint::Auto)
}

/// As [`clear`], telling `auto` what happens to `dst` next.
#[inline]
pub fn clear_hint(dst: &mut [u8], hint: Hint) {
    if let Err(e) = clear_opts(Options::hint(hint), dst) {
        panic!("bulkmem::clear: {e}");
    }
}

/// Zeroes with the named strategy (`Auto` allowed).
pub fn clear_with(strategy: Strategy, dst: &mut [u8]) -> Result<(), Error> {
    clear_opts(Options::strategy(strategy), dst).map(drop)
}

/// Zeroes with full options; returns the strategy that ran.
#[inline]
pub fn clear_opts(opts: Options, dst: &mut [u8]) -> Result<Strategy, Error> {
    let s = if opts.strategy == Strategy::Auto {
        auto::bands(Op::Clear, opts.hint).lookup(dst.len())
    } else {
        resolve(opts, &Request::single(Op::Clear, dst.len(), opts.hint))?
    };
    // SAFETY: `dst` is a valid writable slice; `resolve` checked the CPU.
    unsafe { run_clear(s, dst.as_mut_ptr(), dst.len()) };
    Ok(s)
}

/// Copies every `(dst, src)` pair, choosing one primitive for the whole batch
/// from its total size (see [`auto`]). Adjacent extents are merged first.
/// Returns the strategy used. On a length mismatch nothing is written and the
/// error names the first bad extent.
pub fn copy_batch(ops: &mut [(&mut [u8], &[u8])]) -> Result<Strategy, Error> {
    copy_batch_with(Options::default(), ops)
}

/// As [`copy_batch`] with a strategy or hint.
pub fn copy_batch_with(opts: Options, ops: &mut [(&mut [u8], &[u8])]) -> Result<Strategy, Error> {
    check_lengths(ops)?;
    let (total, count) = plan::shape(ops.iter().map(|(d, s)| Run {
        dst: d.as_ptr() as *mut u8,
        src: s.as_ptr(),
        len: d.len(),
    }));
    let req = Request {
        op: Op::Copy,
        total,
        runs: count,
        hint: opts.hint,
    };
    let s = resolve(opts, &req)?;
    let runs = ops.iter_mut().map(|(d, s)| Run {
        dst: exposed_mut(d.as_mut_ptr()),
        src: exposed(s.as_ptr()),
        len: d.len(),
    });
    // SAFETY: the runs lie inside slices lent mutably (dst) and shared
    // (src), disjoint by the borrow rules; `resolve` checked the CPU.
    unsafe { copy_runs(s, runs) };
    Ok(s)
}

/// Runs the unfenced kernel of `s` over the coalesced `runs`, asking for
/// each next run's source while copying the current one, then fences once
/// for the whole batch, before the caller can see it returned.
///
/// # Safety
/// Every run's `src` readable and `dst` writable for its `len`, no
/// destination overlapping anything else; `s` resolved for `Op::Copy`.
unsafe fn copy_runs(s: Strategy, runs: impl Iterator<Item = Run>) {
    let kernel = handle::copy_fn_unfenced(s);
    let mut runs = plan::coalesce(runs).peekable();
    while let Some(r) = runs.next() {
        if let Some(next) = runs.peek() {
            kernels::prefetch_ahead(next.src, next.len);
        }
        // SAFETY: a run is one extent or several continuing ones; the
        // caller's contract.
        unsafe { kernel(r.dst, r.src, r.len) };
    }
    kernels::drain();
}

/// As [`copy_runs`], zeroing.
///
/// # Safety
/// Every run's `dst` writable for its `len`; `s` resolved for `Op::Clear`.
unsafe fn clear_runs(s: Strategy, runs: impl Iterator<Item = Run>) {
    let kernel = handle::clear_fn_unfenced(s);
    for r in plan::coalesce(runs) {
        // SAFETY: the caller's contract.
        unsafe { kernel(r.dst, r.len) };
    }
    kernels::drain();
}

/// The first `(dst, src)` pair whose lengths differ, as an error.
pub(crate) fn check_lengths(ops: &[(&mut [u8], &[u8])]) -> Result<(), Error> {
    match ops
        .iter()
        .enumerate()
        .find(|(_, (d, s))| d.len() != s.len())
    {
        Some((index, (d, s))) => Err(Error::LengthMismatch {
            index: Some(index),
            dst: d.len(),
            src: s.len(),
        }),
        None => Ok(()),
    }
}

/// Zeroes every extent, choosing one primitive for the whole batch.
pub fn clear_batch(ops: &mut [&mut [u8]]) -> Result<Strategy, Error> {
    clear_batch_with(Options::default(), ops)
}

/// As [`clear_batch`] with a strategy or hint.
pub fn clear_batch_with(opts: Options, ops: &mut [&mut [u8]]) -> Result<Strategy, Error> {
    let (total, count) = plan::shape(ops.iter().map(|d| Run {
        dst: d.as_ptr() as *mut u8,
        src: core::ptr::null(),
        len: d.len(),
    }));
    let req = Request {
        op: Op::Clear,
        total,
        runs: count,
        hint: opts.hint,
    };
    let s = resolve(opts, &req)?;
    let runs = ops.iter_mut().map(|d| Run {
        dst: exposed_mut(d.as_mut_ptr()),
        src: core::ptr::null(),
        len: d.len(),
    });
    // SAFETY: each run lies inside mutably borrowed extents (merged only
    // where they continue each other); `resolve` checked the CPU.
    unsafe { clear_runs(s, runs) };
    Ok(s)
}

/// Copies extents given by address on the calling thread, choosing one
/// primitive for the batch as [`copy_batch`] does. The batch is checked
/// first, as [`Engine::copy_extents`] checks it (no null pointer, no
/// destination overlapping another extent or its own source), and nothing is
/// written when it fails. This is what C callers' batches go through.
///
/// # Safety
/// Every `src` readable and every `dst` writable for its `len` for the
/// duration of the call, and nothing else accessing the destinations.
pub unsafe fn copy_extents(opts: Options, ops: &[Extent]) -> Result<Strategy, Error> {
    extent::validate_extents(Op::Copy, ops)?;
    let runs = ops.iter().map(|e| Run {
        dst: e.dst,
        src: e.src,
        len: e.len,
    });
    let (total, count) = plan::shape(runs.clone());
    let s = resolve(
        opts,
        &Request {
            op: Op::Copy,
            total,
            runs: count,
            hint: opts.hint,
        },
    )?;
    // SAFETY: the caller vouches for each extent; validation found no null
    // pointer and no destination overlapping anything else; `resolve`
    // checked the CPU.
    unsafe { copy_runs(s, runs) };
    Ok(s)
}

/// Zeroes extents given by address (`src` ignored); checked and chosen as
/// [`copy_extents`].
///
/// # Safety
/// Every `dst` writable for its `len` for the duration of the call, and
/// nothing else accessing them.
pub unsafe fn clear_extents(opts: Options, ops: &[Extent]) -> Result<Strategy, Error> {
    extent::validate_extents(Op::Clear, ops)?;
    let runs = ops.iter().map(|e| Run {
        dst: e.dst,
        src: core::ptr::null(),
        len: e.len,
    });
    let (total, count) = plan::shape(runs.clone());
    let s = resolve(
        opts,
        &Request {
            op: Op::Clear,
            total,
            runs: count,
            hint: opts.hint,
        },
    )?;
    // SAFETY: as in copy_extents.
    unsafe { clear_runs(s, runs) };
    Ok(s)
}

// A merged run spans several borrows, so the pointer that walks it must be
// allowed to reach all of them: it is rebuilt from an address whose extents'
// provenance has been exposed, rather than derived from one extent's borrow.
pub(crate) fn exposed_mut(p: *const u8) -> *mut u8 {
    core::ptr::with_exposed_provenance_mut(p.expose_provenance())
}

pub(crate) fn exposed(p: *const u8) -> *const u8 {
    core::ptr::with_exposed_provenance(p.expose_provenance())
}

/// Runs the copy kernel of a resolved strategy.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes, not overlapping; `s`
/// came from [`resolve`] for `Op::Copy` (supported and available).
#[inline]
unsafe fn run_copy(s: Strategy, dst: *mut u8, src: *const u8, len: usize) {
    let k = handle::copy_fn(s);
    // SAFETY: forwarded contract.
    unsafe { k(dst, src, len) }
}

/// Runs the clear kernel of a resolved strategy.
///
/// # Safety
/// `dst` writable for `len` bytes; `s` came from [`resolve`] for `Op::Clear`.
#[inline]
unsafe fn run_clear(s: Strategy, dst: *mut u8, len: usize) {
    let k = handle::clear_fn(s);
    // SAFETY: forwarded contract.
    unsafe { k(dst, len) }
}
