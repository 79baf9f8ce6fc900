//! Which matched cells changed: the verdict of each, from the samples of
//! both documents, and the outcome `--json` writes and the tables show.

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

use super::significance;
use super::{key, label, Doc, Key};
use crate::stats::Stats;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Faster,
    Slower,
    Same,
    Unknown,
}

impl serde::Serialize for Verdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl Verdict {
    pub(super) fn name(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "unchanged",
            Verdict::Unknown => "cannot-tell",
        }
    }

    pub(super) fn mark(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "~",
            Verdict::Unknown => "?",
        }
    }
}

/// A matched cell's ratio, verdict and p-values (raw, Holm-adjusted).
pub(super) struct Judged {
    pub(super) ratio: Option<f64>,
    pub(super) verdict: Verdict,
    pub(super) p: Option<f64>,
    pub(super) p_holm: Option<f64>,
}

/// Every matched cell's verdict, and the drift between the runs (relative
/// stdev of a cell's B/A that no cell's samples account for). A cell is
/// faster or slower only when the test, corrected for the number of cells,
/// is significant and its median ratio moved by at least `threshold` the
/// same way.
pub(super) fn judge(pairs: &[(&Stats, &Stats)], threshold: f64) -> (Vec<Judged>, f64) {
    let cells: Vec<Option<significance::Cell>> = pairs
        .iter()
        .map(|(a, b)| significance::Cell::of(&a.samples, &b.samples))
        .collect();
    let tested: Vec<significance::Cell> = cells.iter().flatten().copied().collect();
    let drift = significance::drift(&tested);
    let tests: Vec<(i8, f64)> = tested
        .iter()
        .map(|c| significance::welch(c, drift, tested.len()))
        .collect();
    let adjusted = significance::holm(&tests.iter().map(|t| t.1).collect::<Vec<_>>());
    let mut next = tests.iter().zip(adjusted);
    let judged = pairs
        .iter()
        .zip(&cells)
        .map(|((a, b), cell)| {
            let ratio = (a.median > 0.0 && b.median.is_finite()).then(|| b.median / a.median);
            let test = cell.and_then(|_| next.next());
            let verdict = match (ratio, test) {
                (Some(r), Some((&(sign, _), p))) if p <= significance::ALPHA => {
                    // Means and medians can disagree on direction with
                    // skewed samples; a change is only called when both
                    // point the same way.
                    if sign > 0 && r - 1.0 >= threshold {
                        Verdict::Faster
                    } else if sign < 0 && 1.0 - r >= threshold {
                        Verdict::Slower
                    } else {
                        Verdict::Same
                    }
                }
                (Some(_), Some(_)) => Verdict::Same,
                _ => Verdict::Unknown,
            };
            Judged {
                ratio,
                verdict,
                p: test.map(|t| t.0 .1),
                p_holm: test.map(|t| t.1),
            }
        })
        .collect();
    (judged, drift.sqrt())
}

/// Paired (row of A, row of B), then the rows only in A, only in B.
pub(super) type Matching = (Vec<(usize, usize)>, Vec<usize>, Vec<usize>);

/// Rows of `a` and `b` with the same key, paired in order (the first row of
/// `a` with a key gets the first row of `b` with it, and so on), then the
/// indices of the rows of each left without a partner. Linear in the rows:
/// one hash lookup per row, where a scan of `b` for each row of `a` took
/// 21 s on 40,000 rows.
pub(super) fn match_rows(a: &[Key], b: &[Key]) -> Matching {
    let mut waiting: HashMap<&Key, VecDeque<usize>> = HashMap::with_capacity(b.len());
    for (j, k) in b.iter().enumerate() {
        waiting.entry(k).or_default().push_back(j);
    }
    let mut used_b = vec![false; b.len()];
    let mut pairs = Vec::new();
    let mut only_a = Vec::new();
    for (i, k) in a.iter().enumerate() {
        match waiting.get_mut(k).and_then(VecDeque::pop_front) {
            Some(j) => {
                used_b[j] = true;
                pairs.push((i, j));
            }
            None => only_a.push(i),
        }
    }
    let only_b = (0..b.len()).filter(|&j| !used_b[j]).collect();
    (pairs, only_a, only_b)
}

/// A matched cell's side: the figures the verdict came from.
#[derive(Serialize)]
pub(super) struct Side {
    pub(super) median: f64,
    pub(super) stdev: f64,
    pub(super) runs: usize,
}

impl Side {
    pub(super) fn of(s: &Stats) -> Side {
        Side {
            median: s.median,
            stdev: s.stdev,
            runs: s.samples.len(),
        }
    }
}

