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

/// P(|T| >= |t|) for Student's t with `df` (fractional) degrees of freedom:
/// I_x(df/2, 1/2) with x = df / (df + t²), by statrs' regularized
/// incomplete beta.
pub fn t_two_sided(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return 1.0;
    }
    if t.is_infinite() {
        return 0.0;
    }
    // Beyond 1e12 df the tail is the normal's to far more digits than a
    // verdict needs, and x would round to 1.
    let (t2, df) = (t * t, df.min(1e12));
    statrs::function::beta::beta_reg(df / 2.0, 0.5, df / (df + t2))
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
}
