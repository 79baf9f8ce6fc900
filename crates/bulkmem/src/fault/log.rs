//! The faults one checked batch's workers record ([`FaultLog`]), and how
//! they become per-extent outcomes. Separate from checked.rs so that the
//! job that runs the checked kernels (job.rs) and the entry points that
//! make them (checked.rs) share it without depending on each other.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::checked::mc::copy_mc_gang::McGang;
use crate::checked::mc::extable::RawFault;
use crate::fault::{self, Fault, Outcome};
use crate::handle::{CheckedClearKernel, CheckedCopyKernel, Unfenced};
use crate::kernels::gang::{Gang, GANG};
use crate::plan::Span;
use crate::report::Report;

/// The faults of one checked batch, shared by its workers. Sparse: faults
/// are rare, and a per-extent table (an atomic and an `Option<Fault>` per
/// extent) cost its allocation and initialisation on every batch, 7% of a
/// batch of 65536 scattered 4 KiB clears on a Zen 4 VM.
pub(crate) struct FaultLog {
    /// Extents in the batch.
    count: usize,
    /// Whether any fault was recorded: until one is, no piece looks at
    /// `faults`.
    any: AtomicBool,
    /// Per faulted extent, its earliest fault (offset in the extent).
    faults: Mutex<Vec<(usize, Fault)>>,
}

impl FaultLog {
    /// The faults recorded so far. A worker that panics holding the lock
    /// leaves a whole list behind (each update is one push), so poisoning
    /// is ignored, as the engine's own locks do.
    fn faults(&self) -> MutexGuard<'_, Vec<(usize, Fault)>> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A log for `count` extents; installs the fault handler, which the
    /// pieces then take as given.
    pub(crate) fn new(count: usize) -> FaultLog {
        fault::install();
        FaultLog {
            count,
            any: AtomicBool::new(false),
            faults: Mutex::new(Vec::new()),
        }
    }

    /// Whether extent `e` already faulted at or before offset `from`.
    #[inline]
    fn ended_before(&self, e: usize, from: usize) -> bool {
        self.any.load(Ordering::Acquire) && self.faulted_before(e, from)
    }

    #[cold]
    #[inline(never)]
    fn faulted_before(&self, e: usize, from: usize) -> bool {
        self.faults()
            .iter()
            .any(|&(x, f)| x == e && f.offset <= from)
    }

    #[cold]
    fn record(&self, e: usize, offset: usize, mut f: Fault) {
        f.offset = offset;
        let mut faults = self.faults();
        match faults.iter_mut().find(|(x, _)| *x == e) {
            Some((_, g)) if g.offset <= offset => {}
            Some((_, g)) => *g = f,
            None => faults.push((e, f)),
        }
        self.any.store(true, Ordering::Release);
    }

    /// Copies span `s` of extent `s.run` (checked batches run their
    /// extents one to one) unless that extent already faulted before
    /// `s.from`.
    ///
    /// # Safety
    /// As the engine's kernels: the span lies in a validated extent.
    #[inline]
    pub(crate) unsafe fn copy(&self, k: Unfenced<'_, CheckedCopyKernel>, s: &Span) {
        if self.ended_before(s.run, s.from) {
            return;
        }
        // SAFETY: forwarded contract; the routine survives the fault, and
        // the log's maker installed the handler.
        let r = unsafe { fault::copy_installed(k, s.dst, s.src, s.len) };
        if let Err(f) = r {
            self.record(s.run, s.from + f.offset, f);
        }
    }

    /// Copies a gang of four extents' spans (`spans[j]`, the span `g`
    /// copies) with `gang`, the checked twin
    /// of `k`'s four-extent form. After a fault, or once any fault is on
    /// record (an extent may have ended before its span), each span goes
    /// through [`FaultLog::copy`] from where the gang stopped, so faults
    /// are recorded exactly as one extent at a time records them.
    ///
    /// # Safety
    /// As [`FaultLog::copy`] for every span; `g` describes `spans`.
    pub(crate) unsafe fn copy_gang(
        &self,
        k: Unfenced<'_, CheckedCopyKernel>,
        gang: McGang,
        g: &Gang,
        spans: &[Span; GANG],
    ) {
        let done = if self.any.load(Ordering::Acquire) {
            0
        } else {
            let mut raw = MaybeUninit::<RawFault>::uninit();
            // SAFETY: forwarded contract; the log's maker installed the
            // handler. The fault details are not needed: the spans are
            // redone below, exactly.
            let left = unsafe { gang(g, raw.as_mut_ptr()) };
            if left == 0 {
                return;
            }
            g.len - left
        };
        for s in spans {
            // SAFETY: forwarded contract.
            unsafe { self.copy(k, &s.after(done)) };
        }
    }

    /// As [`FaultLog::copy`], zeroing.
    ///
    /// # Safety
    /// As [`FaultLog::copy`].
    #[inline]
    pub(crate) unsafe fn clear(&self, k: Unfenced<'_, CheckedClearKernel>, s: &Span) {
        if self.ended_before(s.run, s.from) {
            return;
        }
        // SAFETY: forwarded contract; the log's maker installed the handler.
        if let Err(f) = unsafe { fault::clear_installed(k, s.dst, s.len) } {
            self.record(s.run, s.from + f.offset, f);
        }
    }

    pub(crate) fn outcomes(self, report: &Report) -> Vec<Outcome> {
        let mut faults = self.faults.into_inner().unwrap_or_else(|e| e.into_inner());
        if faults.is_empty() && report.extents_done == self.count {
            // The common case, filled in one go.
            return vec![Outcome::Done; self.count];
        }
        faults.sort_unstable_by_key(|&(e, _)| e);
        let mut faults = faults.into_iter().peekable();
        (0..self.count)
            .map(|i| match faults.next_if(|&(e, _)| e == i) {
                Some((_, f)) => Outcome::Faulted(f),
                None if i < report.extents_done => Outcome::Done,
                None => match report.partial {
                    Some((p, n)) if p == i => Outcome::Partial(n),
                    _ => Outcome::NotStarted,
                },
            })
            .collect()
    }
}
