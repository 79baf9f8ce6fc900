//! Calibration: measure every strategy on this machine and build the
//! profile `auto` follows (docs/design.md, "Calibration"). This module
//! measures; the policy (`crate::auto`) decides, from the rules and the
//! profile this writes. `bulkmem tune` is a thin command over
//! [`calibrate`] and [`write_profile`]; a program can calibrate itself the
//! same way.
//!
//! Three shapes per operation, on a ladder of sizes ([`ladder`]):
//!
//! * single calls, hot, each followed by a read of its destination (the
//!   whole use: [`read_once`]), from 64 B to the top of the ladder;
//! * batches of 4 KiB extents and of 2 MiB extents, cold, from 1 MiB
//!   (4 MiB for 2 MiB extents) to the top.
//!
//! The top is at least 256 MiB and 32x the cache this thread gets,
//! measured ([`cache_edge`]), not the LLC a VM reports (its host's), so
//! the largest requests are measured rather than left to the last cell
//! (with the ladder stopping at 4x the share, 64 MiB on a Zen 3 VM, glibc's
//! memcpy beat the `avx2-nt` chosen for 256 MiB and 1 GiB by 6%; there the
//! cache measures 16-32 MiB, so the top is 512 MiB-1 GiB); it is capped at
//! an eighth of physical memory. A shape's climb ends early where two
//! cells past the cache measure alike ([`levelled`]).

pub mod cache_edge;
mod choose;
mod ladder;
mod level;
mod measure;
pub mod toolkit;

use std::io::Write as _;
use std::path::Path;

use crate::auto::{decide, Cell, Identity, Machine, Profile, Request, Shape, FORMAT};
use crate::error::Error;
use crate::strategy::{Hint, Op, Strategy};

pub use choose::{candidates, choose, recheck, Measured, Prior, KEEP};
pub use ladder::{
    ladder, ladder_top, memory_cap, Ladder, FULL_RUNS, QUICK_TOP_FLOOR, SMALL_CELL, TOP_FLOOR,
};
pub use level::{levelled, LEVEL_FLAT, LEVEL_FROM, LEVEL_TIE};
pub use measure::HOT_BYTES;
pub use toolkit::read_once;

/// How to calibrate.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CalibrateOptions {
    /// Fewer sizes (x4 steps) and runs (3); the profile records it.
    pub quick: bool,
    /// Runs per cell (scored by their lower quartile); `None`: 7, or 3
    /// with `quick`.
    pub runs: Option<usize>,
    /// Pin the calling thread to this CPU for the measurement (it stays
    /// pinned afterwards); `None` measures where the thread runs.
    pub cpu: Option<usize>,
}

impl CalibrateOptions {
    /// The full calibration (x2 steps for single calls, 7 runs).
    pub fn full() -> CalibrateOptions {
        CalibrateOptions {
            quick: false,
            runs: None,
            cpu: None,
        }
    }

    /// The quick calibration.
    pub fn quick() -> CalibrateOptions {
        CalibrateOptions {
            quick: true,
            ..CalibrateOptions::full()
        }
    }

    /// Sets the runs per cell.
    pub fn runs(mut self, runs: usize) -> CalibrateOptions {
        self.runs = Some(runs.max(1));
        self
    }

    /// Sets the CPU to measure on.
    pub fn cpu(mut self, cpu: usize) -> CalibrateOptions {
        self.cpu = Some(cpu);
        self
    }
}

/// Where a calibration is, for a progress display.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Step<'a> {
    /// Cells finished (measured or re-checked).
    pub done: usize,
    /// Cells in all ([`Ladder::units`]).
    pub of: usize,
    /// What is being measured now, e.g. "copy single 4K".
    pub label: &'a str,
    /// About how long the rest will take, from how long the cells done so
    /// far took for the bytes they moved (`None` before the first is
    /// done). Rows that level off early shorten it as they do.
    pub left: Option<std::time::Duration>,
}

/// What a row tells the progress display.
enum Tick {
    /// A cell starts: its label and its [`cost`].
    Cell(String, f64),
    /// A row levelled off: these units and this cost will not be measured.
    Skip(usize, f64),
    /// Crossovers found: these units and this cost are added.
    More(usize, f64),
}

