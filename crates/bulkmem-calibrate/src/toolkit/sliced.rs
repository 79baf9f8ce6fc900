//! Runs in pieces that take turns with the other cells' pieces within a
//! round (docs/measurements.md, "Slices"): hot runs cut into pieces, and a
//! bench's long calls and cold batches repeated at two points of the
//! round ([`BENCH_PIECES`]).
//!
//! On the shared 2-vCPU VMs a kernel's speed drifts by a third within tens
//! of milliseconds: a hot 4 KiB `memset` in L1, timed in 1 ms pieces for
//! 3 s on the Zen 3 VM, ran at 36-66 GB/s by 10 ms windows, in plateaus
//! and bursts. A round that times each cell for 10 ms in one go compares
//! cells measured up to a round apart, so two runs of the same kernel in
//! one round were 0.79-1.27x apart in one round of ten (`bench`, hot 4 KiB
//! clear, 749 rounds). Taking the same 10 ms in pieces, each cell's piece
//! after the other cells' pieces, puts every cell in the same spells: laid
//! over that `memset`'s time line, the middle 90% of same-kernel ratios
//! narrowed from 0.84-1.36x in 10 ms runs to 0.93-1.09x in 1 ms pieces and
//! 0.95-1.04x in 0.25 ms pieces.

use std::time::Duration;

use super::{gbps, visit, Order, Race};

/// The most pieces a run is cut into: a bench's 10 ms run
/// ([`MIN_RUN`](super::MIN_RUN)) in 0.5 ms pieces.
pub const MAX_SLICES: usize = 20;

/// How many pieces a run of `reps` calls is cut into when each piece
/// starts with `warm` untimed calls ([`warm_calls`](super::warm_calls)):
/// as many as keep the untimed calls to a quarter of the timed ones, at
/// most [`MAX_SLICES`], at least one. Each piece needs its warm-up: it
/// follows another kernel's piece, whose dirty lines or cold destination
/// it would otherwise pay for.
pub fn slices(reps: usize, warm: usize) -> usize {
    (reps / (4 * warm.max(1))).clamp(1, MAX_SLICES)
}

/// The pieces a bench run is taken in: `slices` ([`slices`]), or, for a
/// bench's runs of at least `min_run` (not the tests' runs of fixed
/// length, zero), never fewer than [`BENCH_PIECES`].
pub fn bench_pieces(slices: usize, min_run: Duration) -> usize {
    if min_run.is_zero() {
        slices
    } else {
        slices.max(BENCH_PIECES)
    }
}

/// The fewest pieces of a bench run: every row is timed at two points of
/// each round, each piece after its own warm-up (or, cold, cooling), also
/// where one call or batch fills a run (a DRAM-bound copy of 256 MiB and
/// up, every cold batch of 256 MiB) or where [`slices`] keeps a run whole
/// for its warm-up's sake (a hot 32 MiB cell). A DRAM-bound call's speed
/// on a shared host drifts over hundreds of milliseconds: back-to-back
/// 256 MiB `memcpy`s on the Zen 3 VM ran at 10.9 GB/s +-10%, correlated
/// 0.64 with the next call and 0.28 with the eighth, so a row's one call a
/// round was one point of that drift, several rows' calls away from the
/// row it was paired with. Laid over 2,000 such calls, eight rows of one
/// kernel in seven rounds put the paired median of two rows under 0.95x
/// in 11% of the cells with one call a run, 5% with two calls at two
/// points of the round, 4% with three; the best of seven level rows over
/// the eighth, under 0.95x in 24%, 8% and 4%. The tune keeps its own
/// pieces (`slices`): its time is budgeted, and it scores and re-checks
/// instead.
pub const BENCH_PIECES: usize = 2;

/// What one piece of a run did: the bytes it moved and the time it took.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Piece {
    /// Bytes moved (by every thread of the run).
    pub bytes: usize,
    /// From the piece's start to its last thread's finish.
    pub time: Duration,
}

/// A piece that took this many times its round's median piece (of the
/// same cell) was stalled, not slow: its time counts as the median's. On
/// the Zen 3 VM a hot 4 KiB `memset` timed in 0.25 ms pieces had 0.3%
/// of them over twice the median and one in 1,600 over four times (up
/// to 40x: the vCPU away for 10 ms), about two a second. Such a stall
/// lands on one cell's piece and took a whole round's sample of that
/// cell to 0.39-0.48x of its neighbours' (two full tunes of ten put
/// `avx2` there, once read, at hot 64 KiB and 2 MiB clears), after which
/// the race dropped it for the pass; stalls are the machine's, not the
/// kernel's.
pub const STALLED: u32 = 3;

/// A cell's sample for one round: its pieces' bytes over their time
/// (GB/s), each piece's time capped at [`STALLED`] x the median piece's
/// where there are three pieces or more (with fewer, the median is not a
/// piece's own time).
fn sample(pieces: &[Piece]) -> f64 {
    let bytes = pieces.iter().map(|p| p.bytes).sum();
    let mut times: Vec<Duration> = pieces.iter().map(|p| p.time).collect();
    times.sort_unstable();
    let cap = match times.len() {
        n if n >= 3 => times[n / 2] * STALLED,
        _ => Duration::MAX,
    };
    let time = pieces
        .iter()
        .map(|p| {
            if p.time > cap {
                times[times.len() / 2]
            } else {
                p.time
            }
        })
        .sum();
    gbps(bytes, time)
}

