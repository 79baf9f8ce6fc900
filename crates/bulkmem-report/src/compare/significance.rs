//! Whether a cell's two sets of samples differ, as a p-value, and which of
//! many such cells may be called changed at once.
//!
//! Two things make the plain per-cell test call noise a change:
//!
//! - Many cells are tested at once (60 in a small `bench copy`), so at 5%
//!   each, three would be "significant" in two identical runs. Holm's
//!   step-down correction keeps the chance of calling *any* unchanged cell
//!   at 5% for the whole comparison.
//! - A cell's samples are taken back to back within one run, so whatever
//!   lasts the whole run (another tenant's load, the clock, where the pages
//!   landed) moves them together and their spread does not show it. That
//!   drift between the runs is estimated from the cells themselves (see
//!   [`drift`]) and added to each cell's variance.

use crate::stats::t_two_sided;

/// Family-wise error rate of one comparison: the chance that two runs of
/// the same build get any cell called faster or slower.
pub const ALPHA: f64 = 0.05;

/// What a variance estimated by a median is worth next to the usual
/// sample variance, in degrees of freedom: the asymptotic efficiency of the
/// median absolute deviation at the normal, 37%. The drift is such an
/// estimate, so `family` cells give it about a third of `family - 1` df.
const MEDIAN_EFFICIENCY: f64 = 0.37;

/// One cell, as the test sees it: the log of B/A of the means, and the
/// relative variances of A's and B's means with their degrees of freedom.
#[derive(Clone, Copy, Debug)]
pub struct Cell {
    /// ln(mean(B) / mean(A)).
    pub shift: f64,
    /// Var(mean(A)) / mean(A)², and its df (samples - 1).
    pub var_a: (f64, f64),
    /// The same for B.
    pub var_b: (f64, f64),
}

impl Cell {
    /// `None` when either side has fewer than two samples (no spread to
    /// test against) or a mean that is not positive (no ratio).
    pub fn of(a: &[f64], b: &[f64]) -> Option<Cell> {
        let rel = |s: &[f64]| {
            let n = s.len() as f64;
            let mean = s.iter().sum::<f64>() / n;
            let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            // The delta method: Var(ln m) ≈ Var(m) / m² for the mean m.
            (mean, (var / n / (mean * mean), n - 1.0))
        };
        if a.len() < 2 || b.len() < 2 {
            return None;
        }
        let ((ma, var_a), (mb, var_b)) = (rel(a), rel(b));
        (ma > 0.0 && mb > 0.0 && ma.is_finite() && mb.is_finite()).then(|| Cell {
            shift: (mb / ma).ln(),
            var_a,
            var_b,
        })
    }

    fn within(&self) -> f64 {
        self.var_a.0 + self.var_b.0
    }

    /// Welch–Satterthwaite degrees of freedom of [`Cell::within`] + `drift`,
    /// the drift's from the `family` cells it was estimated from; with
    /// noise-free samples and no drift, both sides' pooled.
    fn df(&self, drift: f64, family: usize) -> f64 {
        let part = |(v, df): (f64, f64)| v * v / df;
        let mut denom = part(self.var_a) + part(self.var_b);
        if drift > 0.0 {
            denom += part((drift, MEDIAN_EFFICIENCY * (family.max(2) - 1) as f64));
        }
        if denom > 0.0 {
            (self.within() + drift).powi(2) / denom
        } else {
            self.var_a.1 + self.var_b.1
        }
    }
}

/// The drift between the two runs, as a variance of a cell's log ratio
/// beyond its samples' own; 0 with fewer than three cells (two cells that
/// disagree do not say which one moved). Two parts:
///
/// - how far the cells scatter around their common (median) shift, τ²
///   ([`scatter`]), robust to up to half the cells really changing;
/// - the common shift itself, c, which one pair of runs cannot tell from
///   the whole run going faster or slower (another tenant's load for the
///   length of a run moved every cell 2.4x between two identical runs on a
///   shared 2-CPU host). It counts as drift up to γ, how far a whole run
///   can move: its samples are taken back to back, so a disturbance that
///   outlasts them moves the run's mean as far as it moves one sample, and
///   γ² is the median cell's relative variance of one sample, A's and B's
///   added. A common shift beyond that is a change, and a quiet machine
///   (1% per sample) still sees a build 10% slower everywhere.
pub fn drift(cells: &[Cell]) -> f64 {
    if cells.len() < 3 {
        return 0.0;
    }
    let common = median(cells.iter().map(|c| c.shift).collect());
    let one_sample = |(v, df): (f64, f64)| v * (df + 1.0);
    let gamma2 = median(
        cells
            .iter()
            .map(|c| one_sample(c.var_a) + one_sample(c.var_b))
            .collect(),
    );
    scatter(cells, common) + (common * common).min(gamma2)
}

/// The smallest τ² at which the median cell, its deviation from `center`
/// tested against its own variance + τ², is unremarkable (two-sided p of
/// at least one half, as the median of p-values is when the cells scatter
/// only as their samples say). A median, so up to half the cells may
/// really have changed without inflating it; 0 where the cells scatter no
/// more than their samples say (a quiet machine).
fn scatter(cells: &[Cell], center: f64) -> f64 {
    let family = cells.len();
    let median_p = |tau2: f64| {
        median(
            cells
                .iter()
                .map(|c| {
                    let d = c.shift - center;
                    if d == 0.0 {
                        // A noise-free cell exactly at the median: no evidence.
                        return 1.0;
                    }
                    t_two_sided(d / (c.within() + tau2).sqrt(), c.df(tau2, family))
                })
                .collect(),
        )
    };
    if median_p(0.0) >= 0.5 {
        return 0.0;
    }
    // At this τ² every |t| is at most 0.6745, the normal's two-sided 50%
    // point, so every p (Student's tails being heavier) is at least one
    // half; the median p grows with τ²: bisect below it.
    let max_d2 = cells
        .iter()
        .map(|c| (c.shift - center).powi(2))
        .fold(0.0, f64::max);
    let (mut lo, mut hi) = (0.0, max_d2 / 0.6745_f64.powi(2));
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if median_p(mid) < 0.5 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Welch's t-test of `c`'s shift against 0, two-sided, with `drift` (a
/// variance from [`drift`] over `family` cells) added to the cell's own.
/// Degrees of freedom by Welch–Satterthwaite, the drift's estimated from
/// the `family` cells. Returns (sign of the shift, p-value).
pub fn welch(c: &Cell, drift: f64, family: usize) -> (i8, f64) {
    let var = c.within() + drift;
    let sign = if c.shift > 0.0 { 1 } else { -1 };
    if var == 0.0 {
        // Noise-free samples (a timer at its resolution) on a quiet
        // machine: any difference is real.
        return (sign, if c.shift == 0.0 { 1.0 } else { 0.0 });
    }
    (sign, t_two_sided(c.shift / var.sqrt(), c.df(drift, family)))
}

/// Holm's adjusted p-values, in the order given: the i-th smallest (from 0)
/// of m is multiplied by m - i, then raised to the largest adjusted value
/// before it, capped at 1. A cell is significant at family-wise level α
/// exactly when its adjusted p-value is at most α.
///
/// Holm rather than Benjamini–Hochberg: `--fail-on` turns a single call
/// into a failed CI job, so what has to stay at 5% is the chance of any
/// false call (the family-wise rate), which Holm bounds and BH, bounding
/// only the expected share of false calls among the calls, does not once
/// some cells really changed. Holm also holds under any dependence between
/// the cells, and the cells of one run are dependent: they share the
/// machine's state.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut adjusted = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((m - rank) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

#[cfg(test)]
mod tests;
