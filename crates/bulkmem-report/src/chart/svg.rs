//! The SVG of a chart, drawn with plotters. Its SVG backend writes text for
//! the viewer to lay out, so no font metrics (and no font library) are
//! needed; where the layout needs a text width, it is estimated per
//! character.

use std::ops::Range;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{x_tick_label, YAxis};
use super::{
    Chart, Panel, Point, BELOW, CHAR_W, DASHES, LEFT, LEGEND_PAD, LEGEND_ROW, MARKERS, PALETTE,
    RIGHT, SUBTITLE_H, SWATCH, TITLE_H,
};

const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";

pub(super) fn text_w(s: &str) -> f64 {
    s.chars().count() as f64 * CHAR_W
}

/// A text style of about `px` pixels: plotters sizes text in whole pixels
/// of line height, which its SVG backend divides by 1.24 to get the
/// font-size.
fn font(px: f64) -> TextStyle<'static> {
    styled(px, FontStyle::Normal)
}

fn styled(px: f64, style: FontStyle) -> TextStyle<'static> {
    (FONT, (px * 1.24).round(), style).into_text_style(&(1, 1))
}

/// An axis with the ticks we chose: plotters' own tick placement knows
/// neither sizes in powers of two nor which log ticks deserve a label.
struct Ticked {
    range: Range<f64>,
    /// Labelled ticks, with grid lines.
    bold: Vec<f64>,
    /// Grid lines only.
    light: Vec<f64>,
}

impl Ranged for Ticked {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = (v - self.range.start) / (self.range.end - self.range.start);
        (f64::from(limit.0) + f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// How one series is told apart from the others sharing its colour.
pub(super) struct Style {
    pub(super) color: RGBColor,
    /// (dash, gap) in pixels; `None` for a solid line.
    pub(super) dash: Option<(u32, u32)>,
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
            None
        } else {
            *broken += 1;
            Some(DASHES[(*broken - 1) % DASHES.len()])
        };
        let marker = *seen % MARKERS;
        *seen += 1;
        let [_, r, g, b] = PALETTE[c].to_be_bytes();
        out.push((
            s.name.clone(),
            Style {
                color: RGBColor(r, g, b),
                dash,
                marker,
            },
        ));
    }
    out
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Failed<'a> = DrawingAreaErrorKind<<SVGBackend<'a> as DrawingBackend>::ErrorType>;

/// A marker of shape `shape` centred on `at`, in the coordinates of the
/// area it is drawn on; the shape itself is in pixels.
fn marker<'a, C: Clone + 'a>(
    shape: usize,
    at: C,
    color: RGBColor,
) -> DynElement<'a, SVGBackend<'a>, C> {
    let fill = color.filled();
    let hollow = ShapeStyle {
        color: color.to_rgba(),
        filled: false,
        stroke_width: 2,
    };
    let blank = WHITE.filled();
    let r = 4;
    let e = EmptyElement::at(at);
    match shape {
        0 => (e + Circle::new((0, 0), r, fill)).into_dyn(),
        1 => (e + Rectangle::new([(-r, -r), (r, r)], fill)).into_dyn(),
        2 => (e + Polygon::new(vec![(0, -r - 1), (r + 1, r), (-r - 1, r)], fill)).into_dyn(),
        3 => (e + Polygon::new(vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)], fill))
            .into_dyn(),
        4 => (e + Polygon::new(vec![(0, r + 1), (r + 1, -r), (-r - 1, -r)], fill)).into_dyn(),
        5 => (e + Circle::new((0, 0), r, blank) + Circle::new((0, 0), r, hollow)).into_dyn(),
        _ => (e
            + Rectangle::new([(-r, -r), (r, r)], blank)
            + Rectangle::new([(-r, -r), (r, r)], hollow))
        .into_dyn(),
    }
}

/// A line through `pts` in `style`, on an area whose coordinates are `C`.
fn line<'a, C: Clone + 'a>(pts: Vec<C>, style: &Style) -> DynElement<'a, SVGBackend<'a>, C> {
    let stroke = style.color.stroke_width(2);
    match style.dash {
        None => PathElement::new(pts, stroke).into_dyn(),
        Some((on, off)) => DashedPathElement::new(pts, on, off, stroke).into_dyn(),
    }
}

/// Canvas geometry, computed once from the panel count and the legend.
struct Layout {
    width: f64,
    height: f64,
    cols: usize,
    cell_w: f64,
    cell_h: f64,
    plot_w: f64,
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
            cell_w,
            cell_h,
            plot_w,
            legend_top,
            legend_cols,
            legend_rows,
            legend_col_w,
        }
    }
}

