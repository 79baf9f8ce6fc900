//! `bulkmem bench fill`: the kernel's non-temporal template-fill patches' template initialisation. Each element
//! is a prepared template whose first 8 bytes are patched with its index
//! (the seed's per-pfn update). Rows:
//!
//! * `memcpy-per-element`: copy the template into each element (no patch);
//! * `memcpy-patch`: the same, then patch it in place: the baseline;
//! * `fill-temporal` / `fill-nt` / `fill-auto`: `fill_with` with hint
//!   reuse / stream / auto;
//! * `engine`: the engine's `fill_with` on `--threads` workers.
//!
//! Regions up to 1 MiB are measured hot (refilled until a run has written
//! 64 MiB); larger ones cold (evicted before each run). Every row is checked
//! once against the expected contents before it is timed.

use std::time::Instant;

use bulkmem::mapping::Mapping;
use bulkmem::{Control, Engine, Hint};

use crate::arena;
use crate::harness::{gbps, interleave, Rounds};
use crate::report::{by_strategy, FillCell, Row};
use crate::size::fmt_size;
use crate::table::Table;

use std::path::PathBuf;

use crate::preflight::{self, eviction_bytes, Need};
use crate::size;
use clap::Args;

use crate::chart::{self, Panel};
use crate::cli::{
    check_memory, check_outputs, measuring_cpus, plot_panels, publish, usage, with_progress,
    Failure, Measure, Output,
};

pub const STRATEGIES: &[&str] = &[
    "memcpy-per-element",
    "memcpy-patch",
    "fill-temporal",
    "fill-nt",
    "fill-auto",
    "engine",
];

/// What the speed-ups are over: a plain per-element copy and patch.
const BASELINE: &str = "memcpy-patch";

const HOT_MAX: usize = 1 << 20;
const HOT_BYTES: usize = 64 << 20;

#[derive(Clone, Debug)]
pub struct Plan {
    pub elements: Vec<usize>,
    pub sizes: Vec<usize>,
    pub threads: usize,
    pub rounds: Rounds,
    pub thp: bool,
}

impl Plan {
    pub fn groups(&self) -> usize {
        self.elements.len() * self.sizes.len()
    }
}

#[inline(always)]
fn stamp(i: usize, e: &mut [u8]) {
    let b = (i as u64).to_le_bytes();
    let n = e.len().min(8);
    e[..n].copy_from_slice(&b[..n]);
}

fn template(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + 7) as u8 | 0x80).collect()
}

pub fn run(plan: &Plan, progress: &mut dyn FnMut(usize, usize, &str)) -> Result<Vec<Row>, String> {
    let engine = Engine::builder()
        .threads(plan.threads)
        .build()
        .map_err(|e| format!("cannot start a {}-thread engine: {e}", plan.threads))?;
    let biggest = plan.sizes.iter().copied().max().unwrap_or(0);
    let mut region = arena::prefaulted(biggest, plan.thp, 0)
        .map_err(|e| format!("cannot map {biggest} bytes: {e}"))?;
    let llc = bulkmem::cpu::info().llc_bytes();
    let evict = arena::eviction_buffer(llc, plan.thp)
        .map_err(|e| format!("cannot map the eviction buffer: {e}"))?;
    let mut rows = Vec::new();
    let mut n = 0;
    for &el in &plan.elements {
        for &size in &plan.sizes {
            progress(
                n,
                plan.groups(),
                &format!("{el}-byte elements, {}", crate::size::fmt_size(size)),
            );
            n += 1;
            if size % el != 0 {
                return Err(format!(
                    "--sizes {} is not a whole number of {el}-byte elements",
                    crate::size::fmt_size(size)
                ));
            }
            rows.extend(measure(
                plan,
                el,
                &mut region.as_mut_slice()[..size],
                &engine,
                &evict,
            )?);
        }
    }
    progress(n, plan.groups(), "done");
    Ok(rows)
}

