//! From medians to choices: a profile departs from the built-in rules only
//! where the departure is clear and reproduces, because on a shared
//! machine near-ties flip from one measurement to the next (seen on a
//! 2-CPU Zen 3 VM: every strategy at 24 GB/s from 512K to 4M in one run,
//! `portable` ahead by 7%; 20% behind in the next):
//!
//! 1. Each strategy is scored by its fraction of the best, smoothed over
//!    the cell and its ladder neighbours ([`scores`]).
//! 2. The rules' choice stays while it scores within [`KEEP`] of the top;
//!    else the previous size's choice, likewise (fewer bands); else the top.
//! 3. A re-check measures the choice, the rules' choice and `per-page`
//!    again: a departure from the rules that does not win again reverts to
//!    the rules' choice, and a choice slower than `per-page` records
//!    `per-page` (a profile never makes a size slower than the kernel's
//!    own loop).

use crate::auto::{Cell, Shape};
use crate::strategy::{Op, Strategy};

/// Keep the rules' (or else the previous size's) choice while it scores at
/// least this fraction of the top.
pub const KEEP: f64 = 0.97;

/// What the built-in rules pick for a cell (no profile, no overrides).
pub type Prior<'a> = &'a dyn Fn(Op, Shape, usize) -> Strategy;

/// One cell's medians, GB/s per strategy in measurement order.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// The operation measured.
    pub op: Op,
    /// The request shape measured.
    pub shape: Shape,
    /// A single call's length, or a batch's total.
    pub size: usize,
    /// Median GB/s per strategy.
    pub gbps: Vec<(Strategy, f64)>,
}

/// How each strategy scores at cell `i` of `row` (one op and shape,
/// ascending sizes): its fraction of the cell's best, as a geometric mean
/// weighted 1-2-1 over the cell and its neighbours on the ladder. Sizes a
/// factor of 2-4 apart behave alike except at cache edges, so one noisy
/// cell (measured: every strategy but two dropped 30% in one 64K cell)
/// cannot flip a band, and an edge moves by at most half a step.
fn scores(row: &[Measured], i: usize) -> Vec<(Strategy, f64)> {
    let frac = |m: &Measured, s: Strategy| {
        let best = m.gbps.iter().map(|g| g.1).fold(0.0, f64::max);
        let g = m.gbps.iter().find(|g| g.0 == s).map_or(0.0, |g| g.1);
        if best > 0.0 {
            (g / best).max(1e-6)
        } else {
            1e-6
        }
    };
    let window: Vec<(&Measured, f64)> =
        [(i.checked_sub(1), 1.0), (Some(i), 2.0), (Some(i + 1), 1.0)]
            .into_iter()
            .filter_map(|(j, w)| Some((row.get(j?)?, w)))
            .collect();
    let weight: f64 = window.iter().map(|w| w.1).sum();
    row[i]
        .gbps
        .iter()
        .map(|&(s, _)| {
            let log: f64 = window.iter().map(|(m, w)| w * frac(m, s).ln()).sum();
            (s, (log / weight).exp())
        })
        .collect()
}

/// Winners, margins and choices; `measured` comes in (op, shape) rows of
/// ascending size.
pub fn choose(measured: &[Measured], prior: Prior) -> Vec<Cell> {
    let mut cells: Vec<Cell> = Vec::with_capacity(measured.len());
    for row in measured.chunk_by(|a, b| a.op == b.op && a.shape == b.shape) {
        let mut prev: Option<Strategy> = None;
        for (i, m) in row.iter().enumerate() {
            let mut ranked = m.gbps.clone();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
            let Some(&(winner, best)) = ranked.first() else {
                continue;
            };
            let runner = ranked.get(1).copied();
            let score = scores(row, i);
            let Some((top, top_score)) = score.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))
            else {
                continue;
            };
            let close = |p: Strategy| {
                score
                    .iter()
                    .any(|&(s, sc)| s == p && sc >= KEEP * top_score)
            };
            let choice = Some(prior(m.op, m.shape, m.size))
                .filter(|&p| close(p))
                .or(prev.filter(|&p| close(p)))
                .unwrap_or(top);
            prev = Some(choice);
            cells.push(Cell {
                op: m.op,
                shape: m.shape,
                size: m.size,
                winner,
                runner_up: runner.map(|r| r.0),
                margin: runner.map_or(1.0, |r| if r.1 > 0.0 { best / r.1 } else { f64::INFINITY }),
                choice,
                gbps: m.gbps.clone(),
            });
        }
    }
    cells
}

