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
