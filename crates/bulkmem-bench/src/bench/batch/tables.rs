//! The tables of `bench batch`.

use super::Plan;
use crate::report::{pivot, Pivot, Row};
use crate::size::fmt_size;
use bulkmem_report::stats::Stats;
use bulkmem_report::table::Table;

/// Tables: per (layout, placement), a row per thread count (and the
/// per-page baseline), a column per shape.
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
        .map(|(layout, placement)| {
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
                    s if b.placement == placement => Some(format!(
                        "engine {} + {}",
                        r.threads,
                        s.trim_start_matches("engine+")
                    )),
                    _ => None,
                }
            };
            let col = |r: &Row| format!("{}x{}", batch(r).count, fmt_size(r.size));
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
            let mut shares: Vec<(String, Vec<f64>)> = Vec::new();
            for r in rows {
                let (Some(name), Some(s)) = (row(r), batch(r).bound_share) else {
                    continue;
                };
                match shares.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, v)) => v.push(s),
                    None => shares.push((name, vec![s])),
                }
            }
            if !shares.is_empty() {
                let bound = if op == "copy" { "min(read, write)" } else { "write" };
                let cells: Vec<String> = shares
                    .iter()
                    .map(|(n, v)| {
                        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                        let hi = v.iter().copied().fold(0.0, f64::max);
                        format!("{n} {:.0}-{:.0}%", lo * 100.0, hi * 100.0)
                    })
                    .collect();
                t.notes.push(format!(
                    "of the memory bound ({bound} per thread count, bench limits), over the columns: {}",
                    cells.join(", ")
                ));
            }
            t
        })
        .collect()
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
