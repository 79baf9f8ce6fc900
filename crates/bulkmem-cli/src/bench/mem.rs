//! `bulkmem bench copy|clear`: every strategy at every size, cache-hot and
//! cache-cold, the way seeds 000 and 004 measure them.
//!
//! * hot: the same source and destination on every call, repeated until a
//!   run has moved at least [`HOT_BYTES`].
//! * consume: as hot, each call followed by one read of its whole
//!   destination, timed together: what a program that reads what it
//!   copied pays (docs/design.md, "The whole use").
//! * pipe: as hot, each call followed by `write()`s of its destination
//!   into a pipe that another thread drains, timed together: a server
//!   sending what it just copied (redis replying to a GET).
//! * cold: distinct extents of `size` bytes scattered (shuffled) over arenas
//!   of `total` bytes (default 256 MiB, many times the LLC), with an eviction
//!   pass before each run. `auto` submits a run's extents as one batch, as a
//!   migration hands over its folios; every named strategy is called extent by
//!   extent, as the kernel's loops do.
//!
//! Every cell checks its output once before it is timed, so a broken
//! strategy cannot report a fast number.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use bulkmem::calibrate::toolkit::{
    first_wrong, poison, scattered, scattered_pairs, warm_calls, ColdArenas, FULL_CHECK,
};
use bulkmem::mapping::Mapping;
use bulkmem::{Hint, Op, Strategy};

use super::against::Foreign;
use super::exec::{cells, Exec};
use super::pipe_sink::PipeSink;

use crate::arena;
use crate::harness::{fill_pattern, gbps, interleave, Rounds, POISON};
use crate::preflight::{self, eviction_bytes, times, Need};
use crate::report::Row;
use crate::size::fmt_size;
use crate::stats::Stats;

/// Bytes a hot run moves at least (by repeating the call): `bulkmem tune`'s.
pub use bulkmem::calibrate::HOT_BYTES;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Regime {
    Hot,
    Cold,
    Consume,
    Pipe,
}

impl Regime {
    pub const ALL: [Regime; 4] = [Regime::Hot, Regime::Cold, Regime::Consume, Regime::Pipe];

    pub fn name(self) -> &'static str {
        match self {
            Regime::Hot => "hot",
            Regime::Cold => "cold",
            Regime::Consume => "consume",
            Regime::Pipe => "pipe",
        }
    }

    /// What follows each call in a hot-buffer regime, timed with it.
    fn after(self) -> After {
        match self {
            Regime::Consume => After::Read,
            Regime::Pipe => After::Pipe,
            Regime::Hot | Regime::Cold => After::Nothing,
        }
    }
}

/// The destination's next user, in the regimes that reuse one buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum After {
    Nothing,
    Read,
    Pipe,
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct Plan {
    pub op: Op,
    pub sizes: Vec<usize>,
    pub regimes: Vec<Regime>,
    /// Concrete strategies and/or `Auto`; all available and supporting `op`.
    pub strategies: Vec<Strategy>,
    pub hint: Hint,
    pub threads: usize,
    pub rounds: Rounds,
    /// Bytes per cold run.
    pub total: usize,
    /// NUMA nodes to place the sources and destinations on (DRAM0 ->
    /// DRAM1 or CXL rows); `None` leaves them where they faulted in.
    pub src_node: Option<usize>,
    pub dst_node: Option<usize>,
    /// CPUs to pin worker i to (`cpus[i % len]`); worker 0 is the caller.
    pub cpus: Vec<usize>,
    pub thp: bool,
    /// Also measure `checked` (`bulkmem::copy_checked`, the fault-surviving
    /// routine standing in for what auto picks; `bench fault`).
    pub checked: bool,
    /// Cold cells call named strategies through the library's batch call
    /// (one kernel for the batch, one drain at its end), as `auto` runs,
    /// so like is compared with like; otherwise extent by extent, as the
    /// kernel's per-folio loops do (`--cold-calls each`).
    pub named_batches: bool,
    /// Bytes a hot, consume or pipe run moves at least, by repeating the
    /// call ([`HOT_BYTES`] unless a quicker report asks for less).
    pub hot_bytes: usize,
    /// Other libraries' routines, each one more row (`--against`).
    pub foreign: Vec<(String, Foreign)>,
}