fn measure(
    plan: &Plan,
    el: usize,
    dst: &mut [u8],
    engine: &Engine,
    evict: &Mapping,
) -> Result<Vec<Row>, String> {
    let t = template(el);
    let size = dst.len();
    let hot = size <= HOT_MAX;
    let reps = if hot { (HOT_BYTES / size).max(1) } else { 1 };
    // Returns the mode that ran, for the `chose` column.
    let one = |name: &str, dst: &mut [u8]| -> Result<String, String> {
        Ok(match name {
            "memcpy-per-element" => {
                for e in dst.chunks_exact_mut(el) {
                    e.copy_from_slice(&t);
                }
                "memcpy".into()
            }
            "memcpy-patch" => {
                for (i, e) in dst.chunks_exact_mut(el).enumerate() {
                    e.copy_from_slice(&t);
                    stamp(i, e);
                }
                "memcpy".into()
            }
            "fill-temporal" | "fill-nt" | "fill-auto" => {
                let hint = match name {
                    "fill-temporal" => Hint::Reuse,
                    "fill-nt" => Hint::Stream,
                    _ => Hint::Auto,
                };
                let m = bulkmem::fill_with_hint(dst, &t, hint, stamp).map_err(|e| e.to_string())?;
                m.strategy().name().into()
            }
            _ => {
                let r = engine
                    .fill_with(dst, &t, &stamp, Control::default())
                    .map_err(|e| e.to_string())?;
                r.strategy.name().into()
            }
        })
    };
    let mut want = t.repeat(size / el);
    let mut chose = Vec::new();
    for &name in STRATEGIES {
        dst.fill(0);
        chose.push(one(name, dst)?);
        if name != "memcpy-per-element" {
            for (i, e) in want.chunks_exact_mut(el).enumerate() {
                stamp(i, e);
            }
        }
        if dst != &want[..] {
            return Err(format!(
                "verification failed: {name} filled {el}-byte elements wrongly"
            ));
        }
    }
    let stats = interleave(STRATEGIES.len(), plan.rounds, |k| {
        if !hot {
            arena::evict_through(evict);
        }
        let start = Instant::now();
        for _ in 0..reps {
            one(STRATEGIES[k], dst)?;
        }
        Ok(gbps(size * reps, start.elapsed()))
    })?;
    Ok(STRATEGIES
        .iter()
        .enumerate()
        .map(|(k, &name)| Row {
            op: "fill",
            strategy: name.to_string(),
            chose: chose[k].clone(),
            hint: None,
            size,
            total: size,
            regime: if hot { "hot" } else { "cold" },
            threads: if name == "engine" {
                engine.threads()
            } else {
                1
            },
            runs: plan.rounds.runs,
            gbps: stats[k].clone(),
            speedup: None,
            baseline: None,
            calls: None,
            batch: None,
            fill: Some(FillCell {
                element: el,
                patch: name != "memcpy-per-element",
            }),
            moved: None,
            migrated: None,
        })
        .collect())
}

/// A row per strategy, a column per (element, size), GB/s and the speed-up
/// over `memcpy-patch`.
pub fn table(rows: &[Row]) -> Vec<Table> {
    let col = |r: &Row| {
        let el = r.fill.as_ref().map_or(0, |f| f.element);
        format!("{el}B/{} {}", fmt_size(r.size), r.regime)
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

#[derive(Args)]
pub struct FillArgs {
    /// Element (template) sizes in bytes.
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, allow_hyphen_values = true, default_value = "64,128,4096")]
    element: Vec<usize>,
    /// Region sizes; up to 1M they are measured hot, larger ones cold.
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, allow_hyphen_values = true, default_value = "64K,64M,1G")]
    sizes: Vec<usize>,
    /// Workers for the `engine` row. More workers than usable CPUs run
    /// with a warning: they share CPUs.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: u32,
    #[command(flatten)]
    measure: Measure,
    /// Do not ask for transparent huge pages on the benchmark arenas.
    #[arg(long)]
    no_thp: bool,
    #[command(flatten)]
    out: Output,
    /// GB/s against region size, a panel per element size, a line per
    /// strategy (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

