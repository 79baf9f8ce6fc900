//! Median, minimum and maximum of repeated measurements.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

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
        Some(Stats {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_bad_inputs() {
        assert_eq!(
            Stats::of(&[3.0, 1.0, 2.0]),
            Some(Stats {
                median: 2.0,
                min: 1.0,
                max: 3.0
            })
        );
        assert_eq!(Stats::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert_eq!(Stats::of(&[]), None);
        assert_eq!(Stats::of(&[1.0, f64::NAN]), None);
    }
}
