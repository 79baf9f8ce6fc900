//! `bulkmem bench copy|clear`: every strategy at every size, cache-hot and
//! cache-cold, the way seeds 000 and 004 measure them.
//!
//! * hot: the same source and destination on every call, repeated until a
//!   run has moved at least [`HOT_BYTES`] and lasted [`Plan::min_run`],
//!   timed in pieces that take turns with the other rows'
//!   (docs/measurements.md, "Slices").
//! * consume: as hot, each call followed by one read of its whole
//!   destination, timed together: what a program that reads what it
//!   copied pays (docs/design.md, "The whole use").
//! * pipe: as hot, each call followed by `write()`s of its destination
//!   into a pipe that another thread drains, timed together: a server
//!   sending what it just copied (redis replying to a GET).
//! * cold: distinct extents of `size` bytes scattered (shuffled) over arenas
//!   of `total` bytes (default 256 MiB, many times the LLC), with an eviction
//!   pass before each run. `auto` submits a run's extents as one batch, as a
//!   migration hands over its folios; every named strategy is called extent by
//!   extent, as the kernel's loops do.
//!
//! Every cell checks its output once before it is timed, so a broken
//! strategy cannot report a fast number.
//!
//! This file is the plan and the order of its cells; the hot-buffer
//! regimes are `hot.rs`, the cold one `cold.rs`, what the flags give
//! `args.rs`.

use bulkmem::mapping::Mapping;
use bulkmem::{Op, Strategy};
use bulkmem_calibrate::toolkit::{first_wrong, ColdArenas};

use crate::results::Row;
use bulkmem_report::stats::Stats;

mod again;
mod args;
mod cold;
mod exec;
mod hot;
pub(crate) mod plan;

pub use again::remeasure;
pub use args::{needs, parse_regimes, Regimes};
use cold::cold_group;
use hot::{hot_group, HotBufs};
use plan::{After, Plan, Regime};

/// Bytes a hot run moves at least (by repeating the call): `bulkmem tune`'s.
pub use bulkmem_calibrate::HOT_BYTES;

/// Called as work proceeds with (done, of, label); the unit is one
/// (regime, size) group of cells.
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, &str);

/// Number of progress units [`run`] reports.
pub fn groups(plan: &Plan) -> usize {
    plan.regimes.len() * plan.sizes.len()
}

/// Runs the plan; rows come out in (regime, size, strategy) order.
///
/// Within a (regime, size) group the strategies take turns (hot runs piece
/// by piece), so a noisy neighbour slows all of them alike and the ratios
/// stay honest.
pub fn run(plan: &Plan, progress: Progress) -> Result<Vec<Row>, String> {
    let of = groups(plan);
    let mut done = 0;
    let mut rows = Vec::new();
    let llc = bulkmem::cpu::info().llc_bytes();
    for &regime in &plan.regimes {
        let label = |size| {
            format!(
                "{} {} {}",
                plan.op,
                regime.name(),
                bulkmem_machine::units::format_bytes(size)
            )
        };
        match regime {
            Regime::Hot | Regime::Consume | Regime::Pipe => {
                for &size in &plan.sizes {
                    progress(done, of, &label(size));
                    let mut bufs = HotBufs::new(plan, size, regime.after())?;
                    rows.extend(hot_group(plan, size, regime, &mut bufs)?);
                    done += 1;
                }
            }
            Regime::Cold => {
                let total = plan
                    .sizes
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(0)
                    .max(plan.total);
                let mut a = ColdArenas::new(plan.op, total, llc, plan.thp)
                    .map_err(|e| format!("cannot map the {total}-byte arenas: {e}"))?;
                place(&a.src, plan.src_node, "source")?;
                place(&a.dst, plan.dst_node, "destination")?;
                for &size in &plan.sizes {
                    progress(done, of, &label(size));
                    rows.extend(cold_group(plan, size, &mut a)?);
                    done += 1;
                }
            }
        }
    }
    progress(done, of, "done");
    Ok(rows)
}

/// Moves every page of `m` to `node` (`move_pages`), so a cell measures
/// that node's memory; every page must get there.
fn place(m: &Mapping, node: Option<usize>, what: &str) -> Result<(), String> {
    let Some(node) = node else { return Ok(()) };
    let r = bulkmem::numa::migrate(
        m.as_ptr() as usize,
        m.len(),
        node,
        bulkmem::numa::MigrateOptions::default(),
    )
    .map_err(|e| format!("cannot place the {what} on node {node}: {e}"))?;
    if !r.is_complete() {
        return Err(format!(
            "only {} of the {what}'s pages reached node {node} ({} failed)",
            r.moved + r.already,
            r.failed.len()
        ));
    }
    Ok(())
}

fn row(
    plan: &Plan,
    name: &str,
    chose: Option<Strategy>,
    size: usize,
    total: usize,
    regime: Regime,
    gbps: Stats,
) -> Row {
    Row {
        op: plan.op.name(),
        strategy: name.to_string(),
        chose: chose.map_or(name, |s| s.name()).to_string(),
        hint: (name == "auto").then(|| plan.hint.name().to_string()),
        size,
        total,
        regime: regime.name(),
        threads: plan.threads,
        runs: plan.rounds.runs,
        gbps,
        src_offset: (plan.src_offset > 0 && regime != Regime::Cold).then_some(plan.src_offset),
        dst_offset: (plan.dst_offset > 0 && regime != Regime::Cold).then_some(plan.dst_offset),
        ..Default::default()
    }
}

