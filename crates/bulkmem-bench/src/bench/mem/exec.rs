//! How one cell of `bench copy|clear` runs a call: a checked kernel, the
//! library's batch call, `auto` with a hint, a checked routine, or another
//! library's routine (`--against`).

use bulkmem::{Hint, Op, Options, Strategy};
use bulkmem_policy::handle::Kernel;

use super::super::against::Foreign;
use super::plan::Plan;

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
    req: &bulkmem_policy::auto::Request,
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
        let s = bulkmem_policy::auto::chosen_twin(req).strategy();
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
            Exec::Batch(s) => {
                bulkmem::copy_opts(dst, src, Options::strategy(s)).expect("available")
            }
            Exec::Auto(h) => bulkmem::copy_opts(dst, src, Options::hint(h)).expect("equal lengths"),
            Exec::Checked(s) => {
                bulkmem::fault::copy_checked(dst, src).expect("no fault in a benchmark");
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
            Exec::Batch(s) => bulkmem::clear_opts(dst, Options::strategy(s)).expect("available"),
            Exec::Auto(h) => bulkmem::clear_opts(dst, Options::hint(h)).expect("clear cannot fail"),
            Exec::Checked(s) => {
                bulkmem::fault::clear_checked(dst).expect("no fault in a benchmark");
                s
            }
            Exec::Foreign(f) => {
                f.clear(dst);
                return None;
            }
        })
    }

    /// `reps` calls on one destination (`op` a copy from `src`, or a
    /// clear), each followed by `after(dst)` (the regime's next user of the
    /// destination), stopping at its first error. The routine is resolved
    /// once for the run, not per call: matched per call, behind a closure
    /// and out-of-line slice accessors, the harness took about 14 ns a
    /// call, a quarter to a third of a hot 4 KiB `avx2` copy, and
    /// squeezed the ratios between rows of small cells towards 1.
    #[inline]
    pub(super) fn repeated<A>(
        self,
        op: Op,
        dst: &mut [u8],
        src: &[u8],
        reps: usize,
        after: A,
    ) -> Result<(), String>
    where
        A: FnMut(&[u8]) -> Result<(), String>,
    {
        match (op, self) {
            (Op::Copy, Exec::Named(Kernel::Copy(k))) => {
                repeat(reps, dst, |d| k.copy(d, src), after)
            }
            (Op::Clear, Exec::Named(Kernel::Clear(k))) => repeat(reps, dst, |d| k.clear(d), after),
            (Op::Copy, Exec::Auto(Hint::Auto)) => {
                repeat(reps, dst, |d| bulkmem::copy(d, src), after)
            }
            (Op::Clear, Exec::Auto(Hint::Auto)) => repeat(reps, dst, bulkmem::clear, after),
            (Op::Copy, Exec::Auto(h)) => {
                repeat(reps, dst, |d| bulkmem::copy_hint(d, src, h), after)
            }
            (Op::Clear, Exec::Auto(h)) => repeat(reps, dst, |d| bulkmem::clear_hint(d, h), after),
            (Op::Copy, Exec::Foreign(f)) => repeat(reps, dst, |d| f.copy(d, src), after),
            (Op::Clear, Exec::Foreign(f)) => repeat(reps, dst, |d| f.clear(d), after),
            (Op::Copy, Exec::Batch(s)) => repeat(
                reps,
                dst,
                |d| {
                    bulkmem::copy_opts(d, src, Options::strategy(s)).expect("available");
                },
                after,
            ),
            (Op::Clear, Exec::Batch(s)) => repeat(
                reps,
                dst,
                |d| {
                    bulkmem::clear_opts(d, Options::strategy(s)).expect("available");
                },
                after,
            ),
            (Op::Copy, Exec::Checked(_)) => repeat(
                reps,
                dst,
                |d| bulkmem::fault::copy_checked(d, src).expect("no fault in a benchmark"),
                after,
            ),
            (Op::Clear, Exec::Checked(_)) => repeat(
                reps,
                dst,
                |d| bulkmem::fault::clear_checked(d).expect("no fault in a benchmark"),
                after,
            ),
            (op, Exec::Named(k)) => {
                unreachable!("{} kernel for {} in a {op} cell", k.strategy(), k.op())
            }
        }
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
                bulkmem::copy_batch_opts(ops, Options::hint(h))
                    .expect("equal lengths")
                    .strategy
            }
            Exec::Batch(s) => {
                bulkmem::copy_batch_opts(ops, Options::strategy(s))
                    .expect("an available strategy")
                    .strategy
            }
            Exec::Checked(s) => {
                let out =
                    bulkmem::fault::copy_batch_checked(Strategy::Auto, ops).expect("equal lengths");
                assert!(out.iter().all(|o| *o == bulkmem::fault::Outcome::Done));
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
                bulkmem::clear_batch_opts(ops, Options::hint(h))
                    .expect("clear cannot fail")
                    .strategy
            }
            Exec::Batch(s) => {
                bulkmem::clear_batch_opts(ops, Options::strategy(s))
                    .expect("an available strategy")
                    .strategy
            }
            Exec::Checked(s) => {
                let out = bulkmem::fault::clear_batch_checked(Strategy::Auto, ops)
                    .expect("auto is valid");
                assert!(out.iter().all(|o| *o == bulkmem::fault::Outcome::Done));
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

/// `reps` times `call(dst)` then `after(dst)`; generic over both, so each
/// routine and regime gets its own loop with nothing dispatched per call.
#[inline(always)]
fn repeat(
    reps: usize,
    dst: &mut [u8],
    mut call: impl FnMut(&mut [u8]),
    mut after: impl FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    for _ in 0..reps {
        call(dst);
        after(dst)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_exec(op: Op) -> Vec<Exec> {
        vec![
            Exec::Named(Kernel::new(Strategy::PerPage, op).unwrap()),
            Exec::Batch(Strategy::Portable),
            Exec::Auto(Hint::Auto),
            Exec::Auto(Hint::Stream),
            Exec::Checked(Strategy::PerPage),
        ]
    }

    #[test]
    fn repeated_calls_run_the_routine_then_hand_over_each_time() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8 + 1).collect();
        for op in [Op::Copy, Op::Clear] {
            for exec in every_exec(op) {
                let mut dst = vec![0xa5u8; src.len()];
                let mut seen = 0;
                exec.repeated(op, &mut dst, &src, 3, |d| {
                    // Each hand-over sees the finished call.
                    match op {
                        Op::Copy => assert_eq!(d, &src[..]),
                        Op::Clear => assert!(d.iter().all(|&b| b == 0)),
                    }
                    seen += 1;
                    Ok(())
                })
                .unwrap();
                assert_eq!(seen, 3, "{op}");
            }
        }
    }

    #[test]
    fn repeated_calls_stop_at_the_first_failed_hand_over() {
        let src = vec![7u8; 64];
        let mut dst = vec![0u8; 64];
        let mut seen = 0;
        let e = Exec::Auto(Hint::Auto)
            .repeated(Op::Copy, &mut dst, &src, 5, |_| {
                seen += 1;
                if seen == 2 {
                    Err("the pipe is closed".to_string())
                } else {
                    Ok(())
                }
            })
            .unwrap_err();
        assert_eq!((seen, e.as_str()), (2, "the pipe is closed"));
    }
}
