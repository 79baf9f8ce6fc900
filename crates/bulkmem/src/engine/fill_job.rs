//! Fills on the workers: [`Engine::fill`] and its variants cut the
//! destination into whole staging windows and run the fill module's
//! [`Plan`] over each piece. Separate so that the engine reaches the fill
//! module through that one interface.

use super::batch::FillShape;
use super::job::{execute, Work};
use super::stream::Marks;
use super::Engine;
use crate::control::Control;
use crate::error::Error;
use crate::fill::Plan;
use crate::handle::Fence;
use crate::report::Report;

/// [`Engine::fill_with_control`]: chunks are whole windows of elements,
/// so each element is written by one worker.
pub(super) fn fill(
    engine: &Engine,
    dst: &mut [u8],
    template: &[u8],
    ctl: Control<'_>,
) -> Result<Report, Error> {
    let plan = Plan::new(dst.len(), template.len(), engine.opts.hint)?;
    let l = template.len();
    let each = |off: usize, p: *mut u8, n: usize, fence: &Fence| {
        // SAFETY: the piece lies in `dst` (exclusively borrowed for the
        // whole batch) and starts and ends on element boundaries.
        unsafe { plan.run(p, n, template, off / l, fence) }
    };
    run(engine, dst, plan, &each, ctl)
}

/// [`Engine::fill_patched`].
pub(super) fn fill_patched<P: Fn(usize, &mut [u8]) + Sync>(
    engine: &Engine,
    dst: &mut [u8],
    template: &[u8],
    patch: &P,
    ctl: Control<'_>,
) -> Result<Report, Error> {
    let plan = Plan::new(dst.len(), template.len(), engine.opts.hint)?;
    let l = template.len();
    let each = |off: usize, p: *mut u8, n: usize, fence: &Fence| {
        let mut f = |i: usize, e: &mut [u8]| patch(i, e);
        // SAFETY: as in fill.
        unsafe { plan.run_with(p, n, template, off / l, fence, &mut f) }
    };
    run(engine, dst, plan, &each, ctl)
}

fn run(
    engine: &Engine,
    dst: &mut [u8],
    plan: Plan,
    each: &(dyn Fn(usize, *mut u8, usize, &Fence) + Sync),
    ctl: Control<'_>,
) -> Result<Report, Error> {
    let _serial = engine.serial()?;
    let shape = FillShape(dst.as_mut_ptr(), dst.len());
    let mut marks = Marks::default();
    marks.mark(&shape, false);
    // Whole staging windows per chunk: line-aligned boundaries too.
    let align = plan.align();
    execute(
        engine,
        marks.stream(&shape, false),
        Work::Each(each),
        plan.strategy(),
        align,
        ctl,
    )
    .map_err(Error::from)
}