/// Called as work proceeds with (done, of, label); the unit is one
/// (regime, size) group of cells.
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, &str);

/// Number of progress units [`run`] reports.
pub fn groups(plan: &Plan) -> usize {
    plan.regimes.len() * plan.sizes.len()
}

/// Runs the plan; rows come out in (regime, size, strategy) order.
///
/// Within a (regime, size) group the strategies take turns run by run, so a
/// noisy neighbour slows all of them alike and the ratios stay honest.
pub fn run(plan: &Plan, progress: Progress) -> Result<Vec<Row>, String> {
    let of = groups(plan);
    let mut done = 0;
    let mut rows = Vec::new();
    let llc = bulkmem::cpu::info().llc_bytes();
    for &regime in &plan.regimes {
        let label = |size| {
            format!(
                "{} {} {}",
                plan.op,
                regime.name(),
                crate::size::fmt_size(size)
            )
        };
        match regime {
            Regime::Hot | Regime::Consume | Regime::Pipe => {
                for &size in &plan.sizes {
                    progress(done, of, &label(size));
                    let mut bufs = HotBufs::new(plan, size, regime.after())?;
                    rows.extend(hot_group(plan, size, regime, &mut bufs)?);
                    done += 1;
                }
            }
            Regime::Cold => {
                let total = plan
                    .sizes
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(0)
                    .max(plan.total);
                let mut a = ColdArenas::new(plan.op, total, llc, plan.thp)
                    .map_err(|e| format!("cannot map the {total}-byte arenas: {e}"))?;
                place(&a.src, plan.src_node, "source")?;
                place(&a.dst, plan.dst_node, "destination")?;
                for &size in &plan.sizes {
                    progress(done, of, &label(size));
                    rows.extend(cold_group(plan, size, &mut a)?);
                    done += 1;
                }
            }
        }
    }
    progress(done, of, "done");
    Ok(rows)
}

/// One thread's hot buffers of one size, and where its destination goes
/// after each call.
struct HotPair {
    src: Mapping,
    dst: Mapping,
    after: After,
    /// The pipe regime's pipe (its reader drains it until dropped).
    sink: Option<PipeSink>,
}

impl HotPair {
    /// Hands the destination to its next user.
    fn consume(&mut self) -> Result<(), String> {
        match self.after {
            After::Nothing => Ok(()),
            After::Read => {
                std::hint::black_box(bulkmem::calibrate::read_once(self.dst.as_slice()));
                Ok(())
            }
            After::Pipe => match &mut self.sink {
                Some(sink) => sink.send(self.dst.as_slice()),
                None => Err("the pipe regime has no pipe".into()),
            },
        }
    }
}

/// Per-thread hot buffers of one size.
struct HotBufs {
    pairs: Vec<HotPair>,
}

impl HotBufs {
    fn new(plan: &Plan, size: usize, after: After) -> Result<HotBufs, String> {
        let mut pairs = Vec::new();
        for _ in 0..plan.threads {
            let mut src = arena::prefaulted(size, plan.thp, 0)
                .map_err(|e| format!("cannot map {size} bytes: {e}"))?;
            fill_pattern(src.as_mut_slice());
            place(&src, plan.src_node, "source")?;
            let dst = arena::prefaulted(size, plan.thp, POISON)
                .map_err(|e| format!("cannot map {size} bytes: {e}"))?;
            place(&dst, plan.dst_node, "destination")?;
            let sink = match after {
                After::Pipe => Some(PipeSink::new()?),
                _ => None,
            };
            pairs.push(HotPair {
                src,
                dst,
                after,
                sink,
            });
        }
        Ok(HotBufs { pairs })
    }
}

