use super::*;

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got - want).abs() <= tol
}

#[test]
fn t_tails_match_published_values() {
    // Critical values from tables: each is where the two-sided tail is 5%.
    for (t, df) in [
        (12.706, 1.0),
        (4.303, 2.0),
        (3.182, 3.0),
        (2.571, 5.0),
        (2.228, 10.0),
        (2.042, 30.0),
        (1.980, 120.0),
        (1.960, 1e6),
        (1.960, 1e300),
    ] {
        let p = t_two_sided(t, df);
        assert!(close(p, 0.05, 2e-4), "t {t}, df {df}: p {p}");
    }
    // Fractional df (Welch) and other tails, against mpmath's
    // regularized incomplete beta (15 digits).
    for (t, df, want) in [
        (2.228, 10.0, 0.050_011_771_817_111_4),
        (1.96, 1e6, 0.049_996_067_582_829_4),
        (1.0, 3.0, 0.391_002_218_955_771),
        (0.5, 2.5, 0.657_697_919_869_715),
        (3.0, 7.3, 0.018_980_551_023_133_5),
        (10.0, 4.0, 0.000_562_003_622_715_991),
        (10.276_80, 1.1, 0.05),
        (6.016_66, 1.5, 0.05),
        (3.683_50, 2.4, 0.05),
    ] {
        let p = t_two_sided(t, df);
        assert!(
            close(p, want, want * 1e-5 + 1e-12),
            "t {t}, df {df}: {p}, want {want}"
        );
        assert!(close(t_two_sided(-t, df), p, 1e-15), "symmetric");
    }
    assert_eq!(t_two_sided(0.0, 5.0), 1.0);
    assert_eq!(t_two_sided(f64::INFINITY, 5.0), 0.0);
    assert_eq!(t_two_sided(f64::NAN, 5.0), 1.0);
    assert_eq!(t_two_sided(2.0, f64::NAN), 1.0);
    let mut last = 1.0;
    for i in 1..400 {
        let p = t_two_sided(f64::from(i) * 0.05, 6.5);
        assert!(p < last && p > 0.0, "not decreasing at {i}: {p}");
        last = p;
    }
}

#[test]
fn holm_steps_down_and_stops_at_the_first_miss() {
    // p = [0.01, 0.04, 0.03, 0.005], m = 4. Ascending, times m - i:
    //   0.005 (#3) x4 = 0.02  -> 0.02
    //   0.01  (#0) x3 = 0.03  -> 0.03
    //   0.03  (#2) x2 = 0.06  -> 0.06  (> 0.05: Holm stops here)
    //   0.04  (#1) x1 = 0.04  -> 0.06  (raised to the running max)
    // So #3 and #0 are significant; #1 is not, although 0.04 alone
    // would pass its own step's bound of 0.05 / 1.
    let adj = holm(&[0.01, 0.04, 0.03, 0.005]);
    for (got, want) in adj.iter().zip([0.03, 0.06, 0.06, 0.02]) {
        assert!(close(*got, want, 1e-15), "{adj:?}");
    }
    let called: Vec<bool> = adj.iter().map(|&p| p <= ALPHA).collect();
    assert_eq!(called, [true, false, false, true]);
    // p = [0.01, 0.015, 0.2, 0.012]: 0.01 x4 = 0.04, 0.012 x3 = 0.036
    // -> 0.04, 0.015 x2 = 0.03 -> 0.04, 0.2 x1 = 0.2. Three calls,
    // where Bonferroni (x4 each: 0.04, 0.06, 0.8, 0.048) makes two.
    let adj = holm(&[0.01, 0.015, 0.2, 0.012]);
    for (got, want) in adj.iter().zip([0.04, 0.04, 0.2, 0.04]) {
        assert!(close(*got, want, 1e-15), "{adj:?}");
    }
    // Capped at 1, and an empty family is fine.
    assert_eq!(holm(&[0.6, 0.9]), vec![1.0, 1.0]);
    assert!(holm(&[]).is_empty());
}

