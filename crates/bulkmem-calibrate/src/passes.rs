//! Measuring a ladder: per operation and shape, a first pass over every
//! strategy this CPU runs, the crossovers between far cells whose choices
//! differ, then a re-check of each cell's strong candidates, interleaved
//! anew, so one noisy pass cannot decide a cell.

use super::choose::{
    break_tie, candidates, choose, disputed as disputed_by, recheck, rules_choice, settle_dispute,
    steady_near_top, ties, Measured,
};
use super::ladder::{ladder_here, CalibrateOptions, Ladder};
use super::level::levelled;
use super::nt_shape::{race_nt_shapes, SHAPE_RUNS};
use super::progress::{cost, Step, Tick, Tracker, DISPUTE_COST, RECHECK_COST, TIE_COST};
use super::{measure, toolkit};
use crate::error::Error;
use bulkmem::{Op, Strategy};
use bulkmem_policy::auto::{Cell, Identity, Profile, Shape, FORMAT};

/// The largest single call whose ties a quick calibration breaks: its
/// budget is 20 s, and a tie-break (three 10 ms runs) cost it 0.05-0.25 s
/// up to here, a 16 MiB or larger cell's about a second (Zen 3 VM). From
/// the L2 to the L3 (1-4 MiB there) the cache-allocating kernels read
/// back alike and differ alone: with ties up to 1 MiB only, 4 of 8 quick
/// tunes kept `libc` or `rep stos*` for hot 2 MiB clears, at 0.89-0.95x
/// of `avx2`.
pub const QUICK_TIES: usize = 4 << 20;

/// The largest single call whose re-check a third pass settles whenever
/// the two passes disagree (`Row::recheck`): a pass there takes a
/// fraction of a second, and one dip in it decides under the lower of
/// two (Zen 3 VM: a full tune's first pass put a hot 2 MiB clear by
/// `avx2` at 0.65x of `rep stosq`, a quick tune's a 4 KiB copy by `avx2`
/// at 0.54x of `libc`, between cells it led; the kernels kept ran at
/// 0.67-0.91x of `avx2` in `bench`).
pub const DISPUTES_UPTO: usize = 4 << 20;

/// [`calibrate`] over an explicit ladder.
pub fn measure_ladder(l: &Ladder, progress: &mut dyn FnMut(Step<'_>)) -> Result<Profile, Error> {
    // Past the cache, as the ladder's top is, and no larger than it.
    let top = l.large.iter().chain(&l.singles).copied().max().unwrap_or(0);
    let race_bytes = (4 * l.cache).clamp(64 << 20, top.max(64 << 20));
    let race_runs = if l.quick { 3 } else { SHAPE_RUNS };
    let nt_copy_shape = race_nt_shapes(race_bytes, race_runs)?.map(|r| r.chosen);
    let mut tracker = Tracker::new(l, progress);
    let mut step = |t: Tick| tracker.tick(t);
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
            row.add_cells(&mids, &all, &mut measured)?;
            let mut chosen = choose(&measured, &rules_choice);
            let sizes: Vec<usize> = measured.iter().map(|m| m.size).collect();
            let mut again = row.recheck(&mut chosen, &sizes, &[])?;
            // The re-check can make far neighbours differ where the first
            // pass had them agree: those crossovers are measured too, as
            // new cells with a re-check of their own (a quick ladder's
            // 16 and 64 MiB copies, both `rep movsb` at first, became
            // `rep movsb` and `avx2-nt`, and 32 MiB, left to the first,
            // ran at 0.57-0.74x of `avx2-nt` on the Zen 3 VM).
            let late = crossovers(&chosen);
            if !late.is_empty() {
                row.add_cells(&late, &all, &mut measured)?;
                let mut fresh: Vec<Cell> = choose(&measured, &rules_choice)
                    .into_iter()
                    .filter(|c| late.contains(&c.size))
                    .collect();
                let more = row.recheck(&mut fresh, &late, &chosen)?;
                again.again.extend(more.again);
                again.third.extend(more.third);
                chosen.extend(fresh);
                chosen.sort_by_key(|c| c.size);
            }
            row.break_ties(&mut chosen, &again)?;
            cells.extend(chosen);
        }
    }
    tracker.finish();
    Ok(Profile {
        format: FORMAT,
        bulkmem: env!("CARGO_PKG_VERSION").to_string(),
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        quick: l.quick,
        cpu: Identity::this(),
        cells,
        nt_copy_shape,
    })
}

