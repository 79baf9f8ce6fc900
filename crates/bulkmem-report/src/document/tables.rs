//! The human tables of result rows: one per (op, regime), pivots of any
//! two row fields, and the one-line summary of who wins.

use std::fmt::Write as _;

use super::auto_best::{auto_over_best, LEVEL_ALPHA};
use super::Row;
use crate::size::{human_size, size_label};
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
            "cold" if human_size(least).trim_start_matches('~') == human_size(most) => format!(
                "{} batches of shuffled extents, cache evicted before each{batched}",
                human_size(least)
            ),
            "cold" => format!(
                "{}-{} batches of shuffled extents, cache evicted before each{batched}",
                human_size(least),
                human_size(most)
            ),
            "consume" => "same buffers, each call then a read of its destination, timed together"
                .to_string(),
            "pipe" => {
                "same buffers, each call then write() of its destination to a drained pipe, timed together"
                    .to_string()
            }
            _ => "same buffers every call".to_string(),
        };
        let past = |what: &str, off: Option<usize>| {
            off.map_or(String::new(), |o| format!(", {what} {o} bytes past a page"))
        };
        let how = format!(
            "{how}{}{}",
            past("sources", cell_rows.iter().find_map(|r| r.src_offset)),
            past("destinations", cell_rows.iter().find_map(|r| r.dst_offset))
        );
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
        header.extend(sizes.iter().map(|&s| size_label(s)));
        let mut within_noise = 0;
        let mut firsts: Vec<String> = Vec::new();
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
                        let again = match b.first {
                            Some((x, row)) => {
                                firsts.push(format!("{} {x:.2}x {row}", size_label(s)));
                                "*"
                            }
                            None => "",
                        };
                        format!("{mark}{:.2}x {}{again}", b.ratio, b.best)
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
        if !firsts.is_empty() {
            let runs = cell_rows
                .iter()
                .find_map(|r| r.remeasured.as_ref())
                .map_or(0, |a| a.runs);
            t.notes.push(format!(
                "* on auto/best ({}): measured again, in {runs} rounds of auto and the rows ahead of it alone, as this run's best row is picked by the noise it is measured with; this run's own figure: {}",
                firsts.len(),
                firsts.join(", ")
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
        let mut trailing: Vec<Trailing> = Vec::new();
        for (regime, size) in cells {
            let here: Vec<&Row> = rows
                .iter()
                .filter(|r| r.op == op && r.regime == regime && r.size == size)
                .collect();
            if let (Some(a), Some(b)) = (
                here.iter().find(|r| r.strategy == "auto"),
                auto_over_best(&here),
            ) {
                if b.ratio < TRAILS && b.told_apart {
                    trailing.push(Trailing {
                        cell: format!("{regime} {}", size_label(size)),
                        ratio: b.ratio,
                        chose: a.chose.clone(),
                        best: b.best.to_string(),
                    });
                }
            }
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
                    size_label(size),
                    best.strategy
                ));
            }
            if let Some(a) = named("auto") {
                if let Some(x) = a.speedup {
                    auto.push((x, format!("{regime} {}", size_label(size))));
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
        lines.extend(trailing_lines(op, &trailing));
    }
    lines
}

/// `auto` over the best row under which a cell is named in the summary.
pub const TRAILS: f64 = 0.90;

/// A cell where `auto` trails the best row: the summary names it.
struct Trailing {
    cell: String,
    ratio: f64,
    chose: String,
    best: String,
}

/// Whether `strategy` stores around the cache.
fn streams(strategy: &str) -> bool {
    strategy.ends_with("-nt") || strategy == "clzero"
}

/// The summary's lines for the cells where `auto` trails by more than
/// 10%: each cell, then why in one phrase and what to do.
fn trailing_lines(op: &str, cells: &[Trailing]) -> Vec<String> {
    if cells.is_empty() {
        return Vec::new();
    }
    let named: Vec<String> = cells
        .iter()
        .map(|t| {
            format!(
                "{} {:.2}x (chose {}, {} won)",
                t.cell, t.ratio, t.chose, t.best
            )
        })
        .collect();
    let mut lines = vec![format!(
        "{op}: auto trails the best row by more than {:.0}% at {}",
        (1.0 - TRAILS) * 100.0,
        named.join(", ")
    )];
    let to_stream = cells.iter().any(|t| streams(&t.best) && !streams(&t.chose));
    let to_reuse = cells.iter().any(|t| !streams(&t.best) && streams(&t.chose));
    if to_stream {
        lines.push(
            "  why: a streaming row won where auto kept the data in cache: the built-in rules \
             stream only large totals, guessing the data is read again; if it is not (a GC's \
             freed pages, a copy nobody reads soon), pass the hint stream (Hint::Stream, \
             --hint stream)"
                .to_string(),
        );
    }
    if to_reuse {
        lines.push(
            "  why: a cached row won where auto streamed: if the data is read again soon, pass \
             the hint reuse (Hint::Reuse, --hint reuse)"
                .to_string(),
        );
    }
    lines.push(
        "  what to do: `bulkmem tune` measures this machine and auto follows its profile from \
         the next process on (run it again if a profile is in use and the machine changed)"
            .to_string(),
    );
    lines
}

#[cfg(test)]
mod tests;
