//! Line charts of benchmark results: GB/s against size, one panel per
//! regime (or per element size, for fill), one line per strategy, with the spread of the runs as error bars.
//! The SVG is written by hand (text is laid out by the viewer, so no font
//! metrics are needed; widths are estimated per character); PNG rasterises
//! that same SVG with resvg, using whatever system fonts exist (without any,
//! lines and axes still draw).

use std::fmt::Write as _;
use std::path::Path;

mod axis;
mod rows;

use axis::{x_tick_label, YAxis};
pub use rows::{merge_disjoint, panels, RowStyle};

/// One measured cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// A size in bytes.
    pub x: f64,
    /// GB/s, the median of the runs.
    pub y: f64,
    /// The slowest run.
    pub lo: f64,
    /// The fastest run.
    pub hi: f64,
}

pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
    /// Palette index: series of one strategy share a colour.
    pub color: usize,
    /// Prefer a broken line (e.g. the cold regime beside the hot one).
    pub dashed: bool,
}

/// One set of axes: a regime such as "hot" or "cold", or fill's element size.
pub struct Panel {
    pub name: String,
    pub series: Vec<Series>,
}

pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub panels: &'a [Panel],
    /// Space sizes by powers of two, as the tables do.
    pub log_x: bool,
}

/// Room left of a plot for the rotated y label and the tick labels.
const LEFT: f64 = 82.0;
const RIGHT: f64 = 24.0;
/// Above the first panel: the chart title.
const TITLE_H: f64 = 44.0;
/// Above each plot: the panel name.
const SUBTITLE_H: f64 = 26.0;
/// Below each plot: x tick labels and the x label.
const BELOW: f64 = 54.0;
const LEGEND_PAD: f64 = 20.0;
const LEGEND_ROW: f64 = 20.0;
/// The legend swatch is long enough to show two periods of the longest dash.
const SWATCH: f64 = 36.0;
/// Average advance of a character at font-size 12; generous, so estimated
/// widths err towards room to spare rather than clipped labels.
const CHAR_W: f64 = 7.0;
const PALETTE: [&str; 12] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22", "#000000", "#aec7e8",
];

/// Broken-line patterns, handed out in turn to series that share a colour;
/// only the first unbroken series of a colour gets the solid line.
const DASHES: [&str; 6] = ["6 3", "2 2", "8 3 2 3", "12 4", "4 2 1 2 1 2", "1 4"];
const MARKERS: usize = 7;

