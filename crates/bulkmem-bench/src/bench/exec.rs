//! How one cell of `bench copy|clear` runs a call: a checked kernel, the
//! library's batch call, `auto` with a hint, a checked routine, or another
//! library's routine (`--against`).

use bulkmem::{Hint, Kernel, Options, Strategy};

use super::against::Foreign;
use super::mem::Plan;

/// How one call executes: a resolved kernel, the same through the
/// library's batch call, `auto` with a hint, the checked routine of a
/// checked strategy, or a foreign routine.
#[derive(Clone, Copy)]
pub(super) enum Exec {
    Named(Kernel),
    Batch(Strategy),
    Auto(Hint),
    /// `auto`'s checked call (`copy_checked`, `clear_checked`, the
    /// checked batches with `Auto`); the strategy is the twin it runs,
    /// for the row's label.
    Checked(Strategy),
    Foreign(Foreign),
}

/// The cells of a group: row name and how each runs. `req` is what one
/// call (hot) or one thread's batch (cold) looks like to `auto`, so the
/// checked cell stands in for the routine auto picks for the same shape;
/// `cold` groups call named strategies through the batch call where the
/// plan says so ([`Plan::named_batches`]).
pub(super) fn cells(
    plan: &Plan,
    req: &bulkmem::Request,
    cold: bool,
) -> Result<Vec<(String, Exec)>, String> {
    let mut v: Vec<(String, Exec)> = plan
        .strategies
        .iter()
        .map(|&s| {
            (
                s.name().to_string(),
                Exec::of(plan, s, cold && plan.named_batches),
            )
        })
        .collect();
    if plan.checked {
        let s = bulkmem::fault::checked_form(Strategy::Auto, req).map_err(|e| e.to_string())?;
        v.push(("checked".to_string(), Exec::Checked(s)));
    }
    v.extend(
        plan.foreign
            .iter()
            .map(|(label, f)| (label.clone(), Exec::Foreign(*f))),
    );
    Ok(v)
}

impl Exec {
    fn of(plan: &Plan, s: Strategy, batched: bool) -> Exec {
        if s == Strategy::Auto {
            Exec::Auto(plan.hint)
        } else if batched {
            Exec::Batch(s)
        } else {
            Exec::Named(Kernel::new(s, plan.op).expect("the plan holds only available strategies"))
        }
    }

    /// One copy; returns the strategy that ran (none: a foreign routine).
    pub(super) fn copy(self, dst: &mut [u8], src: &[u8]) -> Option<Strategy> {
        Some(match self {
            Exec::Named(Kernel::Copy(k)) => {
                k.copy(dst, src);
                k.strategy()
            }
            Exec::Named(Kernel::Clear(k)) => {
                unreachable!("{} clear kernel in a copy cell", k.strategy())
            }
            Exec::Batch(s) => bulkmem::copy_with(s, dst, src)
                .map(|()| s)
                .expect("available"),
            Exec::Auto(h) => bulkmem::copy_opts(Options::hint(h), dst, src).expect("equal lengths"),
            Exec::Checked(s) => {
                bulkmem::copy_checked(dst, src).expect("no fault in a benchmark");
                s
            }
            Exec::Foreign(f) => {
                f.copy(dst, src);
                return None;
            }
        })
    }

    pub(super) fn clear(self, dst: &mut [u8]) -> Option<Strategy> {
        Some(match self {
            Exec::Named(Kernel::Clear(k)) => {
                k.clear(dst);
                k.strategy()
            }
            Exec::Named(Kernel::Copy(k)) => {
                unreachable!("{} copy kernel in a clear cell", k.strategy())
            }
            Exec::Batch(s) => bulkmem::clear_with(s, dst).map(|()| s).expect("available"),
            Exec::Auto(h) => bulkmem::clear_opts(Options::hint(h), dst).expect("clear cannot fail"),
            Exec::Checked(s) => {
                bulkmem::clear_checked(dst).expect("no fault in a benchmark");
                s
            }
            Exec::Foreign(f) => {
                f.clear(dst);
                return None;
            }
        })
    }

    /// How a cold run reaches this cell's routine: `batch` (one batch
    /// call for the run) or `each` (a call per extent).
    pub(super) fn calls(self) -> &'static str {
        match self {
            Exec::Auto(_) | Exec::Batch(_) | Exec::Checked(_) => "batch",
            Exec::Named(_) | Exec::Foreign(_) => "each",
        }
    }

    pub(super) fn copy_batch(self, ops: &mut [(&mut [u8], &[u8])]) -> Option<Strategy> {
        Some(match self {
            Exec::Auto(h) => {
                bulkmem::copy_batch_with(Options::hint(h), ops).expect("equal lengths")
            }
            Exec::Batch(s) => {
                bulkmem::copy_batch_with(Options::strategy(s), ops).expect("an available strategy")
            }
            Exec::Checked(s) => {
                let out =
                    bulkmem::fault::copy_batch_checked(Strategy::Auto, ops).expect("equal lengths");
                assert!(out.iter().all(|o| *o == bulkmem::engine::Outcome::Done));
                s
            }
            Exec::Named(Kernel::Copy(k)) => {
                for (d, sr) in ops.iter_mut() {
                    k.copy(d, sr);
                }
                k.strategy()
            }
            Exec::Named(Kernel::Clear(k)) => {
                unreachable!("{} clear kernel in a copy cell", k.strategy())
            }
            Exec::Foreign(f) => {
                for (d, sr) in ops.iter_mut() {
                    f.copy(d, sr);
                }
                return None;
            }
        })
    }

    pub(super) fn clear_batch(self, ops: &mut [&mut [u8]]) -> Option<Strategy> {
        Some(match self {
            Exec::Auto(h) => {
                bulkmem::clear_batch_with(Options::hint(h), ops).expect("clear cannot fail")
            }
            Exec::Batch(s) => {
                bulkmem::clear_batch_with(Options::strategy(s), ops).expect("an available strategy")
            }
            Exec::Checked(s) => {
                let out = bulkmem::fault::clear_batch_checked(Strategy::Auto, ops)
                    .expect("auto is valid");
                assert!(out.iter().all(|o| *o == bulkmem::engine::Outcome::Done));
                s
            }
            Exec::Named(Kernel::Clear(k)) => {
                for d in ops.iter_mut() {
                    k.clear(d);
                }
                k.strategy()
            }
            Exec::Named(Kernel::Copy(k)) => {
                unreachable!("{} copy kernel in a clear cell", k.strategy())
            }
            Exec::Foreign(f) => {
                for d in ops.iter_mut() {
                    f.clear(d);
                }
                return None;
            }
        })
    }
}