/// Moves every page of `m` to `node` (`move_pages`), so a cell measures
/// that node's memory; every page must get there.
fn place(m: &Mapping, node: Option<usize>, what: &str) -> Result<(), String> {
    let Some(node) = node else { return Ok(()) };
    let r = bulkmem::numa::migrate(
        m.as_ptr() as usize,
        m.len(),
        node,
        bulkmem::numa::MigrateOptions::default(),
    )
    .map_err(|e| format!("cannot place the {what} on node {node}: {e}"))?;
    if !r.is_complete() {
        return Err(format!(
            "only {} of the {what}'s pages reached node {node} ({} failed)",
            r.moved + r.already,
            r.failed.len()
        ));
    }
    Ok(())
}

fn hot_group(
    plan: &Plan,
    size: usize,
    regime: Regime,
    bufs: &mut HotBufs,
) -> Result<Vec<Row>, String> {
    let reps = (plan.hot_bytes / size).max(1);
    let cells = cells(
        plan,
        &bulkmem::Request::single(plan.op, size, plan.hint),
        false,
    )?;
    let execs: Vec<Exec> = cells.iter().map(|c| c.1).collect();
    // Check each cell once, from a poisoned destination.
    let mut chose: Vec<Option<Strategy>> = vec![None; execs.len()];
    let sparse = size > FULL_CHECK;
    for (i, exec) in execs.iter().enumerate() {
        for p in bufs.pairs.iter_mut() {
            poison(p.dst.as_mut_slice(), sparse);
            chose[i] = match plan.op {
                Op::Copy => exec.copy(p.dst.as_mut_slice(), p.src.as_slice()),
                Op::Clear => exec.clear(p.dst.as_mut_slice()),
            };
            verify(
                plan.op,
                &cells[i].0,
                size,
                regime.name(),
                p.dst.as_slice(),
                p.src.as_slice(),
                sparse,
            )?;
        }
    }
    let stats = interleave(execs.len(), plan.rounds, |i| {
        let exec = execs[i];
        let call = |p: &mut HotPair| {
            match plan.op {
                Op::Copy => exec.copy(p.dst.as_mut_slice(), p.src.as_slice()),
                Op::Clear => exec.clear(p.dst.as_mut_slice()),
            };
            p.consume()
        };
        // Untimed calls first (`toolkit::warm_calls`: one, or four near the
        // cache's edge): the caches then hold what this strategy leaves
        // behind, not what the previous cell did (at 32 MiB a clear after a
        // temporal loop's dirty lines measured 0.75x of the same clear
        // after a non-temporal one).
        let failed = std::sync::Mutex::new(None);
        let keep = |r: Result<(), String>| {
            if let Err(e) = r {
                *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            }
        };
        for _ in 0..warm_calls(size) {
            timed(&mut bufs.pairs, &plan.cpus, |p| keep(call(p)));
        }
        let t = timed(&mut bufs.pairs, &plan.cpus, |p| {
            for _ in 0..reps {
                keep(call(p));
            }
        });
        match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e),
            None => Ok(gbps(reps * size * plan.threads, t)),
        }
    })?;
    Ok((0..execs.len())
        .map(|i| {
            row(
                plan,
                &cells[i].0,
                chose[i],
                size,
                size,
                regime,
                stats[i].clone(),
            )
        })
        .collect())
}

