//! `bulkmem tune`: measure every strategy on this machine and write the
//! profile `auto` follows (bulkmem::auto::Profile; docs/design.md,
//! "Calibration").
//!
//! Three shapes per operation, measured as the bench measures (strategies
//! interleaved run by run, medians, every cell verified once):
//!
//! * single calls, hot (the same buffers every call), on a geometric ladder
//!   of lengths from 64 B to 4x one thread's LLC share (the first point at
//!   or past it);
//! * batches of 4 KiB extents and of 2 MiB extents, cold (scattered over
//!   the batch total, caches evicted before each run), at totals from 1 MiB
//!   (4 MiB for 2 MiB extents) to past 4x the share. Every strategy runs
//!   through the library's batch call, as `auto` does.
//!
//! Per cell the winner, its margin over the runner-up, and `auto`'s choice.
//! A profile departs from the built-in rules only where the departure is
//! clear and reproduces, because on a shared machine near-ties flip from
//! one measurement to the next (seen here: every strategy at 24 GB/s from
//! 512K to 4M in one run, `portable` ahead by 7%; 20% behind in the next):
//!
//! 1. Each strategy is scored by its fraction of the best, smoothed over
//!    the cell and its ladder neighbours ([`scores`]).
//! 2. The rules' choice stays while it scores within [`KEEP`] of the top;
//!    else the previous size's choice, likewise (fewer bands); else the top.
//! 3. A re-check measures the choice, the rules' choice and `per-page`
//!    again: a departure from the rules that does not win again reverts to
//!    the rules' choice, and a choice slower than `per-page` records
//!    `per-page` (a profile never makes a size slower than the kernel's
//!    own loop).

use bulkmem::auto::{Cell, Identity, Profile, Shape, FORMAT};
use bulkmem::{Hint, Op, Strategy};

use crate::bench::mem::{self as bench_mem, Plan, Regime};
use crate::cli::{measuring_cpus, runtime, usage, with_progress, Failure};
use crate::harness::Rounds;
use crate::report::Row;
use clap::Args;
use std::path::{Path, PathBuf};

/// Keep the rules' (or else the previous size's) choice while it scores at
/// least this fraction of the top.
pub const KEEP: f64 = 0.97;

/// What the built-in rules pick for a cell (no profile, no overrides).
pub type Prior<'a> = &'a dyn Fn(Op, Shape, usize) -> Strategy;

/// The built-in rules' choice on this machine for a cell.
pub fn rules_choice(op: Op, shape: Shape, size: usize) -> Strategy {
    let req = match shape {
        Shape::Single => bulkmem::Request::single(op, size, Hint::Auto),
        _ => bulkmem::Request {
            op,
            total: size,
            runs: (size / shape.extent()).max(2),
            hint: Hint::Auto,
        },
    };
    bulkmem::auto::choose(bulkmem::Machine::this(), &req)
}

/// What to measure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ladder {
    /// Single-call lengths.
    pub singles: Vec<usize>,
    /// Batch totals of 4 KiB extents.
    pub small: Vec<usize>,
    /// Batch totals of 2 MiB extents.
    pub large: Vec<usize>,
    pub runs: usize,
    pub quick: bool,
}

/// The ladder for a machine whose threads each get `share` bytes of LLC.
pub fn ladder(share: usize, quick: bool) -> Ladder {
    let top = share.saturating_mul(4).max(4 << 20);
    // Geometric from `from`, by `step`, up to the first point at or past
    // `top`: larger requests use the last cell, where streaming has won.
    let geo = |from: usize, step: usize| {
        let mut v = vec![from];
        while *v.last().expect("non-empty") < top {
            let next = v.last().expect("non-empty").saturating_mul(step);
            v.push(next);
        }
        v
    };
    if quick {
        Ladder {
            singles: geo(64, 4),
            small: geo(1 << 20, 8),
            large: geo(4 << 20, 4),
            runs: 3,
            quick,
        }
    } else {
        Ladder {
            singles: geo(64, 2),
            small: geo(1 << 20, 4),
            large: geo(4 << 20, 4),
            runs: 7,
            quick,
        }
    }
}

