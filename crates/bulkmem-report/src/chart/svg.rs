//! The SVG of a chart, written by hand: text is laid out by the viewer, so
//! no font metrics are needed, and widths are estimated per character.

use std::fmt::Write as _;

use super::axis::{x_tick_label, YAxis};
use super::{
    Chart, Panel, Point, BELOW, CHAR_W, DASHES, LEFT, LEGEND_PAD, LEGEND_ROW, MARKERS, PALETTE,
    RIGHT, SUBTITLE_H, SWATCH, TITLE_H,
};

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub(super) fn text_w(s: &str) -> f64 {
    s.chars().count() as f64 * CHAR_W
}

/// How one series is told apart from the others sharing its colour.
pub(super) struct Style {
    pub(super) color: &'static str,
    /// Empty for a solid line.
    pub(super) dash: &'static str,
    pub(super) marker: usize,
}

/// One entry per distinct series name, in order of first appearance, so a
/// series keeps its look in every panel and appears once in the legend.
pub(super) fn legend(chart: &Chart) -> Vec<(String, Style)> {
    let mut out: Vec<(String, Style)> = Vec::new();
    // Per palette index: is the solid line taken, broken lines handed out,
    // series seen.
    let mut used: Vec<(bool, usize, usize)> = vec![(false, 0, 0); PALETTE.len()];
    for s in chart.panels.iter().flat_map(|p| &p.series) {
        if out.iter().any(|(n, _)| *n == s.name) {
            continue;
        }
        let c = s.color % PALETTE.len();
        let (solid, broken, seen) = &mut used[c];
        let dash = if !s.dashed && !*solid {
            *solid = true;
            ""
        } else {
            *broken += 1;
            DASHES[(*broken - 1) % DASHES.len()]
        };
        let marker = *seen % MARKERS;
        *seen += 1;
        out.push((
            s.name.clone(),
            Style {
                color: PALETTE[c],
                dash,
                marker,
            },
        ));
    }
    out
}

