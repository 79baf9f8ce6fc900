//! The measurement loop every bench shares: cells are verified once by the
//! caller, then measured in interleaved rounds (every cell once per round,
//! so drift on a shared machine hits all cells alike), after `warmup`
//! untimed rounds; each cell's samples become [`Stats`]. The measuring
//! parts themselves are the library's (`bulkmem_calibrate::toolkit`), the
//! ones `bulkmem tune` uses.

use bulkmem_calibrate::toolkit;
pub use bulkmem_calibrate::toolkit::{cpu_time, gbps, pattern as fill_pattern, POISON};
pub use bulkmem_calibrate::toolkit::{Order, Piece};

use bulkmem_report::stats::Stats;

/// How many rounds a bench measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounds {
    /// Timed rounds; every cell gets one sample per round.
    pub runs: usize,
    /// Untimed rounds before them (page faults, frequency ramp, caches).
    pub warmup: usize,
}

/// Measures `cells` cells: `measure(i)` runs cell `i` once and returns its
/// figure (GB/s, or whatever the bench reports), in the library's
/// interleaved rounds (`bulkmem_calibrate::toolkit::interleave`, as
/// `bulkmem tune` measures), each round starting one cell later
/// ([`Order::Rotated`]); a failing cell stops the bench with its error.
pub fn interleave(
    cells: usize,
    rounds: Rounds,
    measure: impl FnMut(usize) -> Result<f64, String>,
) -> Result<Vec<Stats>, String> {
    interleave_in(Order::Rotated, cells, rounds, measure)
}

/// As [`interleave`], in the rounds' `order` ([`Order::Fixed`]: for
/// cells that depend on the one before).
pub fn interleave_in(
    order: Order,
    cells: usize,
    rounds: Rounds,
    measure: impl FnMut(usize) -> Result<f64, String>,
) -> Result<Vec<Stats>, String> {
    toolkit::interleave(cells, rounds.runs, rounds.warmup, order, measure).map(stats)
}

/// As [`interleave`], each cell's run cut into `slices` pieces that take
/// turns with the other cells' pieces within a round
/// (`bulkmem_calibrate::toolkit::interleave_sliced`): `piece(i)` runs one
/// piece of cell `i`; a round's sample is its pieces' bytes over their
/// time (GB/s).
pub fn interleave_sliced(
    cells: usize,
    rounds: Rounds,
    slices: usize,
    piece: impl FnMut(usize) -> Result<Piece, String>,
) -> Result<Vec<Stats>, String> {
    toolkit::interleave_sliced(cells, rounds.runs, rounds.warmup, slices, None, piece).map(stats)
}

/// Each cell's samples as the tables show them.
fn stats(samples: Vec<Vec<f64>>) -> Vec<Stats> {
    samples.iter().map(|s| Stats::or_zero(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_interleave_cells_after_the_warmup() {
        let mut order = Vec::new();
        let stats = interleave_in(Order::Fixed, 2, Rounds { runs: 3, warmup: 1 }, |i| {
            order.push(i);
            Ok((order.len() * 10 + i) as f64)
        })
        .unwrap();
        assert_eq!(order, [0, 1, 0, 1, 0, 1, 0, 1]);
        // Warm-up figures (10, 21) are dropped.
        assert_eq!(stats[0].samples, [30.0, 50.0, 70.0]);
        assert_eq!(stats[1].samples, [41.0, 61.0, 81.0]);
        // Rotated: the second timed round starts at cell 1.
        order.clear();
        interleave(2, Rounds { runs: 2, warmup: 0 }, |i| {
            order.push(i);
            Ok(1.0)
        })
        .unwrap();
        assert_eq!(order, [0, 1, 1, 0]);
        let err = interleave(1, Rounds { runs: 2, warmup: 0 }, |_| Err("bad".into()));
        assert_eq!(err.unwrap_err(), "bad");
    }
}