impl Ladder {
    fn sizes(&self, shape: Shape) -> &[usize] {
        match shape {
            Shape::Single => &self.singles,
            Shape::SmallExtents => &self.small,
            Shape::LargeExtents => &self.large,
        }
    }

    /// Progress units: one per (op, shape, size), measured and re-checked.
    pub fn units(&self) -> usize {
        2 * 2 * (self.singles.len() + self.small.len() + self.large.len())
    }
}

/// One cell's medians.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub op: Op,
    pub shape: Shape,
    pub size: usize,
    pub gbps: Vec<(Strategy, f64)>,
}

/// How each strategy scores at cell `i` of `row` (one op and shape,
/// ascending sizes): its fraction of the cell's best, as a geometric mean
/// weighted 1-2-1 over the cell and its neighbours on the ladder. Sizes a
/// factor of 2-4 apart behave alike except at cache edges, so one noisy
/// cell (measured: every strategy but two dropped 30% in one 64K cell)
/// cannot flip a band, and an edge moves by at most half a step.
fn scores(row: &[Measured], i: usize) -> Vec<(Strategy, f64)> {
    let frac = |m: &Measured, s: Strategy| {
        let best = m.gbps.iter().map(|g| g.1).fold(0.0, f64::max);
        let g = m.gbps.iter().find(|g| g.0 == s).map_or(0.0, |g| g.1);
        if best > 0.0 {
            (g / best).max(1e-6)
        } else {
            1e-6
        }
    };
    let window: Vec<(&Measured, f64)> =
        [(i.checked_sub(1), 1.0), (Some(i), 2.0), (Some(i + 1), 1.0)]
            .into_iter()
            .filter_map(|(j, w)| Some((row.get(j?)?, w)))
            .collect();
    let weight: f64 = window.iter().map(|w| w.1).sum();
    row[i]
        .gbps
        .iter()
        .map(|&(s, _)| {
            let log: f64 = window.iter().map(|(m, w)| w * frac(m, s).ln()).sum();
            (s, (log / weight).exp())
        })
        .collect()
}

/// Winners, margins and choices; `measured` comes in (op, shape) rows of
/// ascending size.
pub fn choose(measured: &[Measured], prior: Prior) -> Vec<Cell> {
    let mut cells: Vec<Cell> = Vec::with_capacity(measured.len());
    for row in measured.chunk_by(|a, b| a.op == b.op && a.shape == b.shape) {
        let mut prev: Option<Strategy> = None;
        for (i, m) in row.iter().enumerate() {
            let mut ranked = m.gbps.clone();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
            let Some(&(winner, best)) = ranked.first() else {
                continue;
            };
            let runner = ranked.get(1).copied();
            let score = scores(row, i);
            let (top, top_score) = score
                .iter()
                .copied()
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .expect("at least one strategy");
            let close = |p: Strategy| {
                score
                    .iter()
                    .any(|&(s, sc)| s == p && sc >= KEEP * top_score)
            };
            let choice = Some(prior(m.op, m.shape, m.size))
                .filter(|&p| close(p))
                .or(prev.filter(|&p| close(p)))
                .unwrap_or(top);
            prev = Some(choice);
            cells.push(Cell {
                op: m.op,
                shape: m.shape,
                size: m.size,
                winner,
                runner_up: runner.map(|r| r.0),
                margin: runner.map_or(1.0, |r| if r.1 > 0.0 { best / r.1 } else { f64::INFINITY }),
                choice,
                gbps: m.gbps.clone(),
            });
        }
    }
    cells
}

/// Applies a re-check: `again` holds fresh medians of each cell's choice,
/// the rules' choice and `per-page`. A departure from the rules that loses
/// to them there reverts to them; then a choice slower than `per-page`
/// becomes `per-page`. Returns how many cells changed.
pub fn recheck(cells: &mut [Cell], again: &[Measured], prior: Prior) -> usize {
    let mut changed = 0;
    for c in cells.iter_mut() {
        let Some(m) = again
            .iter()
            .find(|m| m.op == c.op && m.shape == c.shape && m.size == c.size)
        else {
            continue;
        };
        let g = |s| m.gbps.iter().find(|x| x.0 == s).map(|x| x.1);
        let before = c.choice;
        let rules = prior(c.op, c.shape, c.size);
        if let (Some(ours), Some(theirs)) = (g(c.choice), g(rules)) {
            if ours < theirs {
                c.choice = rules;
            }
        }
        if let (Some(ours), Some(base)) = (g(c.choice), g(Strategy::PerPage)) {
            if ours < base {
                c.choice = Strategy::PerPage;
            }
        }
        changed += usize::from(c.choice != before);
    }
    changed
}

