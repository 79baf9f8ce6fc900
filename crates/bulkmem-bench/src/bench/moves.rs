//! `bulkmem bench move`: the kernel's UFFDIO_MOVE batching, from user space.
//! For 4 KiB pages and transparent huge pages, each size is moved:
//!
//! * `per-page-ioctl`: one UFFDIO_MOVE per 4 KiB page (no batching);
//! * `one-ioctl`: a single raw UFFDIO_MOVE of the whole range;
//! * `move-range`: bulkmem's `Mover::move_range` (one ioctl, continuing
//!   after partial progress);
//! * `copy-auto`: `bulkmem::copy` into a fresh destination (what a
//!   compactor without MOVE does: the destination pages fault in, and the
//!   source pages stay until released).
//!
//! Each run maps and populates a fresh source and maps a fresh destination
//! (untimed); only the move or copy is timed. The first run of every cell is
//! checked page by page.

use std::time::Instant;

use bulkmem::uffd::{MoveOptions, Mover};

use crate::arena::{populate, region, PageKind};
use crate::harness::{interleave, Rounds};
use crate::results::{by_strategy, MoveCell, Row};
use bulkmem_machine::units::format_bytes;
use bulkmem_report::stats::Stats;
use bulkmem_report::table::Table;

use std::path::PathBuf;

use crate::arena::check;
use crate::size;
use clap::Args;

use crate::cli::{
    check_memory, check_outputs, measuring_cpus, publish, twice_the_largest, usage, with_progress,
    Failure, Measure, Output, Style,
};

pub const STRATEGIES: &[&str] = &["per-page-ioctl", "one-ioctl", "move-range", "copy-auto"];

const PAGE: usize = 4096;
const HUGE: usize = 2 << 20;

#[derive(Clone, Debug)]
pub struct Plan {
    pub sizes: Vec<usize>,
    pub pages: Vec<PageKind>,
    pub rounds: Rounds,
}

impl Plan {
    pub fn groups(&self) -> usize {
        self.sizes.len() * self.pages.len()
    }
}

pub fn run(plan: &Plan, progress: &mut dyn FnMut(usize, usize, &str)) -> Result<Vec<Row>, String> {
    let mut mover = Mover::new().map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut n = 0;
    for &kind in &plan.pages {
        for &size in &plan.sizes {
            progress(
                n,
                plan.groups(),
                &format!(
                    "{} {}",
                    kind.name(),
                    bulkmem_machine::units::format_bytes(size)
                ),
            );
            n += 1;
            if size % HUGE != 0 {
                return Err(format!(
                    "--sizes {} is not a multiple of 2M",
                    bulkmem_machine::units::format_bytes(size)
                ));
            }
            let mut unchecked = vec![true; STRATEGIES.len()];
            let secs = interleave(STRATEGIES.len(), plan.rounds, |k| {
                let verify = std::mem::take(&mut unchecked[k]);
                one(&mut mover, STRATEGIES[k], size, kind, verify)
            })?;
            for (k, &name) in STRATEGIES.iter().enumerate() {
                let per = |f: &dyn Fn(f64) -> f64| -> Stats {
                    Stats::or_zero(&secs[k].samples.iter().map(|&s| f(s)).collect::<Vec<_>>())
                };
                let gbps = per(&|s| size as f64 / s / 1e9);
                let ms = per(&|s| s * 1e3);
                rows.push(Row {
                    op: "move",
                    strategy: name.to_string(),
                    chose: if name == "copy-auto" {
                        "auto".into()
                    } else {
                        "uffdio-move".into()
                    },
                    hint: None,
                    size,
                    total: size,
                    regime: "cold",
                    threads: 1,
                    runs: plan.rounds.runs,
                    gbps,
                    moved: Some(MoveCell {
                        page: kind.name(),
                        ms,
                    }),
                    ..Default::default()
                });
            }
        }
    }
    progress(n, plan.groups(), "done");
    crate::results::add_speedups_over(&mut rows, "per-page-ioctl");
    Ok(rows)
}