fn cold_group(plan: &Plan, size: usize, a: &mut ColdArenas) -> Result<Vec<Row>, String> {
    let cooler = &a.cooler;
    let count = (plan.total.max(size) / size).max(1);
    let total = count * size;
    let sparse = total > FULL_CHECK;
    let per_thread = count.div_ceil(plan.threads);
    let batch = bulkmem::Request {
        op: plan.op,
        total: per_thread * size,
        runs: per_thread,
        hint: plan.hint,
    };
    let cells = cells(plan, &batch, true)?;
    let execs: Vec<Exec> = cells.iter().map(|c| c.1).collect();
    let mut chose: Vec<Option<Strategy>> = vec![None; execs.len()];
    let stats = match plan.op {
        Op::Copy => {
            let mut ops = scattered_pairs(a.dst.as_mut_slice(), a.src.as_slice(), size, count);
            for (i, exec) in execs.iter().enumerate() {
                for (d, _) in ops.iter_mut() {
                    poison(d, sparse);
                }
                for part in ops.chunks_mut(per_thread) {
                    chose[i] = exec.copy_batch(part);
                }
                for (d, sr) in &ops {
                    verify(plan.op, &cells[i].0, size, "cold", d, sr, sparse)?;
                }
            }
            let mut parts: Vec<&mut [(&mut [u8], &[u8])]> = ops.chunks_mut(per_thread).collect();
            interleave(execs.len(), plan.rounds, |i| {
                let touched = parts.iter().flat_map(|p| p.iter());
                cooler.cool(2 * total, touched.flat_map(|(d, s)| [&**d, *s]));
                let t = timed(&mut parts, &plan.cpus, |part| {
                    execs[i].copy_batch(part);
                });
                Ok(gbps(total, t))
            })?
        }
        Op::Clear => {
            let mut ops = scattered(a.dst.as_mut_slice(), size, count);
            for (i, exec) in execs.iter().enumerate() {
                for d in ops.iter_mut() {
                    poison(d, sparse);
                }
                for part in ops.chunks_mut(per_thread) {
                    chose[i] = exec.clear_batch(part);
                }
                for d in &ops {
                    verify(plan.op, &cells[i].0, size, "cold", d, &[], sparse)?;
                }
            }
            let mut parts: Vec<&mut [&mut [u8]]> = ops.chunks_mut(per_thread).collect();
            interleave(execs.len(), plan.rounds, |i| {
                cooler.cool(total, parts.iter().flat_map(|p| p.iter().map(|d| &**d)));
                let t = timed(&mut parts, &plan.cpus, |part| {
                    execs[i].clear_batch(part);
                });
                Ok(gbps(total, t))
            })?
        }
    };
    // Fewer extents than threads leaves threads idle: report who worked.
    // (Splitting one extent across threads is the batch engine's job.)
    let workers = count.div_ceil(per_thread);
    Ok((0..execs.len())
        .map(|i| {
            let mut r = row(
                plan,
                &cells[i].0,
                chose[i],
                size,
                total,
                Regime::Cold,
                stats[i].clone(),
            );
            r.threads = workers;
            r.calls = Some(execs[i].calls());
            r
        })
        .collect())
}

fn row(
    plan: &Plan,
    name: &str,
    chose: Option<Strategy>,
    size: usize,
    total: usize,
    regime: Regime,
    gbps: Stats,
) -> Row {
    Row {
        op: plan.op.name(),
        strategy: name.to_string(),
        chose: chose.map_or(name, |s| s.name()).to_string(),
        hint: (name == "auto").then(|| plan.hint.name().to_string()),
        size,
        total,
        regime: regime.name(),
        threads: plan.threads,
        runs: plan.rounds.runs,
        gbps,
        speedup: None,
        baseline: None,
        calls: None,
        batch: None,
        fill: None,
        moved: None,
        migrated: None,
    }
}

/// Fails unless `dst` holds `src` (copy) or zeros (clear).
/// Checks `dst` after `op` (every byte, or the library's sample where
/// `sparse`: `bulkmem::calibrate::toolkit::first_wrong`).
fn verify(
    op: Op,
    s: &str,
    size: usize,
    regime: &str,
    dst: &[u8],
    src: &[u8],
    sparse: bool,
) -> Result<(), String> {
    let src = if op == Op::Copy { src } else { &[] };
    match first_wrong(dst, src, sparse) {
        None => Ok(()),
        Some(i) => Err(format!(
            "verification failed: {op} strategy {s} ({regime}, extent {}) left byte {i} wrong; its numbers would be meaningless",
            crate::size::fmt_size(size)
        )),
    }
}

