//! The human tables of result rows: one per (op, regime), pivots of any
//! two row fields, and the one-line summary of who wins.

use std::fmt::Write as _;

use super::Row;
use crate::size::fmt_size;
use crate::stats::Stats;
use crate::table::{cell, noise_note, Table};

/// One table per (op, regime): a row per strategy, a column per size, each
/// cell `median±stdev` GB/s and the speed-up over `baseline` (rows whose
/// `speedup` came from [`add_speedups_over`](super::add_speedups_over)
/// with the same name). `auto_kind` is what `auto` followed in this
/// process (`tuned` or `built-in`), shown beside its rows.
pub fn tables_over(
    rows: &[Row],
    unavailable: &[String],
    baseline: &str,
    auto_kind: &str,
) -> Vec<Table> {
    let mut out = Vec::new();
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if !keys.contains(&(r.op, r.regime)) {
            keys.push((r.op, r.regime));
        }
    }
    for (op, regime) in keys {
        let cell_rows: Vec<&Row> = rows
            .iter()
            .filter(|r| r.op == op && r.regime == regime)
            .collect();
        let mut sizes: Vec<usize> = cell_rows.iter().map(|r| r.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let mut strategies: Vec<&str> = Vec::new();
        for r in &cell_rows {
            if !strategies.contains(&r.strategy.as_str()) {
                strategies.push(&r.strategy);
            }
        }
        let first = cell_rows[0];
        let per_run = |r: &&Row| r.total.max(r.size);
        let least = cell_rows.iter().map(per_run).min().unwrap_or(0);
        let most = cell_rows.iter().map(per_run).max().unwrap_or(0);
        let calls: Vec<&str> = cell_rows.iter().filter_map(|r| r.calls).collect();
        let batched = if calls.iter().all(|&c| c == "batch") {
            ", every row one call a batch"
        } else if calls.contains(&"batch") {
            ", [batch] rows one call a batch, the others a call per extent"
        } else {
            ""
        };
        let mixed = calls.contains(&"batch") && calls.contains(&"each");
        let how = match regime {
            "cold" if least == most => format!(
                "{} batches of shuffled extents, cache evicted before each{batched}",
                fmt_size(least)
            ),
            "cold" => format!(
                "{}-{} batches of shuffled extents, cache evicted before each{batched}",
                fmt_size(least),
                fmt_size(most)
            ),
            "consume" => "same buffers, each call then a read of its destination, timed together"
                .to_string(),
            "pipe" => {
                "same buffers, each call then write() of its destination to a drained pipe, timed together"
                    .to_string()
            }
            _ => "same buffers every call".to_string(),
        };
        let (lo, hi) = cell_rows.iter().fold((usize::MAX, 0), |(lo, hi), r| {
            (lo.min(r.threads), hi.max(r.threads))
        });
        let threads = match (lo, hi) {
            (lo, hi) if lo < hi => format!(
                "; {lo}-{hi} threads worked (one per extent at most), GB/s summed over them"
            ),
            (_, t) if t > 1 => format!("; {t} threads, GB/s summed over them"),
            _ => "; 1 thread".to_string(),
        };
        let mut header = vec!["strategy".to_string()];
        header.extend(sizes.iter().map(|&s| fmt_size(s)));
        let mut within_noise = 0;
        let mut t = Table::new(
            format!(
                "{op}, {regime} ({how}{threads}): GB/s median±stdev of {} runs; x = over {baseline}",
                first.runs
            ),
            header,
        );
        for name in strategies {
            let first_of = cell_rows.iter().find(|r| r.strategy == name);
            let mut label = match first_of.and_then(|r| r.hint.as_deref()) {
                Some(h) if h != "auto" => format!("{name} ({auto_kind}, {h})"),
                Some(_) => format!("{name} ({auto_kind})"),
                _ => name.to_string(),
            };
            if mixed && first_of.and_then(|r| r.calls) == Some("batch") {
                label += " [batch]";
            }
            let find = |s: usize| cell_rows.iter().find(|r| r.strategy == name && r.size == s);
            let mut cells = vec![label];
            cells.extend(sizes.iter().map(|&s| match find(s) {
                Some(r) => cell(&r.gbps, r.speedup.filter(|_| name != baseline)),
                None => "-".to_string(),
            }));
            t.row(cells);
            if name == "auto" || name == "checked" {
                let what = if name == "auto" {
                    "  auto chose"
                } else {
                    "  checked ran"
                };
                let mut cells = vec![what.to_string()];
                cells.extend(
                    sizes
                        .iter()
                        .map(|&s| find(s).map_or("-".to_string(), |r| r.chose.clone())),
                );
                t.row(cells);
            }
            if name == "auto" {
                let mut cells = vec!["  auto/best".to_string()];
                cells.extend(sizes.iter().map(|&s| {
                    let of_size: Vec<&Row> =
                        cell_rows.iter().copied().filter(|r| r.size == s).collect();
                    auto_over_best(&of_size).map_or("-".to_string(), |b| {
                        let level = b.ratio < 1.0 && !b.told_apart;
                        within_noise += usize::from(level);
                        let mark = if level { "~" } else { "" };
                        format!("{mark}{:.2}x {}", b.ratio, b.best)
                    })
                }));
                t.row(cells);
            }
        }
        t.notes
            .extend(noise_note(cell_rows.iter().map(|r| &r.gbps)));
        if within_noise > 0 {
            t.notes.push(format!(
                "~ on auto/best ({within_noise}): auto measured below that row, but this run did not tell them apart (paired t-test of the rounds' ratios, {:.0}%)",
                LEVEL_ALPHA * 100.0
            ));
        }
        out.push(t);
    }
    if let (false, Some(last)) = (rows.iter().any(|r| r.strategy == baseline), out.last_mut()) {
        last.notes.push(format!(
            "no ratios: this run has no `{baseline}` row (--baseline names another)"
        ));
    }
    if let (false, Some(last)) = (unavailable.is_empty(), out.last_mut()) {
        last.notes.push(format!(
            "not run (this CPU lacks them): {}",
            unavailable.join(", ")
        ));
    }
    out
}