/// Measures the ladder on the calling thread (pinned to `cpus[0]`) and
/// returns the profile.
pub fn measure(
    l: &Ladder,
    cpus: &[usize],
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Profile, String> {
    let of = l.units();
    let mut done = 0;
    let mut all_cells = Vec::new();
    for op in [Op::Copy, Op::Clear] {
        let strategies: Vec<Strategy> = Strategy::for_op(op)
            .iter()
            .copied()
            .filter(|s| s.available())
            .collect();
        let mut measured = Vec::new();
        for shape in Shape::ALL {
            measured.extend(measure_shape(
                l,
                op,
                shape,
                l.sizes(shape),
                &|_| strategies.clone(),
                cpus,
                &mut |label| {
                    progress(done, of, label);
                    done += 1;
                },
            )?);
        }
        let mut cells = choose(&measured, &rules_choice);
        // Re-check each cell's choice against the rules' and per-page,
        // interleaved anew.
        let mut again = Vec::new();
        for shape in Shape::ALL {
            let of_shape: Vec<&Cell> = cells.iter().filter(|c| c.shape == shape).collect();
            let pick = |size: usize| {
                let mut v = vec![Strategy::PerPage];
                // Singles share one plan: every choice of the ladder runs.
                for c in of_shape
                    .iter()
                    .filter(|c| shape == Shape::Single || c.size == size)
                {
                    for s in [c.choice, rules_choice(op, shape, c.size)] {
                        if !v.contains(&s) {
                            v.push(s);
                        }
                    }
                }
                v
            };
            again.extend(measure_shape(
                l,
                op,
                shape,
                l.sizes(shape),
                &pick,
                cpus,
                &mut |label| {
                    progress(done, of, &format!("re-check {label}"));
                    done += 1;
                },
            )?);
        }
        recheck(&mut cells, &again, &rules_choice);
        all_cells.extend(cells);
    }
    progress(done, of, "done");
    Ok(Profile {
        format: FORMAT,
        bulkmem: env!("CARGO_PKG_VERSION").to_string(),
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        quick: l.quick,
        cpu: Identity::this(),
        cells: all_cells,
    })
}

/// Medians of `strategies(size)` for each size of one (op, shape).
fn measure_shape(
    l: &Ladder,
    op: Op,
    shape: Shape,
    sizes: &[usize],
    strategies: &dyn Fn(usize) -> Vec<Strategy>,
    cpus: &[usize],
    step: &mut dyn FnMut(&str),
) -> Result<Vec<Measured>, String> {
    let plan = |sizes: Vec<usize>, total: usize, strategies: Vec<Strategy>, regime| Plan {
        op,
        sizes,
        regimes: vec![regime],
        strategies,
        hint: Hint::Auto,
        threads: 1,
        rounds: Rounds {
            runs: l.runs,
            warmup: 0,
        },
        total,
        src_node: None,
        dst_node: None,
        cpus: cpus.to_vec(),
        thp: true,
        checked: false,
        named_batches: true,
    };
    let mut out = Vec::new();
    if shape == Shape::Single {
        // One plan for the whole ladder: every size runs the same strategies.
        let p = plan(sizes.to_vec(), 0, strategies(0), Regime::Hot);
        let rows = bench_mem::run(&p, &mut |d, _, label| {
            if d < sizes.len() {
                step(&format!("{} {label}", shape.name()));
            }
        })?;
        for &size in sizes {
            out.push(measured(op, shape, size, &rows));
        }
    } else {
        for &total in sizes {
            let p = plan(vec![shape.extent()], total, strategies(total), Regime::Cold);
            step(&format!(
                "{op} {} total {}",
                shape.name(),
                crate::size::fmt_size(total)
            ));
            let rows = bench_mem::run(&p, &mut |_, _, _| {})?;
            out.push(measured(op, shape, total, &rows));
        }
    }
    Ok(out)
}

fn measured(op: Op, shape: Shape, size: usize, rows: &[Row]) -> Measured {
    let gbps = rows
        .iter()
        .filter(|r| shape != Shape::Single || r.size == size)
        .filter_map(|r| Some((r.strategy.parse().ok()?, r.gbps.median)))
        .collect();
    Measured {
        op,
        shape,
        size,
        gbps,
    }
}

/// The profile's choices as bands, one line per (op, shape):
/// `copy single     64 avx2 (1.51x libc) | 16K rep-movsb ...`.
pub fn summary(p: &Profile) -> Vec<String> {
    let mut lines = Vec::new();
    for op in [Op::Copy, Op::Clear] {
        for shape in Shape::ALL {
            let cells = p.cells_of(op, shape);
            if cells.is_empty() {
                continue;
            }
            let mut parts: Vec<String> = Vec::new();
            let mut last = None;
            for c in cells {
                if last == Some(c.choice) {
                    continue;
                }
                last = Some(c.choice);
                let why = if c.choice == c.winner {
                    match c.runner_up {
                        Some(r) => format!(" ({:.2}x {r})", c.margin),
                        None => String::new(),
                    }
                } else if c.choice == rules_choice(op, shape, c.size) {
                    format!(" (rules; {} won by little or not again)", c.winner)
                } else if c.choice == Strategy::PerPage {
                    format!(" ({} lost to per-page on re-check)", c.winner)
                } else {
                    format!(" (kept; {} won by little)", c.winner)
                };
                parts.push(format!(
                    "{}+ {}{why}",
                    crate::size::fmt_size(c.size),
                    c.choice
                ));
            }
            lines.push(format!("{op} {:<9} {}", shape.name(), parts.join(" | ")));
        }
    }
    lines
}

#[derive(Args)]
pub struct TuneArgs {
    /// Where to write the profile [default: $BULKMEM_PROFILE, else
    /// $XDG_CACHE_HOME/bulkmem/profile-<cpu-id>.toml, else
    /// ~/.cache/bulkmem/profile-<cpu-id>.toml].
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Fewer sizes and runs (under 30 s on 2 cores); the profile says so.
    #[arg(long)]
    quick: bool,
    /// Runs per cell (median) [default: 7, or 3 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: Option<u32>,
}

/// `bulkmem tune`: checks the output path first (exit 2 at once if it
/// cannot be written), measures, then writes the profile atomically.
pub fn cmd(a: TuneArgs, quiet: bool) -> Result<(), Failure> {
    use bulkmem::auto::{self, Identity};
    let id = Identity::this();
    let from_env = std::env::var_os("BULKMEM_PROFILE")
        .filter(|v| !v.is_empty() && v != "off" && v != "OFF")
        .map(PathBuf::from);
    let path = a
        .out
        .or(from_env)
        .or_else(|| auto::default_profile_path(&id))
        .ok_or_else(|| usage("no place for the profile: give --out FILE (HOME is not set)"))?;
    let tmp = path.with_extension("toml.tmp");
    let writable = || -> std::io::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&tmp, b"")?;
        std::fs::remove_file(&tmp)
    };
    writable().map_err(|e| usage(format!("cannot write the profile {}: {e}", path.display())))?;
    let share = bulkmem::Machine::this().llc_share();
    let mut ladder = ladder(share, a.quick);
    if let Some(r) = a.runs {
        ladder.runs = r as usize;
    }
    let cpus = measuring_cpus(None)?;
    let started = std::time::Instant::now();
    let profile = with_progress(quiet, ladder.units(), |p| measure(&ladder, &cpus, p))?;
    std::fs::write(&tmp, profile.to_toml())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| runtime(format!("cannot write the profile {}: {e}", path.display())))?;
    println!(
        "bulkmem tune: {} cells in {:.0} s ({} runs each{}) on {}",
        profile.cells.len(),
        started.elapsed().as_secs_f64(),
        ladder.runs,
        if a.quick { ", --quick" } else { "" },
        bulkmem::cpu::info().brand
    );
    println!("auto's choices, from each size up (margin over the runner-up):");
    for line in summary(&profile) {
        println!("  {line}");
    }
    println!("wrote {}", path.display());
    let default = auto::default_profile_path(&id);
    match std::env::var_os("BULKMEM_PROFILE") {
        Some(v) if v == "off" || v == "OFF" => {
            println!("note: BULKMEM_PROFILE=off: auto ignores profiles until it is unset")
        }
        Some(v) if !v.is_empty() && Path::new(&v) != path => println!(
            "note: BULKMEM_PROFILE={} points elsewhere: auto reads that file",
            PathBuf::from(v).display()
        ),
        None if default.as_deref() != Some(path.as_path()) => println!(
            "note: auto reads this file only with BULKMEM_PROFILE={}",
            path.display()
        ),
        _ => println!("auto follows it from the next process on (`bulkmem info` shows it)"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Strategy::*;

    /// Rules that pick a strategy no test cell measures: never kept.
    const NONE: Prior = &|_, _, _| RepStosq;
    /// Rules that pick rep-movsb everywhere.
    const MOVSB: Prior = &|_, _, _| RepMovsb;

    fn m(size: usize, gbps: &[(Strategy, f64)]) -> Measured {
        Measured {
            op: Op::Copy,
            shape: Shape::Single,
            size,
            gbps: gbps.to_vec(),
        }
    }

    #[test]
    fn ladders_span_64_bytes_to_past_four_shares() {
        let share = 16 << 20;
        for quick in [false, true] {
            let l = ladder(share, quick);
            assert_eq!(l.singles[0], 64);
            for v in [&l.singles, &l.small, &l.large] {
                assert!(*v.last().unwrap() >= 4 * share, "{v:?}");
                assert!(
                    v[v.len() - 2] < 4 * share,
                    "stops at the first point past: {v:?}"
                );
                assert!(v.windows(2).all(|w| w[1] > w[0]));
            }
            assert_eq!(l.small[0], 1 << 20);
            assert!(l.large[0] >= 2 * (2 << 20), "at least two 2 MiB extents");
        }
        let (full, quick) = (ladder(share, false), ladder(share, true));
        assert!(quick.units() < full.units());
        assert!(quick.runs < full.runs);
        // A tiny LLC still measures batches.
        assert!(ladder(0, true).small.len() >= 2);
    }

    #[test]
    fn winners_margins_and_kept_choices() {
        let cells = choose(
            &[
                m(64, &[(PerPage, 5.0), (Avx2, 20.0), (Libc, 10.0)]),
                // Libc wins by 2% (and less with its neighbours): keep avx2.
                m(128, &[(PerPage, 5.0), (Avx2, 19.6), (Libc, 20.0)]),
                // Libc wins by 30% here and after: switch.
                m(256, &[(PerPage, 5.0), (Avx2, 15.0), (Libc, 20.0)]),
                m(512, &[(PerPage, 5.0), (Avx2, 15.0), (Libc, 20.0)]),
            ],
            NONE,
        );
        assert_eq!(cells.len(), 4);
        assert_eq!((cells[0].winner, cells[0].choice), (Avx2, Avx2));
        assert_eq!(cells[0].runner_up, Some(Libc));
        assert!((cells[0].margin - 2.0).abs() < 1e-9);
        assert_eq!((cells[1].winner, cells[1].choice), (Libc, Avx2));
        assert_eq!((cells[2].winner, cells[2].choice), (Libc, Libc));
        assert_eq!(cells[3].choice, Libc);
        // A new (op, shape) starts afresh.
        let mut other = m(64, &[(PerPage, 1.0), (Libc, 2.0)]);
        other.op = Op::Clear;
        let cells = choose(&[m(64, &[(Avx2, 2.0), (Libc, 1.99)]), other], NONE);
        assert_eq!(cells[1].choice, Libc);
    }

    #[test]
    fn one_noisy_cell_does_not_flip_its_band() {
        let steady = [(PerPage, 40.0), (Avx2, 46.0), (Libc, 45.0)];
        let cells = choose(
            &[
                m(32 << 10, &steady),
                // The measurement that chose per-page at 64K on this machine.
                m(64 << 10, &[(PerPage, 41.96), (Avx2, 41.32), (Libc, 27.48)]),
                m(128 << 10, &steady),
            ],
            NONE,
        );
        assert_eq!(cells[1].winner, PerPage, "the raw winner stays on record");
        assert_eq!(cells[1].choice, Avx2);
        // A real edge (two cells in a row) still moves the band.
        let cells = choose(
            &[
                m(1, &steady),
                m(2, &[(PerPage, 10.0), (Avx2, 5.0), (Libc, 6.0)]),
                m(4, &[(PerPage, 10.0), (Avx2, 5.0), (Libc, 6.0)]),
            ],
            NONE,
        );
        assert_eq!(cells[2].choice, PerPage);
    }

    #[test]
    fn the_rules_stay_unless_the_measurement_departs_clearly_and_again() {
        // A near-tie (portable ahead by 2%): the rules' rep-movsb stays.
        let tie = [(PerPage, 24.0), (RepMovsb, 24.6), (Portable, 25.1)];
        let cells = choose(&[m(1, &tie), m(2, &tie), m(4, &tie)], MOVSB);
        assert!(cells
            .iter()
            .all(|c| c.choice == RepMovsb && c.winner == Portable));
        // A clear win departs...
        let clear = [(PerPage, 24.0), (RepMovsb, 24.6), (Portable, 30.0)];
        let mut cells = choose(&[m(1, &clear), m(2, &clear)], MOVSB);
        assert!(cells.iter().all(|c| c.choice == Portable));
        // ...and reverts where the re-check does not confirm it.
        let again = [
            m(1, &[(PerPage, 29.0), (RepMovsb, 32.0), (Portable, 21.0)]),
            m(2, &[(PerPage, 24.0), (RepMovsb, 24.6), (Portable, 29.0)]),
        ];
        assert_eq!(recheck(&mut cells, &again, MOVSB), 1);
        assert_eq!((cells[0].choice, cells[1].choice), (RepMovsb, Portable));
    }

    #[test]
    fn a_choice_slower_than_per_page_on_recheck_becomes_per_page() {
        let mut cells = choose(
            &[
                m(64, &[(PerPage, 5.0), (Avx2, 5.2)]),
                m(128, &[(PerPage, 5.0), (Avx2, 9.0)]),
            ],
            NONE,
        );
        let n = recheck(
            &mut cells,
            &[
                m(64, &[(PerPage, 5.1), (Avx2, 5.0)]),
                m(128, &[(PerPage, 5.0), (Avx2, 9.1)]),
            ],
            NONE,
        );
        assert_eq!(n, 1);
        assert_eq!(cells[0].choice, PerPage);
        assert_eq!(
            cells[0].winner, Avx2,
            "the first measurement's winner stays on record"
        );
        assert_eq!(cells[1].choice, Avx2);
    }

    #[test]
    fn a_tiny_measured_profile_is_complete_and_follows_its_cells() {
        let l = Ladder {
            singles: vec![4096, 65536],
            small: vec![1 << 20],
            large: vec![4 << 20],
            runs: 1,
            quick: true,
        };
        let cpus = vec![bulkmem::placement::current_cpu()];
        let mut steps = 0;
        let p = measure(&l, &cpus, &mut |_, _, _| steps += 1).unwrap();
        assert_eq!(steps, l.units() + 1);
        assert_eq!(p.cells.len(), 2 * 4);
        for c in &p.cells {
            assert!(c.choice.supports(c.op) && c.choice.available(), "{c:?}");
            let n = Strategy::for_op(c.op)
                .iter()
                .filter(|s| s.available())
                .count();
            assert_eq!(c.gbps.len(), n, "{c:?}");
            assert!(c.gbps.iter().all(|g| g.1 > 0.0));
        }
        let back = Profile::parse(&p.to_toml()).unwrap();
        assert_eq!(back.cells.len(), p.cells.len());
        assert_eq!(back.cpu, Identity::this());
        assert_eq!(summary(&p).len(), 6);
    }
}
