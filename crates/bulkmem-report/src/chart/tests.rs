//! The chart's SVG, read back: what a viewer would draw.

use super::svg::{legend, text_w};
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

/// Every `<text>` element: its x and its (still escaped) text.
fn texts(svg: &str) -> Vec<(f64, String)> {
    svg.match_indices("<text ")
        .map(|(i, _)| {
            let rest = &svg[i..];
            let end = rest.find("</text>").unwrap();
            let body = &rest[rest.find('>').unwrap() + 1..end];
            (attr(rest, "x"), body.trim().to_string())
        })
        .collect()
}

fn has_text(svg: &str, text: &str) -> bool {
    texts(svg).iter().any(|(_, t)| t == text)
}

/// The first `name="..."` attribute at or after the start of `svg`, as a
/// number.
fn attr(svg: &str, name: &str) -> f64 {
    let open = format!(r#" {name}=""#);
    let rest = &svg[svg.find(&open).unwrap() + open.len()..];
    rest[..rest.find('"').unwrap()].parse().unwrap()
}

/// The line pieces drawn `width` px wide in `color` (plotters' uppercase
/// hex): one per line, or one per dash of a broken line.
fn strokes(svg: &str, color: &str, width: u32) -> usize {
    let stroke = format!(r#"stroke="{color}" stroke-width="{width}""#);
    svg.lines()
        .filter(|l| l.starts_with("<polyline") && l.contains(&stroke))
        .count()
}

#[test]
fn svg_names_series_ticks_and_escapes_text() {
    let p = panel("hot", series());
    let svg = render_svg(&chart(&p));
    assert!(has_text(&svg, "copy &amp; clear"));
    assert!(has_text(&svg, "per-page") && has_text(&svg, "avx2-nt &lt;cold&gt;"));
    for tick in ["4K", "2M", "256M", "20", "0", "size", "GB/s", "hot"] {
        assert!(has_text(&svg, tick), "missing text {tick}");
    }
    assert!(!svg.contains("NaN") && !svg.contains("inf"));
    assert_eq!(
        svg.matches("<circle").count(),
        5 + 2,
        "the NaN point is skipped; colours differ, so both markers are circles"
    );
    assert_eq!(
        strokes(&svg, "#1F77B4", 2),
        2,
        "one solid line and its legend swatch"
    );
    assert!(
        strokes(&svg, "#D62728", 2) > 2,
        "the dashed line is drawn in pieces"
    );
}

#[test]
fn svg_parses_and_is_the_same_every_time() {
    let mut p = panel("hot", series());
    p.extend(panel("cold", series()));
    let svg = render_svg(&chart(&p));
    assert_eq!(svg, render_svg(&chart(&p)));
    let tree = resvg::usvg::Tree::from_str(&svg, &resvg::usvg::Options::default()).unwrap();
    assert_eq!(tree.size().width(), 2.0 * (LEFT + 460.0 + RIGHT) as f32);
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
    assert_eq!(styles[0].1.dash, None, "the first unbroken series is solid");
    assert!(styles.iter().skip(1).all(|(_, s)| s.dash.is_some()));
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
    for tick in ["1", "10", "100", "1000"] {
        assert!(has_text(&svg, tick), "missing log tick {tick}");
    }
    assert!(!has_text(&svg, "500"), "a log axis has no linear steps");

    let narrow = panel("hot", series());
    let svg = render_svg(&chart(&narrow));
    for tick in ["1", "100", "1000"] {
        assert!(!has_text(&svg, tick), "linear axis has log tick {tick}");
    }
    for tick in ["0", "5", "10", "15", "20"] {
        assert!(has_text(&svg, tick), "missing linear tick {tick}");
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
    assert_eq!(
        strokes(&svg, "#2CA02C", 1),
        2 * 3,
        "a bar and its two caps for each real spread"
    );
}

#[test]
fn two_panels_render_two_subtitles() {
    let mut p = panel("hot", series());
    p.extend(panel("cold", series()));
    let svg = render_svg(&chart(&p));
    let t = texts(&svg);
    let count = |s: &str| t.iter().filter(|(_, x)| x == s).count();
    assert_eq!((count("hot"), count("cold")), (1, 1));
    assert_eq!(
        count("per-page"),
        1,
        "a series in both panels is listed once"
    );
    assert_eq!(count("size"), 2, "each panel labels its axes");
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
    assert!(attr(&svg16, "height") > attr(&svg2, "height"));
    let names: Vec<&str> = sixteen[0].series.iter().map(|s| s.name.as_str()).collect();
    assert_legend_fits(&svg16, &names);
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
    assert_legend_fits(&render_svg(&chart(&long)), &["x".repeat(300).as_str()]);
}

/// Every name is in the legend once, and its estimated right edge lies
/// inside the canvas.
fn assert_legend_fits(svg: &str, names: &[&str]) {
    let w = attr(svg, "width");
    let t = texts(svg);
    for name in names {
        let found: Vec<_> = t.iter().filter(|(_, s)| s == name).collect();
        assert_eq!(found.len(), 1, "legend lists {name} {} times", found.len());
        let x = found[0].0;
        assert!(x + text_w(name) <= w, "{name} runs off a {w} px canvas");
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
        resvg::usvg::Tree::from_str(&svg, &resvg::usvg::Options::default()).unwrap();
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
        (2.0 * (LEFT + 460.0 + RIGHT), attr(&svg, "height"))
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
