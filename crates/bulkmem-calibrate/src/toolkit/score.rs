//! How a calibration scores what it measured, and when it stops
//! measuring a kernel that cannot win (docs/design.md, "Spending the runs
//! where they decide").

use super::{visit, Order};

/// Sequential elimination ([`interleave_pruned`]): after each round a cell
/// whose best run is below this fraction of the leader's worst is out of
/// the race: to win it would need every run left to be 1/0.7 = 1.43x its
/// best so far, while the leader stays at its worst. On the shared VMs a
/// kernel's runs within one cell spread by up to 1.77x (a hot 32 MiB
/// `libc` clear, 12.8-22.7 GB/s), but such a kernel is scored by its slow
/// runs ([`lower_quartile`]), so its fast ones could not have won it the
/// cell.
pub const OUT_OF_RACE: f64 = 0.7;

/// When [`interleave_pruned`] drops a cell: after each round from the
/// `after`th on, a cell whose best sample is below `bar` x the leader's
/// worst is out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Race {
    /// The fraction of the leader's worst sample a cell's best must reach.
    pub bar: f64,
    /// Rounds every cell runs before any is dropped.
    pub after: usize,
}

impl Race {
    /// A calibration's passes, every strategy at once: [`OUT_OF_RACE`]
    /// from the first round.
    pub const WIDE: Race = Race {
        bar: OUT_OF_RACE,
        after: 1,
    };

    /// A tie-break (`calibrate::break_tie`) asks only which of a few
    /// kernels is clearly fastest alone: after two rounds, one whose best
    /// is below 0.85x the leader's worst is out. Runs of one kernel in
    /// the same round of `bench` (`auto` and the row of the kernel it
    /// ran, 24 cells of about 500 rounds, timed whole before
    /// [`interleave_sliced`](super::interleave_sliced)) were 0.85x apart
    /// or more in 4.5-26% of rounds by cell (median 9%), but below 0.85x
    /// in two rounds running in 0.3% (at most 2%; Zen 3 VM). A 4 KiB copy's
    /// `rep movsb`, 0.72x of `avx2` alone, then stops after two rounds.
    pub const TIE_BREAK: Race = Race {
        bar: 0.85,
        after: 2,
    };

    /// After timed round `round` (from 0), takes out of `racing` every
    /// cell that can no longer win; false once, from round `after` on,
    /// fewer than two race on.
    pub(super) fn prune(self, round: usize, samples: &[Vec<f64>], racing: &mut [bool]) -> bool {
        if round + 1 < self.after {
            return true;
        }
        let lo = |s: &Vec<f64>| s.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = |s: &Vec<f64>| s.iter().copied().fold(0.0, f64::max);
        let lq = |i: usize| lower_quartile(samples[i].clone());
        let leader = (0..samples.len())
            .filter(|&i| racing[i])
            .max_by(|&a, &b| lq(a).total_cmp(&lq(b)));
        if let Some(l) = leader {
            let bar = self.bar * lo(&samples[l]);
            for (r, s) in racing.iter_mut().zip(samples) {
                *r = *r && hi(s) >= bar;
            }
        }
        racing.iter().filter(|&&r| r).count() >= 2
    }
}

/// As [`interleave`](super::interleave) without a warm-up, in
/// [`Order::Rotated`] rounds, but a calibration spends its rounds on the
/// cells that can still win (higher is better): after each round from
/// `race.after` on, every cell
/// whose best sample is below `race.bar` x the worst sample of the leader
/// (the best lower quartile) stops being measured, keeping the samples
/// it has; once one cell is left, the rounds end (nothing is left to
/// decide).
pub fn interleave_pruned<E>(
    cells: usize,
    runs: usize,
    race: Race,
    mut measure: impl FnMut(usize) -> Result<f64, E>,
) -> Result<Vec<Vec<f64>>, E> {
    let mut samples = vec![Vec::with_capacity(runs); cells];
    let mut racing = vec![true; cells];
    for round in 0..runs {
        let racers = (0..cells).filter(|&i| racing[i]).collect();
        for i in visit(Order::Rotated, round, racers) {
            let x = measure(i)?;
            samples[i].push(x);
        }
        if !race.prune(round, &samples, &mut racing) {
            break;
        }
    }
    Ok(samples)
}

/// How `a` runs against `b` measured in the same rounds (`a[r]` and
/// `b[r]` from round `r`): the median of `a[r] / b[r]` over the rounds
/// both have; `None` without one. A slow spell that spans a round slows
/// both alike and cancels.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<f64> {
    let mut r: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|p| *p.1 > 0.0)
        .map(|(x, y)| x / y)
        .collect();
    r.sort_by(f64::total_cmp);
    let n = r.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(r[n / 2]),
        _ => Some((r[n / 2 - 1] + r[n / 2]) / 2.0),
    }
}

