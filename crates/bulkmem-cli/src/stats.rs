//! Summary statistics of repeated measurements, with the samples kept so
//! a later `bulkmem compare` can test whether two runs differ.

use serde::{Deserialize, Serialize};

/// Median, mean, sample standard deviation, extremes and the raw samples
/// (in the order measured).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub median: f64,
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for one sample.
    pub stdev: f64,
    pub min: f64,
    pub max: f64,
    #[serde(default)]
    pub samples: Vec<f64>,
}

/// A cell whose stdev exceeds this fraction of its median is marked noisy.
pub const NOISY: f64 = 0.05;

impl Stats {
    /// Summary of `samples`; `None` when there are none or any is not finite.
    pub fn of(samples: &[f64]) -> Option<Stats> {
        if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        Some(Stats {
            median,
            mean,
            stdev: var.sqrt(),
            min: v[0],
            max: v[n - 1],
            samples: samples.to_vec(),
        })
    }

    /// [`Stats::of`], or all zeros (a cell that could not be measured).
    pub fn or_zero(samples: &[f64]) -> Stats {
        Stats::of(samples).unwrap_or_default()
    }

    /// Standard deviation relative to the median (0 when the median is 0).
    pub fn spread(&self) -> f64 {
        if self.median > 0.0 {
            self.stdev / self.median
        } else {
            0.0
        }
    }

    pub fn is_noisy(&self) -> bool {
        self.spread() > NOISY
    }
}

/// `z` of the standard normal at 2.5%: the large-df limit of
/// [`t_critical_95`], and the seed of Hill's approximation.
const Z_025: f64 = -1.959_963_984_540_054;

/// The two-sided 5% critical value of Student's t with `df` degrees of
/// freedom (fractional, as Welch–Satterthwaite gives them; below 1 read
/// as 1, which only errs towards "no change"). Within 1e-4 of the exact
/// quantile for every df >= 1.
pub fn t_critical_95(df: f64) -> f64 {
    let n = if df.is_nan() { 1.0 } else { df.max(1.0) };
    if n >= 2.5 {
        hill(n)
    } else {
        // Hill is off by up to 0.9 between 1 and 2 df (it is exact at
        // both): there, the tail integral is solved for t directly.
        let mut t = hill(n);
        for _ in 0..6 {
            t -= (tail(t, n) - 0.05) / tail_slope(t, n);
        }
        t
    }
}

/// G. W. Hill, "Algorithm 396: Student's t-quantiles" (CACM 13(10), 1970),
/// for a two-sided probability of 5%, as R's `qt` uses it: exact at 1 and
/// 2 df, within 4e-5 from 2.5 df on.
fn hill(n: f64) -> f64 {
    const P: f64 = 0.05;
    if (n - 1.0).abs() < 1e-12 {
        return 1.0 / (P * std::f64::consts::FRAC_PI_2).tan();
    }
    if (n - 2.0).abs() < 1e-12 {
        return (2.0 / (P * (2.0 - P)) - 2.0).sqrt();
    }
    let a = 1.0 / (n - 0.5);
    let b = 48.0 / (a * a);
    let mut c = ((20700.0 * a / b - 98.0) * a - 16.0) * a + 96.36;
    let d = ((94.5 / (b + c) - 3.0) / b + 1.0) * (a * std::f64::consts::FRAC_PI_2).sqrt() * n;
    let x = d * P;
    let mut y = x.powf(2.0 / n);
    if y > 0.05 + a {
        let x = Z_025;
        y = x * x;
        if n < 5.0 {
            c += 0.3 * (n - 4.5) * (x + 0.6);
        }
        c += (((0.05 * d * x - 5.0) * x - 7.0) * x - 2.0) * x + b;
        y = (((((0.4 * y + 6.3) * y + 36.0) * y + 94.5) / c - y - 3.0) / b + 1.0) * x;
        y = a * y * y;
        y = if y > 0.002 {
            y.exp_m1()
        } else {
            0.5 * y * y + y
        };
    } else {
        y = ((1.0 / (((n + 6.0) / (n * y) - 0.089 * d - 0.822) * (n + 2.0) * 3.0)
            + 0.5 / (n + 4.0))
            * y
            - 1.0)
            * (n + 1.0)
            / (n + 2.0)
            + 1.0 / y;
    }
    (n * y).sqrt()
}