fn cell(shift: f64, rel_var: f64) -> Cell {
    Cell {
        shift,
        var_a: (rel_var, 6.0),
        var_b: (rel_var, 6.0),
    }
}

#[test]
fn drift_is_what_the_cells_scatter_beyond_their_samples() {
    // Shifts of ±0.1 around 0 where the samples promise ±0.014: the
    // median cell's p reaches one half where 0.1 / sqrt(2e-4 + τ²) is
    // Student's 75% point for the Welch–Satterthwaite df of 2e-4 (12
    // df) + τ² (0.37 x 9 df), 3.41 df there: τ² = 0.0174267925971611
    // (mpmath).
    let wide: Vec<Cell> = (0..10)
        .map(|i| cell(if i % 2 == 0 { 0.1 } else { -0.1 }, 1e-4))
        .collect();
    let tau2 = scatter(&wide, 0.0);
    // The common shift is 0 here, so that is all the drift.
    assert_eq!(drift(&wide), tau2);
    assert!(close(tau2, 0.017_426_792_597_161_1, 1e-9), "{tau2}");
    // Cells that scatter as their samples say: no drift.
    let quiet: Vec<Cell> = (0..10)
        .map(|i| cell(0.005 * f64::from(i % 3) - 0.005, 1e-4))
        .collect();
    assert_eq!(drift(&quiet), 0.0);
    // All of them shifted: drift up to one sample's variance (7 x 1e-4
    // on each side), a change beyond it.
    let moved = |by: f64| {
        quiet
            .iter()
            .map(|c| cell(c.shift + by, 1e-4))
            .collect::<Vec<_>>()
    };
    assert!(close(drift(&moved(0.02)), 0.02 * 0.02, 1e-12));
    assert!(close(drift(&moved(0.5)), 14e-4, 1e-12));
    // One cell that really moved does not make drift of the rest (it
    // moves the median shift a little) nor hide itself.
    let mut one = quiet.clone();
    one[4] = cell(-0.5, 1e-6);
    assert!(drift(&one) < 1e-5, "{}", drift(&one));
    assert!(welch(&one[4], drift(&one), 10).1 < 1e-9);
    // Two cells cannot say which one moved.
    assert_eq!(drift(&[cell(0.0, 1e-6), cell(0.3, 1e-6)]), 0.0);
}

#[test]
fn welch_tests_the_log_ratio_with_the_drift_added() {
    let c = Cell::of(
        &[10.0, 10.2, 9.9, 10.1, 10.0],
        &[12.0, 12.1, 11.9, 12.2, 12.0],
    )
    .unwrap();
    assert!(close(c.shift, (12.04f64 / 10.04).ln(), 1e-12));
    let (sign, p) = welch(&c, 0.0, 1);
    assert_eq!(sign, 1);
    assert!(p < 1e-6, "{p}");
    // A drift as large as the shift leaves it unremarkable.
    let (_, p) = welch(&c, c.shift * c.shift, 60);
    assert!(p > 0.05, "{p}");
    let back = Cell::of(&[12.0, 12.1, 11.9], &[10.0, 10.1, 9.9]).unwrap();
    assert_eq!(welch(&back, 0.0, 1).0, -1);
    // Noise-free samples: any difference is real, none is none.
    let flat = |x: f64| [x, x];
    assert_eq!(
        welch(&Cell::of(&flat(5.0), &flat(6.0)).unwrap(), 0.0, 1),
        (1, 0.0)
    );
    assert_eq!(
        welch(&Cell::of(&flat(5.0), &flat(5.0)).unwrap(), 0.0, 1).1,
        1.0
    );
    // Overlapping noisy samples whose means differ by less than the noise.
    let (_, p) = welch(
        &Cell::of(&[10.0, 12.0, 8.0], &[10.5, 12.5, 8.5]).unwrap(),
        0.0,
        1,
    );
    assert!(p > 0.5, "{p}");
    assert!(Cell::of(&[5.0], &[6.0, 6.0]).is_none());
    assert!(Cell::of(&[0.0, 0.0], &[6.0, 6.0]).is_none());
}