/// Applies a re-check: `again` holds fresh medians of each cell's choice,
/// the rules' choice and `per-page`. A departure from the rules that loses
/// to them there reverts to them; then a choice slower than `per-page`
/// becomes `per-page`. Returns how many cells changed.
pub fn recheck(cells: &mut [Cell], again: &[Measured], prior: Prior) -> usize {
    let mut changed = 0;
    for c in cells.iter_mut() {
        let Some(m) = again
            .iter()
            .find(|m| m.op == c.op && m.shape == c.shape && m.size == c.size)
        else {
            continue;
        };
        let g = |s| m.gbps.iter().find(|x| x.0 == s).map(|x| x.1);
        let before = c.choice;
        let rules = prior(c.op, c.shape, c.size);
        if let (Some(ours), Some(theirs)) = (g(c.choice), g(rules)) {
            if ours < theirs {
                c.choice = rules;
            }
        }
        if let (Some(ours), Some(base)) = (g(c.choice), g(Strategy::PerPage)) {
            if ours < base {
                c.choice = Strategy::PerPage;
            }
        }
        changed += usize::from(c.choice != before);
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use Strategy::*;

    /// Rules that pick a strategy no test cell measures: never kept.
    const NONE: Prior = &|_, _, _| RepStosq;
    /// Rules that pick rep-movsb everywhere.
    const MOVSB: Prior = &|_, _, _| RepMovsb;

    fn m(size: usize, gbps: &[(Strategy, f64)]) -> Measured {
        Measured {
            op: Op::Copy,
            shape: Shape::Single,
            size,
            gbps: gbps.to_vec(),
        }
    }

    #[test]
    fn winners_margins_and_kept_choices() {
        let cells = choose(
            &[
                m(64, &[(PerPage, 5.0), (Avx2, 20.0), (Libc, 10.0)]),
                // Libc wins by 2% (and less with its neighbours): keep avx2.
                m(128, &[(PerPage, 5.0), (Avx2, 19.6), (Libc, 20.0)]),
                // Libc wins by 30% here and after: switch.
                m(256, &[(PerPage, 5.0), (Avx2, 15.0), (Libc, 20.0)]),
                m(512, &[(PerPage, 5.0), (Avx2, 15.0), (Libc, 20.0)]),
            ],
            NONE,
        );
        assert_eq!(cells.len(), 4);
        assert_eq!((cells[0].winner, cells[0].choice), (Avx2, Avx2));
        assert_eq!(cells[0].runner_up, Some(Libc));
        assert!((cells[0].margin - 2.0).abs() < 1e-9);
        assert_eq!((cells[1].winner, cells[1].choice), (Libc, Avx2));
        assert_eq!((cells[2].winner, cells[2].choice), (Libc, Libc));
        assert_eq!(cells[3].choice, Libc);
        // A new (op, shape) starts afresh.
        let mut other = m(64, &[(PerPage, 1.0), (Libc, 2.0)]);
        other.op = Op::Clear;
        let cells = choose(&[m(64, &[(Avx2, 2.0), (Libc, 1.99)]), other], NONE);
        assert_eq!(cells[1].choice, Libc);
    }

    #[test]
    fn one_noisy_cell_does_not_flip_its_band() {
        let steady = [(PerPage, 40.0), (Avx2, 46.0), (Libc, 45.0)];
        let cells = choose(
            &[
                m(32 << 10, &steady),
                // The measurement that chose per-page at 64K on a Zen 3 VM.
                m(64 << 10, &[(PerPage, 41.96), (Avx2, 41.32), (Libc, 27.48)]),
                m(128 << 10, &steady),
            ],
            NONE,
        );
        assert_eq!(cells[1].winner, PerPage, "the raw winner stays on record");
        assert_eq!(cells[1].choice, Avx2);
        // A real edge (two cells in a row) still moves the band.
        let cells = choose(
            &[
                m(1, &steady),
                m(2, &[(PerPage, 10.0), (Avx2, 5.0), (Libc, 6.0)]),
                m(4, &[(PerPage, 10.0), (Avx2, 5.0), (Libc, 6.0)]),
            ],
            NONE,
        );
        assert_eq!(cells[2].choice, PerPage);
    }

    #[test]
    fn the_rules_stay_unless_the_measurement_departs_clearly_and_again() {
        // A near-tie (portable ahead by 2%): the rules' rep-movsb stays.
        let tie = [(PerPage, 24.0), (RepMovsb, 24.6), (Portable, 25.1)];
        let cells = choose(&[m(1, &tie), m(2, &tie), m(4, &tie)], MOVSB);
        assert!(cells
            .iter()
            .all(|c| c.choice == RepMovsb && c.winner == Portable));
        // A clear win departs...
        let clear = [(PerPage, 24.0), (RepMovsb, 24.6), (Portable, 30.0)];
        let mut cells = choose(&[m(1, &clear), m(2, &clear)], MOVSB);
        assert!(cells.iter().all(|c| c.choice == Portable));
        // ...and reverts where the re-check does not confirm it.
        let again = [
            m(1, &[(PerPage, 29.0), (RepMovsb, 32.0), (Portable, 21.0)]),
            m(2, &[(PerPage, 24.0), (RepMovsb, 24.6), (Portable, 29.0)]),
        ];
        assert_eq!(recheck(&mut cells, &again, MOVSB), 1);
        assert_eq!((cells[0].choice, cells[1].choice), (RepMovsb, Portable));
    }

    #[test]
    fn a_choice_slower_than_per_page_on_recheck_becomes_per_page() {
        let mut cells = choose(
            &[
                m(64, &[(PerPage, 5.0), (Avx2, 5.2)]),
                m(128, &[(PerPage, 5.0), (Avx2, 9.0)]),
            ],
            NONE,
        );
        let n = recheck(
            &mut cells,
            &[
                m(64, &[(PerPage, 5.1), (Avx2, 5.0)]),
                m(128, &[(PerPage, 5.0), (Avx2, 9.1)]),
            ],
            NONE,
        );
        assert_eq!(n, 1);
        assert_eq!(cells[0].choice, PerPage);
        assert_eq!(
            cells[0].winner, Avx2,
            "the first measurement's winner stays on record"
        );
        assert_eq!(cells[1].choice, Avx2);
    }
}
