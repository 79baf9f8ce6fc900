//! `auto` against the best of a cell's other rows: the tables' `auto/best`
//! line, and which cells `bench copy|clear` measures again because of it
//! (docs/measurements.md, "auto/best").
//!
//! The best row is picked by the same rounds that measure it: of eight
//! rows of one kernel, the best's median sits above the others' by the
//! run's noise, so `auto` reads below the best even where it ran the very
//! kernel of that row. Laid over 2,000 back-to-back 256 MiB `memcpy`s on
//! the Zen 3 VM, two rows of one kernel in seven rounds (two pieces a
//! round) put one under 0.95x of the other in 0.4% of the cells, the best
//! of seven such rows over the eighth in 14%. Rounds of their own for
//! auto and the few rows ahead of it measure them without that pick.

use super::{Label, Row};
use crate::stats::Stats;

/// `auto` against the best of one cell's other rows: see [`auto_over_best`].
pub(super) struct AutoOverBest<'r> {
    /// How close the choice came to the best this run measured.
    pub ratio: f64,
    /// That row's name.
    pub best: &'r str,
    /// Whether the rounds tell auto and that row apart ([`told_apart`]);
    /// without paired samples, never.
    pub told_apart: bool,
    /// Where the cell was measured again ([`Row::remeasured`]): the run's
    /// own figure and best row, which `ratio` and `best` replace.
    pub first: Option<(f64, &'r str)>,
}

/// Two-sided level of [`told_apart`]'s test.
pub(super) const LEVEL_ALPHA: f64 = 0.05;

/// The most rows ahead of `auto` that a cell is measured again with
/// ([`to_remeasure`]), the fastest first: rounds stay short, and a row
/// further behind the best is not what decides the figure.
pub const AHEAD_MOST: usize = 3;

/// `auto` over the best of one cell's other rows (those that ran what
/// they name: every strategy, and other libraries' rows, but not
/// `checked`). The best row is the one with the best median; the ratio is
/// the median, over the rounds, of auto's sample over that row's sample of
/// the same round (the bench interleaves its cells, one sample of each per
/// round), so a slow or fast spell of the machine that spans a round
/// cancels out instead of landing on one row's median. Rows without
/// paired samples (another run's JSON) divide their medians. Where auto's
/// row carries [`Row::remeasured`], the figure is those rounds' (auto
/// over the best of the rows measured with it), the run's own kept in
/// `first`.
pub(super) fn auto_over_best<'r>(cell: &[&'r Row]) -> Option<AutoOverBest<'r>> {
    let auto = cell.iter().find(|r| r.strategy == "auto")?;
    let named = cell
        .iter()
        .filter(|r| ran_what_it_names(r))
        .map(|r| (r.strategy.as_str(), &r.gbps));
    let first = against_best(&auto.gbps, named)?;
    let Some(again) = &auto.remeasured else {
        return Some(first);
    };
    let second = again
        .rows
        .iter()
        .find(|r| r.strategy == "auto")
        .and_then(|a| {
            let others = again
                .rows
                .iter()
                .filter(|r| r.strategy != "auto")
                .map(|r| (r.strategy.as_str(), &r.gbps));
            against_best(&a.gbps, others)
        });
    Some(match second {
        Some(s) => AutoOverBest {
            first: Some((first.ratio, first.best)),
            ..s
        },
        None => first,
    })
}

/// A row that ran the strategy it names: what `auto` is held against.
fn ran_what_it_names(r: &Row) -> bool {
    r.strategy != "auto" && r.strategy != "checked" && r.chose == r.strategy
}

/// `auto` (its GB/s `a`) over the row of `rows` with the best median.
fn against_best<'r>(
    a: &Stats,
    rows: impl Iterator<Item = (&'r str, &'r Stats)>,
) -> Option<AutoOverBest<'r>> {
    let (best, b) = rows.max_by(|x, y| x.1.median.total_cmp(&y.1.median))?;
    let (ratio, told_apart) = over(a, b)?;
    Some(AutoOverBest {
        ratio,
        best,
        told_apart,
        first: None,
    })
}