/// Runs `work` on every worker at once, worker i pinned to `cpus[i % n]`
/// (worker 0 on the calling thread, already pinned), and returns the time
/// from the common start to the last finish.
pub(super) fn timed<W: Send>(
    workers: &mut [W],
    cpus: &[usize],
    work: impl Fn(&mut W) + Sync,
) -> Duration {
    if workers.len() == 1 {
        let t = Instant::now();
        work(&mut workers[0]);
        return t.elapsed();
    }
    let barrier = Barrier::new(workers.len());
    let (first, rest) = workers.split_first_mut().expect("at least one worker");
    std::thread::scope(|scope| {
        for (i, w) in rest.iter_mut().enumerate() {
            let (barrier, work) = (&barrier, &work);
            let cpu = cpus[(i + 1) % cpus.len()];
            scope.spawn(move || {
                let _ = bulkmem::placement::pin_to(cpu);
                barrier.wait();
                work(w);
            });
        }
        barrier.wait();
        let t = Instant::now();
        work(first);
        // Leaving the scope joins the others: their finish is in the time.
        t
    })
    .elapsed()
}

/// The regimes `--regime` names.
#[derive(Clone, Debug)]
pub struct Regimes(pub Vec<Regime>);

/// `hot`, `cold`, `consume`, `pipe`, comma-separated, or `both` (hot and
/// cold) or `all`; measured in the order given.
pub fn parse_regimes(s: &str) -> Result<Regimes, String> {
    let mut out: Vec<Regime> = Vec::new();
    for word in s.split(',') {
        let add: &[Regime] = match word.trim() {
            "both" => &[Regime::Hot, Regime::Cold],
            "all" => &Regime::ALL,
            w => match Regime::ALL.iter().find(|r| r.name() == w) {
                Some(r) => std::slice::from_ref(r),
                None => {
                    return Err(format!(
                        "'{w}': expected hot, cold, consume, pipe, both or all (comma-separated)"
                    ))
                }
            },
        };
        for r in add {
            if !out.contains(r) {
                out.push(*r);
            }
        }
    }
    Ok(Regimes(out))
}