#[derive(Serialize)]
pub(super) struct Cell {
    pub(super) cell: String,
    pub(super) a: Side,
    pub(super) b: Side,
    /// B/A of the medians; `null` when A's is 0.
    pub(super) ratio: Option<f64>,
    pub(super) verdict: Verdict,
    /// Welch's two-sided p-value, drift included; `null` with fewer than
    /// two samples on a side.
    pub(super) p: Option<f64>,
    /// `p` after Holm's correction over the comparison's tested cells:
    /// significant when at most 0.05.
    pub(super) p_holm: Option<f64>,
}

/// What `--json` writes and the tables show. GB/s throughout.
#[derive(Serialize)]
pub struct Outcome {
    pub(super) a: String,
    pub(super) b: String,
    pub(super) threshold: f64,
    /// Between-run drift: the relative stdev of a cell's B/A beyond what
    /// its samples explain, estimated from all the cells (0 on a quiet
    /// machine). Counted in every cell's test.
    pub(super) drift: f64,
    pub(super) cells: Vec<Cell>,
    pub(super) only_in_a: Vec<String>,
    pub(super) only_in_b: Vec<String>,
    pub faster: usize,
    pub slower: usize,
    pub(super) unchanged: usize,
    pub(super) cannot_tell: usize,
    /// Geometric mean of B/A over the cells with a ratio.
    pub(super) geomean: Option<f64>,
}

/// Pairs the cells of `a` and `b` and judges each pair.
pub fn outcome(a: &Doc, b: &Doc, threshold: f64) -> Outcome {
    let keys_a: Vec<Key> = a.rows.iter().map(|r| key(&r.fields)).collect();
    let keys_b: Vec<Key> = b.rows.iter().map(|r| key(&r.fields)).collect();
    let (pairs, only_a, only_b) = match_rows(&keys_a, &keys_b);

    // `total` is shown only where leaving it out would give two different
    // cells the same label: per short label, the first key seen under it and
    // whether a second one was.
    let short_a: Vec<String> = a.rows.iter().map(|r| label(r, false)).collect();
    let short_b: Vec<String> = b.rows.iter().map(|r| label(r, false)).collect();
    let mut keys_of: HashMap<&str, (&Key, bool)> = HashMap::new();
    for (l, k) in short_a
        .iter()
        .zip(&keys_a)
        .chain(short_b.iter().zip(&keys_b))
    {
        keys_of
            .entry(l)
            .and_modify(|(first, more)| *more |= *first != k)
            .or_insert((k, false));
    }
    let name = |doc: &Doc, short: &[String], i: usize| {
        if keys_of[short[i].as_str()].1 {
            label(&doc.rows[i], true)
        } else {
            short[i].clone()
        }
    };
    let stats: Vec<(Stats, Stats)> = pairs
        .iter()
        .map(|&(i, j)| (a.rows[i].row.gbps.clone(), b.rows[j].row.gbps.clone()))
        .collect();
    let refs: Vec<(&Stats, &Stats)> = stats.iter().map(|(x, y)| (x, y)).collect();
    let (judged, drift) = judge(&refs, threshold);
    let cells: Vec<Cell> = pairs
        .iter()
        .zip(&stats)
        .zip(judged)
        .map(|((&(i, _), (ma, mb)), j)| Cell {
            cell: name(a, &short_a, i),
            a: Side::of(ma),
            b: Side::of(mb),
            ratio: j.ratio,
            verdict: j.verdict,
            p: j.p,
            p_holm: j.p_holm,
        })
        .collect();
    let count = |v: Verdict| cells.iter().filter(|c| c.verdict == v).count();
    let logs: Vec<f64> = cells
        .iter()
        .filter_map(|c| c.ratio.filter(|r| *r > 0.0 && r.is_finite()))
        .map(f64::ln)
        .collect();
    Outcome {
        a: a.name.clone(),
        b: b.name.clone(),
        threshold,
        drift,
        faster: count(Verdict::Faster),
        slower: count(Verdict::Slower),
        unchanged: count(Verdict::Same),
        cannot_tell: count(Verdict::Unknown),
        geomean: (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp()),
        only_in_a: only_a.iter().map(|&i| name(a, &short_a, i)).collect(),
        only_in_b: only_b.iter().map(|&j| name(b, &short_b, j)).collect(),
        cells,
    }
}

/// What `--fail-on` watches for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum FailOn {
    /// A cell significantly slower in B.
    Slower,
    /// A cell significantly faster in B (an unexpected gain is suspect too).
    Faster,
    /// Either.
    Any,
}

/// Whether `o` has a change `fail_on` fails on.
pub fn fails(o: &Outcome, fail_on: FailOn) -> bool {
    match fail_on {
        FailOn::Slower => o.slower > 0,
        FailOn::Faster => o.faster > 0,
        FailOn::Any => o.slower + o.faster > 0,
    }
}
