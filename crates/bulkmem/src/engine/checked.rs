//! Checked batches: a SIGBUS in one extent ends that extent only; the
//! others are still done, and the result says per extent what happened.
//!
//! Extents are not merged (so a fault is attributed to exactly one), and
//! each piece of an extent runs the checked routine of [`crate::fault`].
//! An extent longer than a chunk is copied by several workers at once; a
//! piece that starts after an already recorded fault in its extent is
//! skipped, and the fault with the smallest offset wins. So the reported
//! offset is still the first byte not copied, and everything before it is
//! done; but for such long extents, pieces after the fault that were
//! already running on other workers may have completed too
//! ([`Outcome::Faulted`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{lock, stream, validate, Batch, ClearSlices, Control, CopySlices};
use super::{Engine, Extent, Kernel, Raw, Report, SPLIT_ALIGN};
use crate::error::Error;
use crate::fault::{self, Fault, McClear, McCopy};
use crate::plan::Run;
use crate::strategy::Op;

/// What a checked batch did to one extent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every byte copied (or zeroed).
    Done,
    /// Stopped at a SIGBUS: bytes before `Fault::offset` (relative to the
    /// extent) are done. Nothing after it was written, except, in extents
    /// longer than the engine's chunk, by pieces other workers were
    /// already running when the fault happened (their bytes are then the
    /// correct copy).
    Faulted(Fault),
    /// The batch was cancelled (or a progress callback panicked) after
    /// this many leading bytes of the extent; the rest is untouched.
    Partial(usize),
    /// Never touched: the batch stopped before reaching it.
    NotStarted,
}

/// A checked batch's report: the batch as a whole (as for unchecked
/// batches; faulted bytes count as processed) and one outcome per extent,
/// in the caller's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedReport {
    pub report: Report,
    pub extents: Vec<Outcome>,
}

impl CheckedReport {
    /// The faulted extents, as (index, fault).
    pub fn faults(&self) -> impl Iterator<Item = (usize, &Fault)> {
        self.extents
            .iter()
            .enumerate()
            .filter_map(|(i, o)| match o {
                Outcome::Faulted(f) => Some((i, f)),
                _ => None,
            })
    }

    /// Whether every extent is [`Outcome::Done`].
    pub fn all_done(&self) -> bool {
        self.extents.iter().all(|o| *o == Outcome::Done)
    }
}

/// The faults of one checked batch, shared by its workers.
pub(crate) struct FaultLog {
    /// The extent each run is (runs are the non-empty extents, in order).
    owners: Vec<usize>,
    /// Per extent: offset of the earliest fault recorded, usize::MAX if none.
    first: Vec<AtomicUsize>,
    detail: Mutex<Vec<Option<Fault>>>,
}

impl FaultLog {
    fn new(count: usize) -> FaultLog {
        FaultLog {
            owners: Vec::new(),
            first: (0..count).map(|_| AtomicUsize::new(usize::MAX)).collect(),
            detail: Mutex::new(vec![None; count]),
        }
    }

    /// Whether extent `e` already faulted at or before offset `from`.
    fn ended_before(&self, e: usize, from: usize) -> bool {
        self.first[e].load(Ordering::Relaxed) <= from
    }

    fn record(&self, e: usize, offset: usize, mut f: Fault) {
        f.offset = offset;
        let mut d = lock(&self.detail);
        if offset < self.first[e].load(Ordering::Relaxed) {
            self.first[e].store(offset, Ordering::Relaxed);
            d[e] = Some(f);
        }
    }

    /// Copies `[from, to)` of run `i` (= one extent) unless the extent
    /// already faulted before `from`.
    ///
    /// # Safety
    /// As the engine's kernels: the piece lies in a validated extent.
    pub(super) unsafe fn copy(&self, k: McCopy, i: usize, run: Run, from: usize, to: usize) {
        let e = self.owners[i];
        if self.ended_before(e, from) {
            return;
        }
        // SAFETY: forwarded contract; the routine survives SIGBUS.
        let r = unsafe { fault::copy_exact(k, run.dst.add(from), run.src.add(from), to - from) };
        if let Err(f) = r {
            self.record(e, from + f.offset, f);
        }
    }