/// The sizes to measure between neighbouring cells whose choices or
/// winners differ and that lie 4x or more apart: the power of two nearest
/// their geometric mean. Winners count too, as the first pass's choices
/// are smoothed over neighbours: a 16 MiB clear that its 64 MiB neighbour
/// pulled to `avx512-nt` went back to `rep stosb` in the re-check, and the
/// 32 MiB calls between, left to the 64 MiB cell, ran at 0.45x.
fn crossovers(row: &[crate::auto::Cell]) -> Vec<usize> {
    row.windows(2)
        .filter(|w| {
            (w[0].choice != w[1].choice || w[0].winner != w[1].winner) && w[1].size >= 4 * w[0].size
        })
        .map(|w| {
            let mid = ((w[0].size as f64).log2() + (w[1].size as f64).log2()) / 2.0;
            1usize << mid.round() as u32
        })
        .filter(|&m| row.iter().all(|c| c.size != m))
        .collect()
}

/// What one cell costs to measure, for the estimate of the time left: bytes
/// moved per strategy and run (a single call and its read, repeated up to
/// `HOT_BYTES`; a cold batch and its cooling).
fn cost(shape: Shape, size: usize) -> f64 {
    let bytes = match shape {
        Shape::Single => size
            .saturating_mul(measure::MAX_REPS)
            .min(HOT_BYTES)
            .max(size),
        _ => size,
    };
    2.0 * bytes as f64
}

/// A re-check measures a few candidates where the first pass measured them
/// all: about this fraction of its cost.
const RECHECK_COST: f64 = 0.4;

/// The built-in rules' choice on this machine for a cell (no profile, no
/// overrides): what a profile departs from only where it measured better.
pub fn rules_choice(op: Op, shape: Shape, size: usize) -> Strategy {
    let req = match shape {
        Shape::Single => Request::single(op, size, Hint::Auto),
        _ => Request {
            op,
            total: size,
            runs: (size / shape.extent()).max(2),
            hint: Hint::Auto,
        },
    };
    decide(Machine::this(), &req).strategy
}

/// The ladder [`calibrate`] measures with `opts` on this machine, on the
/// CPU `opts` names (the calling thread is pinned there first): its top
/// from the cache this thread gets, measured ([`cache_edge::find`], well
/// under a second), not from the LLC the CPU reports.
pub fn ladder_here(opts: &CalibrateOptions) -> Result<Ladder, Error> {
    if let Some(c) = opts.cpu {
        crate::placement::pin_to(c).map_err(|e| Error::Calibration {
            what: format!("cannot pin to CPU {c}: {e}"),
        })?;
    }
    let memory = ladder::physical_memory();
    let edge = cache_edge::find(memory_cap(memory) / 4)?;
    let mut l = ladder(edge.edge, memory, opts.quick);
    if let Some(r) = opts.runs {
        l.runs = r.max(1);
        l.small_runs = l.runs;
    }
    Ok(l)
}