/// One timed move (or copy) of `size` bytes; seconds.
fn one(
    mover: &mut Mover,
    name: &str,
    size: usize,
    kind: PageKind,
    verify: bool,
) -> Result<f64, String> {
    let mut src = region(size, kind)?;
    populate(&mut src);
    let mut dst = region(size, kind)?;
    let moving = name != "copy-auto";
    if moving {
        mover
            .register(dst.as_mut_ptr(), size)
            .map_err(|e| e.to_string())?;
    }
    let t = Instant::now();
    match name {
        "per-page-ioctl" => {
            for off in (0..size).step_by(PAGE) {
                // SAFETY: one page of our fresh mappings; dst is registered.
                let (moved, err) = unsafe {
                    mover.move_once(
                        dst.as_mut_ptr().add(off),
                        src.as_mut_ptr().add(off),
                        PAGE,
                        0,
                    )
                };
                if moved != PAGE {
                    return Err(format!("UFFDIO_MOVE of one page failed: errno {err:?}"));
                }
            }
        }
        "one-ioctl" => {
            let (to, from) = (dst.as_mut_ptr(), src.as_mut_ptr());
            // SAFETY: our fresh mappings; dst is registered.
            let (moved, err) = unsafe { mover.move_once(to, from, size, 0) };
            if moved != size {
                return Err(format!(
                    "one UFFDIO_MOVE moved {moved} of {size} bytes: errno {err:?}"
                ));
            }
        }
        "move-range" => {
            // SAFETY: as above.
            let r = unsafe {
                mover.move_range(
                    dst.as_mut_ptr(),
                    src.as_mut_ptr(),
                    size,
                    MoveOptions::default(),
                )
            }
            .map_err(|e| e.to_string())?;
            if !r.is_complete() {
                return Err(format!("move_range left failures: {:?}", r.failures));
            }
        }
        _ => bulkmem::copy(dst.as_mut_slice(), src.as_slice()),
    }
    let secs = t.elapsed().as_secs_f64();
    if moving {
        mover
            .unregister(dst.as_mut_ptr(), size)
            .map_err(|e| e.to_string())?;
    }
    if verify {
        check(&dst).map_err(|p| format!("verification failed: {name} left page {p} wrong"))?;
    }
    Ok(secs)
}

/// A row per strategy, a column per (page kind, size): GB/s and the
/// speed-up over `per-page-ioctl` (milliseconds per move are in the JSON).
pub fn table(rows: &[Row]) -> Vec<Table> {
    let col = |r: &Row| {
        let page = r.moved.as_ref().map_or("", |m| m.page);
        format!("{page} {}", format_bytes(r.size))
    };
    by_strategy(
        rows,
        format!(
            "move (fresh source and destination each run): GB/s median±stdev of {} runs; x = over per-page-ioctl",
            rows.first().map_or(0, |r| r.runs)
        ),
        &col,
        "per-page-ioctl",
    )
}

#[derive(Args)]
pub struct MoveArgs {
    /// Bytes moved per run (multiples of 2M).
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, allow_hyphen_values = true, default_value = "64M,1G")]
    sizes: Vec<usize>,
    /// Source pages: 4K (no THP) or thp.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "4K,thp")]
    pages: Vec<PageKind>,
    #[command(flatten)]
    measure: Measure,
    #[command(flatten)]
    out: Output,
    /// GB/s against size, a line per strategy and page kind (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

pub fn cmd(a: MoveArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), a.plot.as_deref())?;
    if let Some(&s) = a.sizes.iter().find(|&&s| s % (2 << 20) != 0) {
        return Err(usage(format!(
            "--sizes {} is not a multiple of 2M",
            bulkmem_machine::units::format_bytes(s)
        )));
    }
    check_memory(&[twice_the_largest(
        "--sizes",
        &a.sizes,
        "a populated source and a destination that copy-auto faults in",
    )])?;
    let plan = Plan {
        sizes: a.sizes,
        pages: a.pages,
        rounds: a.measure.rounds(),
    };
    measuring_cpus(None)?;
    let rows = with_progress(quiet, plan.groups(), |p| run(&plan, p))?;
    let style = |r: &Row| {
        let page = r.moved.as_ref()?.page;
        let color = STRATEGIES
            .iter()
            .position(|s| *s == r.strategy)
            .unwrap_or(0);
        Some((format!("{} {page}", r.strategy), color, page == "thp"))
    };
    publish(
        &a.out,
        &table(&rows),
        &rows,
        a.plot
            .as_deref()
            .map(|p| (p, "move", "bytes moved", &style as Style)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_moves_and_is_checked() {
        if let Err(e) = Mover::new() {
            eprintln!("skipping: {e}");
            return;
        }
        let plan = Plan {
            sizes: vec![HUGE],
            pages: vec![PageKind::Small, PageKind::Thp],
            rounds: crate::harness::Rounds { runs: 1, warmup: 0 },
        };
        let rows = run(&plan, &mut |_, _, _| {}).unwrap();
        assert_eq!(rows.len(), 2 * STRATEGIES.len());
        for r in &rows {
            assert!(
                r.gbps.median > 0.0 && r.moved.as_ref().unwrap().ms.median > 0.0,
                "{r:?}"
            );
        }
        let t = bulkmem_report::table::text(&table(&rows));
        assert!(
            t.contains("move-range") && t.contains("thp 2M") && t.contains("4K 2M"),
            "{t}"
        );
        let e = run(
            &Plan {
                sizes: vec![PAGE],
                pages: vec![PageKind::Small],
                rounds: crate::harness::Rounds { runs: 1, warmup: 0 },
            },
            &mut |_, _, _| {},
        )
        .unwrap_err();
        assert!(e.contains("multiple of 2M"), "{e}");
    }
}
