//! The calling thread's checked batches: every extent copied or cleared
//! in turn by one checked routine, a fault ending its extent only, and
//! copies of same-size extents four at a time (`crate::gangs`).

use core::mem::MaybeUninit;

use super::{clear_installed, copy_installed, Outcome};
use crate::auto::{self, Request};
use crate::checked::mc::extable::RawFault;
use crate::checked::mc::handler;
use crate::error::Error;
use crate::extent::check_lengths;
use crate::handle::{CheckedClearKernel, CheckedCopyKernel, Fence, Unfenced};
use crate::plan::{Extent, Span};
use crate::strategy::{Hint, Op, Strategy};

/// Copies every `(dst, src)` pair on the calling thread, surviving SIGBUS:
/// a fault ends its extent only. One checked routine is chosen for the
/// batch as a whole (as `copy_batch` chooses) and streaming stores are
/// fenced once at the end rather than per extent. Returns each extent's
/// [`Outcome`] (`Done` or `Faulted`), in order;
/// lengths are checked first and nothing is written on a mismatch.
pub fn copy_batch_checked(
    strategy: Strategy,
    ops: &mut [(&mut [u8], &[u8])],
) -> Result<Vec<Outcome>, Error> {
    check_lengths(ops)?;
    let total = ops.iter().map(|(d, _)| d.len()).sum();
    let req = Request::batch(Op::Copy, total, ops.len(), Hint::Auto);
    let k = auto::kernel::<CheckedCopyKernel>(strategy, &req)?;
    handler::ensure();
    // The unfenced routines fence only when they fault: this fence once
    // for the rest, when the loop is done.
    let fence = Fence::new();
    let k = Unfenced::new(k, &fence);
    let runs: Vec<Extent> = ops
        .iter_mut()
        .map(|(d, s)| Extent {
            dst: d.as_mut_ptr(),
            src: s.as_ptr(),
            len: d.len(),
        })
        .collect();
    // Filled in one go; a fault overwrites its extent's entry.
    let out = std::cell::RefCell::new(vec![Outcome::Done; ops.len()]);
    let copy = |i: usize, from: usize| {
        let r = runs[i];
        // SAFETY: each run is a valid, disjoint (one borrowed mutably) pair
        // of equal lengths, `from` at most its length; the routine came
        // from a CheckedKernel; the handler was installed above.
        let done = unsafe { copy_installed(k, r.dst.add(from), r.src.add(from), r.len - from) };
        if let Err(mut f) = done {
            f.offset += from;
            out.borrow_mut()[i] = Outcome::Faulted(f);
        }
    };
    // The batch loop every copy takes (a prefetch never faults and does
    // not consume poison: docs/design.md, "Checked copies").
    crate::gangs::walk(
        (0..runs.len()).map(|i| Span::of(i, runs[i], 0, runs[i].len)),
        |s| copy(s.run, 0),
        k.gang().map(|gang| {
            let copy = &copy;
            move |g: &_, spans: &[Span; crate::gangs::GANG]| {
                let mut raw = MaybeUninit::<RawFault>::uninit();
                // SAFETY: four extents of this batch (valid, disjoint,
                // equal lengths); the handler was installed above.
                let left = unsafe { gang(g, raw.as_mut_ptr()) };
                if left != 0 {
                    // Every extent from where the gang stopped, one at a
                    // time: the fault is reported exactly.
                    for s in spans {
                        copy(s.run, g.len - left);
                    }
                }
            }
        }),
    );
    fence.drain();
    Ok(out.into_inner())
}

/// As [`copy_batch_checked`], zeroing.
pub fn clear_batch_checked(
    strategy: Strategy,
    ops: &mut [&mut [u8]],
) -> Result<Vec<Outcome>, Error> {
    let total = ops.iter().map(|d| d.len()).sum();
    let req = Request::batch(Op::Clear, total, ops.len(), Hint::Auto);
    let k = auto::kernel::<CheckedClearKernel>(strategy, &req)?;
    handler::ensure();
    let fence = Fence::new();
    let k = Unfenced::new(k, &fence);
    let mut out = vec![Outcome::Done; ops.len()];
    for (d, o) in ops.iter_mut().zip(&mut out) {
        // SAFETY: a valid writable slice; the routine came from a
        // CheckedKernel; the handler was installed above.
        if let Err(f) = unsafe { clear_installed(k, d.as_mut_ptr(), d.len()) } {
            *o = Outcome::Faulted(f);
        }
    }
    fence.drain();
    Ok(out)
}