/// The sizes to measure between neighbouring cells whose choices or
/// winners differ and that lie 4x or more apart: the power of two nearest
/// their geometric mean. Winners count too, as the first pass's choices
/// are smoothed over neighbours: a 16 MiB clear that its 64 MiB neighbour
/// pulled to `avx512-nt` went back to `rep stosb` in the re-check, and the
/// 32 MiB calls between, left to the 64 MiB cell, ran at 0.45x.
fn crossovers(row: &[Cell]) -> Vec<usize> {
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

/// The cells next in size below and above `size`, among `cells` and
/// `around`: what [`steady_near_top`] compares a re-checked cell with. A
/// late crossover cell (one or two a quick tune on the Zen 3 VM: 128 B
/// copies, 512 B clears) is re-checked in a list of its own, where the
/// cells beside it were other crossovers sizes apart, or none, so the
/// kernel leading on both sides went unmeasured in its re-check whenever
/// its first pass had dipped.
fn neighbours<'c>(
    size: usize,
    cells: &'c [Cell],
    around: &'c [Cell],
) -> (Option<&'c Cell>, Option<&'c Cell>) {
    let all = || cells.iter().chain(around);
    (
        all().filter(|c| c.size < size).max_by_key(|c| c.size),
        all().filter(|c| c.size > size).min_by_key(|c| c.size),
    )
}

/// A row's re-check: the second pass of its cells, and the third of
/// those it disputed.
struct Passes {
    again: Vec<Measured>,
    third: Vec<Measured>,
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
    /// Measures the cells at `sizes` (crossovers: none yet measured) with
    /// every strategy, into `measured` in size order, counting them and
    /// their re-checks into the progress.
    fn add_cells(
        &mut self,
        sizes: &[usize],
        strategies: &dyn Fn(usize) -> Vec<Strategy>,
        measured: &mut Vec<Measured>,
    ) -> Result<(), Error> {
        if sizes.is_empty() {
            return Ok(());
        }
        let c: f64 = sizes.iter().map(|&m| cost(self.shape, m)).sum();
        (self.step)(Tick::More(2 * sizes.len(), c * (1.0 + RECHECK_COST)));
        measured.extend(self.measure(sizes, strategies, None, 1.0, "")?);
        measured.sort_by_key(|m| m.size);
        Ok(())
    }

    /// Re-checks `cells` (at `sizes`): each one's strong candidates
    /// measured again, interleaved anew, then [`recheck`]. Where that
    /// overturns the first pass's choice, streaming for cache-allocating
    /// or back, the two passes disagree where it costs most, and a third
    /// pass of the two choices (and `per-page`) decides
    /// ([`settle_dispute`]): more runs only where the evidence conflicts
    /// and the choice matters. Without it a quick tune's hot
    /// 32 MiB copy went from `avx2-nt` (the first pass's and the rules'
    /// choice) to `rep movsq` on one re-check, and ran at 0.67-0.80x of
    /// `avx2-nt` in `bench copy` (Zen 3 VM); single calls up to
    /// [`DISPUTES_UPTO`] get one wherever the passes disagree. `around`:
    /// the row's cells already settled, the neighbours of late crossover
    /// cells ([`neighbours`]). Returns the re-check's figures and the
    /// third passes'.
    fn recheck(
        &mut self,
        cells: &mut [Cell],
        sizes: &[usize],
        around: &[Cell],
    ) -> Result<Passes, Error> {
        let (op, shape) = (self.op, self.shape);
        let ties_upto = self.ties_upto();
        let small = |size| shape == Shape::Single && size <= DISPUTES_UPTO;
        let again = self.measure(
            sizes,
            &|size| {
                let Some(i) = cells.iter().position(|c| c.size == size) else {
                    return vec![Strategy::PerPage];
                };
                let mut v = candidates(&cells[i], rules_choice(op, shape, size), size <= ties_upto);
                if let (true, (Some(below), Some(above))) =
                    (small(size), neighbours(size, cells, around))
                {
                    for s in steady_near_top(below, above) {
                        if !v.contains(&s) {
                            v.push(s);
                        }
                    }
                }
                v
            },
            None,
            RECHECK_COST,
            "re-check ",
        )?;
        let first: Vec<Strategy> = cells.iter().map(|c| c.choice).collect();
        recheck(cells, &again, &rules_choice);
        // (size, the choices in dispute and `per-page`, whose guard needs
        // it in every pass). Disputes between a streaming and a
        // cache-allocating choice are settled at every size: there a
        // wrong pick costs 1.2-1.5x. Single calls up to DISPUTES_UPTO are
        // settled whenever the passes disagree (`disputed`), as one dip
        // decides the lower-of-two there. Larger temporal swaps differ by
        // a few percent, and settling those too (4-15 a tune) made a
        // quick tune 7% slower.
        let mut disputed: Vec<(usize, Vec<Strategy>)> = Vec::new();
        for (c, &f) in cells.iter_mut().zip(&first) {
            let Some(a) = again.iter().find(|m| m.size == c.size) else {
                continue;
            };
            let s = disputed_by(c, f, a, small(c.size));
            if !s.is_empty() {
                disputed.push((c.size, s));
                c.choice = f;
            }
        }
        if !disputed.is_empty() {
            let sizes: Vec<usize> = disputed.iter().map(|d| d.0).collect();
            let c: f64 = sizes.iter().map(|&s| cost(shape, s)).sum();
            (self.step)(Tick::More(sizes.len(), c * DISPUTE_COST));
            let third = self.measure(
                &sizes,
                &|size| {
                    disputed
                        .iter()
                        .find(|d| d.0 == size)
                        .map_or_else(|| vec![Strategy::PerPage], |d| d.1.clone())
                },
                None,
                DISPUTE_COST,
                "decide ",
            )?;
            settle_dispute(cells, &again, &third, &rules_choice);
            return Ok(Passes { again, third });
        }
        Ok(Passes {
            again,
            third: Vec::new(),
        })
    }