/// `auto` against the best of one cell's other rows: see [`auto_over_best`].
struct AutoOverBest<'r> {
    /// How close the choice came to the best this run measured.
    ratio: f64,
    /// That row's name.
    best: &'r str,
    /// Whether this run's rounds tell auto and that row apart
    /// ([`told_apart`]); without paired samples, never.
    told_apart: bool,
}

/// Two-sided level of [`told_apart`]'s test.
const LEVEL_ALPHA: f64 = 0.05;

/// `auto` over the best of one cell's other rows (those that ran what
/// they name: every strategy, and other libraries' rows, but not
/// `checked`). The best row is the one with the best median; the ratio is
/// the median, over the rounds, of auto's sample over that row's sample of
/// the same round (the bench interleaves its cells, one sample of each per
/// round), so a slow or fast spell of the machine that spans a round
/// cancels out instead of landing on one row's median. Rows without
/// paired samples (another run's JSON) divide their medians.
fn auto_over_best<'r>(cell: &[&'r Row]) -> Option<AutoOverBest<'r>> {
    let auto = cell.iter().find(|r| r.strategy == "auto")?;
    let best = cell
        .iter()
        .filter(|r| r.strategy != "auto" && r.strategy != "checked" && r.chose == r.strategy)
        .max_by(|a, b| a.gbps.median.total_cmp(&b.gbps.median))?;
    let (a, b) = (&auto.gbps.samples, &best.gbps.samples);
    let ratios: Option<Vec<f64>> = (a.len() == b.len() && !a.is_empty())
        .then(|| a.iter().zip(b).map(|(x, y)| x / y).collect::<Vec<_>>())
        .filter(|r| r.iter().all(|x| x.is_finite() && *x > 0.0));
    let ratio = match ratios.as_deref().and_then(Stats::of) {
        Some(p) => p.median,
        None if best.gbps.median > 0.0 => auto.gbps.median / best.gbps.median,
        None => return None,
    };
    Some(AutoOverBest {
        ratio,
        best: best.strategy.as_str(),
        told_apart: ratios.is_some_and(|r| told_apart(&r)),
    })
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