fn dash_attr(dash: &str) -> String {
    if dash.is_empty() {
        String::new()
    } else {
        format!(r#" stroke-dasharray="{dash}""#)
    }
}

/// A point marker of shape `shape` centred on (x, y).
fn marker(o: &mut String, shape: usize, x: f64, y: f64, color: &str) {
    let r = 3.5;
    let _ = match shape {
        0 => writeln!(
            o,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="{r}" fill="{color}"/>"#
        ),
        1 => writeln!(
            o,
            r#"<rect x="{:.1}" y="{:.1}" width="{}" height="{}" fill="{color}"/>"#,
            x - r,
            y - r,
            2.0 * r,
            2.0 * r
        ),
        2 => writeln!(
            o,
            r#"<path d="M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z" fill="{color}"/>"#,
            y - r - 1.0,
            x + r + 0.5,
            y + r,
            x - r - 0.5,
            y + r
        ),
        3 => writeln!(
            o,
            r#"<path d="M{x:.1},{:.1} L{:.1},{y:.1} L{x:.1},{:.1} L{:.1},{y:.1} Z" fill="{color}"/>"#,
            y - r - 1.0,
            x + r + 1.0,
            y + r + 1.0,
            x - r - 1.0
        ),
        4 => writeln!(
            o,
            r#"<path d="M{x:.1},{:.1} L{:.1},{:.1} L{:.1},{:.1} Z" fill="{color}"/>"#,
            y + r + 1.0,
            x + r + 0.5,
            y - r,
            x - r - 0.5,
            y - r
        ),
        5 => writeln!(
            o,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="{r}" fill="white" stroke="{color}" stroke-width="1.5"/>"#
        ),
        _ => writeln!(
            o,
            r#"<rect x="{:.1}" y="{:.1}" width="{}" height="{}" fill="white" stroke="{color}" stroke-width="1.5"/>"#,
            x - r,
            y - r,
            2.0 * r,
            2.0 * r
        ),
    };
}

/// Canvas geometry, computed once from the panel count and the legend.
struct Layout {
    width: f64,
    height: f64,
    cols: usize,
    plot_w: f64,
    plot_h: f64,
    cell_w: f64,
    cell_h: f64,
    legend_top: f64,
    legend_cols: usize,
    legend_rows: usize,
    legend_col_w: f64,
}

impl Layout {
    fn new(panels: usize, labels: &[&str]) -> Layout {
        // Two panels read best side by side (hot beside cold); more would be
        // too narrow, so they stack.
        let cols = if panels <= 2 { panels.max(1) } else { 1 };
        let rows = panels.max(1).div_ceil(cols);
        let plot_w = if cols == 1 { 760.0 } else { 460.0 };
        let plot_h = if rows > 2 { 260.0 } else { 340.0 };
        let cell_w = LEFT + plot_w + RIGHT;
        let cell_h = SUBTITLE_H + plot_h + BELOW;
        let longest = labels.iter().map(|l| text_w(l)).fold(0.0, f64::max);
        let legend_col_w = SWATCH + 8.0 + longest + 24.0;
        // Widen rather than clip when even one legend column does not fit.
        let width = (cols as f64 * cell_w).max(legend_col_w + 2.0 * LEGEND_PAD);
        let legend_cols = (((width - 2.0 * LEGEND_PAD) / legend_col_w).floor() as usize)
            .clamp(1, labels.len().max(1));
        let legend_rows = labels.len().div_ceil(legend_cols);
        let legend_top = TITLE_H + rows as f64 * cell_h + 6.0;
        let height = legend_top + legend_rows as f64 * LEGEND_ROW + LEGEND_PAD;
        Layout {
            width,
            height,
            cols,
            plot_w,
            plot_h,
            cell_w,
            cell_h,
            legend_top,
            legend_cols,
            legend_rows,
            legend_col_w,
        }
    }
}

/// The chart as SVG text.
pub fn render_svg(chart: &Chart) -> String {
    let styles = legend(chart);
    let labels: Vec<&str> = styles.iter().map(|(n, _)| n.as_str()).collect();
    let empty = [Panel {
        name: String::new(),
        series: Vec::new(),
    }];
    let panels = if chart.panels.is_empty() {
        &empty[..]
    } else {
        chart.panels
    };
    let l = Layout::new(panels.len(), &labels);

    let usable_x = |x: f64| x.is_finite() && (!chart.log_x || x > 0.0);
    let usable = |p: &Point| usable_x(p.x) && p.y.is_finite();
    // One x range for every panel, so the same size sits at the same place
    // in each and panels compare at a glance.
    let mut xs: Vec<f64> = panels
        .iter()
        .flat_map(|p| &p.series)
        .flat_map(|s| &s.points)
        .filter(|p| usable(p))
        .map(|p| p.x)
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let fx = |x: f64| if chart.log_x { x.log2() } else { x };
    let (x_lo, x_hi) = match (xs.first(), xs.last()) {
        (Some(&a), Some(&b)) if fx(b) > fx(a) => (fx(a), fx(b)),
        (Some(&a), _) => (fx(a) - 1.0, fx(a) + 1.0),
        _ => (0.0, 1.0),
    };
    // Inset so the first and last points and their labels clear the frame.
    let inset = 14.0;

    let (w, h) = (l.width, l.height);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="28" font-size="16" text-anchor="middle">{}</text>"#,
        w / 2.0,
        escape(chart.title)
    );

    for (i, panel) in panels.iter().enumerate() {
        let left = (i % l.cols) as f64 * l.cell_w + LEFT;
        let top = TITLE_H + (i / l.cols) as f64 * l.cell_h + SUBTITLE_H;
        let (pw, ph) = (l.plot_w, l.plot_h);
        let px = |x: f64| left + inset + (fx(x) - x_lo) / (x_hi - x_lo) * (pw - 2.0 * inset);

        let mut values = Vec::new();
        let mut extremes = Vec::new();
        for p in panel.series.iter().flat_map(|s| &s.points) {
            if usable(p) {
                values.push(p.y);
                extremes.extend([p.lo, p.hi]);
            }
        }
        let axis = YAxis::fit(&values, &extremes);
        let py = |y: f64| top + ph - axis.frac(y) * ph;

        let _ = writeln!(
            o,
            r#"<text class="subtitle" x="{:.1}" y="{:.1}" font-size="14" font-weight="bold" text-anchor="middle">{}</text>"#,
            left + pw / 2.0,
            top - 9.0,
            escape(&panel.name)
        );
        for (v, label) in &axis.ticks {
            let y = py(*v);
            let stroke = if label.is_some() { "#ddd" } else { "#f2f2f2" };
            let _ = writeln!(
                o,
                r#"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{stroke}"/>"#,
                left + pw
            );
            if let Some(label) = label {
                let _ = writeln!(
                    o,
                    r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"#,
                    left - 6.0,
                    y + 4.0,
                    escape(label)
                );
            }
        }
        // Every size gets a grid line, but only labels with room get text:
        // 19 power-of-two sizes do not fit in a 460 px panel.
        let mut last_end = f64::NEG_INFINITY;
        for &x in &xs {
            let gx = px(x);
            let _ = writeln!(
                o,
                r##"<line x1="{gx:.1}" y1="{top}" x2="{gx:.1}" y2="{:.1}" stroke="#eee"/>"##,
                top + ph
            );
            let label = x_tick_label(x);
            let half = text_w(&label) / 2.0;
            if gx - half >= last_end + 6.0 {
                last_end = gx + half;
                let _ = writeln!(
                    o,
                    r#"<text x="{gx:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"#,
                    top + ph + 18.0,
                    escape(&label)
                );
            }
        }
        let _ = writeln!(
            o,
            r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
        );
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" font-size="13" text-anchor="middle">{}</text>"#,
            left + pw / 2.0,
            top + ph + 40.0,
            escape(chart.x_label)
        );
        let (lx, ly) = (left - LEFT + 18.0, top + ph / 2.0);
        let _ = writeln!(
            o,
            r#"<text x="{lx:.1}" y="{ly:.1}" font-size="13" text-anchor="middle" transform="rotate(-90 {lx:.1} {ly:.1})">{}</text>"#,
            escape(chart.y_label)
        );

        for s in &panel.series {
            let Some((_, style)) = styles.iter().find(|(n, _)| *n == s.name) else {
                continue;
            };
            let color = style.color;
            // A log axis has no place for 0 or below; such points are left
            // out rather than drawn at the floor as if measured there.
            let mut pts: Vec<Point> = s
                .points
                .iter()
                .copied()
                .filter(|p| usable(p) && (!axis.log || p.y > 0.0))
                .collect();
            pts.sort_by(|a, b| a.x.total_cmp(&b.x));
            for p in &pts {
                if p.lo.is_finite() && p.hi.is_finite() && p.hi > p.lo {
                    let (x, y0, y1) = (px(p.x), py(p.lo), py(p.hi));
                    let _ = writeln!(
                        o,
                        r#"<path class="err" d="M{x:.1},{y0:.1} V{y1:.1} M{:.1},{y0:.1} H{:.1} M{:.1},{y1:.1} H{:.1}" stroke="{color}" stroke-width="1" fill="none"/>"#,
                        x - 3.0,
                        x + 3.0,
                        x - 3.0,
                        x + 3.0
                    );
                }
            }
            if pts.len() > 1 {
                let path: Vec<String> = pts
                    .iter()
                    .map(|p| format!("{:.1},{:.1}", px(p.x), py(p.y)))
                    .collect();
                let _ = writeln!(
                    o,
                    r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2" stroke-linejoin="round"{}/>"#,
                    path.join(" "),
                    dash_attr(style.dash)
                );
            }
            for p in &pts {
                marker(&mut o, style.marker, px(p.x), py(p.y), color);
            }
        }
    }

    for (i, (name, style)) in styles.iter().enumerate() {
        // Column-major, so the legend reads down like a list.
        let (col, row) = (i / l.legend_rows, i % l.legend_rows);
        let x = LEGEND_PAD + col as f64 * l.legend_col_w;
        let y = l.legend_top + row as f64 * LEGEND_ROW + LEGEND_ROW / 2.0;
        let _ = writeln!(
            o,
            r#"<line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}" stroke-width="2"{}/>"#,
            x + SWATCH,
            style.color,
            dash_attr(style.dash)
        );
        marker(&mut o, style.marker, x + SWATCH / 2.0, y, style.color);
        let _ = writeln!(
            o,
            r#"<text class="legend" x="{:.1}" y="{:.1}" font-size="12">{}</text>"#,
            x + SWATCH + 8.0,
            y + 4.0,
            escape(name)
        );
    }
    debug_assert!(styles.len() <= l.legend_cols * l.legend_rows);
    o.push_str("</svg>\n");
    o
}