/// The x axis shared by every panel: positions (log2 of the size on a log
/// axis) and the sizes measured.
struct XAxis {
    log: bool,
    xs: Vec<f64>,
    lo: f64,
    hi: f64,
}

impl XAxis {
    fn fit(chart: &Chart, panels: &[Panel], plot_w: f64) -> XAxis {
        let log = chart.log_x;
        let mut xs: Vec<f64> = panels
            .iter()
            .flat_map(|p| &p.series)
            .flat_map(|s| &s.points)
            .filter(|p| usable(log, p))
            .map(|p| p.x)
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        let f = |x: f64| if log { x.log2() } else { x };
        let (lo, hi) = match (xs.first(), xs.last()) {
            (Some(&a), Some(&b)) if f(b) > f(a) => (f(a), f(b)),
            (Some(&a), _) => (f(a) - 1.0, f(a) + 1.0),
            _ => (0.0, 1.0),
        };
        // Inset so the first and last points and their labels clear the frame.
        let pad = 14.0 / (plot_w - 28.0) * (hi - lo);
        XAxis {
            log,
            xs,
            lo: lo - pad,
            hi: hi + pad,
        }
    }

    fn pos(&self, x: f64) -> f64 {
        if self.log {
            x.log2()
        } else {
            x
        }
    }

    fn size(&self, pos: f64) -> f64 {
        if self.log {
            pos.exp2().round()
        } else {
            pos
        }
    }

    /// The sizes whose labels fit: every size gets a grid line, but 19
    /// power-of-two sizes do not fit in a 460 px panel.
    fn labelled(&self, plot_w: f64) -> Vec<f64> {
        let px = |x: f64| (self.pos(x) - self.lo) / (self.hi - self.lo) * plot_w;
        let mut last_end = f64::NEG_INFINITY;
        let mut out = Vec::new();
        for &x in &self.xs {
            let half = text_w(&x_tick_label(x)) / 2.0;
            if px(x) - half >= last_end + 6.0 {
                last_end = px(x) + half;
                out.push(self.pos(x));
            }
        }
        out
    }
}

fn usable(log_x: bool, p: &Point) -> bool {
    p.x.is_finite() && (!log_x || p.x > 0.0) && p.y.is_finite()
}

/// One panel: its axes and grid, then per series the error bars, the line
/// and the markers. Values are drawn in the y axis' own fraction space.
fn draw_panel<'a>(
    cell: &Area<'a>,
    chart: &Chart,
    panel: &Panel,
    x: &XAxis,
    plot_w: f64,
    styles: &[(String, Style)],
) -> Result<(), Failed<'a>> {
    let mut values = Vec::new();
    let mut extremes = Vec::new();
    for p in panel.series.iter().flat_map(|s| &s.points) {
        if usable(x.log, p) {
            values.push(p.y);
            extremes.extend([p.lo, p.hi]);
        }
    }
    let axis = YAxis::fit(&values, &extremes);
    let (bold, light): (Vec<_>, Vec<_>) = axis.ticks.iter().partition(|(_, l)| l.is_some());
    let y_range = Ticked {
        range: 0.0..1.0,
        bold: bold.iter().map(|(v, _)| axis.frac(*v)).collect(),
        light: light.iter().map(|(v, _)| axis.frac(*v)).collect(),
    };
    let x_range = Ticked {
        range: x.lo..x.hi,
        bold: x.labelled(plot_w),
        light: x.xs.iter().map(|&v| x.pos(v)).collect(),
    };
    let mut c = ChartBuilder::on(cell)
        .caption(&panel.name, styled(14.0, FontStyle::Bold))
        .margin_right(RIGHT)
        .x_label_area_size(BELOW)
        .y_label_area_size(LEFT)
        .build_cartesian_2d(x_range, y_range)?;
    let y_label = |f: &f64| {
        bold.iter()
            .find(|(v, _)| (axis.frac(*v) - f).abs() < 1e-9)
            .and_then(|(_, l)| l.clone())
            .unwrap_or_default()
    };
    let x_label = |p: &f64| x_tick_label(x.size(*p));
    c.configure_mesh()
        .x_desc(chart.x_label)
        .y_desc(chart.y_label)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .label_style(font(12.0))
        .axis_desc_style(font(13.0))
        .bold_line_style(RGBColor(0xdd, 0xdd, 0xdd))
        .light_line_style(RGBColor(0xf2, 0xf2, 0xf2))
        .axis_style(RGBColor(0x33, 0x33, 0x33))
        .draw()?;
    let area = c.plotting_area();
    let frame = ShapeStyle::from(RGBColor(0x33, 0x33, 0x33));
    area.draw(&Rectangle::new([(x.lo, 0.0), (x.hi, 1.0)], frame))?;

    for s in &panel.series {
        let Some((_, style)) = styles.iter().find(|(n, _)| *n == s.name) else {
            continue;
        };
        // A log axis has no place for 0 or below; such points are left out
        // rather than drawn at the floor as if measured there.
        let mut pts: Vec<Point> = s
            .points
            .iter()
            .copied()
            .filter(|p| usable(x.log, p) && (!axis.log || p.y > 0.0))
            .collect();
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        let at = |p: &Point, y: f64| (x.pos(p.x), axis.frac(y));
        let bar = style.color.stroke_width(1);
        for p in pts
            .iter()
            .filter(|p| p.lo.is_finite() && p.hi.is_finite() && p.hi > p.lo)
        {
            let (lo, hi) = (at(p, p.lo), at(p, p.hi));
            area.draw(&PathElement::new(vec![lo, hi], bar))?;
            for end in [lo, hi] {
                area.draw(&(EmptyElement::at(end) + PathElement::new(vec![(-3, 0), (3, 0)], bar)))?;
            }
        }
        if pts.len() > 1 {
            area.draw(&line(pts.iter().map(|p| at(p, p.y)).collect(), style))?;
        }
        for p in &pts {
            area.draw(&marker(style.marker, at(p, p.y), style.color))?;
        }
    }
    Ok(())
}