/// How [`pivot`] lays rows out: which table row and column a result goes
/// to (`None`: not in this table).
pub struct Pivot<'a> {
    pub title: String,
    /// Header of the name column.
    pub corner: &'a str,
    pub row: &'a dyn Fn(&Row) -> Option<String>,
    pub col: &'a dyn Fn(&Row) -> String,
    /// The strategy whose cells get no speed-up (it is the baseline).
    pub baseline: &'a str,
}

/// One table of `rows`, rows and columns in order of first appearance, each
/// cell `median±stdev` and the speed-up, with a noise note if needed.
pub fn pivot(rows: &[Row], p: Pivot) -> Table {
    let mut names: Vec<String> = Vec::new();
    let mut cols: Vec<String> = Vec::new();
    let mut placed: Vec<(String, String, &Row)> = Vec::new();
    for r in rows {
        let Some(name) = (p.row)(r) else { continue };
        let col = (p.col)(r);
        if !names.contains(&name) {
            names.push(name.clone());
        }
        if !cols.contains(&col) {
            cols.push(col.clone());
        }
        placed.push((name, col, r));
    }
    let mut header = vec![p.corner.to_string()];
    header.extend(cols.iter().cloned());
    let mut t = Table::new(p.title, header);
    for name in &names {
        let mut cells = vec![name.clone()];
        for c in &cols {
            let r = placed.iter().find(|(n, cc, _)| n == name && cc == c);
            cells.push(match r {
                Some((_, _, r)) => cell(&r.gbps, r.speedup.filter(|_| r.strategy != p.baseline)),
                None => "-".into(),
            });
        }
        t.row(cells);
    }
    t.notes
        .extend(noise_note(placed.iter().map(|(_, _, r)| &r.gbps)));
    t
}

/// [`pivot`] with a row per strategy, in one table.
pub fn by_strategy(
    rows: &[Row],
    title: String,
    col: &dyn Fn(&Row) -> String,
    baseline: &str,
) -> Vec<Table> {
    vec![pivot(
        rows,
        Pivot {
            title,
            corner: "strategy",
            row: &|r| Some(r.strategy.clone()),
            col,
            baseline,
        },
    )]
}

