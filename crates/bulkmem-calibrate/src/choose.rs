//! From measurements (each strategy's lower quartile over its runs) to
//! choices: a profile departs from the built-in rules only
//! where the departure is clear and reproduces, because on a shared
//! machine near-ties flip from one measurement to the next (seen on a
//! 2-CPU Zen 3 VM: every strategy at 24 GB/s from 512K to 4M in one run,
//! `portable` ahead by 7%; 20% behind in the next):
//!
//! 1. Each strategy is scored by its fraction of the best, smoothed over
//!    the cell and its ladder neighbours ([`scores`]).
//! 2. The rules' choice stays while it scores within [`KEEP`] of the top;
//!    else the previous size's choice, likewise (fewer bands); else the top.
//! 3. A re-check measures the strong candidates again (the choice, the
//!    rules' choice, the first pass's two fastest and `per-page`; where a
//!    tie-break can follow, everything within [`NEAR_TOP`]), and the
//!    cell keeps what did well in *both* passes: each candidate's score is
//!    the lower of its two fractions of the best, and the rules' choice,
//!    else the first pass's choice, stays while it scores within [`KEEP`]
//!    of the top. One noisy pass can neither keep a loser (an `avx512`
//!    clear kept by its neighbours at 64 KiB measured 0.90x `rep-stosb` in
//!    both passes on an Emerald Rapids VM) nor demote a winner (a `libc`
//!    clear 1.35x `per-page` at 16 MiB in the first pass, 2% behind in the
//!    re-check, became `per-page`). Where the re-check still overturns the
//!    first pass's choice, streaming for cache-allocating or back, a third
//!    pass of the two choices decides ([`settle_dispute`]): each scores
//!    what it reached in two of the three. A choice slower than `per-page` over
//!    the passes (geometric mean) records `per-page`: a profile never
//!    makes a size slower than the kernel's own loop.
//! 4. Single-call candidates that tie over both passes ([`ties`]: within
//!    [`KEEP`], or [`NEAR_TOP`] where both leave the destination in the
//!    cache; a quick calibration's cells up to
//!    [`QUICK_TIES`](super::QUICK_TIES) only) are measured alone, with
//!    nothing reading the destination, and the fastest there takes the
//!    cell ([`break_tie`]; by more than KEEP only where it streams and the
//!    choice does not, or the other way round).

use bulkmem::auto::{Cell, Machine, Policy, Request, Shape};
use bulkmem::{Hint, Op, Strategy};

/// Keep the rules' (or else the previous size's) choice while it scores at
/// least this fraction of the top.
pub const KEEP: f64 = 0.97;

/// What the built-in rules pick for a cell (no profile, no overrides).
pub type Prior<'a> = &'a dyn Fn(Op, Shape, usize) -> Strategy;

/// One cell's figures (lower quartiles), GB/s per strategy in
/// measurement order.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// The operation measured.
    pub op: Op,
    /// The request shape measured.
    pub shape: Shape,
    /// A single call's length, or a batch's total.
    pub size: usize,
    /// Each strategy's score: the lower quartile of its GB/s over the runs
    /// ([`toolkit::lower_quartile`](super::toolkit::lower_quartile)).
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
            let Some((top, top_score)) = score.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))
            else {
                continue;
            };
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

/// Where a tie can follow the re-check ([`ties`]), it also measures every
/// strategy the first pass put within this fraction of its fastest: one
/// pass of the whole use does not rank kernels that are level, and a
/// strategy left out of the re-check cannot be tied. On the Zen 3 VM a
/// near-top strategy's fraction of the best moved by 0.91x or less
/// between the two passes in a tenth of 269 re-checks, and a hot 1 MiB
/// clear left `avx2` out (0.957x the first pass's best, third) to keep
/// `libc`, which measured 0.75-0.88x of `avx2` alone in other tunes'
/// tie-breaks.
pub const NEAR_TOP: f64 = 0.93;