/// Writes the chart to `path`; the extension (.svg or .png) picks the format.
pub fn write(path: &Path, chart: &Chart) -> Result<(), String> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let bytes = match ext.as_deref() {
        Some("svg") => render_svg(chart).into_bytes(),
        Some("png") => render_png(&render_svg(chart))?,
        _ => {
            return Err(format!(
                "cannot plot to {}: the file name must end in .svg or .png",
                path.display()
            ))
        }
    };
    crate::write_file::write_file(path, &bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn render_png(svg: &str) -> Result<Vec<u8>, String> {
    let mut opt = resvg::usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(svg, &opt)
        .map_err(|e| format!("cannot render the chart: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or("cannot allocate the image")?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| format!("cannot encode PNG: {e}"))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn text_w(s: &str) -> f64 {
    s.chars().count() as f64 * CHAR_W
}

/// How one series is told apart from the others sharing its colour.
struct Style {
    color: &'static str,
    /// Empty for a solid line.
    dash: &'static str,
    marker: usize,
}

/// One entry per distinct series name, in order of first appearance, so a
/// series keeps its look in every panel and appears once in the legend.
fn legend(chart: &Chart) -> Vec<(String, Style)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(x: f64, y: f64) -> Point {
        Point { x, y, lo: y, hi: y }
    }

    fn series() -> Vec<Series> {
        vec![
            Series {
                name: "per-page".into(),
                points: vec![pt(4096.0, 10.0), pt(2097152.0, 12.0), pt(268435456.0, 11.0)],
                color: 0,
                dashed: false,
            },
            Series {
                name: "avx2-nt <cold>".into(),
                points: vec![
                    pt(4096.0, 9.0),
                    pt(2097152.0, f64::NAN),
                    pt(268435456.0, 17.5),
                ],
                color: 1,
                dashed: true,
            },
        ]
    }

    fn panel(name: &str, series: Vec<Series>) -> Vec<Panel> {
        vec![Panel {
            name: name.into(),
            series,
        }]
    }

    fn chart(p: &[Panel]) -> Chart<'_> {
        Chart {
            title: "copy & clear",
            x_label: "size",
            y_label: "GB/s",
            panels: p,
            log_x: true,
        }
    }

    /// The text of every `<text class="{class}" ...>` element.
    fn texts(svg: &str, class: &str) -> Vec<String> {
        let open = format!(r#"<text class="{class}""#);
        svg.match_indices(&open)
            .map(|(i, _)| {
                let rest = &svg[i..];
                let start = rest.find('>').unwrap() + 1;
                let end = rest.find("</text>").unwrap();
                rest[start..end].to_string()
            })
            .collect()
    }

    fn height(svg: &str) -> f64 {
        let rest = &svg[svg.find(r#"height=""#).unwrap() + 8..];
        rest[..rest.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn svg_names_series_ticks_and_escapes_text() {
        let p = panel("hot", series());
        let svg = render_svg(&chart(&p));
        assert!(svg.contains("copy &amp; clear"));
        assert!(svg.contains("per-page") && svg.contains("avx2-nt &lt;cold&gt;"));
        for tick in [">4K<", ">2M<", ">256M<", ">20<", ">0<"] {
            assert!(svg.contains(tick), "missing tick {tick}");
        }
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        assert_eq!(
            svg.matches("<circle").count(),
            5 + 2,
            "the NaN point is skipped; colours differ, so both markers are circles"
        );
        assert_eq!(
            svg.matches("stroke-dasharray").count(),
            2,
            "dashed line and its legend swatch"
        );
    }

    #[test]
    fn series_sharing_a_colour_differ_in_dash_and_marker() {
        let s: Vec<Series> = (0..4)
            .map(|i| Series {
                name: format!("engine {i}"),
                points: vec![pt(4096.0, 1.0 + i as f64), pt(8192.0, 2.0)],
                color: 5,
                dashed: i % 2 == 1,
            })
            .collect();
        let p = panel("hot", s);
        let styles = legend(&chart(&p));
        for (i, (a, sa)) in styles.iter().enumerate() {
            for (b, sb) in &styles[i + 1..] {
                assert!(sa.dash != sb.dash, "{a} and {b} share a dash pattern");
                assert!(sa.marker != sb.marker, "{a} and {b} share a marker");
            }
        }
        assert_eq!(styles[0].1.dash, "", "the first unbroken series is solid");
        assert!(styles.iter().skip(1).all(|(_, s)| !s.dash.is_empty()));
    }

    #[test]
    fn wide_range_gets_a_log_axis_and_narrow_a_linear_one() {
        let wide = panel(
            "hot",
            vec![
                Series {
                    name: "per-page small".into(),
                    points: vec![pt(64.0 * 1048576.0, 0.5)],
                    color: 0,
                    dashed: false,
                },
                Series {
                    name: "remap thp".into(),
                    points: vec![pt(64.0 * 1048576.0, 2200.0)],
                    color: 1,
                    dashed: true,
                },
            ],
        );
        let svg = render_svg(&chart(&wide));
        for tick in [">1<", ">10<", ">100<", ">1000<"] {
            assert!(svg.contains(tick), "missing log tick {tick}");
        }
        assert!(!svg.contains(">500<"), "a log axis has no linear steps");

        let narrow = panel("hot", series());
        let svg = render_svg(&chart(&narrow));
        for tick in [">1<", ">100<", ">1000<"] {
            assert!(!svg.contains(tick), "linear axis has log tick {tick}");
        }
        for tick in [">0<", ">5<", ">10<", ">15<", ">20<"] {
            assert!(svg.contains(tick), "missing linear tick {tick}");
        }
    }

    #[test]
    fn every_spread_gets_an_error_bar() {
        let p = panel(
            "cold",
            vec![Series {
                name: "rep-movsb".into(),
                points: vec![
                    Point {
                        x: 4096.0,
                        y: 10.0,
                        lo: 8.0,
                        hi: 11.0,
                    },
                    Point {
                        x: 8192.0,
                        y: 12.0,
                        lo: 12.0,
                        hi: 12.0,
                    },
                    Point {
                        x: 16384.0,
                        y: 13.0,
                        lo: 12.5,
                        hi: 14.0,
                    },
                    Point {
                        x: 32768.0,
                        y: 13.0,
                        lo: f64::NAN,
                        hi: 14.0,
                    },
                ],
                color: 2,
                dashed: false,
            }],
        );
        let svg = render_svg(&chart(&p));
        assert_eq!(svg.matches(r#"class="err""#).count(), 2);
    }

    #[test]
    fn two_panels_render_two_subtitles() {
        let mut p = panel("hot", series());
        p.extend(panel("cold", series()));
        let svg = render_svg(&chart(&p));
        assert_eq!(texts(&svg, "subtitle"), ["hot", "cold"]);
        assert_eq!(
            texts(&svg, "legend").len(),
            2,
            "a series in both panels is listed once"
        );
    }

    #[test]
    fn a_long_legend_grows_the_canvas_and_keeps_every_label() {
        let many = |n: usize| -> Vec<Panel> {
            let s = (0..n)
                .map(|i| Series {
                    name: format!(
                        "engine {} {} {}",
                        1 << (i % 5),
                        ["spread", "compact"][i % 2],
                        ["adjacent", "apart"][(i / 2) % 2]
                    ) + &" x".repeat(i / 4),
                    points: vec![pt(4096.0, i as f64 + 1.0), pt(2097152.0, 2.0)],
                    color: i % 3,
                    dashed: i % 2 == 1,
                })
                .collect();
            panel("hot", s)
        };
        let (two, sixteen) = (many(2), many(16));
        let (svg2, svg16) = (render_svg(&chart(&two)), render_svg(&chart(&sixteen)));
        assert!(height(&svg16) > height(&svg2));
        let labels = texts(&svg16, "legend");
        assert_eq!(labels.len(), 16);
        for s in &sixteen[0].series {
            assert!(labels.contains(&s.name), "legend lacks {}", s.name);
        }
        assert_legend_fits(&svg16);
        // A label wider than the plots widens the canvas instead of clipping.
        let long = panel(
            "hot",
            vec![Series {
                name: "x".repeat(300),
                points: vec![pt(4096.0, 1.0)],
                color: 0,
                dashed: false,
            }],
        );
        assert_legend_fits(&render_svg(&chart(&long)));
    }

    /// Every legend label's estimated right edge lies inside the canvas.
    fn assert_legend_fits(svg: &str) {
        let rest = &svg[svg.find(r#"width=""#).unwrap() + 7..];
        let w: f64 = rest[..rest.find('"').unwrap()].parse().unwrap();
        let open = r#"<text class="legend" x=""#;
        for (i, _) in svg.match_indices(open) {
            let rest = &svg[i + open.len()..];
            let x: f64 = rest[..rest.find('"').unwrap()].parse().unwrap();
            let text = &rest[rest.find('>').unwrap() + 1..rest.find("</text>").unwrap()];
            assert!(x + text_w(text) <= w, "{text} runs off a {w} px canvas");
        }
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        let cases: Vec<Vec<Panel>> = vec![
            vec![],
            panel("empty", vec![]),
            panel(
                "one",
                vec![Series {
                    name: "one".into(),
                    points: vec![pt(4096.0, 0.0)],
                    color: 0,
                    dashed: false,
                }],
            ),
            panel(
                "bad",
                vec![Series {
                    name: "bad".into(),
                    points: vec![
                        Point {
                            x: f64::INFINITY,
                            y: f64::NAN,
                            lo: f64::NAN,
                            hi: f64::INFINITY,
                        },
                        pt(0.0, 1.0),
                        Point {
                            x: 4096.0,
                            y: -3.0,
                            lo: -5.0,
                            hi: f64::INFINITY,
                        },
                    ],
                    color: 3,
                    dashed: true,
                }],
            ),
            panel(
                "log with zeros",
                vec![Series {
                    name: "z".into(),
                    points: vec![
                        Point {
                            x: 4096.0,
                            y: 0.01,
                            lo: 0.0,
                            hi: 0.02,
                        },
                        Point {
                            x: 8192.0,
                            y: 500.0,
                            lo: -1.0,
                            hi: 600.0,
                        },
                        pt(16384.0, 0.0),
                    ],
                    color: 99,
                    dashed: false,
                }],
            ),
            (0..5)
                .map(|i| Panel {
                    name: format!("p{i}"),
                    series: vec![],
                })
                .collect(),
        ];
        for p in &cases {
            let svg = render_svg(&chart(p));
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        }
    }

    #[test]
    fn png_is_a_real_image_and_bad_extensions_are_refused() {
        let dir = std::env::temp_dir().join(format!("bulkmem-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut p = panel("hot", series());
        p.extend(panel("cold", series()));
        let png = dir.join("c.png");
        write(&png, &chart(&p)).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 2000,
            "{} bytes",
            bytes.len()
        );
        // The IHDR chunk carries the size the layout computed.
        let dim = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as f64;
        let svg = render_svg(&chart(&p));
        assert_eq!(
            (dim(16), dim(20)),
            (2.0 * (LEFT + 460.0 + RIGHT), height(&svg))
        );
        let svg_path = dir.join("c.SVG");
        write(&svg_path, &chart(&p)).unwrap();
        assert!(std::fs::read_to_string(&svg_path)
            .unwrap()
            .contains("</svg>"));
        let e = write(&dir.join("c.jpg"), &chart(&p)).unwrap_err();
        assert!(e.contains("c.jpg") && e.contains(".svg or .png"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