/// Measures every strategy this CPU runs, for both operations, on the
/// ladder `opts` describes, on the calling thread, and returns the profile
/// (not yet written: see [`write_profile`]). `progress` is called before
/// each cell and once at the end. Takes from seconds (`quick`) to a few
/// minutes, and maps up to twice the ladder's top in memory.
pub fn calibrate(
    opts: &CalibrateOptions,
    progress: &mut dyn FnMut(Step<'_>),
) -> Result<Profile, Error> {
    measure_ladder(&ladder_here(opts)?, progress)
}

/// [`calibrate`] over an explicit ladder.
pub fn measure_ladder(l: &Ladder, progress: &mut dyn FnMut(Step<'_>)) -> Result<Profile, Error> {
    let started = std::time::Instant::now();
    let mut of = l.units();
    let mut done = 0;
    let mut cost_left: f64 = Shape::ALL
        .iter()
        .flat_map(|&shape| l.sizes(shape).iter().map(move |&size| cost(shape, size)))
        .sum::<f64>()
        * 2.0
        * (1.0 + RECHECK_COST);
    let mut cost_done = 0.0;
    let mut step = |t: Tick| match t {
        Tick::Cell(label, c) => {
            let left = (cost_done > 0.0)
                .then(|| started.elapsed().mul_f64((cost_left / cost_done).max(0.0)));
            progress(Step {
                done,
                of,
                label: &label,
                left,
            });
            done += 1;
            cost_done += c;
            cost_left -= c;
        }
        Tick::Skip(units, c) => {
            of = of.saturating_sub(units);
            cost_left -= c;
        }
        Tick::More(units, c) => {
            of += units;
            cost_left += c;
        }
    };
    let mut cells = Vec::new();
    for op in [Op::Copy, Op::Clear] {
        let strategies: Vec<Strategy> = Strategy::for_op(op)
            .iter()
            .copied()
            .filter(|s| s.available())
            .collect();
        for shape in Shape::ALL {
            // Both passes of a shape share its arenas: mapping and filling
            // them again for the re-check cost a second per large shape.
            let mut row = Row {
                op,
                shape,
                ladder: l,
                arenas: None,
                step: &mut step,
            };
            let all = |_| strategies.clone();
            let mut measured = row.measure(l.sizes(shape), &all, Some(l.cache), 1.0, "")?;
            // Where the choice changes between cells 4x or more apart, the
            // crossover is measured rather than put at the band's edge: one
            // cell between them (on the quick ladder's x4 steps a 32 MiB
            // copy fell to the 64 MiB cell's non-temporal choice, at 0.64x
            // of a cached copy once consumed).
            let mids = crossovers(&choose(&measured, &rules_choice));
            if !mids.is_empty() {
                let c: f64 = mids.iter().map(|&m| cost(shape, m)).sum();
                (row.step)(Tick::More(2 * mids.len(), c * (1.0 + RECHECK_COST)));
                measured.extend(row.measure(&mids, &all, None, 1.0, "")?);
                measured.sort_by_key(|m| m.size);
            }
            let mut chosen = choose(&measured, &rules_choice);
            // Re-check each measured cell's strong candidates, interleaved
            // anew.
            let sizes: Vec<usize> = measured.iter().map(|m| m.size).collect();
            let again = row.measure(
                &sizes,
                &|size| {
                    chosen.iter().find(|c| c.size == size).map_or_else(
                        || vec![Strategy::PerPage],
                        |c| candidates(c, rules_choice(op, shape, size)),
                    )
                },
                None,
                RECHECK_COST,
                "re-check ",
            )?;
            recheck(&mut chosen, &again, &rules_choice);
            cells.extend(chosen);
        }
    }
    progress(Step {
        done: of,
        of,
        label: "done",
        left: Some(std::time::Duration::ZERO),
    });
    Ok(Profile {
        format: FORMAT,
        bulkmem: env!("CARGO_PKG_VERSION").to_string(),
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        quick: l.quick,
        cpu: Identity::this(),
        cells,
    })
}

/// One (op, shape) row of the ladder being measured: its cold arenas
/// (grown with the sizes, kept for the re-check) and the progress step.
struct Row<'a> {
    op: Op,
    shape: Shape,
    ladder: &'a Ladder,
    arenas: Option<(usize, toolkit::ColdArenas)>,
    step: &'a mut dyn FnMut(Tick),
}

impl Row<'_> {
    /// The row's cells at `sizes` (ascending), each with
    /// `strategies(size)`, each costing `weight` x its [`cost`] for the
    /// estimate of the time left. Given the thread's `cache`, the row ends
    /// at the first cell [`levelled`] with the cell at least 4x below it:
    /// larger requests use that cell, as they would the ladder's last.
    fn measure(
        &mut self,
        sizes: &[usize],
        strategies: &dyn Fn(usize) -> Vec<Strategy>,
        cache: Option<usize>,
        weight: f64,
        prefix: &str,
    ) -> Result<Vec<Measured>, Error> {
        let (op, shape) = (self.op, self.shape);
        let mut out: Vec<Measured> = Vec::new();
        for (k, &size) in sizes.iter().enumerate() {
            let label = format!(
                "{prefix}{op} {} {}",
                shape.name(),
                crate::units::format_bytes(size)
            );
            (self.step)(Tick::Cell(label, weight * cost(shape, size)));
            let s = strategies(size);
            let m = if shape == Shape::Single {
                measure::hot(op, size, &s, self.ladder.runs_for(shape, size))?
            } else {
                if self.arenas.as_ref().is_none_or(|a| a.0 < size) {
                    // Grown with the ladder, so a row that levels off
                    // early never maps its top; the old arenas go before
                    // the new are mapped.
                    drop(self.arenas.take());
                    let a = measure::cold_arenas(op, size)?;
                    self.arenas = Some((size, a));
                }
                let a = &mut self.arenas.as_mut().expect("just made").1;
                measure::cold(op, shape, size, &s, self.ladder.runs_for(shape, size), a)?
            };
            // Compared with the cell at least 4x smaller: two x2 steps can
            // both lie before a crossover (16 and 32 MiB copies, temporal
            // on the Emerald Rapids VM, where 64 MiB streams).
            let below = out
                .iter()
                .rev()
                .find(|p| p.size.saturating_mul(4) <= m.size);
            let level = cache.is_some_and(|c| below.is_some_and(|p| levelled(p, &m, c)));
            out.push(m);
            if level {
                // Neither pass measures the sizes above: both their units
                // and their cost go.
                let rest = &sizes[k + 1..];
                let c: f64 = rest.iter().map(|&s| cost(shape, s)).sum();
                (self.step)(Tick::Skip(2 * rest.len(), c * (1.0 + RECHECK_COST)));
                break;
            }
        }
        Ok(out)
    }
}