/// The strategies a re-check measures for `c`: `per-page`, the choice,
/// the rules' choice and the first pass's two fastest, in that order,
/// without repeats; where `tie_follows` (a tie-break may use the
/// re-check), then every other strategy within [`NEAR_TOP`] of the
/// first pass's fastest, fastest first.
pub fn candidates(c: &Cell, rules: Strategy, tie_follows: bool) -> Vec<Strategy> {
    let mut ranked = c.gbps.clone();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let top = ranked.first().map_or(0.0, |g| g.1);
    let near = ranked.iter().filter(|g| g.1 >= NEAR_TOP * top).count();
    let take = if tie_follows { near.max(2) } else { 2 };
    let mut v = Vec::with_capacity(3 + take);
    for s in [Strategy::PerPage, c.choice, rules]
        .into_iter()
        .chain(ranked.iter().take(take).map(|g| g.0))
    {
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v
}

/// The strategies the first pass put within [`NEAR_TOP`] of the top in
/// both `below` and `above`, the cells either side of one in its row. A
/// re-check of a small single call (up to
/// [`DISPUTES_UPTO`](super::DISPUTES_UPTO)) measures them too: a
/// kernel's speed does not fall away at one size and come back at the
/// next, but one run of a pass can (a stall too short to be told from
/// the kernel, [`STALLED`](super::toolkit::STALLED), or a run in two
/// pieces), and the first round's race then drops the kernel for the
/// rest of the pass. Two full tunes of ten put `avx2` at 0.39x and
/// 0.48x of the best once read, in a hot 2 MiB and a 64 KiB clear, while
/// it led both neighbours; left out of the re-check, it could not win the
/// cell back, and `rep stos*` ran there at 0.87-0.89x of `avx2` in
/// `bench clear` (Zen 3 VM). Measured again near the top, it makes the
/// passes disagree ([`disputed`]), and a third pass decides.
pub fn steady_near_top(below: &Cell, above: &Cell) -> Vec<Strategy> {
    let near = |c: &Cell, s: Strategy| {
        let top = c.gbps.iter().map(|g| g.1).fold(0.0, f64::max);
        get(&c.gbps, s).is_some_and(|x| x >= NEAR_TOP * top)
    };
    below
        .gbps
        .iter()
        .map(|g| g.0)
        .filter(|&s| near(below, s) && near(above, s))
        .collect()
}

/// What a third pass measures for cell `c` after its re-check (`again`;
/// `first`: the first pass's choice, `c.choice` the re-check's), `per-page`
/// first, or nothing where the passes agree. Every size disputes a swap
/// between a streaming and a cache-allocating choice. Where `every` (small
/// single calls, whose passes are cheap and dip), so does any
/// disagreement: the choice changed, the re-check's fastest is another,
/// or a kernel near the re-check's top ([`NEAR_TOP`]) was under
/// [`TIE_FLOOR`] of the best in the first pass, where under the lower of
/// two that one dip would keep it out of the cell and of its ties.
pub fn disputed(c: &Cell, first: Strategy, again: &Measured, every: bool) -> Vec<Strategy> {
    let kinds = first.is_non_temporal() != c.choice.is_non_temporal();
    let mut s = vec![Strategy::PerPage, first, c.choice];
    if every {
        let best = |v: &[(Strategy, f64)]| v.iter().map(|x| x.1).fold(0.0, f64::max);
        let (before, now) = (best(&c.gbps), best(&again.gbps));
        let fastest = again.gbps.iter().max_by(|a, b| a.1.total_cmp(&b.1));
        s.extend(fastest.map(|g| g.0));
        s.extend(
            again
                .gbps
                .iter()
                .filter(|g| g.1 >= NEAR_TOP * now)
                .filter(|g| get(&c.gbps, g.0).is_some_and(|f| f < TIE_FLOOR * before))
                .map(|g| g.0),
        );
    }
    let mut v: Vec<Strategy> = Vec::with_capacity(s.len());
    for x in s {
        if !v.contains(&x) {
            v.push(x);
        }
    }
    let agree = v.iter().all(|&x| x == Strategy::PerPage || x == c.choice);
    if !kinds && (agree || !every) {
        v.clear();
    }
    v
}

/// Applies a re-check: `again` holds fresh figures of each cell's
/// [`candidates`]. A candidate scores the lower of its fractions of the
/// best in the two passes; the rules' choice, else the first pass's
/// choice, stays while it scores within [`KEEP`] of the top, else the top
/// takes the cell; then a choice slower than `per-page` over both passes
/// becomes `per-page`. Returns how many cells changed.
pub fn recheck(cells: &mut [Cell], again: &[Measured], prior: Prior) -> usize {
    settle(cells, &[again], prior)
}

/// As [`recheck`], for cells whose re-check overturned the first pass
/// (their choice restored first), with a third pass (`third`: the two
/// choices in dispute and `per-page`) to decide: a candidate scores the fraction of the best it
/// reached in two of the three passes (their median), so one noisy pass
/// can no more overturn the other two than it could keep a loser.
/// Cells `third` does not hold are left as they are.
pub fn settle_dispute(
    cells: &mut [Cell],
    again: &[Measured],
    third: &[Measured],
    prior: Prior,
) -> usize {
    settle(cells, &[again, third], prior)
}

fn settle(cells: &mut [Cell], passes: &[&[Measured]], prior: Prior) -> usize {
    let mut changed = 0;
    for c in cells.iter_mut() {
        let found: Option<Vec<&Measured>> = passes
            .iter()
            .map(|p| {
                p.iter()
                    .find(|m| m.op == c.op && m.shape == c.shape && m.size == c.size)
            })
            .collect();
        let Some(extra) = found else {
            continue;
        };
        let Some(scored) = majority(c, &extra) else {
            continue;
        };
        let Some(&(top, top_score)) = scored.iter().max_by(|a, b| a.1.total_cmp(&b.1)) else {
            continue;
        };
        let score = |s| scored.iter().find(|x| x.0 == s).map(|x| x.1);
        let before = c.choice;
        c.choice = [prior(c.op, c.shape, c.size), c.choice]
            .into_iter()
            .find(|&s| score(s).is_some_and(|x| x >= KEEP * top_score))
            .unwrap_or(top);
        if slower_than_per_page(c, &extra, c.choice) {
            c.choice = Strategy::PerPage;
        }
        changed += usize::from(c.choice != before);
    }
    changed
}

fn get(v: &[(Strategy, f64)], s: Strategy) -> Option<f64> {
    v.iter().find(|x| x.0 == s).map(|x| x.1)
}

/// Each strategy the last of `extra` measured, scored by the fraction of
/// the best it reached in more than half of the passes (the first,
/// `c.gbps`, then `extra`): the lower of two, the middle of three.
fn majority(c: &Cell, extra: &[&Measured]) -> Option<Vec<(Strategy, f64)>> {
    Some(
        fractions(c, extra)?
            .into_iter()
            .map(|(s, mut f)| {
                f.sort_by(|a, b| b.total_cmp(a));
                (s, f[f.len() / 2])
            })
            .collect(),
    )
}

/// Each strategy the last of `extra` measured, with its fraction of the
/// best in each pass (the first, `c.gbps`, then `extra`), where every
/// pass measured it.
fn fractions(c: &Cell, extra: &[&Measured]) -> Option<Vec<(Strategy, Vec<f64>)>> {
    let best = |v: &[(Strategy, f64)]| v.iter().map(|x| x.1).fold(0.0, f64::max);
    let passes: Vec<&[(Strategy, f64)]> = std::iter::once(&c.gbps[..])
        .chain(extra.iter().map(|m| &m.gbps[..]))
        .collect();
    let bests: Vec<f64> = passes.iter().map(|p| best(p)).collect();
    if bests.iter().any(|&b| b <= 0.0) {
        return None;
    }
    let of = |s| {
        passes
            .iter()
            .zip(&bests)
            .map(|(p, b)| Some(get(p, s)? / b))
            .collect::<Option<Vec<f64>>>()
    };
    Some(
        extra
            .last()?
            .gbps
            .iter()
            .filter_map(|&(s, _)| Some((s, of(s)?)))
            .collect(),
    )
}

/// Whether `s` is slower than `per-page` over all the passes (the
/// geometric mean of its ratios). Every pass counts alike: one slow
/// re-check of a clear winner is noise, a loss in both is not.
fn slower_than_per_page(c: &Cell, extra: &[&Measured], s: Strategy) -> bool {
    let vs_base = |v: &[(Strategy, f64)]| Some(get(v, s)? / get(v, Strategy::PerPage)?);
    let ratios: Option<Vec<f64>> = std::iter::once(&c.gbps[..])
        .chain(extra.iter().map(|m| &m.gbps[..]))
        .map(vs_base)
        .collect();
    ratios.is_some_and(|r| r.iter().product::<f64>() < 1.0)
}

/// A re-checked candidate within [`KEEP`] of the choice over both passes
/// (the geometric mean of its ratios to it) is tied with it unless some
/// pass put it further behind the best than this. The lower-of-two alone
/// missed ties whose noise exceeds KEEP: on the Zen 3 VM a hot 64 KiB
/// clear, `avx2` 1.055x `rep stosq` once read in the first pass and
/// behind in the re-check, kept `rep stosq`, which ran at 0.73-0.87x of
/// `avx2` alone while the two read back alike (0.94-1.03x over three
/// 11-run benches); a quick tune's 4 KiB copy kept `rep movsb` (0.94x
/// the best twice) over `avx2` (0.86x, then the best), and ran at
/// 0.78-0.85x of `avx2` alone.
pub const TIE_FLOOR: f64 = 0.85;

/// Whether `s` leaves a destination of `size` bytes in the cache: not a
/// streaming kernel, and for `libc` not past glibc's non-temporal
/// threshold on this machine (what [`Machine::libc_twin`](bulkmem::auto::Machine::libc_twin)
/// says it runs there).
fn allocates(op: Op, size: usize, s: Strategy) -> bool {
    let runs = match s {
        Strategy::Libc => bulkmem::auto::Machine::this().libc_twin(op, size),
        s => s,
    };
    !runs.is_non_temporal()
}

/// The strategies a re-checked single-call cell cannot tell apart by its
/// whole use, not slower than `per-page`, the choice first: those within
/// [`KEEP`] of the top over the passes (each scored by the fraction of
/// the best it reached in most of the passes that measured it: the lower
/// of two, the middle of three where a `third` pass settled a dispute),
/// and those within KEEP of the choice on average over the passes if
/// that score is not below [`TIE_FLOOR`]. A third pass outvotes one dip:
/// a full tune's first pass put a hot 2 MiB clear by `avx2` at 0.65x of
/// `rep stosq` once read, and `rep stosq` then ran at 0.88-0.91x of
/// `avx2` in `bench clear` (Zen 3 VM). Where the choice and a candidate
/// both leave the destination in the cache (`allocates`), the read after
/// the call costs both the same, so their whole uses differ only by the
/// calls, which the call alone measures undiluted: there the average
/// need only reach
/// [`NEAR_TOP`], the pass-to-pass noise of a near-top kernel. (A quick
/// tune's 4 KiB copy kept `rep movsb`, whose whole use averaged 0.936x
/// of `avx2`'s over the two passes, and ran at 0.67-0.79x of `avx2` alone,
/// which also read back 1.2x faster in `bench copy --regime consume`;
/// Zen 3 VM.) Streaming against allocating keeps KEEP: there the read
/// after differs, and a few percent once read back is what a server
/// replying with the copy pays. Empty unless the choice is one of them
/// and has company.
pub fn ties(c: &Cell, again: &Measured, third: Option<&Measured>) -> Vec<Strategy> {
    let passes: Vec<&[(Strategy, f64)]> = [&c.gbps[..], &again.gbps[..]]
        .into_iter()
        .chain(third.map(|t| &t.gbps[..]))
        .collect();
    let bests: Vec<f64> = passes
        .iter()
        .map(|p| p.iter().map(|x| x.1).fold(0.0, f64::max))
        .collect();
    if bests.iter().any(|&b| b <= 0.0) {
        return Vec::new();
    }
    // Each re-checked candidate's fraction of the best in each pass that
    // measured it (a third pass measures the disputed ones only).
    let each: Vec<(Strategy, Vec<Option<f64>>)> = again
        .gbps
        .iter()
        .map(|&(s, _)| {
            let f = passes.iter().zip(&bests).map(|(p, b)| Some(get(p, s)? / b));
            (s, f.collect::<Vec<_>>())
        })
        .filter(|(_, f)| f[0].is_some())
        .collect();
    // What it reached in most of those passes: the lower of two, the
    // middle of three (as `settle_dispute` scores).
    let most = |f: &[Option<f64>]| {
        let mut v: Vec<f64> = f.iter().flatten().copied().collect();
        v.sort_by(|a, b| b.total_cmp(a));
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let top = each.iter().map(|x| most(&x.1)).fold(0.0, f64::max);
    let Some((_, mine)) = each.iter().find(|x| x.0 == c.choice) else {
        return Vec::new();
    };
    let alike = |s: Strategy| allocates(c.op, c.size, s) && allocates(c.op, c.size, c.choice);
    let near_choice = |s: Strategy, f: &[Option<f64>]| {
        let logs: Vec<f64> = f
            .iter()
            .zip(mine)
            .filter_map(|(x, m)| Some((x.as_ref()? / m.as_ref()?).ln()))
            .collect();
        let mean = (logs.iter().sum::<f64>() / logs.len().max(1) as f64).exp();
        let band = if alike(s) { NEAR_TOP } else { KEEP };
        mean >= band && most(f) >= TIE_FLOOR
    };
    let tied = |s: Strategy| {
        let measured: Vec<&Measured> = std::iter::once(again)
            .chain(third.filter(|t| get(&t.gbps, s).is_some()))
            .collect();
        each.iter()
            .find(|x| x.0 == s)
            .is_some_and(|(_, f)| most(f) >= KEEP * top || near_choice(s, f))
            && !slower_than_per_page(c, &measured, s)
    };
    if !tied(c.choice) {
        return Vec::new();
    }
    let mut v = vec![c.choice];
    v.extend(
        each.iter()
            .map(|x| x.0)
            .filter(|&s| s != c.choice && tied(s)),
    );
    if v.len() < 2 {
        v.clear();
    }
    v
}

/// Breaks a tie ([`ties`]) by the copy or clear alone (`alone`: the tied
/// strategies measured hot with nothing reading the destination, as GB/s
/// or as each one's ratio to the choice): where
/// the whole use cannot separate them, the call alone is what is left to
/// gain, for callers that read the destination later or not at all (at
/// 4 KiB `avx2` and `avx512` measured alike once read, 1.25-1.4x apart
/// alone on an Emerald Rapids VM). Where the fastest alone leaves the
/// destination as the choice does (both in the cache, or both on its way
/// to DRAM), it takes the cell by any margin: the call is all that tells
/// them apart, and between equals either is right. Holding the choice
/// unless beaten by [`KEEP`] kept `rep stos*` for hot 2 MiB clears that
/// a tie-break put 1.02x behind `avx2`, where six tie-breaks measured
/// 1.02-1.10x and `bench clear` 1.06-1.10x, so the cell ran at 0.92x
/// (Zen 3 VM). A streaming kernel and a cache-allocating one still swap
/// only by more than KEEP: the whole use, which called them level, is
/// the caller's cost, and the call alone favours the streaming one.
/// Returns whether the choice changed.
pub fn break_tie(c: &mut Cell, alone: &Measured) -> bool {
    let Some(mine) = get(&alone.gbps, c.choice) else {
        return false;
    };
    let Some(&(fastest, rate)) = alone.gbps.iter().max_by(|a, b| a.1.total_cmp(&b.1)) else {
        return false;
    };
    let alike = |s| allocates(alone.op, alone.size, s);
    let margin = if alike(fastest) == alike(c.choice) {
        1.0
    } else {
        KEEP
    };
    if fastest != c.choice && rate * margin > mine {
        c.choice = fastest;
        return true;
    }
    false
}

/// The built-in rules' choice on this machine for a cell (no profile, no
/// overrides): what a profile departs from only where it measured better.
pub fn rules_choice(op: Op, shape: Shape, size: usize) -> Strategy {
    let req = match shape {
        Shape::Single => Request::single(op, size, Hint::Auto),
        _ => Request::batch(op, size, (size / shape.extent()).max(2), Hint::Auto),
    };
    Policy::rules(Machine::this()).decide(&req).strategy
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
                // The measurement that chose per-page at 64K on a Zen 3 VM.
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
    fn a_choice_slower_than_per_page_over_both_passes_becomes_per_page() {
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
                // 1.04x, then 0.93x: slower over both.
                m(64, &[(PerPage, 5.4), (Avx2, 5.0)]),
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
    fn a_third_pass_settles_a_re_check_that_overturned_the_first() {
        /// Rules that stream: avx2-nt everywhere.
        const NT: Prior = &|_, _, _| Avx2Nt;
        let first = [m(
            32 << 20,
            &[(PerPage, 8.0), (RepMovsq, 13.9), (Avx2Nt, 14.0)],
        )];
        // The re-check alone puts rep movsq 1.11x ahead: it takes the cell.
        let again = [m(
            32 << 20,
            &[(PerPage, 8.0), (RepMovsq, 14.0), (Avx2Nt, 12.6)],
        )];
        let mut cells = choose(&first, NT);
        assert_eq!(cells[0].choice, Avx2Nt);
        assert_eq!(recheck(&mut cells, &again, NT), 1);
        assert_eq!(cells[0].choice, RepMovsq);
        // A third pass like the first: avx2-nt won two of three, and stays
        // (the first pass's choice is restored before it is applied).
        let mut cells = choose(&first, NT);
        let third = [m(
            32 << 20,
            &[(PerPage, 8.0), (RepMovsq, 12.3), (Avx2Nt, 14.0)],
        )];
        assert_eq!(settle_dispute(&mut cells, &again, &third, NT), 0);
        assert_eq!(cells[0].choice, Avx2Nt);
        // A third pass like the re-check confirms it: rep movsq.
        let third = [m(
            32 << 20,
            &[(PerPage, 8.0), (RepMovsq, 14.1), (Avx2Nt, 12.5)],
        )];
        assert_eq!(settle_dispute(&mut cells, &again, &third, NT), 1);
        assert_eq!(cells[0].choice, RepMovsq);
        // A cell the third pass did not measure is left alone.
        let mut cells = choose(&first, NT);
        assert_eq!(settle_dispute(&mut cells, &again, &[], NT), 0);
        assert_eq!(cells[0].choice, Avx2Nt);
    }

    fn clear(size: usize, gbps: &[(Strategy, f64)]) -> Measured {
        Measured {
            op: Op::Clear,
            ..m(size, gbps)
        }
    }

    #[test]
    fn one_slow_recheck_does_not_demote_a_clear_winner_to_per_page() {
        // The 16 MiB clear cell of a tune on an Emerald Rapids VM.
        let first = [(PerPage, 16.68), (RepStosb, 21.07), (Libc, 22.45)];
        let mut cells = choose(&[clear(16 << 20, &first)], NONE);
        assert_eq!(cells[0].choice, Libc);
        let again = [clear(
            16 << 20,
            &[(PerPage, 20.0), (RepStosb, 20.5), (Libc, 19.6)],
        )];
        recheck(&mut cells, &again, NONE);
        assert_eq!(cells[0].choice, Libc, "{:?}", cells[0]);
    }

    #[test]
    fn a_choice_that_trails_in_both_passes_gives_way() {
        // Neighbours kept avx512 at 64 KiB; both passes put it 10% behind.
        let kept = [(PerPage, 42.0), (RepStosb, 45.0), (Avx512, 40.3)];
        let near = [(PerPage, 40.0), (RepStosb, 42.0), (Avx512, 46.0)];
        const AVX512: Prior = &|_, _, _| Avx512;
        let mut cells = choose(
            &[
                clear(32 << 10, &near),
                clear(64 << 10, &kept),
                clear(128 << 10, &near),
            ],
            AVX512,
        );
        assert_eq!(cells[1].choice, Avx512, "smoothing keeps the rules' choice");
        assert_eq!(
            candidates(&cells[1], Avx512, false),
            vec![PerPage, Avx512, RepStosb],
            "the first pass's two fastest are re-checked"
        );
        let again = [clear(
            64 << 10,
            &[(PerPage, 43.0), (RepStosb, 46.0), (Avx512, 41.4)],
        )];
        assert_eq!(recheck(&mut cells[1..2], &again, AVX512), 1);
        assert_eq!(cells[1].choice, RepStosb);
        // A win in the re-check does not make up for 0.90x in the first
        // pass: a candidate scores by its worse pass.
        let mut cells = choose(&[clear(64 << 10, &kept)], AVX512);
        cells[0].choice = Avx512;
        let again = [clear(
            64 << 10,
            &[(PerPage, 43.0), (RepStosb, 44.0), (Avx512, 46.0)],
        )];
        recheck(&mut cells, &again, AVX512);
        assert_eq!(cells[0].choice, RepStosb);
    }

    #[test]
    fn ties_of_the_whole_use_are_broken_by_the_call_alone() {
        // Consumed, avx2 and avx512 are within noise in both passes;
        // libc is 15% behind in the re-check (0.91x on average, under
        // NEAR_TOP); per-page is far behind.
        let first = [(PerPage, 20.0), (Libc, 29.0), (Avx2, 30.0), (Avx512, 29.6)];
        let mut cells = choose(&[m(4096, &first)], NONE);
        assert_eq!(cells[0].choice, Avx2);
        let again = m(
            4096,
            &[(PerPage, 21.0), (Libc, 25.5), (Avx2, 29.5), (Avx512, 30.0)],
        );
        recheck(&mut cells, std::slice::from_ref(&again), NONE);
        assert_eq!(cells[0].choice, Avx2);
        let t = ties(&cells[0], &again, None);
        assert_eq!(t, vec![Avx2, Avx512], "the choice first, libc out");
        // Alone, avx512 is 1.3x: it takes the cell.
        let mut c = cells[0].clone();
        assert!(break_tie(&mut c, &m(4096, &[(Avx2, 50.0), (Avx512, 65.0)])));
        assert_eq!(c.choice, Avx512);
        // Both leave the destination in the cache: 2% ahead alone is
        // enough (either is right between equals).
        let mut c = cells[0].clone();
        assert!(break_tie(&mut c, &m(4096, &[(Avx2, 50.0), (Avx512, 51.0)])));
        assert_eq!(c.choice, Avx512);
        let mut c = cells[0].clone();
        assert!(!break_tie(
            &mut c,
            &m(4096, &[(Avx2, 50.0), (Avx512, 49.0)])
        ));
        assert_eq!(c.choice, Avx2);
    }

    #[test]
    fn kernels_near_the_top_on_both_sides_are_steady() {
        // A full tune's hot 1, 2 and 4 MiB clears once read (Zen 3 VM):
        // avx2 led both neighbours, and one dip put it at 0.39x between.
        let cells = choose(
            &[
                m(
                    1 << 20,
                    &[
                        (PerPage, 21.2),
                        (RepStosb, 24.1),
                        (Avx2, 24.2),
                        (Avx2Nt, 9.3),
                    ],
                ),
                m(
                    2 << 20,
                    &[
                        (PerPage, 21.7),
                        (RepStosb, 25.3),
                        (Avx2, 9.7),
                        (Avx2Nt, 10.2),
                    ],
                ),
                m(
                    4 << 20,
                    &[
                        (PerPage, 22.9),
                        (RepStosb, 26.5),
                        (Avx2, 26.0),
                        (Avx2Nt, 9.1),
                    ],
                ),
            ],
            NONE,
        );
        assert_eq!(steady_near_top(&cells[0], &cells[2]), vec![RepStosb, Avx2]);
        let c = &cells[1];
        let picked = candidates(c, RepStosq, true);
        assert!(
            !picked.contains(&Avx2),
            "the first pass alone leaves it out"
        );
        // Near the top on one side only is not steady.
        assert_eq!(steady_near_top(&cells[0], &cells[1]), vec![RepStosb]);
    }

    #[test]
    fn a_streaming_kernel_displaces_a_cached_choice_alone_only_by_more_than_keep() {
        let cell = |choice| Cell {
            choice,
            ..choose(&[m(4096, &[(Avx2, 30.0), (Avx2Nt, 29.5)])], NONE)[0].clone()
        };
        for (choice, other) in [(Avx2, Avx2Nt), (Avx2Nt, Avx2)] {
            let mut c = cell(choice);
            assert!(
                !break_tie(&mut c, &m(4096, &[(choice, 50.0), (other, 51.0)])),
                "{other} 2% ahead of {choice}"
            );
            assert!(break_tie(
                &mut c,
                &m(4096, &[(choice, 50.0), (other, 52.0)])
            ));
            assert_eq!(c.choice, other);
        }
        // Two streaming kernels are equals in what they leave behind.
        let mut c = cell(Avx2Nt);
        assert!(break_tie(
            &mut c,
            &m(4096, &[(Avx2Nt, 50.0), (Avx512Nt, 50.5)])
        ));
        assert_eq!(c.choice, Avx512Nt);
    }

    #[test]
    fn cache_allocating_kernels_tie_within_near_top_streaming_ones_within_keep() {
        // A quick tune's 4 KiB copy (Zen 3 VM): `rep movsb` on top in both
        // passes, `avx2` and `avx2-nt` each 0.933x of it on average, never
        // under 0.90x.
        let first = [
            (PerPage, 20.0),
            (RepMovsb, 30.0),
            (Avx2, 29.0),
            (Avx2Nt, 29.0),
        ];
        let mut cells = choose(&[m(4096, &first)], NONE);
        assert_eq!(cells[0].choice, RepMovsb);
        let again = m(
            4096,
            &[
                (PerPage, 20.0),
                (RepMovsb, 30.0),
                (Avx2, 27.0),
                (Avx2Nt, 27.0),
            ],
        );
        recheck(&mut cells, std::slice::from_ref(&again), NONE);
        assert_eq!(cells[0].choice, RepMovsb);
        assert_eq!(
            ties(&cells[0], &again, None),
            vec![RepMovsb, Avx2],
            "both allocate: the call alone decides; streaming stays out"
        );
        // Below NEAR_TOP on average, allocating kernels do not tie either.
        let far = m(
            4096,
            &[
                (PerPage, 20.0),
                (RepMovsb, 30.0),
                (Avx2, 26.0),
                (Avx2Nt, 26.0),
            ],
        );
        assert!(ties(&cells[0], &far, None).is_empty());
    }

    #[test]
    fn small_cells_dispute_any_disagreement_large_ones_only_streaming_swaps() {
        // A full tune's hot 2 MiB clear (Zen 3 VM): `avx2` at 0.64x of
        // `libc` in the first pass, 0.99x of it in the re-check.
        let first = [
            (PerPage, 21.66),
            (RepStosq, 24.89),
            (Libc, 26.25),
            (Avx2, 16.87),
        ];
        let mut c = choose(&[clear(2 << 20, &first)], NONE)[0].clone();
        assert_eq!(c.choice, Libc);
        let again = clear(2 << 20, &[(PerPage, 21.0), (Libc, 26.0), (Avx2, 25.8)]);
        assert_eq!(disputed(&c, Libc, &again, true), vec![PerPage, Libc, Avx2]);
        assert!(disputed(&c, Libc, &again, false).is_empty(), "large: agree");
        // Avx2 trailing in both: the passes agree.
        let behind = clear(2 << 20, &[(PerPage, 21.0), (Libc, 26.0), (Avx2, 20.0)]);
        assert!(disputed(&c, Libc, &behind, true).is_empty());
        // A swap to streaming is disputed at any size; a temporal swap
        // only where small.
        c.choice = Avx2Nt;
        assert_eq!(
            disputed(&c, Libc, &behind, false),
            vec![PerPage, Libc, Avx2Nt]
        );
        c.choice = RepStosq;
        assert!(disputed(&c, Libc, &behind, false).is_empty());
        assert_eq!(
            disputed(&c, Libc, &behind, true),
            vec![PerPage, Libc, RepStosq]
        );
    }

    #[test]
    fn a_third_pass_outvotes_one_dip_in_a_tie() {
        // A full tune's hot 2 MiB clear (Zen 3 VM): `avx2` at 0.65x of
        // `rep stosq` in the first pass, level or ahead after.
        let c = Cell {
            op: Op::Clear,
            shape: Shape::Single,
            size: 2 << 20,
            winner: RepStosq,
            runner_up: Some(RepStosb),
            margin: 25.73 / 24.38,
            choice: RepStosq,
            gbps: vec![
                (PerPage, 20.37),
                (RepStosq, 25.73),
                (RepStosb, 24.38),
                (Avx2, 16.76),
            ],
        };
        let pass = |g: &[(Strategy, f64)]| Measured {
            op: Op::Clear,
            ..m(2 << 20, g)
        };
        let again = pass(&[
            (PerPage, 21.0),
            (RepStosq, 26.0),
            (RepStosb, 25.0),
            (Avx2, 26.5),
        ]);
        let third = pass(&[(PerPage, 21.0), (RepStosq, 26.0), (Avx2, 26.4)]);
        assert_eq!(
            ties(&c, &again, None),
            vec![RepStosq, RepStosb],
            "the lower of two: avx2 out"
        );
        assert_eq!(
            ties(&c, &again, Some(&third)),
            vec![RepStosq, RepStosb, Avx2],
            "the middle of three: avx2 in; rep stosb, not in the third pass, on two"
        );
    }

    #[test]
    fn where_a_tie_can_follow_every_near_top_strategy_is_rechecked() {
        // The Zen 3 VM's hot 1 MiB clear, once read: `avx2` third at
        // 0.957x of `libc`, `portable` at 0.75x.
        let first = [
            (PerPage, 24.77),
            (RepStosq, 27.20),
            (RepStosb, 26.89),
            (Libc, 28.19),
            (Avx2, 26.97),
            (Avx2Nt, 9.45),
            (Clzero, 9.05),
            (Portable, 21.06),
        ];
        let mut cells = choose(&[m(1 << 20, &first)], NONE);
        cells[0].op = Op::Clear;
        assert_eq!(cells[0].choice, Libc);
        assert_eq!(
            candidates(&cells[0], RepStosb, false),
            vec![PerPage, Libc, RepStosb, RepStosq],
            "without a tie-break: the first pass's two fastest"
        );
        assert_eq!(
            candidates(&cells[0], RepStosb, true),
            vec![PerPage, Libc, RepStosb, RepStosq, Avx2],
            "with one: everything within NEAR_TOP"
        );
        // The top two are re-checked however far the second trails.
        let far = [(PerPage, 10.0), (Avx2, 30.0), (Libc, 20.0)];
        let cells = choose(&[m(1 << 20, &far)], NONE);
        assert_eq!(candidates(&cells[0], Avx2, true), vec![PerPage, Avx2, Libc]);
    }

    #[test]
    fn a_candidate_level_with_the_choice_on_average_is_tied() {
        // The Zen 3 VM's hot 64 KiB clear, once read: `avx2` led the first
        // pass by 5.5%, neighbours kept `rep stosq`, and the re-check put
        // `avx2` over 8% behind (here 9%). Its lower-of-two trails by more
        // than KEEP, yet on average it is within KEEP of the choice and no
        // pass put it past TIE_FLOOR: a tie, for the call alone to break.
        let first = vec![
            (PerPage, 25.14),
            (RepStosq, 29.44),
            (RepStosb, 28.16),
            (Avx2, 31.05),
        ];
        let c = Cell {
            op: Op::Clear,
            shape: Shape::Single,
            size: 64 << 10,
            winner: Avx2,
            runner_up: Some(RepStosq),
            margin: 31.05 / 29.44,
            choice: RepStosq,
            gbps: first,
        };
        let again = |avx2: f64| {
            let mut a = m(
                64 << 10,
                &[
                    (PerPage, 25.0),
                    (RepStosq, 30.5),
                    (RepStosb, 29.0),
                    (Avx2, avx2),
                ],
            );
            a.op = Op::Clear;
            a
        };
        // rep-stosb trails the choice by 5% in both: tied too, as all
        // three leave the destination in the cache (within NEAR_TOP).
        assert_eq!(ties(&c, &again(27.8), None), vec![RepStosq, RepStosb, Avx2]);
        // 5% ahead, then 20% behind: a pass put it under TIE_FLOOR.
        let t = ties(&c, &again(24.0), None);
        assert_eq!(t, vec![RepStosq, RepStosb], "avx2 out");
        // A quick tune's 4 KiB copy: `rep movsb` 0.94x the best in both
        // passes, `avx2` 0.86x, then the best: 2% behind on average.
        let c = Cell {
            op: Op::Copy,
            shape: Shape::Single,
            size: 4096,
            winner: Libc,
            runner_up: Some(RepMovsb),
            margin: 41.96 / 39.62,
            choice: RepMovsb,
            gbps: vec![
                (PerPage, 33.27),
                (RepMovsq, 35.71),
                (RepMovsb, 39.62),
                (Libc, 41.96),
                (Avx2, 35.96),
            ],
        };
        let again = m(
            4096,
            &[
                (PerPage, 35.46),
                (Avx2, 41.53),
                (Libc, 31.16),
                (RepMovsb, 39.15),
            ],
        );
        assert_eq!(
            ties(&c, &again, None),
            vec![RepMovsb, Avx2],
            "libc fell to 0.75x"
        );
        // Past TIE_FLOOR in a pass is out however the average reads:
        // `avx2` 0.80x the best, then 1.18x the choice (even on average).
        let mut c = c;
        c.gbps[4].1 = 0.80 * 41.96;
        let again = m(4096, &[(PerPage, 35.0), (Avx2, 50.0), (RepMovsb, 42.5)]);
        assert!(ties(&c, &again, None).is_empty());
    }

    #[test]
    fn a_clear_whole_use_winner_has_no_tie_to_break() {
        // A streamed copy 2x faster alone loses half its rate once read:
        // the consumed measurement decides, alone is never asked.
        let consumed = [(PerPage, 9.0), (RepMovsb, 10.0), (Avx512Nt, 5.0)];
        let mut cells = choose(&[m(2 << 20, &consumed)], NONE);
        let again = m(
            2 << 20,
            &[(PerPage, 9.2), (RepMovsb, 10.1), (Avx512Nt, 5.2)],
        );
        recheck(&mut cells, std::slice::from_ref(&again), NONE);
        assert_eq!(cells[0].choice, RepMovsb);
        assert!(ties(&cells[0], &again, None).is_empty());
        // Per-page can be one of the ties; libc, within KEEP of the top
        // but slower than per-page over both passes, is not.
        let mut cells = choose(
            &[m(64, &[(PerPage, 10.0), (Avx2, 10.1), (Libc, 9.9)])],
            NONE,
        );
        let again = m(64, &[(PerPage, 10.0), (Avx2, 10.2), (Libc, 9.8)]);
        recheck(&mut cells, std::slice::from_ref(&again), NONE);
        assert_eq!(cells[0].choice, Avx2);
        assert_eq!(ties(&cells[0], &again, None), vec![Avx2, PerPage]);
    }
}