/// What `bench copy|clear|fault` hold at once: hot, a source and a
/// destination of the largest size per thread; cold, two arenas of
/// `--total` (at least the largest size) and the eviction buffer.
pub fn needs(sizes: &[usize], regimes: &[Regime], threads: usize, total: usize) -> Vec<Need> {
    let max = sizes.iter().copied().max().unwrap_or(0);
    let mut needs = Vec::new();
    if regimes
        .iter()
        .any(|r| r.after() != After::Nothing || *r == Regime::Hot)
    {
        needs.push(Need {
            bytes: times(times(2, max), threads),
            flags: if threads > 1 {
                format!("--sizes {} --threads {threads}", fmt_size(max))
            } else {
                format!("--sizes {}", fmt_size(max))
            },
            what: format!(
                "hot: a source and a destination of {} per thread",
                fmt_size(max)
            ),
        });
    }
    if regimes.contains(&Regime::Cold) {
        let arena = max.max(total);
        needs.push(Need {
            bytes: times(2, arena).saturating_add(eviction_bytes()),
            flags: if total >= max {
                format!("--total {}", fmt_size(total))
            } else {
                format!("--sizes {}", fmt_size(max))
            },
            what: format!(
                "cold: two arenas of {} and the {} eviction buffer",
                fmt_size(arena),
                preflight::approx(eviction_bytes())
            ),
        });
    }
    needs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_plan(op: Op, strategies: Vec<Strategy>, threads: usize) -> Plan {
        Plan {
            op,
            sizes: vec![4096, 65536],
            regimes: vec![Regime::Hot, Regime::Cold],
            strategies,
            hint: Hint::Auto,
            threads,
            rounds: crate::harness::Rounds { runs: 1, warmup: 0 },
            total: 1 << 20,
            src_node: None,
            dst_node: None,
            cpus: vec![bulkmem::placement::current_cpu()],
            thp: false,
            checked: false,
            named_batches: false,
            hot_bytes: HOT_BYTES,
            foreign: Vec::new(),
        }
    }

    #[test]
    fn every_cell_yields_a_verified_row() {
        for op in [Op::Copy, Op::Clear] {
            let plan = tiny_plan(
                op,
                vec![Strategy::PerPage, Strategy::Auto, Strategy::Portable],
                2,
            );
            let mut calls = 0;
            let rows = run(&plan, &mut |_, _, _| calls += 1).unwrap();
            assert_eq!(rows.len(), 2 * 2 * 3);
            assert_eq!(calls, groups(&plan) + 1);
            for r in &rows {
                assert!(r.gbps.median > 0.0, "{r:?}");
                assert_eq!(r.hint.is_some(), r.strategy == "auto");
                assert_ne!(r.chose, "auto");
            }
            let cold4k = rows
                .iter()
                .find(|r| r.regime == "cold" && r.size == 4096)
                .unwrap();
            assert_eq!(cold4k.total, 1 << 20);
        }
    }

    #[test]
    fn checked_cells_run_verified_beside_auto() {
        for op in [Op::Copy, Op::Clear] {
            let mut plan = tiny_plan(op, vec![Strategy::Auto], 1);
            plan.checked = true;
            let rows = run(&plan, &mut |_, _, _| {}).unwrap();
            assert_eq!(rows.len(), 2 * 2 * 2);
            for r in rows.iter().filter(|r| r.strategy == "checked") {
                let s: Strategy = r.chose.parse().unwrap();
                let list = match op {
                    Op::Copy => bulkmem::fault::CHECKED_COPY,
                    Op::Clear => bulkmem::fault::CHECKED_CLEAR,
                };
                assert!(list.contains(&s), "{r:?}");
                assert!(r.hint.is_none() && r.gbps.median > 0.0);
            }
        }
    }

    #[test]
    fn consume_and_pipe_cells_are_verified_and_named() {
        for op in [Op::Copy, Op::Clear] {
            let mut plan = tiny_plan(op, vec![Strategy::Auto, Strategy::PerPage], 2);
            plan.regimes = vec![Regime::Consume, Regime::Pipe];
            let rows = run(&plan, &mut |_, _, _| {}).unwrap();
            assert_eq!(rows.len(), 2 * 2 * 2);
            for r in &rows {
                assert!(r.regime == "consume" || r.regime == "pipe", "{r:?}");
                assert!(r.gbps.median > 0.0 && r.total == r.size, "{r:?}");
            }
        }
    }

    #[test]
    fn regimes_parse_as_lists() {
        let names = |s: &str| -> Vec<&str> {
            parse_regimes(s)
                .unwrap()
                .0
                .iter()
                .map(|r| r.name())
                .collect()
        };
        assert_eq!(names("both"), ["hot", "cold"]);
        assert_eq!(names("consume,hot,consume"), ["consume", "hot"]);
        assert_eq!(names("all"), ["hot", "cold", "consume", "pipe"]);
        let e = parse_regimes("hot,warm").unwrap_err();
        assert!(e.contains("'warm'") && e.contains("consume"), "{e}");
        // Consume and pipe hold what hot holds.
        let hot = needs(&[1 << 20], &[Regime::Hot], 1, 0);
        assert_eq!(
            needs(&[1 << 20], &[Regime::Pipe], 1, 0)[0].bytes,
            hot[0].bytes
        );
    }

    #[test]
    fn verification_catches_a_wrong_copy() {
        let e = verify(Op::Copy, "avx2", 4096, "hot", &[1, 2, 3], &[1, 9, 3], false).unwrap_err();
        assert!(e.contains("byte 1") && e.contains("avx2"), "{e}");
        assert!(verify(Op::Clear, "clzero", 4096, "cold", &[0, 0, 7], &[], false).is_err());
        assert!(verify(Op::Clear, "clzero", 4096, "cold", &[0, 0, 0], &[], false).is_ok());
    }
}