/// The score a choice is made on: a strategy's lower quartile over its
/// runs (the 2nd slowest of 7, the slowest of 3), not its median. On a
/// shared machine a cache-allocating kernel near the cache's edge is fast
/// only while the neighbours leave the cache alone: a hot 32 MiB clear
/// with `libc` ran 12.8-22.7 GB/s within one measurement and 26.8 in
/// another, while `avx2-nt` held 22.5-23.3. Scored by its median it was
/// chosen and then ran at 0.67x; scored by its slow runs, the steady
/// kernel wins. Tables show medians and spreads; choices use this.
pub fn lower_quartile(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n => v[(n - 1) / 4],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_quartiles() {
        assert_eq!(lower_quartile(vec![3.0, 1.0, 2.0]), 1.0);
        assert_eq!(lower_quartile(vec![7.0, 1.0, 6.0, 2.0, 5.0, 3.0, 4.0]), 2.0);
        assert_eq!(lower_quartile(vec![4.0]), 4.0);
        assert_eq!(lower_quartile(vec![]), 0.0);
    }

    #[test]
    fn cells_far_behind_after_one_round_stop_being_measured() {
        let mut calls = [0usize; 4];
        // Cell 3 starts close (8.0 >= 0.7 x 10) but falls behind for good.
        let fig = |i: usize, n: usize| [10.0, 6.9, 7.5, if n == 0 { 8.0 } else { 5.0 }][i];
        let samples = interleave_pruned(4, 4, Race::WIDE, |i| {
            let x = fig(i, calls[i]);
            calls[i] += 1;
            Ok::<_, ()>(x)
        })
        .unwrap();
        // 6.9 < 0.7 x 10: out after its first sample; 7.5 races on; cell
        // 3's best (8.0) stays over the bar, so it runs to the end.
        assert_eq!(calls, [4, 1, 4, 4]);
        assert_eq!(samples[1], [6.9]);
        assert_eq!(samples[2].len(), 4);
        // The leader's worst sets the bar: a leader with one slow run
        // (5.0) keeps in a cell (4.0) that its fast runs alone would not.
        let mut calls = [0usize; 2];
        let noisy = |i: usize, n: usize| if i == 0 { [5.0, 10.0, 10.0][n] } else { 4.0 };
        interleave_pruned(2, 3, Race::WIDE, |i| {
            let x = noisy(i, calls[i]);
            calls[i] += 1;
            Ok::<_, ()>(x)
        })
        .unwrap();
        assert_eq!(calls, [3, 3]);
        assert_eq!(
            interleave_pruned(0, 3, Race::WIDE, |_| Ok::<_, ()>(1.0))
                .unwrap()
                .len(),
            0
        );
    }

    #[test]
    fn paired_ratios_are_medians_round_by_round() {
        // By medians 1.0x; round by round 1.2, 1.2 (a slow round for
        // both) and 1.0: 1.2x.
        assert_eq!(
            paired_ratio(&[12.0, 6.0, 10.0], &[10.0, 5.0, 10.0]),
            Some(1.2)
        );
        // Rounds one side lacks (dropped from the race) do not count.
        assert_eq!(paired_ratio(&[4.0, 6.0, 9.0], &[2.0, 2.0]), Some(2.5));
        assert_eq!(paired_ratio(&[1.0], &[]), None);
        assert_eq!(paired_ratio(&[1.0], &[0.0]), None);
    }

    #[test]
    fn a_tie_break_drops_the_clearly_slower_after_two_rounds_and_stops_alone() {
        // 0.8x the leader: kept after one round, out after two; the
        // leader, then alone, is not measured on.
        let run = |race| {
            let mut calls = [0usize; 3];
            interleave_pruned(3, 7, race, |i| {
                calls[i] += 1;
                Ok::<_, ()>([10.0, 8.0, 9.8][i])
            })
            .unwrap();
            calls
        };
        assert_eq!(run(Race::TIE_BREAK), [7, 2, 7], "9.8 races on");
        let mut calls2 = [0usize; 2];
        interleave_pruned(2, 7, Race::TIE_BREAK, |i| {
            calls2[i] += 1;
            Ok::<_, ()>([10.0, 8.0][i])
        })
        .unwrap();
        assert_eq!(calls2, [2, 2], "one left after two rounds: done");
        // The wide race keeps 0.8x to the end.
        assert_eq!(run(Race::WIDE), [7, 7, 7]);
    }
}
