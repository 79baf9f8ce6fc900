//! A cell measured again where `auto` trailed the best of its other rows:
//! auto and the rows ahead of it, in rounds of their own (docs/measurements.md,
//! "auto/best"). The run's best row is the best of several, picked by the
//! very rounds that measure it, so auto reads below it by the run's noise
//! even where it ran that row's kernel; new rounds of the few rows ahead
//! measure them without that pick.

use bulkmem::Strategy;

use super::{run, Plan, Progress, Regime};
use crate::results::{Remeasure, Remeasured, RemeasuredRow, Row};
use bulkmem_machine::units::format_bytes;

/// Measures each of `cells` (from [`to_remeasure`](crate::results::to_remeasure)
/// over `rows`) again, auto and the rows ahead of it, as `plan` measured
/// them, and records that on its auto row ([`Row::remeasured`]).
/// `progress` counts the cells.
pub fn remeasure(
    plan: &Plan,
    rows: &mut [Row],
    cells: &[Remeasure],
    progress: Progress,
) -> Result<(), String> {
    let of = cells.len();
    for (done, c) in cells.iter().enumerate() {
        progress(
            done,
            of,
            &format!("again: {} {} {}", c.op, c.regime, format_bytes(c.size)),
        );
        let Some(regime) = Regime::ALL.into_iter().find(|r| r.name() == c.regime) else {
            continue;
        };
        let named = |n: &str| c.rows.iter().any(|r| r == n);
        let sub = Plan {
            sizes: vec![c.size],
            regimes: vec![regime],
            strategies: plan
                .strategies
                .iter()
                .copied()
                .filter(|&s| s == Strategy::Auto || named(s.name()))
                .collect(),
            foreign: plan
                .foreign
                .iter()
                .filter(|f| named(&f.0))
                .cloned()
                .collect(),
            checked: false,
            ..plan.clone()
        };
        let mut again = run(&sub, &mut |_, _, _| {})?;
        // auto first, then the rows ahead in the order they trailed.
        let rank = |r: &Row| c.rows.iter().position(|n| *n == r.strategy);
        again.sort_by_key(|r| rank(r).map_or(0, |i| i + 1));
        let Some(auto) = rows.iter_mut().find(|r| {
            r.strategy == "auto" && r.op == c.op && r.regime == c.regime && r.size == c.size
        }) else {
            continue;
        };
        auto.remeasured = Some(Remeasured {
            runs: sub.rounds.runs,
            rows: again
                .into_iter()
                .map(|r| RemeasuredRow {
                    strategy: r.strategy,
                    gbps: r.gbps,
                })
                .collect(),
        });
    }
    progress(of, of, "done");
    Ok(())
}