/// `a` over `b`: the median of their rounds' ratios and whether those
/// tell them apart, else (no pairs) their medians' ratio, never told apart.
fn over(a: &Stats, b: &Stats) -> Option<(f64, bool)> {
    let ratios: Option<Vec<f64>> = (a.samples.len() == b.samples.len() && !a.samples.is_empty())
        .then(|| {
            a.samples
                .iter()
                .zip(&b.samples)
                .map(|(x, y)| x / y)
                .collect::<Vec<_>>()
        })
        .filter(|r| r.iter().all(|x| x.is_finite() && *x > 0.0));
    match ratios.as_deref().and_then(Stats::of) {
        Some(p) => Some((p.median, ratios.is_some_and(|r| told_apart(&r)))),
        None if b.median > 0.0 => Some((a.median / b.median, false)),
        None => None,
    }
}

/// Whether `ratios` (auto over a row, one per round) say the two differ:
/// Student's t-test of their logs' mean against 0, two-sided at
/// [`LEVEL_ALPHA`]. On a shared machine a DRAM-bound cell's rounds spread
/// +-10% or more (one `memcpy` of 256 MiB ran at 7-14 GB/s back to back on
/// the Zen 3 VM), so a few percent between two rows there is often this
/// run's noise, not the kernels'; a hot cell's rounds spread 1-2%, where
/// the same few percent is told apart. The best row is the best of
/// several, so a level pair leans against auto: the test is a reading
/// aid, not a verdict on the choice.
fn told_apart(ratios: &[f64]) -> bool {
    let n = ratios.len();
    if n < 2 {
        return false;
    }
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let mean = logs.iter().sum::<f64>() / n as f64;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    if var == 0.0 {
        return mean != 0.0;
    }
    let t = mean / (var / n as f64).sqrt();
    crate::stats::t_two_sided(t, (n - 1) as f64) <= LEVEL_ALPHA
}

/// A cell to measure again: `auto` and `rows` (the fastest first), in
/// rounds of their own.
#[derive(Clone, Debug, PartialEq)]
pub struct Remeasure {
    pub op: Label,
    pub regime: Label,
    pub size: usize,
    pub rows: Vec<String>,
}

