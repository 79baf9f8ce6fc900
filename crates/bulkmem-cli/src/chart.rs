//! Line charts of benchmark results: GB/s against size, one line per
//! strategy. The SVG is written by hand (text is laid out by the viewer, so
//! no font metrics are needed); PNG rasterises that same SVG with resvg,
//! using whatever system fonts exist (without any, lines and axes still draw).

use std::fmt::Write as _;
use std::path::Path;

use crate::size::fmt_size;

pub struct Series {
    pub name: String,
    /// (x, y): x is a size in bytes, y is GB/s.
    pub points: Vec<(f64, f64)>,
    /// Palette index: series of one strategy share a colour.
    pub color: usize,
    /// Drawn dashed (the cold regime beside the hot one).
    pub dashed: bool,
}

pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: &'a [Series],
    /// Space sizes by powers of two, as the tables do.
    pub log_x: bool,
}

const W: f64 = 900.0;
const H: f64 = 560.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

const PALETTE: [&str; 12] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22", "#000000", "#aec7e8",
];

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
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn render_png(svg: &str) -> Result<Vec<u8>, String> {
    let mut opt = resvg::usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(svg, &opt)
        .map_err(|e| format!("cannot render the chart: {e}"))?;
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(W as u32, H as u32).ok_or("cannot allocate the image")?;
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

/// A round number at or above `max` for the top of the y axis.
fn nice_ceiling(max: f64) -> f64 {
    if max.is_nan() || max <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|&v| v >= max)
        .unwrap_or(10.0 * mag)
}

fn x_label(x: f64) -> String {
    if x >= 1.0 && x.fract() == 0.0 && x <= usize::MAX as f64 {
        fmt_size(x as usize)
    } else {
        format!("{x:.1}")
    }
}

/// The chart as SVG text.
pub fn render_svg(chart: &Chart) -> String {
    let usable = |(x, y): &(f64, f64)| x.is_finite() && y.is_finite() && (!chart.log_x || *x > 0.0);
    let mut xs: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().filter(|p| usable(p)).map(|p| p.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let y_max = nice_ceiling(
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().filter(|p| usable(p)).map(|p| p.1))
            .fold(0.0, f64::max),
    );
    let fx = |x: f64| if chart.log_x { x.log2() } else { x };
    let (lo, hi) = match (xs.first(), xs.last()) {
        (Some(&a), Some(&b)) if fx(b) > fx(a) => (fx(a), fx(b)),
        (Some(&a), _) => (fx(a) - 1.0, fx(a) + 1.0),
        _ => (0.0, 1.0),
    };
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let px = |x: f64| LEFT + (fx(x) - lo) / (hi - lo) * pw;
    let py = |y: f64| TOP + ph - (y.max(0.0) / y_max) * ph;

    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="28" font-size="16" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        escape(chart.title)
    );
    for i in 0..=5 {
        let v = y_max * i as f64 / 5.0;
        let y = py(v);
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text>"##,
            LEFT + pw,
            LEFT - 6.0,
            y + 4.0,
            if y_max >= 10.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        );
    }
    for &x in &xs {
        let gx = px(x);
        let _ = writeln!(
            o,
            r##"<line x1="{gx:.1}" y1="{TOP}" x2="{gx:.1}" y2="{:.1}" stroke="#eee"/><text x="{gx:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"##,
            TOP + ph,
            TOP + ph + 18.0,
            escape(&x_label(x))
        );
    }
    let _ = writeln!(
        o,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        o,
        r#"<text x="{}" y="{}" font-size="13" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        H - 18.0,
        escape(chart.x_label)
    );
    let _ = writeln!(
        o,
        r#"<text x="18" y="{}" font-size="13" text-anchor="middle" transform="rotate(-90 18 {})">{}</text>"#,
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        escape(chart.y_label)
    );
    for (i, s) in chart.series.iter().enumerate() {
        let color = PALETTE[s.color % PALETTE.len()];
        let dash = if s.dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let mut pts: Vec<(f64, f64)> = s.points.iter().copied().filter(usable).collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        if pts.len() > 1 {
            let path: Vec<String> = pts
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = writeln!(
                o,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
                path.join(" ")
            );
        }
        for &(x, y) in &pts {
            let _ = writeln!(
                o,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px(x),
                py(y)
            );
        }
        let ly = TOP + 10.0 + 18.0 * i as f64;
        let lx = LEFT + pw + 15.0;
        let _ = writeln!(
            o,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"{dash}/><text x="{}" y="{}" font-size="12">{}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            escape(&s.name)
        );
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series() -> Vec<Series> {
        vec![
            Series {
                name: "per-page".into(),
                points: vec![(4096.0, 10.0), (2097152.0, 12.0), (268435456.0, 11.0)],
                color: 0,
                dashed: false,
            },
            Series {
                name: "avx2-nt <cold>".into(),
                points: vec![(4096.0, 9.0), (2097152.0, f64::NAN), (268435456.0, 17.5)],
                color: 1,
                dashed: true,
            },
        ]
    }

    fn chart(s: &[Series]) -> Chart<'_> {
        Chart {
            title: "copy & clear",
            x_label: "size",
            y_label: "GB/s",
            series: s,
            log_x: true,
        }
    }

    #[test]
    fn svg_names_series_ticks_and_escapes_text() {
        let s = series();
        let svg = render_svg(&chart(&s));
        assert!(svg.contains("copy &amp; clear"));
        assert!(svg.contains("per-page") && svg.contains("avx2-nt &lt;cold&gt;"));
        for tick in [">4K<", ">2M<", ">256M<", ">20<"] {
            assert!(svg.contains(tick), "missing tick {tick}");
        }
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        assert_eq!(
            svg.matches("<circle").count(),
            5,
            "the NaN point is skipped"
        );
        assert_eq!(
            svg.matches("stroke-dasharray").count(),
            2,
            "dashed line and legend"
        );
    }

    #[test]
    fn degenerate_inputs_do_not_panic() {
        for s in [
            vec![],
            vec![Series {
                name: "one".into(),
                points: vec![(4096.0, 0.0)],
                color: 0,
                dashed: false,
            }],
            vec![Series {
                name: "bad".into(),
                points: vec![(f64::INFINITY, f64::NAN), (0.0, 1.0)],
                color: 3,
                dashed: true,
            }],
        ] {
            let svg = render_svg(&chart(&s));
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
            assert!(!svg.contains("NaN"));
        }
    }

    #[test]
    fn png_is_a_real_image_and_bad_extensions_are_refused() {
        let dir = std::env::temp_dir().join(format!("bulkmem-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = series();
        let png = dir.join("c.png");
        write(&png, &chart(&s)).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 2000,
            "{} bytes",
            bytes.len()
        );
        let svg = dir.join("c.SVG");
        write(&svg, &chart(&s)).unwrap();
        assert!(std::fs::read_to_string(&svg).unwrap().contains("</svg>"));
        let e = write(&dir.join("c.jpg"), &chart(&s)).unwrap_err();
        assert!(e.contains("c.jpg") && e.contains(".svg or .png"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
