//! The faults one checked batch's workers record ([`FaultLog`]), and how
//! they become per-extent outcomes. Separate from checked.rs so that the
//! job that runs the checked kernels (job.rs) and the entry points that
//! make them (checked.rs) share it without depending on each other.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::pool::lock;
use crate::fault::{self, Fault, Outcome};
use crate::mc::{McClear, McCopy};
use crate::plan::Run;
use crate::report::Report;

/// The faults of one checked batch, shared by its workers.
pub(crate) struct FaultLog {
    /// The extent each run is (runs are the non-empty extents, in order).
    pub(super) owners: Vec<usize>,
    /// Per extent: offset of the earliest fault recorded, usize::MAX if none.
    first: Vec<AtomicUsize>,
    detail: Mutex<Vec<Option<Fault>>>,
}

impl FaultLog {
    pub(super) fn new(count: usize) -> FaultLog {
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

    pub(super) fn outcomes(self, report: &Report) -> Vec<Outcome> {
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
