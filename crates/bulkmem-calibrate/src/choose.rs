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

use bulkmem::{Hint, Op, Strategy};
use bulkmem_policy::auto::{Cell, Machine, Policy, Request, Shape};

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
/// threshold on this machine (what [`Machine::libc_twin`](bulkmem_policy::auto::Machine::libc_twin)
/// says it runs there).
fn allocates(op: Op, size: usize, s: Strategy) -> bool {
    let runs = match s {
        Strategy::Libc => bulkmem_policy::auto::Machine::this().libc_twin(op, size),
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

/// How far ahead alone a strategy must be to take a tied cell from a
/// choice that leaves the destination as it does ([`break_tie`]). Where
/// memory bounds every kernel, a tie-break measures them all level: a
/// 32 MiB clear on a Xeon (CPUID model 0xa7) had `rep-stosb`, `rep-stosq`,
/// `libc` and `avx512` at 1.00 of the choice, and the fastest by a
/// fraction of a percent, `avx512`, took the cell from the rules'
/// `rep-stosb`, to run the consume cell at 0.95-0.98x it (`bench clear
/// --regime consume`, tuned).
pub const TIE_MARGIN: f64 = 1.01;

/// Breaks a tie ([`ties`]) by the copy or clear alone (`alone`: the tied
/// strategies measured hot with nothing reading the destination, as GB/s
/// or as each one's ratio to the choice): where
/// the whole use cannot separate them, the call alone is what is left to
/// gain, for callers that read the destination later or not at all (at
/// 4 KiB `avx2` and `avx512` measured alike once read, 1.25-1.4x apart
/// alone on an Emerald Rapids VM). Where the fastest alone leaves the
/// destination as the choice does (both in the cache, or both on its way
/// to DRAM), it takes the cell by any margin: the call is all that tells
/// them apart, and between equals either is right, so it takes the cell
/// by more than [`TIE_MARGIN`] only: the noise of one tie-break. Holding
/// the choice unless beaten by [`KEEP`] kept `rep stos*` for hot 2 MiB
/// clears that a tie-break put 1.02x behind `avx2`, where six tie-breaks
/// measured 1.02-1.10x and `bench clear` 1.06-1.10x, so the cell ran at
/// 0.92x (Zen 3 VM). A streaming kernel and a cache-allocating one still
/// swap only by more than KEEP: the whole use, which called them level,
/// is the caller's cost, and the call alone favours the streaming one.
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
        1.0 / TIE_MARGIN
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
mod tests;
