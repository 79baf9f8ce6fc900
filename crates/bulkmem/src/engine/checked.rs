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
//! ([`Outcome::Faulted`](crate::fault::Outcome::Faulted)).

use super::batch::{Batch, ClearSlices, CopySlices, Raw};
use super::job::Work;
use super::Engine;
use crate::auto::Request;
use crate::control::Control;
use crate::error::Error;
use crate::fault::log::FaultLog;
use crate::fault::CheckedReport;
use crate::handle::{CheckedClearKernel, CheckedCopyKernel};
use crate::plan::Extent;
use crate::strategy::Op;

impl Engine {
    /// As [`Engine::copy_batch_with`], surviving SIGBUS: a fault ends only
    /// the extent it hit (see [`Outcome`](crate::fault::Outcome)). Uses the checked form of the
    /// engine's strategy ([`crate::fault::checked_kernel`]); a strategy without one
    /// is refused ([`Error::NotChecked`]) before anything is written.
    pub fn copy_batch_checked(
        &self,
        ops: &mut [(&mut [u8], &[u8])],
        ctl: Control<'_>,
    ) -> Result<CheckedReport, Error> {
        crate::extent::check_lengths(ops)?;
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

    fn run_checked<B: Batch>(
        &self,
        op: Op,
        batch: &B,
        check_overlap: bool,
        ctl: Control<'_>,
    ) -> Result<CheckedReport, Error> {
        let log = FaultLog::new(batch.count());
        let strategy = self.opts.strategy;
        let checked = |req: &Request| -> Result<_, Error> {
            Ok(match op {
                Op::Copy => {
                    let k = crate::auto::kernel::<CheckedCopyKernel>(strategy, req)?;
                    (Work::CopyChecked(k, &log), k.strategy())
                }
                Op::Clear => {
                    let k = crate::auto::kernel::<CheckedClearKernel>(strategy, req)?;
                    (Work::ClearChecked(k, &log), k.strategy())
                }
            })
        };
        // Not coalesced: run i is extent i, empty ones included (the job
        // skips them), so a fault names its extent with no map to build.
        let report = self.run_with(op, batch, check_overlap, false, checked, ctl)?;
        let extents = log.outcomes(&report);
        Ok(CheckedReport { report, extents })
    }
}
