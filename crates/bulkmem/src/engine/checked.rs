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

use super::batch::Batch;
use super::job::Work;
use super::Engine;
use crate::auto::Request;
use crate::control::Control;
use crate::error::Error;
use crate::fault::log::FaultLog;
use crate::fault::CheckedReport;
use crate::handle::{CheckedClearKernel, CheckedCopyKernel};
use crate::strategy::Op;

pub(super) fn run<B: Batch>(
    engine: &Engine,
    op: Op,
    batch: &B,
    check_overlap: bool,
    ctl: Control<'_>,
) -> Result<CheckedReport, Error> {
    let log = FaultLog::new(batch.count());
    let strategy = engine.opts.strategy;
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
    let report = engine.run_with(op, batch, check_overlap, false, checked, ctl)?;
    let extents = log.outcomes(&report);
    Ok(CheckedReport { report, extents })
}