    /// The largest cell whose ties [`break_ties`](Row::break_ties)
    /// breaks: single calls only (a batch is written for someone else,
    /// docs/design.md "The whole use"), and a quick calibration's only up
    /// to [`QUICK_TIES`].
    fn ties_upto(&self) -> usize {
        match self.shape {
            Shape::Single if self.ladder.quick => QUICK_TIES,
            Shape::Single => usize::MAX,
            _ => 0,
        }
    }

    /// What a tie-break at `size` costs the estimate: [`TIE_COST`] first
    /// passes of its cell, for as many runs as that pass had (a quick
    /// calibration's small cells: seven in the pass, three in the
    /// tie-break).
    fn tie_cost(&self, size: usize) -> f64 {
        let runs = self.ladder.runs as f64 / self.ladder.runs_for(self.shape, size) as f64;
        TIE_COST * runs * cost(self.shape, size)
    }

    /// Where a re-checked cell of up to [`ties_upto`](Row::ties_upto) cannot
    /// tell its strong candidates apart by the whole use ([`ties`]),
    /// measures them alone (no read after each call) and lets that decide
    /// ([`break_tie`]).
    fn break_ties(&mut self, cells: &mut [Cell], passes: &Passes) -> Result<(), Error> {
        let upto = self.ties_upto();
        let tied: Vec<(usize, Vec<Strategy>)> = cells
            .iter()
            .enumerate()
            .filter(|(_, c)| c.size <= upto)
            .filter_map(|(i, c)| {
                let again = passes.again.iter().find(|m| m.size == c.size)?;
                let third = passes.third.iter().find(|m| m.size == c.size);
                let t = ties(c, again, third);
                (!t.is_empty()).then_some((i, t))
            })
            .collect();
        let c: f64 = tied
            .iter()
            .map(|(i, _)| self.tie_cost(cells[*i].size))
            .sum();
        (self.step)(Tick::More(tied.len(), c));
        for (i, strategies) in tied {
            let size = cells[i].size;
            let cost = self.tie_cost(size);
            let label = format!(
                "tie-break {} {} {}",
                self.op,
                self.shape.name(),
                bulkmem_machine::units::format_bytes(size)
            );
            (self.step)(Tick::Cell(label.clone(), cost));
            // Tie-breaks run at least MIN_RUN, as `bench` times its hot
            // cells: two kernels a few percent apart alone is what 1-2 ms
            // runs measure worst (docs/measurements.md, "How to measure"). A
            // hot 64 KiB clear from seven 1 ms runs put `avx2` more than
            // KEEP ahead of `libc` and `rep stosb` in 4 of 8 measurements,
            // from 10 ms runs in 8 of 8 (1.06-1.21x; Zen 3 VM), and a
            // quick tune from 1 ms runs kept `libc`, at 0.85x of `avx2`
            // in `bench clear`. Runs that long, each kernel scored
            // against the choice round by round (`measure::alone`), need
            // not be as many as the small cells' 1-2 ms ones: a quick
            // calibration's tie-breaks take its three. Ten `bench`
            // measurements each of a hot 64 KiB and 2 MiB clear and a
            // 4 KiB copy, so scored, put `avx2` more than KEEP ahead of
            // the rest 7, 8 and 10 times from three runs, 9, 7 and 10
            // times from seven (by lower quartiles 8, 5, 9 and 9, 8, 8;
            // Zen 3 VM); a quick tune's 20 tie-breaks took 4 s of its 20
            // with seven.
            let runs = self.ladder.runs;
            let alone = measure::alone(self.op, size, &strategies, runs, cells[i].choice)?;
            (self.step)(Tick::Measured(label, alone.gbps.clone()));
            break_tie(&mut cells[i], &alone);
        }
        Ok(())
    }

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
                bulkmem_machine::units::format_bytes(size)
            );
            (self.step)(Tick::Cell(label.clone(), weight * cost(shape, size)));
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
            (self.step)(Tick::Measured(label, m.gbps.clone()));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary;

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

    #[test]
    fn a_late_cell_is_compared_with_the_cells_next_in_size() {
        let cell = |size: usize| Cell {
            op: Op::Clear,
            shape: Shape::Single,
            size,
            winner: Strategy::Avx2,
            runner_up: None,
            margin: 1.0,
            choice: Strategy::Avx2,
            gbps: vec![(Strategy::Avx2, 1.0)],
        };
        let settled = [cell(256), cell(1024), cell(4096)];
        let late = [cell(512), cell(2048)];
        let sizes = |n: (Option<&Cell>, Option<&Cell>)| (n.0.map(|c| c.size), n.1.map(|c| c.size));
        // Within the late list alone, 512's only neighbour is 2048.
        assert_eq!(sizes(neighbours(512, &late, &[])), (None, Some(2048)));
        assert_eq!(
            sizes(neighbours(512, &late, &settled)),
            (Some(256), Some(1024))
        );
        assert_eq!(
            sizes(neighbours(2048, &late, &settled)),
            (Some(1024), Some(4096))
        );
        assert_eq!(sizes(neighbours(4096, &settled, &[])), (Some(1024), None));
    }

    #[test]
    fn a_tiny_measured_profile_is_complete_and_follows_its_cells() {
        for quick in [true, false] {
            tiny_profile(quick);
        }
    }

    fn tiny_profile(quick: bool) {
        let l = Ladder {
            singles: vec![4096, 65536],
            small: vec![1 << 20],
            large: vec![4 << 20],
            runs: 1,
            small_runs: 1,
            quick,
            cache: 1 << 20,
        };
        let (mut steps, mut of, mut tie_breaks, mut disputes) = (0, 0, 0, 0);
        let mut traced: Vec<String> = Vec::new();
        let p = measure_ladder(&l, &mut |s| {
            assert!(s.done <= s.of);
            if let Some(m) = s.measured {
                // Each cell reported once measured, under the label it
                // started with, with a figure for each strategy it ran.
                assert!(!m.is_empty() && m.iter().all(|g| g.1 > 0.0), "{m:?}");
                traced.push(s.label.to_string());
                return;
            }
            steps += 1;
            of = s.of;
            tie_breaks += usize::from(s.label.starts_with("tie-break copy single"));
            tie_breaks += usize::from(s.label.starts_with("tie-break clear single"));
            disputes += usize::from(s.label.starts_with("decide "));
        })
        .unwrap();
        // Each unit once, and the end; crossovers found between 4 KiB and
        // 64 KiB, before or after the re-check, add a cell (and its
        // re-check) to the ladder's units, each tie broken (single calls
        // only) one, and each re-check that a third pass settles one.
        assert_eq!(steps, of + 1);
        let bisected = p.cells.len() - 2 * 4;
        assert_eq!(
            of,
            l.units() + 2 * bisected + tie_breaks + disputes,
            "{bisected} bisected, {tie_breaks} ties, {disputes} disputes"
        );
        assert!(disputes <= p.cells.len(), "one third pass a cell at most");
        assert_eq!(traced.len(), of, "every unit measured and reported");
        for c in &p.cells {
            let label = format!(
                "{} {} {}",
                c.op,
                c.shape.name(),
                bulkmem_machine::units::format_bytes(c.size)
            );
            assert_eq!(traced.iter().filter(|t| **t == label).count(), 1, "{label}");
            let again = format!("re-check {label}");
            assert_eq!(traced.iter().filter(|t| **t == again).count(), 1, "{again}");
        }
        // Per single row: 16 KiB, then 8 KiB and 32 KiB at most.
        assert!(bisected <= 6, "{bisected} bisected");
        let singles = p.cells.iter().filter(|c| c.shape == Shape::Single).count();
        assert!(tie_breaks <= singles, "single-call cells only, each once");
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
        assert!(back.check_runs_on(&bulkmem::cpu::info().features).is_ok());
        assert_eq!(summary(&p).len(), 6);
    }
}
