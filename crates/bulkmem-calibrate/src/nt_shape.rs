//! Which shape this machine's non-temporal copies take
//! (`bulkmem_machine::kernels::NtCopyShape`: one prefetched stream, four pages at once, or
//! glibc's two pages). No CPU family settles it (one stream led by 1.3x on
//! Zen 3 and Zen 5, glibc's two pages by 1.2x on the review's Zen 2, four
//! pages on Intel), so a tune measures it once, before the ladder: every
//! non-temporal row of every cell then runs the shape the profile records.
//!
//! One large copy past the cache, the widest non-temporal kernel this CPU
//! runs, each shape in interleaved rounds; the CPU's built-in shape stays
//! unless another beats it by [`SHAPE_MARGIN`] in the median, so noise
//! cannot move a profile off the shape its CPU was measured with.

use crate::error::Error;
use bulkmem::{CopyKernel, Strategy};
use bulkmem_machine::kernels::NtCopyShape;

use super::toolkit::{gbps, interleave, pattern, prefaulted, Order, POISON};

/// How much faster than the built-in shape another must measure to be
/// taken: the spread of one tune's medians on the noisy 2-vCPU VMs.
pub const SHAPE_MARGIN: f64 = 1.03;

/// Rounds of the shape race (each copies `bytes` once per shape).
pub const SHAPE_RUNS: usize = 7;

/// What the race found: each shape's median GB/s, and the one taken.
#[derive(Clone, Debug, PartialEq)]
pub struct ShapeRace {
    /// The kernel raced.
    pub strategy: Strategy,
    /// Bytes each run copied.
    pub bytes: usize,
    /// Median GB/s per shape, in [`NtCopyShape::ALL`] order.
    pub gbps: Vec<(NtCopyShape, f64)>,
    /// The shape the profile records.
    pub chosen: NtCopyShape,
}

/// Races the shapes on a copy of `bytes` (past the cache; at least
/// 64 MiB is sensible) with the widest non-temporal copy this CPU runs,
/// and leaves the process's copies in the winner's shape. `None` where
/// the CPU runs no non-temporal copy. The process's shape is its own
/// again (the built-in one) if measuring fails.
pub fn race_nt_shapes(bytes: usize, runs: usize) -> Result<Option<ShapeRace>, Error> {
    let Some(strategy) = [Strategy::Avx512Nt, Strategy::Avx2Nt]
        .into_iter()
        .find(|s| s.available())
    else {
        return Ok(None);
    };
    let builtin = {
        bulkmem_machine::kernels::set_nt_copy_shape(None);
        bulkmem_machine::kernels::nt_copy_shape()
    };
    let k = CopyKernel::new(strategy)?;
    let map = |fill| {
        prefaulted(bytes, true, fill).map_err(|e| Error::Measure {
            what: format!("cannot map {bytes} bytes for the shape race: {e}"),
        })
    };
    let mut src = map(0)?;
    pattern(src.as_mut_slice());
    let mut dst = map(POISON)?;
    let samples = interleave(NtCopyShape::ALL.len(), runs, 1, Order::Rotated, |i| {
        bulkmem_machine::kernels::set_nt_copy_shape(Some(NtCopyShape::ALL[i]));
        let t = std::time::Instant::now();
        k.copy(dst.as_mut_slice(), src.as_slice());
        let g = gbps(bytes, t.elapsed());
        if dst.as_slice() != src.as_slice() {
            return Err(Error::Measure {
                what: format!(
                    "{strategy} in the {} shape copied wrong bytes",
                    NtCopyShape::ALL[i].name()
                ),
            });
        }
        Ok(g)
    });
    let samples = match samples {
        Ok(s) => s,
        Err(e) => {
            bulkmem_machine::kernels::set_nt_copy_shape(None);
            return Err(e);
        }
    };
    let medians: Vec<(NtCopyShape, f64)> = NtCopyShape::ALL
        .into_iter()
        .zip(samples.iter().map(|s| median(s)))
        .collect();
    let chosen = pick(&medians, builtin);
    bulkmem_machine::kernels::set_nt_copy_shape(Some(chosen));
    Ok(Some(ShapeRace {
        strategy,
        bytes,
        gbps: medians,
        chosen,
    }))
}

/// The fastest shape by median, if it beats `builtin`'s by
/// [`SHAPE_MARGIN`]; else `builtin`.
pub fn pick(medians: &[(NtCopyShape, f64)], builtin: NtCopyShape) -> NtCopyShape {
    let of = |s: NtCopyShape| medians.iter().find(|m| m.0 == s).map_or(0.0, |m| m.1);
    let best = medians
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(builtin, |m| m.0);
    if of(best) > of(builtin) * SHAPE_MARGIN {
        best
    } else {
        builtin
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use NtCopyShape::*;

    #[test]
    fn the_builtin_shape_stays_unless_another_clearly_wins() {
        let m = |a, b, c| vec![(Stream, a), (FourPages, b), (TwoPages, c)];
        // Zen 5's figures (bench copy --nt-shape, 256 MiB cold).
        assert_eq!(pick(&m(22.7, 19.0, 21.0), Stream), Stream);
        // The review's Zen 2: glibc's two pages 1.2x one stream.
        assert_eq!(pick(&m(10.0, 8.0, 12.05), Stream), TwoPages);
        // Within the margin, the built-in shape stands either way.
        assert_eq!(pick(&m(10.0, 8.0, 10.2), Stream), Stream);
        assert_eq!(pick(&m(10.2, 8.0, 10.0), TwoPages), TwoPages);
        assert_eq!(pick(&m(10.0, 11.0, 10.0), FourPages), FourPages);
        // A shape that failed to measure (0) is never taken.
        assert_eq!(pick(&m(0.0, 0.0, 0.0), FourPages), FourPages);
    }

    #[test]
    fn a_race_leaves_the_winner_in_place_and_copies_right() {
        let Some(r) = race_nt_shapes(8 << 20, 3).unwrap() else {
            eprintln!("skipped: this CPU runs no non-temporal copy");
            return;
        };
        assert_eq!(bulkmem_machine::kernels::nt_copy_shape(), r.chosen);
        assert_eq!(r.gbps.len(), NtCopyShape::ALL.len());
        assert!(r.gbps.iter().all(|g| g.1 > 0.0), "{r:?}");
        bulkmem_machine::kernels::set_nt_copy_shape(None);
    }
}
