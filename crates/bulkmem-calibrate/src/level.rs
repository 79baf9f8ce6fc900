//! When a row of the ladder has levelled off: past the caches, larger
//! sizes measure as the last ones did, so the climb can stop there.

use super::choose::Measured;
use bulkmem::Strategy;

/// A ladder stops climbing only past this size and twice the thread's
/// cache: below, the caches still shape every figure. The cache measured
/// for a copy's rate can be far smaller than the one that decides whether
/// a copy read back should stream (on the Emerald Rapids VM: 512 KiB, and
/// temporal copies led consumed ones to 32 MiB), hence the floor.
pub const LEVEL_FROM: usize = 64 << 20;

/// Whether `cur` (the next size up) measured as `prev` did, so that larger
/// sizes would too: both at least [`LEVEL_FROM`] and twice `cache`; the
/// best figure within [`LEVEL_FLAT`] of the last one's; each cell's leader
/// within [`LEVEL_TIE`] of the best in the other (the same winner, or a
/// tie in both); and every strategy in either cell's first three at the
/// same standing (its fraction of the cell's best) within [`LEVEL_TIE`].
/// Past the caches every strategy runs at memory speed whatever the size
/// (a 4x larger cell on the Zen 4 VM moved each by 1-6%), so measuring
/// further only costs time: `bulkmem tune --quick` spent 200 of its 234 s
/// on cells of 512 MiB and more.
pub fn levelled(prev: &Measured, cur: &Measured, cache: usize) -> bool {
    let best = |m: &Measured| m.gbps.iter().fold(0.0f64, |b, g| b.max(g.1));
    let (bp, bc) = (best(prev), best(cur));
    if prev.size < LEVEL_FROM.max(cache.saturating_mul(2)) || cur.size <= prev.size || bp <= 0.0 {
        return false;
    }
    let standing =
        |m: &Measured, b: f64, s: Strategy| m.gbps.iter().find(|g| g.0 == s).map(|g| g.1 / b);
    let leader = |m: &Measured| {
        m.gbps
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|g| g.0)
    };
    let top3 = |m: &Measured| {
        let mut v = m.gbps.clone();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v.into_iter().take(3).map(|g| g.0).collect::<Vec<_>>()
    };
    let tie = |m: &Measured, b: f64, s: Option<Strategy>| {
        s.and_then(|s| standing(m, b, s))
            .is_some_and(|x| x >= 1.0 - LEVEL_TIE)
    };
    (bc / bp - 1.0).abs() <= LEVEL_FLAT
        && tie(prev, bp, leader(cur))
        && tie(cur, bc, leader(prev))
        && top3(prev).into_iter().chain(top3(cur)).all(|s| {
            match (standing(prev, bp, s), standing(cur, bc, s)) {
                (Some(a), Some(b)) => (a - b).abs() <= LEVEL_TIE,
                _ => false,
            }
        })
}

/// How far the best figure may move between two cells that have levelled.
pub const LEVEL_FLAT: f64 = 0.15;
/// How far a strategy's standing may move between two cells that have
/// levelled: less than the margin a choice needs to beat the rules.
pub const LEVEL_TIE: f64 = 0.04;

#[cfg(test)]
mod tests {
    use super::*;
    use bulkmem::Op;
    use bulkmem_policy::auto::Shape;

    fn cell(size: usize, g: &[(Strategy, f64)]) -> Measured {
        Measured {
            op: Op::Copy,
            shape: Shape::LargeExtents,
            size,
            gbps: g.to_vec(),
        }
    }

    const M: usize = 1 << 20;
    use Strategy::{Avx2, Avx2Nt, Avx512Nt, Libc, PerPage};

    #[test]
    fn two_alike_cells_past_the_cache_have_levelled() {
        let a = cell(
            64 * M,
            &[
                (Avx2Nt, 12.0),
                (Avx512Nt, 11.9),
                (Libc, 7.0),
                (PerPage, 6.5),
            ],
        );
        // The winner swaps within a tie, figures move a few percent.
        let b = cell(
            256 * M,
            &[
                (Avx2Nt, 11.8),
                (Avx512Nt, 12.0),
                (Libc, 7.1),
                (PerPage, 6.4),
            ],
        );
        assert!(levelled(&a, &b, 4 * M));
    }

    #[test]
    fn cells_in_the_cache_or_that_still_move_have_not() {
        let a = cell(64 * M, &[(Avx2Nt, 12.0), (Avx512Nt, 11.9), (Libc, 7.0)]);
        let b = cell(256 * M, &[(Avx2Nt, 11.8), (Avx512Nt, 12.0), (Libc, 7.1)]);
        assert!(!levelled(&a, &b, 64 * M), "64 MiB is under twice the cache");
        let small = cell(8 * M, &a.gbps);
        assert!(
            !levelled(&small, &cell(32 * M, &b.gbps), M),
            "under LEVEL_FROM"
        );
        // A new winner, clearly ahead.
        let c = cell(256 * M, &[(Avx2Nt, 10.0), (Avx512Nt, 10.1), (Libc, 11.5)]);
        assert!(!levelled(&a, &c, 4 * M));
        // The same winner, but the best figure fell by a fifth.
        let d = cell(256 * M, &[(Avx2Nt, 9.6), (Avx512Nt, 9.5), (Libc, 5.6)]);
        assert!(!levelled(&a, &d, 4 * M));
        // The third moved in standing (0.58 -> 0.70 of the best).
        let e = cell(256 * M, &[(Avx2Nt, 12.0), (Avx512Nt, 11.9), (Libc, 8.4)]);
        assert!(!levelled(&a, &e, 4 * M));
        // A strategy one cell lacks cannot be compared.
        let f = cell(256 * M, &[(Avx2Nt, 12.0), (Avx512Nt, 11.9), (Avx2, 7.0)]);
        assert!(!levelled(&a, &f, 4 * M));
    }
}