/// One line per op: which primitive wins each cell here and by how much
/// over the rows' baseline (their `speedup`), and the range `auto`
/// achieved over it and, where the baseline is another, over `per-page`
/// (the seeds' baseline: the kernel's loop).
pub fn summary(rows: &[Row]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut ops: Vec<&str> = rows.iter().map(|r| r.op).collect();
    ops.dedup();
    let baseline = rows.iter().find_map(|r| r.baseline.as_deref());
    for op in ops {
        let mut cells: Vec<(&str, usize)> = Vec::new();
        for r in rows.iter().filter(|r| r.op == op) {
            if !cells.contains(&(r.regime, r.size)) {
                cells.push((r.regime, r.size));
            }
        }
        let mut wins = Vec::new();
        let mut auto: Vec<(f64, String)> = Vec::new();
        let mut over_per_page: Vec<f64> = Vec::new();
        for (regime, size) in cells {
            let here: Vec<&Row> = rows
                .iter()
                .filter(|r| r.op == op && r.regime == regime && r.size == size)
                .collect();
            let named = |n: &str| here.iter().find(|r| r.strategy == n);
            if let Some(best) = here
                .iter()
                .filter(|r| r.strategy != "auto")
                .max_by(|a, b| a.gbps.median.total_cmp(&b.gbps.median))
            {
                let x = best.speedup.map_or(String::new(), |x| format!(" {x:.2}x"));
                // Batching can beat every primitive called extent by extent.
                let auto_beats = named("auto")
                    .filter(|r| r.gbps.median > best.gbps.median)
                    .and_then(|r| r.speedup)
                    .map_or(String::new(), |a| format!(" (auto {a:.2}x)"));
                wins.push(format!(
                    "{regime} {} {}{x}{auto_beats}",
                    fmt_size(size),
                    best.strategy
                ));
            }
            if let Some(a) = named("auto") {
                if let Some(x) = a.speedup {
                    auto.push((x, format!("{regime} {}", fmt_size(size))));
                }
                if let Some(p) = named("per-page").filter(|p| p.gbps.median > 0.0) {
                    over_per_page.push(a.gbps.median / p.gbps.median);
                }
            }
        }
        let mut line = format!("{op}: fastest here: {}", wins.join(", "));
        let lowest = auto.iter().min_by(|a, b| a.0.total_cmp(&b.0));
        let highest = auto.iter().map(|a| a.0).max_by(f64::total_cmp);
        if let (Some((lo, worst)), Some(hi), Some(base)) = (lowest, highest, baseline) {
            let _ = write!(
                line,
                "; auto {lo:.2}x-{hi:.2}x over {base} (lowest: {worst})"
            );
        }
        let lo = over_per_page.iter().copied().min_by(f64::total_cmp);
        let hi = over_per_page.iter().copied().max_by(f64::total_cmp);
        if let (Some(lo), Some(hi), true) = (lo, hi, baseline != Some("per-page")) {
            let _ = write!(line, ", {lo:.2}x-{hi:.2}x over per-page");
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::super::tests::{over_libc, r, sample};
    use super::*;
    use crate::table::text;

    #[test]
    fn tables_show_every_cell_and_the_choice() {
        let t = text(&tables_over(
            &sample(),
            &["avx512 (needs avx512f)".into()],
            "per-page",
            "built-in",
        ));
        assert!(t.contains("copy, cold"), "{t}");
        assert!(t.contains("x = over per-page"), "{t}");
        assert!(t.contains("1.60x") && t.contains("1.55x"), "{t}");
        assert!(t.contains("auto chose") && t.contains("avx2-nt"), "{t}");
        // auto 7.5 against avx2-nt's 8.0 at 4K; 9.3 against 9.0 at 2M.
        let line = t
            .lines()
            .find(|l| l.contains("auto/best"))
            .unwrap_or_else(|| panic!("{t}"));
        assert!(
            line.contains("0.94x avx2-nt") && line.contains("1.03x avx2-nt"),
            "{line}"
        );
        assert!(t.contains("4K") && t.contains("2M"), "{t}");
        assert!(t.contains("not run (this CPU lacks them): avx512"), "{t}");
    }

    #[test]
    fn auto_over_best_pairs_the_samples_of_each_round() {
        let with = |strategy: &str, samples: &[f64]| Row {
            gbps: Stats::or_zero(samples),
            ..r(strategy, "cold", 4096, 0.0)
        };
        // avx2-nt's median (10.0) is best; by medians auto is 0.90x, but
        // round by round auto ran 0.6, 1.5 and 0.96 of it: 0.96x.
        let rows = [
            with("avx2-nt", &[10.0, 6.0, 10.0]),
            with("per-page", &[5.0, 5.0, 5.0]),
            with("auto", &[6.0, 9.0, 9.6]),
        ];
        let cell: Vec<&Row> = rows.iter().collect();
        let b = auto_over_best(&cell).unwrap();
        assert_eq!(b.best, "avx2-nt");
        assert!((b.ratio - 0.96).abs() < 1e-9, "{}", b.ratio);
        // Rounds from 0.6 to 1.5: not told apart.
        assert!(!b.told_apart);
        // Unequal sample counts (rows of two runs) divide the medians.
        let rows = [with("avx2-nt", &[10.0, 6.0, 10.0]), with("auto", &[9.0])];
        let cell: Vec<&Row> = rows.iter().collect();
        let b = auto_over_best(&cell).unwrap();
        assert!((b.ratio - 0.9).abs() < 1e-9 && !b.told_apart);
    }

    #[test]
    fn auto_below_the_best_within_the_runs_noise_is_marked() {
        let with = |strategy: &str, size: usize, samples: &[f64]| Row {
            gbps: Stats::or_zero(samples),
            ..r(strategy, "hot", size, 0.0)
        };
        let best = [10.0, 12.0, 9.0, 11.0, 10.0, 13.0, 10.0];
        // 4K: 0.93x in every round, told apart. 2M: 0.93x in the median
        // round, but rounds from 0.80x to 1.10x. 32M: auto ahead.
        let steady: Vec<f64> = best.iter().map(|b| b * 0.93).collect();
        let swinging: Vec<f64> = [0.80, 1.10, 0.93, 0.85, 1.02, 0.93, 0.95]
            .iter()
            .zip(best)
            .map(|(r, b)| r * b)
            .collect();
        let ahead: Vec<f64> = best.iter().map(|b| b * 1.02).collect();
        let mut rows = Vec::new();
        for (size, auto) in [(4096, &steady), (2 << 20, &swinging), (32 << 20, &ahead)] {
            rows.push(with("avx2", size, &best));
            rows.push(with("auto", size, auto));
        }
        let of = |size: usize| {
            let cell: Vec<&Row> = rows.iter().filter(|r| r.size == size).collect();
            let b = auto_over_best(&cell).unwrap();
            (format!("{:.2}", b.ratio), b.told_apart)
        };
        assert_eq!(of(4096), ("0.93".into(), true));
        assert_eq!(of(2 << 20), ("0.93".into(), false));
        assert_eq!(of(32 << 20), ("1.02".into(), true));
        let t = text(&tables_over(&rows, &[], "avx2", "tuned"));
        let line = t.lines().find(|l| l.contains("auto/best")).unwrap();
        assert!(line.contains(" 0.93x avx2"), "{line}");
        assert!(line.contains("~0.93x avx2"), "{line}");
        assert!(line.contains(" 1.02x avx2"), "{line}");
        assert!(t.contains("~ on auto/best (1): auto measured below"), "{t}");
        // A run whose auto/best cells are all told apart says nothing.
        let t = text(&tables_over(&rows[..2], &[], "avx2", "tuned"));
        assert!(!t.contains("~ on auto/best"), "{t}");
    }

    #[test]
    fn ratios_over_libc_say_so_and_name_batched_rows() {
        let v = over_libc("each");
        assert_eq!(v[2].baseline.as_deref(), Some("libc"));
        let t = text(&tables_over(&v, &[], "libc", "built-in"));
        assert!(t.contains("x = over libc"), "{t}");
        // auto 7.5 over libc 6.0 at 4K.
        assert!(t.contains("1.25x"), "{t}");
        assert!(t.contains("auto (") && t.contains(") [batch]"), "{t}");
        assert!(t.contains("the others a call per extent"), "{t}");
        assert!(!t.contains("per-page [batch]"), "{t}");
        assert!(!t.contains("no ratios"), "{t}");
        let t = text(&tables_over(&v, &[], "avx512", "built-in"));
        assert!(t.contains("no ratios: this run has no `avx512` row"), "{t}");
        // Every row batched: said once in the title, no row marked.
        let t = text(&tables_over(&over_libc("batch"), &[], "libc", "built-in"));
        assert!(t.contains("every row one call a batch"), "{t}");
        assert!(!t.contains("[batch]"), "{t}");
    }

    #[test]
    fn summary_names_winners_and_auto_range() {
        let s = summary(&sample());
        assert_eq!(s.len(), 1);
        assert!(s[0].contains("cold 4K avx2-nt 1.60x,"), "{}", s[0]);
        assert!(
            s[0].contains("cold 2M avx2-nt 1.50x (auto 1.55x)"),
            "{}",
            s[0]
        );
        assert!(s[0].contains("auto 1.50x-1.55x over per-page"), "{}", s[0]);
        assert!(s[0].contains("lowest: cold 4K"), "{}", s[0]);
        // Over libc, with per-page's range beside it.
        let s = summary(&over_libc("batch"));
        assert!(
            s[0].contains("auto 1.20x-1.25x over libc (lowest: cold 2M)"),
            "{}",
            s[0]
        );
        assert!(s[0].ends_with(", 1.50x-1.55x over per-page"), "{}", s[0]);
    }
}