pub fn cmd(a: FillArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), a.plot.as_deref())?;
    for &el in &a.element {
        if let Some(&s) = a.sizes.iter().find(|&&s| s % el != 0) {
            return Err(usage(format!(
                "--sizes {} is not a whole number of {el}-byte elements",
                size::fmt_size(s)
            )));
        }
    }
    let biggest = a.sizes.iter().copied().max().unwrap_or(0);
    check_memory(&[Need {
        bytes: biggest.saturating_add(eviction_bytes()),
        flags: format!("--sizes {}", fmt_size(biggest)),
        what: format!(
            "a region of {} and the {} eviction buffer",
            fmt_size(biggest),
            preflight::approx(eviction_bytes())
        ),
    }])?;
    crate::cli::warn_oversubscribed(a.threads as usize, crate::cli::usable_cpus());
    let plan = Plan {
        elements: a.element,
        sizes: a.sizes,
        threads: a.threads as usize,
        rounds: a.measure.rounds(),
        thp: !a.no_thp,
    };
    measuring_cpus(None)?;
    let mut rows = with_progress(quiet, plan.groups(), |p| run(&plan, p))?;
    crate::report::add_speedups_over(&mut rows, BASELINE);
    publish(&a.out, &table(&rows), &rows, None)?;
    match a.plot.as_deref() {
        Some(p) => plot_panels(p, "fill", PLOT_X, &panels(&rows)),
        None => Ok(()),
    }
}

/// Says where the regime changes, since hot and cold share each panel.
const PLOT_X: &str = "region size (hot up to 1M, cold above)";

/// A panel per element size, a line per strategy. Element sizes apart: a
/// 64-byte template and a 4 KiB one are different workloads (the patch is
/// an eighth of one and a five-hundredth of the other), and in one panel
/// their lines tangle. Hot and cold sizes share a panel: apart, each would
/// hold a single column of points.
fn panels(rows: &[Row]) -> Vec<Panel> {
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

    #[test]
    fn every_row_is_verified_and_measured() {
        let plan = Plan {
            elements: vec![64, 100],
            sizes: vec![64_000, 2 << 20],
            threads: 2,
            rounds: crate::harness::Rounds { runs: 1, warmup: 0 },
            thp: false,
        };
        let mut plan64 = plan.clone();
        plan64.elements = vec![64];
        plan64.sizes = vec![64 << 10, 2 << 20];
        let mut rows = run(&plan64, &mut |_, _, _| {}).unwrap();
        crate::report::add_speedups_over(&mut rows, BASELINE);
        assert_eq!(rows.len(), 2 * STRATEGIES.len());
        for r in &rows {
            assert!(r.gbps.median > 0.0, "{r:?}");
            assert!(r.speedup.is_some());
            assert_eq!(r.regime, if r.size <= HOT_MAX { "hot" } else { "cold" });
        }
        let t = crate::table::text(&table(&rows));
        assert!(t.contains("fill-nt") && t.contains("64B/2M cold"), "{t}");
        // 2M is not a whole number of 100-byte elements: a clear error.
        let e = run(&plan, &mut |_, _, _| {}).unwrap_err();
        assert!(e.contains("100-byte"), "{e}");
    }

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
                        gbps: crate::stats::Stats::or_zero(&[el as f64]),
                        speedup: None,
                        baseline: None,
                        calls: None,
                        batch: None,
                        fill: Some(FillCell {
                            element: el,
                            patch: true,
                        }),
                        moved: None,
                        migrated: None,
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
        assert!(svg.contains(">64-byte elements<") && svg.contains(">4096-byte elements<"));
        assert_eq!(
            svg.matches(r#"class="legend""#).count(),
            STRATEGIES.len(),
            "a strategy is one legend entry, whatever the element size"
        );
    }
}
