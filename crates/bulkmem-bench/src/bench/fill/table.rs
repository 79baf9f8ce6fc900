//! `bench fill`'s table and plot: a row (a line) per strategy, a column
//! (a point) per element and region size.

use super::{BASELINE, STRATEGIES};
use crate::results::{by_strategy, Row};
use bulkmem_machine::units::format_bytes;
use bulkmem_report::chart::{self, Panel};
use bulkmem_report::table::Table;

/// A row per strategy, a column per (element, size), GB/s and the speed-up
/// over `memcpy-patch`.
pub fn table(rows: &[Row]) -> Vec<Table> {
    let col = |r: &Row| {
        let el = r.fill.as_ref().map_or(0, |f| f.element);
        format!("{el}B/{} {}", format_bytes(r.size), r.regime)
    };
    by_strategy(
        rows,
        format!(
            "fill (first 8 bytes of each element patched with its index): GB/s median±stdev of {} runs; x = over memcpy-patch",
            rows.first().map_or(0, |r| r.runs)
        ),
        &col,
        BASELINE,
    )
}

/// Says where the regime changes, since hot and cold share each panel.
pub(super) const PLOT_X: &str = "region size (hot up to 1M, cold above)";

/// A panel per element size, a line per strategy. Element sizes apart: a
/// 64-byte template and a 4 KiB one are different workloads (the patch is
/// an eighth of one and a five-hundredth of the other), and in one panel
/// their lines tangle. Hot and cold sizes share a panel: apart, each would
/// hold a single column of points.
pub(super) fn panels(rows: &[Row]) -> Vec<Panel> {
    let style = |r: &Row| {
        r.fill.as_ref()?;
        let color = STRATEGIES
            .iter()
            .position(|s| *s == r.strategy)
            .unwrap_or(0);
        Some((r.strategy.clone(), color, false))
    };
    chart::panels(rows, &style, &|r| {
        format!("{}-byte elements", r.fill.as_ref().map_or(0, |f| f.element))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::fill::HOT_MAX;
    use crate::results::FillCell;

    /// A fill result as `run` orders it: element, then size, then strategy;
    /// each row's GB/s is its element size, so a point shows its origin.
    fn result(elements: &[usize], sizes: &[usize]) -> Vec<Row> {
        let mut rows = Vec::new();
        for &el in elements {
            for &size in sizes {
                for &name in STRATEGIES {
                    rows.push(Row {
                        op: "fill",
                        strategy: name.into(),
                        chose: "memcpy".into(),
                        hint: None,
                        size,
                        total: size,
                        regime: if size <= HOT_MAX { "hot" } else { "cold" },
                        threads: 1,
                        runs: 1,
                        gbps: bulkmem_report::stats::Stats::or_zero(&[el as f64]),
                        fill: Some(FillCell {
                            element: el,
                            patch: true,
                        }),
                        ..Default::default()
                    });
                }
            }
        }
        rows
    }

    #[test]
    fn the_plot_has_a_panel_per_element_size() {
        let sizes = [64 << 10, 64 << 20];
        let p = panels(&result(&[64, 4096], &sizes));
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["64-byte elements", "4096-byte elements"]);
        for (panel, el) in p.iter().zip([64.0, 4096.0]) {
            let lines: Vec<&str> = panel.series.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(lines, STRATEGIES, "a line per strategy in {}", panel.name);
            for s in &panel.series {
                // Hot and cold sizes share the panel; no other element's
                // points leak in.
                let xs: Vec<f64> = s.points.iter().map(|q| q.x).collect();
                assert_eq!(xs, sizes.map(|n| n as f64), "{} {}", panel.name, s.name);
                assert!(
                    s.points.iter().all(|q| q.y == el),
                    "{} {}",
                    panel.name,
                    s.name
                );
            }
        }
        let svg = chart::render_svg(&chart::Chart {
            title: "fill",
            x_label: PLOT_X,
            y_label: "GB/s",
            panels: &p,
            log_x: true,
        });
        // The words of every text element, as a viewer shows them.
        let texts: Vec<&str> = svg
            .split("</text>")
            .filter_map(|t| t.rsplit_once('>').map(|(_, words)| words.trim()))
            .collect();
        let count = |s: &str| texts.iter().filter(|t| **t == s).count();
        assert_eq!(count("64-byte elements"), 1);
        assert_eq!(count("4096-byte elements"), 1);
        for s in STRATEGIES {
            assert_eq!(
                count(s),
                1,
                "{s}: one legend entry, whatever the element size"
            );
        }
    }
}