/// Fails unless `dst` holds `src` (copy) or zeros (clear).
/// Checks `dst` after `op` (every byte, or the library's sample where
/// `sparse`: `bulkmem_calibrate::toolkit::first_wrong`).
fn verify(
    op: Op,
    s: &str,
    size: usize,
    regime: &str,
    dst: &[u8],
    src: &[u8],
    sparse: bool,
) -> Result<(), String> {
    let src = if op == Op::Copy { src } else { &[] };
    match first_wrong(dst, src, sparse) {
        None => Ok(()),
        Some(i) => Err(format!(
            "verification failed: {op} strategy {s} ({regime}, extent {}) left byte {i} wrong; its numbers would be meaningless",
            bulkmem_machine::units::format_bytes(size)
        )),
    }
}

/// Runs `work` on every worker at once, worker i pinned to `cpus[i % n]`
/// (worker 0 on the calling thread, already pinned): the library's
/// `toolkit::timed_on`.
pub(super) use bulkmem_calibrate::toolkit::timed_on as timed;

#[cfg(test)]
mod tests {
    use super::*;
    use bulkmem::Hint;

    fn tiny_plan(op: Op, strategies: Vec<Strategy>, threads: usize) -> Plan {
        Plan {
            op,
            sizes: vec![4096, 65536],
            regimes: vec![Regime::Hot, Regime::Cold],
            strategies,
            hint: Hint::Auto,
            threads,
            rounds: crate::harness::Rounds { runs: 1, warmup: 0 },
            total: 1 << 20,
            src_node: None,
            dst_node: None,
            cpus: vec![bulkmem_machine::machine::placement::current_cpu()],
            thp: false,
            checked: false,
            named_batches: false,
            hot_bytes: HOT_BYTES,
            min_run: std::time::Duration::ZERO,
            foreign: Vec::new(),
            src_offset: 0,
            dst_offset: 0,
        }
    }

    #[test]
    fn every_cell_yields_a_verified_row() {
        for op in [Op::Copy, Op::Clear] {
            let plan = tiny_plan(
                op,
                vec![Strategy::PerPage, Strategy::Auto, Strategy::Portable],
                2,
            );
            let mut calls = 0;
            let rows = run(&plan, &mut |_, _, _| calls += 1).unwrap();
            assert_eq!(rows.len(), 2 * 2 * 3);
            assert_eq!(calls, groups(&plan) + 1);
            for r in &rows {
                assert!(r.gbps.median > 0.0, "{r:?}");
                assert_eq!(r.hint.is_some(), r.strategy == "auto");
                assert_ne!(r.chose, "auto");
            }
            let cold4k = rows
                .iter()
                .find(|r| r.regime == "cold" && r.size == 4096)
                .unwrap();
            assert_eq!(cold4k.total, 1 << 20);
        }
    }

    #[test]
    fn checked_cells_run_verified_beside_auto() {
        for op in [Op::Copy, Op::Clear] {
            let mut plan = tiny_plan(op, vec![Strategy::Auto], 1);
            plan.checked = true;
            let rows = run(&plan, &mut |_, _, _| {}).unwrap();
            assert_eq!(rows.len(), 2 * 2 * 2);
            for r in rows.iter().filter(|r| r.strategy == "checked") {
                let s: Strategy = r.chose.parse().unwrap();
                let list = match op {
                    Op::Copy => bulkmem::fault::checked_strategies(Op::Copy),
                    Op::Clear => bulkmem::fault::checked_strategies(Op::Clear),
                };
                assert!(list.contains(&s), "{r:?}");
                assert!(r.hint.is_none() && r.gbps.median > 0.0);
            }
        }
    }

    #[test]
    fn consume_and_pipe_cells_are_verified_and_named() {
        for op in [Op::Copy, Op::Clear] {
            let mut plan = tiny_plan(op, vec![Strategy::Auto, Strategy::PerPage], 2);
            plan.regimes = vec![Regime::Consume, Regime::Pipe];
            // Lengthened runs too.
            plan.min_run = std::time::Duration::from_millis(1);
            let rows = run(&plan, &mut |_, _, _| {}).unwrap();
            assert_eq!(rows.len(), 2 * 2 * 2);
            for r in &rows {
                assert!(r.regime == "consume" || r.regime == "pipe", "{r:?}");
                assert!(r.gbps.median > 0.0 && r.total == r.size, "{r:?}");
            }
        }
    }

    #[test]
    fn verification_catches_a_wrong_copy() {
        let e = verify(Op::Copy, "avx2", 4096, "hot", &[1, 2, 3], &[1, 9, 3], false).unwrap_err();
        assert!(e.contains("byte 1") && e.contains("avx2"), "{e}");
        assert!(verify(Op::Clear, "clzero", 4096, "cold", &[0, 0, 7], &[], false).is_err());
        assert!(verify(Op::Clear, "clzero", 4096, "cold", &[0, 0, 0], &[], false).is_ok());
    }
}
