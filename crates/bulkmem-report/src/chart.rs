//! Line charts of benchmark results: GB/s against size, one panel per
//! regime (or per element size, for fill), one line per strategy, with the spread of the runs as error bars.
//! The SVG is drawn with plotters (text is laid out by the viewer, so no
//! font metrics are needed; widths are estimated per character); PNG
//! rasterises that same SVG with resvg, using whatever system fonts exist
//! (without any, lines and axes still draw).

use std::path::Path;

mod axis;
mod rows;
mod svg;
#[cfg(test)]
mod tests;

pub use rows::{merge_disjoint, panels, RowStyle};
pub use svg::render_svg;

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
/// 0xRRGGBB.
const PALETTE: [u32; 12] = [
    0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e, 0x9467bd, 0x8c564b, 0xe377c2, 0x17becf, 0x7f7f7f,
    0xbcbd22, 0x000000, 0xaec7e8,
];

/// Broken-line patterns (dash, gap), handed out in turn to series that
/// share a colour; only the first unbroken series of a colour gets the solid
/// line.
const DASHES: [(u32, u32); 6] = [(6, 3), (2, 2), (10, 5), (12, 3), (4, 4), (1, 4)];
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