/// The profile's choices as bands, one line per (op, shape):
/// `copy single     64+ avx2 (1.51x libc) | 16K+ rep-movsb ...`.
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
                parts.push(format!(
                    "{}+ {}{}",
                    crate::units::format_bytes(c.size),
                    c.choice,
                    why(c)
                ));
            }
            lines.push(format!("{op} {:<9} {}", shape.name(), parts.join(" | ")));
        }
    }
    lines
}

fn why(c: &Cell) -> String {
    if c.choice == c.winner {
        match c.runner_up {
            Some(r) => format!(" ({:.2}x {r})", c.margin),
            None => String::new(),
        }
    } else if c.choice == rules_choice(c.op, c.shape, c.size) {
        format!(" (rules; {} won by little or not in both passes)", c.winner)
    } else if c.choice == Strategy::PerPage {
        format!(" ({} lost to per-page over both passes)", c.winner)
    } else {
        format!(" ({} won by little or not in both passes)", c.winner)
    }
}

/// Writes `p` to `path` atomically and without harm to what is there:
///
/// * a target that exists and is not a regular file (a device node, a
///   FIFO, a directory) is refused: `BULKMEM_PROFILE=/dev/null bulkmem
///   tune` as root must not replace `/dev/null`;
/// * the temporary is created beside the target with `O_CREAT | O_EXCL |
///   O_NOFOLLOW` under a name no other process chose (so a planted symlink
///   or file is never written through), synced, then renamed over the
///   target; on any failure it is removed.
pub fn write_profile(path: &Path, p: &Profile) -> std::io::Result<()> {
    check_target(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the profile path names no file"))?;
    let (tmp, mut f) = create_temporary(dir, &name.to_string_lossy())?;
    let written = f
        .write_all(p.to_toml().as_bytes())
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Checks up front that [`write_profile`] can write `path` (the target is
/// a regular file or absent, its directory exists or can be made, and a
/// temporary can be created there), so a long calibration does not end in
/// a failed write.
pub fn check_writable(path: &Path) -> std::io::Result<()> {
    check_target(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let (tmp, _) = create_temporary(dir, "check")?;
    std::fs::remove_file(tmp)
}

/// Refuses a target that exists and is not a regular file (symlinks are
/// judged by what they point to: the rename replaces the link itself).
pub fn check_target(path: &Path) -> std::io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it exists and is not a regular file (refusing to replace it)",
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// A new file in `dir` named after `base`, created exclusively.
fn create_temporary(
    dir: &Path,
    base: &str,
) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = None;
    for i in 0..64u32 {
        let tmp = dir.join(format!(
            ".{base}.{}.{:08x}.tmp",
            std::process::id(),
            seed.wrapping_add(i.wrapping_mul(0x9E37_79B9))
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary name was free")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladders_reach_the_floor_and_32_caches_within_an_eighth_of_memory() {
        let mem = 24 << 30;
        for (share, top) in [
            (16 << 20, 512 << 20),
            (64 << 20, 2 << 30),
            (512 << 10, TOP_FLOOR),
            (0, TOP_FLOOR),
            (24 << 20, 768 << 20),
        ] {
            assert_eq!(ladder_top(share, mem, false), top, "{share}");
            for quick in [false, true] {
                let top = ladder_top(share, mem, quick);
                let l = ladder(share, mem, quick);
                assert_eq!(l.singles[0], 64);
                for v in [&l.singles, &l.small, &l.large] {
                    assert_eq!(*v.last().unwrap(), top, "ends at the top: {v:?}");
                    assert!(v.windows(2).all(|w| w[1] > w[0]));
                }
                assert_eq!(l.small[0], 1 << 20);
                assert!(l.large[0] >= 2 * (2 << 20), "at least two 2 MiB extents");
            }
        }
        // A quick ladder stops sooner where the cache is small, not where
        // 32 caches lift it.
        assert_eq!(ladder_top(512 << 10, mem, true), QUICK_TOP_FLOOR);
        assert_eq!(ladder_top(16 << 20, mem, true), 512 << 20);
        // A small machine caps the top, and every point, at an eighth of
        // its memory.
        assert_eq!(ladder_top(16 << 20, 2 << 30, false), 256 << 20);
        assert_eq!(ladder_top(16 << 20, 1 << 30, false), 128 << 20);
        let l = ladder(130 << 20, 10 << 30, false);
        let cap = (10usize << 30) / 8;
        assert_eq!(memory_cap(10 << 30), cap, "already a multiple of 64 MiB");
        assert_eq!(
            memory_cap((23 << 30) + (555 << 20)),
            3008 << 20,
            "rounded down"
        );
        for v in [&l.singles, &l.small, &l.large] {
            assert_eq!(*v.last().unwrap(), cap, "{v:?}");
        }
        assert_eq!(ladder_top(16 << 20, 0, false), 4 << 20);
        let (full, quick) = (ladder(16 << 20, mem, false), ladder(16 << 20, mem, true));
        assert!(quick.units() < full.units());
        assert!(quick.runs < full.runs);
        // Small single calls get the full ladder's runs even when quick.
        for l in [&quick, &full] {
            assert_eq!(l.runs_for(Shape::Single, 4096), full.runs);
            assert_eq!(l.runs_for(Shape::Single, 2 << 20), l.runs);
            assert_eq!(l.runs_for(Shape::SmallExtents, 1 << 20), l.runs);
        }
    }

    #[test]
    fn crossovers_are_bisected_only_between_far_cells_that_differ() {
        let cell = |size: usize, choice: Strategy| Cell {
            op: Op::Copy,
            shape: Shape::Single,
            size,
            winner: choice,
            runner_up: None,
            margin: 1.0,
            choice,
            gbps: vec![(choice, 1.0)],
        };
        let m = 1usize << 20;
        let row = [
            cell(m, Strategy::RepMovsb),
            cell(4 * m, Strategy::RepMovsb),  // same choice: nothing
            cell(16 * m, Strategy::Avx2),     // differs, 4x: 8 MiB
            cell(64 * m, Strategy::Avx512Nt), // differs, 4x: 32 MiB
            cell(128 * m, Strategy::Avx2Nt),  // differs, but only 2x
            cell(1024 * m, Strategy::Libc),   // differs, 8x: 2^(27+30)/2 -> 512 MiB (rounded)
        ];
        assert_eq!(crossovers(&row), vec![8 * m, 32 * m, 512 * m]);
    }

    fn tiny_profile() -> Profile {
        Profile {
            format: FORMAT,
            bulkmem: env!("CARGO_PKG_VERSION").into(),
            created: 1,
            quick: true,
            cpu: Identity::this(),
            cells: Vec::new(),
        }
    }

    #[test]
    fn writing_never_goes_through_a_link_or_over_a_special_file() {
        let d = std::env::temp_dir().join(format!("bulkmem-write-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        // A link at the target: the rename replaces the link, and the file
        // it pointed at keeps its contents.
        let victim = d.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let target = d.join("profile.toml");
        let _ = std::fs::remove_file(&target);
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        write_profile(&target, &tiny_profile()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        let meta = std::fs::symlink_metadata(&target).unwrap();
        assert!(meta.is_file(), "the link was replaced by the profile");
        assert_eq!(
            Profile::parse(&std::fs::read_to_string(&target).unwrap())
                .unwrap()
                .cells
                .len(),
            0
        );
        // No temporary is left behind, and none has a predictable name.
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // Special files are refused before anything is written.
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for special in [fifo.as_path(), Path::new("/dev/null"), d.as_path()] {
            let e = write_profile(special, &tiny_profile()).unwrap_err();
            assert!(
                e.to_string().contains("not a regular file"),
                "{special:?}: {e}"
            );
            assert!(check_writable(special).is_err());
        }
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_tiny_measured_profile_is_complete_and_follows_its_cells() {
        let l = Ladder {
            singles: vec![4096, 65536],
            small: vec![1 << 20],
            large: vec![4 << 20],
            runs: 1,
            small_runs: 1,
            quick: true,
            cache: 1 << 20,
        };
        let (mut steps, mut of) = (0, 0);
        let p = measure_ladder(&l, &mut |s| {
            assert!(s.done <= s.of);
            steps += 1;
            of = s.of;
        })
        .unwrap();
        // Each unit once, and the end; crossovers found between 4 KiB and
        // 64 KiB add a cell (and its re-check) to the ladder's units.
        assert_eq!(steps, of + 1);
        let bisected = p.cells.len() - 2 * 4;
        assert_eq!(of, l.units() + 2 * bisected, "{bisected} bisected");
        assert!(bisected <= 2, "one crossover at most per single row");
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
        assert!(back.check_runs_on(&crate::cpu::info().features).is_ok());
        assert_eq!(summary(&p).len(), 6);
    }
}