/// The cells of `rows` where `auto` measured below `below` x the best of
/// the other rows, each with the rows it measured below `below` of (at
/// most [`AHEAD_MOST`], the fastest first): what `bench copy|clear`
/// measures again. Cells already measured again are not.
pub fn to_remeasure(rows: &[Row], below: f64) -> Vec<Remeasure> {
    let mut out = Vec::new();
    for auto in rows
        .iter()
        .filter(|r| r.strategy == "auto" && r.remeasured.is_none())
    {
        let key = auto.key();
        let mut ahead: Vec<&Row> = rows
            .iter()
            .filter(|r| ran_what_it_names(r) && r.key() == key)
            .filter(|r| over(&auto.gbps, &r.gbps).is_some_and(|(x, _)| x < below))
            .collect();
        let cell: Vec<&Row> = rows.iter().filter(|r| r.key() == key).collect();
        if auto_over_best(&cell).is_none_or(|b| b.ratio >= below) {
            continue;
        }
        ahead.sort_by(|a, b| b.gbps.median.total_cmp(&a.gbps.median));
        ahead.truncate(AHEAD_MOST);
        out.push(Remeasure {
            op: auto.op,
            regime: auto.regime,
            size: auto.size,
            rows: ahead.iter().map(|r| r.strategy.clone()).collect(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::r;
    use super::super::{Remeasured, RemeasuredRow};
    use super::*;

    fn with(strategy: &str, size: usize, samples: &[f64]) -> Row {
        Row {
            gbps: Stats::or_zero(samples),
            ..r(strategy, "hot", size, 0.0)
        }
    }

    #[test]
    fn auto_over_best_pairs_the_samples_of_each_round() {
        // avx2-nt's median (10.0) is best; by medians auto is 0.90x, but
        // round by round auto ran 0.6, 1.5 and 0.96 of it: 0.96x.
        let rows = [
            with("avx2-nt", 4096, &[10.0, 6.0, 10.0]),
            with("per-page", 4096, &[5.0, 5.0, 5.0]),
            with("auto", 4096, &[6.0, 9.0, 9.6]),
        ];
        let cell: Vec<&Row> = rows.iter().collect();
        let b = auto_over_best(&cell).unwrap();
        assert_eq!(b.best, "avx2-nt");
        assert!((b.ratio - 0.96).abs() < 1e-9, "{}", b.ratio);
        // Rounds from 0.6 to 1.5: not told apart.
        assert!(!b.told_apart && b.first.is_none());
        // Unequal sample counts (rows of two runs) divide the medians.
        let rows = [
            with("avx2-nt", 4096, &[10.0, 6.0, 10.0]),
            with("auto", 4096, &[9.0]),
        ];
        let cell: Vec<&Row> = rows.iter().collect();
        let b = auto_over_best(&cell).unwrap();
        assert!((b.ratio - 0.9).abs() < 1e-9 && !b.told_apart);
    }

    #[test]
    fn a_steady_gap_is_told_apart_and_a_swinging_one_is_not() {
        let best = [10.0, 12.0, 9.0, 11.0, 10.0, 13.0, 10.0];
        let times = |f: &[f64]| -> Vec<f64> { f.iter().zip(best).map(|(r, b)| r * b).collect() };
        let of = |auto: &[f64]| {
            let rows = [with("avx2", 4096, &best), with("auto", 4096, auto)];
            let cell: Vec<&Row> = rows.iter().collect();
            let b = auto_over_best(&cell).unwrap();
            (format!("{:.2}", b.ratio), b.told_apart)
        };
        assert_eq!(of(&times(&[0.93; 7])), ("0.93".into(), true));
        let swinging = times(&[0.80, 1.10, 0.93, 0.85, 1.02, 0.93, 0.95]);
        assert_eq!(of(&swinging), ("0.93".into(), false));
        assert_eq!(of(&times(&[1.02; 7])), ("1.02".into(), true));
    }

    /// A cell where auto (9.0 a round) trails `a` (10.0) and `b` (9.8),
    /// is level with `c` (9.1) and ahead of `d` (8.0).
    fn trailing() -> Vec<Row> {
        vec![
            with("a", 4096, &[10.0; 5]),
            with("b", 4096, &[9.8; 5]),
            with("c", 4096, &[9.1; 5]),
            with("d", 4096, &[8.0; 5]),
            with("auto", 4096, &[9.0; 5]),
            with("auto", 8192, &[9.0; 5]),
            with("a", 8192, &[9.1; 5]),
        ]
    }

    #[test]
    fn cells_where_auto_trails_are_measured_again_with_the_rows_ahead() {
        let rows = trailing();
        let again = to_remeasure(&rows, 0.97);
        assert_eq!(
            again,
            vec![Remeasure {
                op: "copy",
                regime: "hot",
                size: 4096,
                rows: vec!["a".into(), "b".into()],
            }]
        );
        // Every row ahead by any margin, the three fastest; 8K too.
        let again = to_remeasure(&rows, 1.0);
        assert_eq!(again[0].rows, ["a", "b", "c"]);
        assert_eq!(again[1].size, 8192);
        assert!(to_remeasure(&rows, 0.0).is_empty());
    }

    #[test]
    fn a_cell_measured_again_gives_those_rounds_figure() {
        let mut rows = trailing();
        let again = |s: &str, samples: &[f64]| RemeasuredRow {
            strategy: s.into(),
            gbps: Stats::or_zero(samples),
        };
        // Its own rounds: auto 0.99x of `b`, 1.01x of `a`.
        rows[4].remeasured = Some(Remeasured {
            runs: 3,
            rows: vec![
                again("auto", &[9.9, 9.9, 9.9]),
                again("a", &[9.8, 9.8, 9.8]),
                again("b", &[10.0, 10.0, 10.0]),
            ],
        });
        let cell: Vec<&Row> = rows.iter().filter(|r| r.size == 4096).collect();
        let b = auto_over_best(&cell).unwrap();
        assert_eq!(b.best, "b");
        assert!((b.ratio - 0.99).abs() < 1e-9, "{}", b.ratio);
        let (first, first_best) = b.first.unwrap();
        assert!((first - 0.9).abs() < 1e-9 && first_best == "a");
        // Measured again once: not again.
        assert!(to_remeasure(&rows, 0.97).is_empty());
        assert_eq!(to_remeasure(&rows, 1.0).len(), 1);
    }
}