fn draw<'a>(
    root: &Area<'a>,
    chart: &Chart,
    styles: &[(String, Style)],
    l: &Layout,
) -> Result<(), Failed<'a>> {
    let empty = [Panel {
        name: String::new(),
        series: Vec::new(),
    }];
    let panels = if chart.panels.is_empty() {
        &empty[..]
    } else {
        chart.panels
    };
    let x = XAxis::fit(chart, panels, l.plot_w);
    root.fill(&WHITE)?;
    let centre = Pos::new(HPos::Center, VPos::Bottom);
    root.draw(&Text::new(
        chart.title,
        ((l.width / 2.0) as i32, 28),
        font(16.0).pos(centre),
    ))?;
    for (i, panel) in panels.iter().enumerate() {
        let left = (i % l.cols) as f64 * l.cell_w;
        let top = TITLE_H + (i / l.cols) as f64 * l.cell_h;
        let cell = root.clone().shrink(
            (left as i32, top as i32),
            (l.cell_w as u32, l.cell_h as u32),
        );
        draw_panel(&cell, chart, panel, &x, l.plot_w, styles)?;
    }
    let left_mid = Pos::new(HPos::Left, VPos::Center);
    for (i, (name, style)) in styles.iter().enumerate() {
        // Column-major, so the legend reads down like a list.
        let (col, row) = (i / l.legend_rows, i % l.legend_rows);
        let lx = (LEGEND_PAD + col as f64 * l.legend_col_w) as i32;
        let ly = (l.legend_top + row as f64 * LEGEND_ROW + LEGEND_ROW / 2.0) as i32;
        root.draw(&line(vec![(lx, ly), (lx + SWATCH as i32, ly)], style))?;
        root.draw(&marker(
            style.marker,
            (lx + SWATCH as i32 / 2, ly),
            style.color,
        ))?;
        root.draw(&Text::new(
            name.as_str(),
            (lx + SWATCH as i32 + 8, ly),
            font(12.0).pos(left_mid),
        ))?;
    }
    debug_assert!(styles.len() <= l.legend_cols * l.legend_rows);
    root.present()
}

/// The chart as SVG text.
pub fn render_svg(chart: &Chart) -> String {
    let styles = legend(chart);
    let labels: Vec<&str> = styles.iter().map(|(n, _)| n.as_str()).collect();
    let l = Layout::new(chart.panels.len(), &labels);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (l.width as u32, l.height as u32))
            .into_drawing_area();
        // The backend draws into a string and its text needs no fonts:
        // nothing here fails short of a bug, and a chart is not worth a
        // panic in a release build.
        let drawn = draw(&root, chart, &styles, &l);
        debug_assert!(drawn.is_ok(), "{drawn:?}");
    }
    out
}