    /// As [`FaultLog::copy`], zeroing.
    ///
    /// # Safety
    /// As [`FaultLog::copy`].
    pub(super) unsafe fn clear(&self, k: McClear, i: usize, run: Run, from: usize, to: usize) {
        let e = self.owners[i];
        if self.ended_before(e, from) {
            return;
        }
        // SAFETY: forwarded contract.
        if let Err(f) = unsafe { fault::clear_exact(k, run.dst.add(from), to - from) } {
            self.record(e, from + f.offset, f);
        }
    }

    fn outcomes(self, report: &Report) -> Vec<Outcome> {
        let detail = self.detail.into_inner().unwrap_or_else(|e| e.into_inner());
        detail
            .into_iter()
            .enumerate()
            .map(|(i, d)| match d {
                Some(f) => Outcome::Faulted(f),
                None if i < report.extents_done => Outcome::Done,
                None => match report.partial {
                    Some((p, n)) if p == i => Outcome::Partial(n),
                    _ => Outcome::NotStarted,
                },
            })
            .collect()
    }
}

impl Engine {
    /// As [`Engine::copy_batch_with`], surviving SIGBUS: a fault ends only
    /// the extent it hit (see [`Outcome`]). Uses the checked form of the
    /// engine's strategy ([`fault::checked_form`]); a strategy without one
    /// is refused ([`Error::NotChecked`]) before anything is written.
    pub fn copy_batch_checked(
        &self,
        ops: &mut [(&mut [u8], &[u8])],
        ctl: Control<'_>,
    ) -> Result<CheckedReport, Error> {
        crate::check_lengths(ops)?;
        self.run_checked(Op::Copy, &CopySlices(ops), false, ctl)
    }

    /// As [`Engine::clear_batch_with`], surviving SIGBUS.
    pub fn clear_batch_checked(
        &self,
        ops: &mut [&mut [u8]],
        ctl: Control<'_>,
    ) -> Result<CheckedReport, Error> {
        self.run_checked(Op::Clear, &ClearSlices(ops), false, ctl)
    }

    /// As [`Engine::copy_extents`], surviving SIGBUS.
    ///
    /// # Safety
    /// As [`Engine::copy_extents`], except that a range may raise SIGBUS
    /// (poisoned, past the end of its file): such extents are reported.
    pub unsafe fn copy_extents_checked(
        &self,
        ops: &[Extent],
        ctl: Control<'_>,
    ) -> Result<CheckedReport, Error> {
        self.run_checked(Op::Copy, &Raw(ops, Op::Copy), true, ctl)
    }

    /// As [`Engine::clear_extents`], surviving SIGBUS.
    ///
    /// # Safety
    /// As [`Engine::copy_extents_checked`].
    pub unsafe fn clear_extents_checked(
        &self,
        ops: &[Extent],
        ctl: Control<'_>,
    ) -> Result<CheckedReport, Error> {
        self.run_checked(Op::Clear, &Raw(ops, Op::Clear), true, ctl)
    }

    fn run_checked(
        &self,
        op: Op,
        batch: &dyn Batch,
        check_overlap: bool,
        ctl: Control<'_>,
    ) -> Result<CheckedReport, Error> {
        let mut guard = self.serial()?;
        let scratch = &mut *guard;
        if check_overlap {
            validate(op, batch, &mut scratch.spans)?;
        }
        let mut log = FaultLog::new(batch.count());
        scratch.runs.clear();
        for i in 0..batch.count() {
            let r = batch.get(i);
            if r.len > 0 {
                scratch.runs.push(r);
                log.owners.push(i);
            }
        }
        let req = stream(op, &scratch.runs, &mut scratch.ends, self.opts.hint);
        let strategy = fault::checked_form(self.opts.strategy, &req)?;
        let kernel = match op {
            Op::Copy => Kernel::CopyChecked(fault::copy_fn(strategy, false), &log),
            Op::Clear => Kernel::ClearChecked(fault::clear_fn(strategy, false), &log),
        };
        let report = self.execute(
            &scratch.runs,
            &scratch.ends,
            kernel,
            strategy,
            SPLIT_ALIGN,
            batch,
            ctl,
        )?;
        let extents = log.outcomes(&report);
        Ok(CheckedReport { report, extents })
    }
}
