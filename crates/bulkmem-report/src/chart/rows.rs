//! Benchmark rows into panels: which rows share a set of axes is the
//! caller's choice (a regime for most benches, an element size for fill).

use super::{Panel, Point, Series};
use crate::document::Row;

/// How one row is drawn: its line's name, colour index and dash; `None`
/// leaves the row out of the plot.
pub type RowStyle<'a> = &'a dyn Fn(&Row) -> Option<(String, usize, bool)>;

/// A panel per distinct `panel_of` name, in order of first appearance; in
/// each, a series per distinct style name, a point per row.
pub fn panels(rows: &[Row], style: RowStyle, panel_of: &dyn Fn(&Row) -> String) -> Vec<Panel> {
    let mut panels: Vec<Panel> = Vec::new();
    for r in rows {
        let Some((name, color, dashed)) = style(r) else {
            continue;
        };
        let key = panel_of(r);
        let panel = match panels.iter().position(|p| p.name == key) {
            Some(i) => &mut panels[i],
            None => {
                panels.push(Panel {
                    name: key,
                    series: Vec::new(),
                });
                panels.last_mut().expect("just pushed")
            }
        };
        let point = Point {
            x: r.size as f64,
            y: r.gbps.median,
            lo: r.gbps.min,
            hi: r.gbps.max,
        };
        match panel.series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push(point),
            None => panel.series.push(Series {
                name,
                points: vec![point],
                color,
                dashed,
            }),
        }
    }
    panels
}

/// Panels that split the sizes between them (small regions hot, large ones
/// cold) become one: apart, each would be a single column. Only for panels
/// that are regimes of one measurement; panels that are different
/// measurements (fill's element sizes) must stay apart.
pub fn merge_disjoint(mut panels: Vec<Panel>) -> Vec<Panel> {
    let disjoint = panels.iter().enumerate().all(|(i, a)| {
        panels[i + 1..].iter().all(|b| {
            a.series
                .iter()
                .flat_map(|s| &s.points)
                .all(|p| b.series.iter().flat_map(|s| &s.points).all(|q| q.x != p.x))
        })
    });
    if panels.len() < 2 || !disjoint {
        return panels;
    }
    let name = panels
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(" / ");
    let mut one = Panel {
        name,
        series: Vec::new(),
    };
    for s in panels.drain(..).flat_map(|p| p.series) {
        match one.series.iter_mut().find(|o| o.name == s.name) {
            Some(o) => o.points.extend(s.points),
            None => one.series.push(s),
        }
    }
    vec![one]
}