/// P(|T| > t) for `n` df. With s = sqrt(n) tan(θ) the density becomes
/// cos^(n-1)(θ), so the tail is the integral of sin^(n-1)(u) over
/// [0, atan(sqrt(n)/t)] relative to [0, π/2] (u = π/2 - θ).
fn tail(t: f64, n: f64) -> f64 {
    sin_power_integral((n.sqrt() / t).atan(), n)
        / sin_power_integral(std::f64::consts::FRAC_PI_2, n)
}

fn tail_slope(t: f64, n: f64) -> f64 {
    let u = (n.sqrt() / t).atan();
    -u.sin().powf(n - 1.0) * n.sqrt()
        / (t * t + n)
        / sin_power_integral(std::f64::consts::FRAC_PI_2, n)
}

/// The integral of sin^(n-1)(u) over [0, upper], by Simpson's rule in
/// v = u^n: the integrand becomes (sin u / u)^(n-1) / n, smooth and
/// bounded, where sin^(n-1) has an infinite slope at 0 for n < 2.
fn sin_power_integral(upper: f64, n: f64) -> f64 {
    const STEPS: usize = 64;
    let h = upper.powf(n) / STEPS as f64;
    let f = |v: f64| {
        let u = v.powf(1.0 / n);
        if u == 0.0 {
            1.0
        } else {
            (u.sin() / u).powf(n - 1.0)
        }
    };
    let inner: f64 = (1..STEPS)
        .map(|i| f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 })
        .sum();
    (f(0.0) + inner + f(upper.powf(n))) * h / 3.0 / n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_bad_inputs() {
        let s = Stats::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.mean), (2.0, 1.0, 3.0, 2.0));
        assert!((s.stdev - 1.0).abs() < 1e-12);
        assert_eq!(s.samples, vec![3.0, 1.0, 2.0]);
        assert_eq!(Stats::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert_eq!(Stats::of(&[5.0]).unwrap().stdev, 0.0);
        assert_eq!(Stats::of(&[]), None);
        assert_eq!(Stats::of(&[1.0, f64::NAN]), None);
        assert_eq!(Stats::or_zero(&[]).median, 0.0);
    }

    #[test]
    fn spread_flags_noise() {
        assert!(!Stats::of(&[10.0, 10.1, 9.9]).unwrap().is_noisy());
        assert!(Stats::of(&[10.0, 12.0, 8.0]).unwrap().is_noisy());
        assert_eq!(Stats::default().spread(), 0.0);
    }

    #[test]
    fn t_critical_values_match_published_quantiles() {
        // Two-sided 5% quantiles from tables (df 1-120) and the normal.
        for (df, t) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (3.0, 3.182),
            (5.0, 2.571),
            (10.0, 2.228),
            (30.0, 2.042),
            (31.0, 2.040),
            (120.0, 1.980),
            (1e9, 1.960),
        ] {
            let got = t_critical_95(df);
            assert!((got - t).abs() < 1e-3, "df {df}: {got}, want {t}");
        }
        // Fractional df (Welch), where Hill alone is off by up to 0.9;
        // reference values from mpmath's regularized incomplete beta.
        for (df, t) in [
            (1.1, 10.27680),
            (1.5, 6.01666),
            (2.1, 4.11215),
            (2.4, 3.68350),
        ] {
            let got = t_critical_95(df);
            assert!((got - t).abs() < 1e-3, "df {df}: {got}, want {t}");
        }
        assert_eq!(t_critical_95(0.5), t_critical_95(1.0));
        assert_eq!(t_critical_95(f64::NAN), t_critical_95(1.0));
    }

    #[test]
    fn hill_and_the_tail_integral_agree_where_both_hold() {
        // Two independent methods: the series and the quadrature.
        for df in [2.5, 2.8, 3.0, 3.5] {
            assert!((tail(hill(df), df) - 0.05).abs() < 1e-5, "df {df}");
        }
        let mut last = f64::INFINITY;
        for i in 0..400 {
            let t = t_critical_95(1.0 + i as f64 * 0.05);
            assert!(t < last && t > 1.959, "not decreasing at {i}: {t}");
            last = t;
        }
    }
}