/// As [`interleave`](super::interleave) in [`Order::Rotated`] rounds, with
/// each cell's run cut into `slices` pieces: a round runs every cell's
/// first piece, then every cell's second, each pass starting one cell
/// later than the one before, and a cell's sample for the round is its
/// pieces' bytes over their time (GB/s; a stalled piece counts as a
/// median one, [`STALLED`]). After `warmup` untimed rounds
/// come `runs` timed ones; with a `race`, cells drop out between rounds as
/// in [`interleave_pruned`](super::interleave_pruned). Samples are in
/// round order, so ratios pair by round.
pub fn interleave_sliced<E>(
    cells: usize,
    runs: usize,
    warmup: usize,
    slices: usize,
    race: Option<Race>,
    mut piece: impl FnMut(usize) -> Result<Piece, E>,
) -> Result<Vec<Vec<f64>>, E> {
    let slices = slices.max(1);
    let mut samples = vec![Vec::with_capacity(runs); cells];
    let mut racing = vec![true; cells];
    for round in 0..warmup + runs {
        let racers: Vec<usize> = (0..cells).filter(|&i| racing[i]).collect();
        let mut done = vec![Vec::with_capacity(slices); cells];
        for pass in 0..slices {
            for i in visit(Order::Rotated, round * slices + pass, racers.clone()) {
                done[i].push(piece(i)?);
            }
        }
        let Some(timed) = round.checked_sub(warmup) else {
            continue;
        };
        for &i in &racers {
            samples[i].push(sample(&done[i]));
        }
        if race.is_some_and(|r| !r.prune(timed, &samples, &mut racing)) {
            break;
        }
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_take_turns_and_add_up_to_one_sample_a_round() {
        let mut order = Vec::new();
        let ms = Duration::from_millis(1);
        let samples = interleave_sliced(2, 2, 1, 3, None, |i| {
            order.push(i);
            // Cell 1 moves 2 bytes a piece, cell 0 one; the second
            // piece of each round is slow for both.
            let slow = order.len() % 6 == 3 || order.len() % 6 == 4;
            Ok::<_, ()>(Piece {
                bytes: (i + 1) * 1_000_000,
                time: if slow { 2 * ms } else { ms },
            })
        })
        .unwrap();
        // Three rounds (one untimed) of three passes; each pass starts
        // one cell later.
        assert_eq!(
            order,
            [0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1]
        );
        for (i, s) in samples.iter().enumerate() {
            assert_eq!(s.len(), 2, "one sample per timed round");
            // 3 pieces in 4 ms.
            let want = gbps(3 * (i + 1) * 1_000_000, 4 * ms);
            assert!(s.iter().all(|&x| (x - want).abs() < 1e-9), "{s:?}");
        }
        let err = interleave_sliced(1, 2, 0, 4, None, |_| Err::<Piece, _>("bad"));
        assert_eq!(err.unwrap_err(), "bad");
    }

    #[test]
    fn a_sliced_race_drops_the_clearly_slower_between_rounds() {
        let mut pieces = [0usize; 2];
        let samples = interleave_sliced(2, 7, 0, 4, Some(Race::TIE_BREAK), |i| {
            pieces[i] += 1;
            Ok::<_, ()>(Piece {
                bytes: [10, 8][i],
                time: Duration::from_nanos(1),
            })
        })
        .unwrap();
        // 0.8x the leader: out after two rounds, and then nothing is
        // left to decide.
        assert_eq!(pieces, [8, 8]);
        assert_eq!(samples[1].len(), 2);
    }

    #[test]
    fn a_stalled_piece_counts_as_a_median_one() {
        let ms = |t: u64| Piece {
            bytes: 1_000_000,
            time: Duration::from_millis(t),
        };
        // 10 ms away in one piece of five: as if it took the median 1 ms.
        assert_eq!(
            sample(&[ms(1), ms(1), ms(11), ms(1), ms(1)]),
            gbps(5_000_000, Duration::from_millis(5))
        );
        // Three times the median is still the kernel's own.
        assert_eq!(
            sample(&[ms(1), ms(3), ms(1)]),
            gbps(3_000_000, Duration::from_millis(5))
        );
        // Two pieces have no median of their own: nothing is capped.
        assert_eq!(
            sample(&[ms(1), ms(11)]),
            gbps(2_000_000, Duration::from_millis(12))
        );
    }

    #[test]
    fn runs_are_cut_so_warm_ups_cost_a_quarter_at_most() {
        assert_eq!(slices(16_384, 1), MAX_SLICES);
        assert_eq!(slices(200, 4), 12);
        assert_eq!(slices(32, 4), 2);
        assert_eq!(slices(8, 4), 1);
        assert_eq!(slices(1, 0), 1);
        assert_eq!(slices(0, 1), 1);
    }

    #[test]
    fn bench_runs_are_taken_at_two_points_of_the_round_at_least() {
        let ms = Duration::from_millis;
        assert_eq!(bench_pieces(1, ms(10)), BENCH_PIECES);
        assert_eq!(bench_pieces(12, ms(10)), 12);
        // Runs of a fixed length (tests) keep what `slices` gave.
        assert_eq!(bench_pieces(1, Duration::ZERO), 1);
        assert_eq!(bench_pieces(12, Duration::ZERO), 12);
    }
}
