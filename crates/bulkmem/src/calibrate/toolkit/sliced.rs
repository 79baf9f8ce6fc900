//! Hot runs cut into pieces that take turns with the other cells' pieces
//! within a round (docs/design.md, "Slices").
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

/// What one piece of a run did: the bytes it moved and the time it took.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Piece {
    /// Bytes moved (by every thread of the run).
    pub bytes: usize,
    /// From the piece's start to its last thread's finish.
    pub time: Duration,
}

/// As [`interleave`](super::interleave) in [`Order::Rotated`] rounds, with
/// each cell's run cut into `slices` pieces: a round runs every cell's
/// first piece, then every cell's second, each pass starting one cell
/// later than the one before, and a cell's sample for the round is its
/// pieces' bytes over their time (GB/s). After `warmup` untimed rounds
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
        let mut done = vec![Piece::default(); cells];
        for pass in 0..slices {
            for i in visit(Order::Rotated, round * slices + pass, racers.clone()) {
                let p = piece(i)?;
                done[i].bytes += p.bytes;
                done[i].time += p.time;
            }
        }
        let Some(timed) = round.checked_sub(warmup) else {
            continue;
        };
        for &i in &racers {
            samples[i].push(gbps(done[i].bytes, done[i].time));
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
    fn runs_are_cut_so_warm_ups_cost_a_quarter_at_most() {
        assert_eq!(slices(16_384, 1), MAX_SLICES);
        assert_eq!(slices(200, 4), 12);
        assert_eq!(slices(32, 4), 2);
        assert_eq!(slices(8, 4), 1);
        assert_eq!(slices(1, 0), 1);
        assert_eq!(slices(0, 1), 1);
    }
}
