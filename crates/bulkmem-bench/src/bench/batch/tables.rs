//! The tables of `bench batch`.

use super::Plan;
use crate::results::{pivot, Pivot, Row};
use bulkmem_machine::units::format_bytes;
use bulkmem_report::stats::Stats;
use bulkmem_report::table::Table;

/// Tables: per (layout, placement), a row per thread count (and the
/// per-page baseline), a column per shape; then, where the bounds were
/// measured, the same rows' shares of them.
pub fn tables(rows: &[Row]) -> Vec<Table> {
    let batch = |r: &Row| r.batch.clone().expect("batch rows");
    let mut groups: Vec<(&'static str, &'static str)> = Vec::new();
    for r in rows.iter().filter(|r| r.strategy.starts_with("engine")) {
        let b = batch(r);
        if !groups.contains(&(b.layout, b.placement)) {
            groups.push((b.layout, b.placement));
        }
    }
    let runs = rows.first().map_or(0, |r| r.runs);
    let op = rows.first().map_or("copy", |r| r.op);
    groups
        .into_iter()
        .flat_map(|(layout, placement)| {
            let row = |r: &Row| {
                let b = batch(r);
                match r.strategy.as_str() {
                    _ if b.layout != layout => None,
                    "per-page" => Some("per-page".to_string()),
                    s if s.ends_with(" only") => Some(format!("{s} ({} ch)", r.threads)),
                    "engine" if b.placement == placement => Some(format!("engine {}", r.threads)),
                    "engine checked" if b.placement == placement => {
                        Some(format!("engine {} checked", r.threads))
                    }
                    "engine single" if b.placement == placement => {
                        Some(format!("engine {} single", r.threads))
                    }
                    s if b.placement == placement => Some(format!(
                        "engine {} + {}",
                        r.threads,
                        s.trim_start_matches("engine+")
                    )),
                    _ => None,
                }
            };
            let col = |r: &Row| format!("{}x{}", batch(r).count, format_bytes(r.size));
            let mut t = pivot(
                rows,
                Pivot {
                    title: format!(
                        "{op}, cold, {layout} folios, placement {placement}: GB/s median±stdev of {runs} runs (summed over threads); x = over per-page (1 thread)"
                    ),
                    corner: "threads",
                    row: &row,
                    col: &col,
                    baseline: "per-page",
                },
            );
            // With copy engines, what the CPU spent is half the story.
            if rows.iter().any(|r| r.strategy.contains('+')) {
                let mut busy: Vec<(String, Vec<f64>)> = Vec::new();
                for r in rows {
                    let (Some(name), Some(b)) = (row(r), batch(r).cpu_busy) else {
                        continue;
                    };
                    match busy.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, v)) => v.push(b),
                        None => busy.push((name, vec![b])),
                    }
                }
                let cells: Vec<String> = busy
                    .iter()
                    .map(|(n, v)| {
                        let s = Stats::or_zero(v);
                        format!("{n} {}", bulkmem_report::table::fixed(s.median))
                    })
                    .collect();
                t.notes.push(format!(
                    "CPU busy (process CPU time / wall time, median over the columns): {}",
                    cells.join(", ")
                ));
            }
            let mut out = vec![t];
            out.extend(shares(rows, op, layout, &row, &col));
            out
        })
        .collect()
}

/// The folio sweep as a kernel patch's cover letter would quote it: per
/// engine row and shape, the share of the memory bound (`bench limits`
/// measured for that thread count, and for scattered folios over pages of
/// that size in a shuffled order) and the bound itself, then the smallest
/// folio's GB/s over the largest's. `None` without bounds.
fn shares(
    rows: &[Row],
    op: &str,
    layout: &str,
    row: &dyn Fn(&Row) -> Option<String>,
    col: &dyn Fn(&Row) -> String,
) -> Option<Table> {
    let bounded: Vec<(&Row, String)> = rows
        .iter()
        .filter(|r| r.batch.as_ref().is_some_and(|b| b.bound_share.is_some()))
        .filter_map(|r| Some((r, row(r)?)))
        .collect();
    if bounded.is_empty() {
        return None;
    }
    let mut cols: Vec<(String, usize)> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (r, name) in &bounded {
        let c = (col(r), r.size);
        if !cols.contains(&c) {
            cols.push(c);
        }
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let smallest = cols.iter().min_by_key(|c| c.1).cloned();
    let largest = cols.iter().max_by_key(|c| c.1).cloned();
    let ratio = match (&smallest, &largest) {
        (Some(a), Some(b)) if a.1 < b.1 => Some((a.clone(), b.clone())),
        _ => None,
    };
    let mut header = vec!["threads".to_string()];
    header.extend(cols.iter().map(|c| c.0.clone()));
    if let Some((a, b)) = &ratio {
        header.push(format!("{} / {}", format_bytes(a.1), format_bytes(b.1)));
    }
    let bound = if op == "copy" { "min(R, W)" } else { "W" };
    let place = if layout == "scattered" {
        "over pages of the folio size in a shuffled order"
    } else {
        "over one long run"
    };
    let mut t = Table::new(
        format!(
            "{op}, {layout} folios: share of the memory bound, {bound} {place} (bench limits, per thread count): median / bound GB/s"
        ),
        header,
    );
    for name in &names {
        let at = |c: &(String, usize)| {
            bounded
                .iter()
                .find(|(r, n)| n == name && col(r) == c.0)
                .map(|(r, _)| *r)
        };
        let mut cells = vec![name.clone()];
        for c in &cols {
            cells.push(
                match at(c).and_then(|r| r.batch.as_ref().map(|b| (b.bound_share, b.bound))) {
                    Some((Some(share), Some(b))) => format!("{:.0}% of {:.1}", share * 100.0, b),
                    Some((Some(share), None)) => format!("{:.0}%", share * 100.0),
                    _ => "-".into(),
                },
            );
        }
        if let Some((a, b)) = &ratio {
            cells.push(match (at(a), at(b)) {
                (Some(x), Some(y)) if y.gbps.median > 0.0 => {
                    format!("{:.2}x", x.gbps.median / y.gbps.median)
                }
                _ => "-".into(),
            });
        }
        t.row(cells);
    }
    Some(t)
}

/// The chart's line for `r` (name, colour, dashed): experiment 1 only, a
/// line per thread count (and placement or layout when there are several).
pub fn style(plan: &Plan, r: &Row) -> Option<(String, usize, bool)> {
    let b = r.batch.as_ref()?;
    // Experiment 1 only: the count experiment has its own axis.
    if b.count != (plan.total / r.size).max(1) || !plan.folios.contains(&r.size) {
        return None;
    }
    let engine = r.strategy.starts_with("engine");
    let mut name = match r.strategy.as_str() {
        "engine" => format!("engine {}", r.threads),
        "engine checked" => format!("engine {} checked", r.threads),
        "engine single" => format!("engine {} single", r.threads),
        "per-page" => "per-page 1".to_string(),
        s if engine => format!("engine {} + {}", r.threads, &s["engine+".len()..]),
        s => s.to_string(),
    };
    if plan.placements.len() > 1 && engine {
        name = format!("{name} {}", b.placement);
    }
    if plan.layouts.len() > 1 {
        name = format!("{name} {}", b.layout);
    }
    // Offloaded rows share their thread count's colour, dashed.
    let offloaded = r.strategy != "engine" && r.strategy != "per-page";
    let color = if engine {
        r.threads
    } else if offloaded {
        11
    } else {
        0
    };
    Some((
        name,
        color,
        offloaded || b.layout == "adjacent" || b.placement == "fill",
    ))
}
