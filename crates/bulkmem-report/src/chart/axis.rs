//! The axes of a chart: the y scale (linear, or log when the values span
//! too much), nice tick steps, and tick labels.

use bulkmem_machine::units::format_bytes;

/// Above this ratio of the largest to the smallest positive value a linear
/// axis squashes the small lines into the floor, so the axis goes log.
const LOG_Y_RATIO: f64 = 30.0;

/// The smallest of 1, 2, 2.5 and 5 times a power of ten at or above `raw`.
fn nice_step(raw: f64) -> f64 {
    if !raw.is_finite() || raw <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|&v| v >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * mag)
}

/// `v` with as few decimals as `step` needs, so ticks read 0, 0.5, 1 and
/// not 0.000, 0.500, 1.000.
fn fmt_tick(v: f64, step: f64) -> String {
    let decimals = (0..6)
        .find(|&d| {
            let scaled = step * 10f64.powi(d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.max(1.0)
        })
        .unwrap_or(6) as usize;
    format!("{v:.decimals$}")
}

pub(super) fn x_tick_label(x: f64) -> String {
    if x >= 1.0 && x.fract() == 0.0 && x <= usize::MAX as f64 {
        format_bytes(x as usize)
    } else {
        format!("{x:.1}")
    }
}

/// A y axis: where a value lands as a fraction of the plot height, and the
/// ticks to label.
pub(super) struct YAxis {
    pub(super) log: bool,
    lo: f64,
    hi: f64,
    /// (value, label); unlabelled ones are minor grid lines.
    pub(super) ticks: Vec<(f64, Option<String>)>,
}

impl YAxis {
    pub(super) fn fit(values: &[f64], extremes: &[f64]) -> YAxis {
        let pos = |v: &&f64| v.is_finite() && **v > 0.0;
        let min_pos = values
            .iter()
            .filter(pos)
            .copied()
            .fold(f64::INFINITY, f64::min);
        let max_pos = values.iter().filter(pos).copied().fold(0.0, f64::max);
        // The bars widen the axis only so far as they stay on it: a bar to 0
        // on a log axis is cut at the floor rather than dragging it down.
        let top = extremes.iter().filter(pos).copied().fold(max_pos, f64::max);
        if min_pos.is_finite() && max_pos / min_pos > LOG_Y_RATIO {
            let bottom = extremes
                .iter()
                .filter(pos)
                .copied()
                .filter(|&v| v >= min_pos / LOG_Y_RATIO)
                .fold(min_pos, f64::min);
            // Ends snap out to a decade only when it is near: a bar dipping
            // just under 1 should not spend a tenth of the plot on 0.1..1.
            let (lo_log, hi_log) = (bottom.log10(), top.log10());
            let pad = 0.04 * (hi_log - lo_log);
            let snap = |v: f64, decade: f64| if (v - decade).abs() <= 0.3 { decade } else { v };
            let lo = snap(lo_log - pad, lo_log.floor());
            let hi = snap(hi_log + pad, hi_log.ceil());
            let inside = |v: f64| v.log10() >= lo - 1e-9 && v.log10() <= hi + 1e-9;
            let decades = (lo.floor() as i32..=hi.ceil() as i32)
                .filter(|&k| inside(10f64.powi(k)))
                .count();
            let mut ticks = Vec::new();
            for k in lo.floor() as i32..=hi.ceil() as i32 {
                let d = 10f64.powi(k);
                for m in 1..10 {
                    let v = m as f64 * d;
                    if !inside(v) {
                        continue;
                    }
                    // Two labelled decades are too few to read a value off,
                    // so the 2s and 5s get labels too.
                    let labelled = m == 1 || (decades < 3 && (m == 2 || m == 5));
                    let label = format!("{v:.*}", (-k).max(0) as usize);
                    ticks.push((v, labelled.then_some(label)));
                }
            }
            return YAxis {
                log: true,
                lo: 10f64.powf(lo),
                hi: 10f64.powf(hi),
                ticks,
            };
        }
        let step = nice_step(top / 6.0);
        let n = (top / step - 1e-9).ceil().max(1.0) as usize;
        let ticks = (0..=n)
            .map(|i| {
                let v = step * i as f64;
                (v, Some(fmt_tick(v, step)))
            })
            .collect();
        YAxis {
            log: false,
            lo: 0.0,
            hi: step * n as f64,
            ticks,
        }
    }

    /// 0 at the bottom of the plot, 1 at the top, clamped to the plot.
    pub(super) fn frac(&self, v: f64) -> f64 {
        let f = if self.log {
            if v.is_nan() || v <= 0.0 {
                return 0.0;
            }
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        if f.is_nan() {
            0.0
        } else {
            f.clamp(0.0, 1.0)
        }
    }
}
