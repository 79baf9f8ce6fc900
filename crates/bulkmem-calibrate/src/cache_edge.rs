//! Where this thread's cache ends, measured: the size from which a copy
//! repeated over the same buffers runs at memory speed.
//!
//! The ladder used to climb to 32x the LLC share the CPU reports, which on
//! a VM is the host's cache, not what the guest gets (a 2-vCPU Emerald
//! Rapids guest reports 300 MiB of L3), and that top took most of a
//! calibration's time. The edge is found by doubling a hot copy from
//! 256 KiB until its rate has fallen from its peak and stopped falling:
//! well below the peak (memory speed) and flat across two doublings.

use std::time::Instant;

use super::toolkit::{self, gbps};
use crate::error::Error;
use bulkmem::CopyKernel;
use bulkmem::Strategy;

/// The first size tried.
const FROM: usize = 256 << 10;
/// A rate at most this fraction of the peak is past the cache.
const FALLEN: f64 = 0.7;
/// Two rates within this fraction of each other are flat.
const FLAT: f64 = 0.12;

/// What [`find`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheEdge {
    /// The largest size still at least halfway between memory speed and
    /// the peak: the cache this thread gets, as a copy sees it (its two
    /// buffers together take twice this).
    pub edge: usize,
    /// Whether the rate levelled off below `limit`; if not, `edge` is the
    /// limit and the cache may be larger.
    pub found: bool,
    /// (size, GB/s) as measured, ascending.
    pub rates: Vec<(usize, f64)>,
}

/// Measures the edge, trying sizes up to `limit` (at least 256 KiB).
pub fn find(limit: usize) -> Result<CacheEdge, Error> {
    let strategy = [Strategy::Avx2, Strategy::Portable]
        .into_iter()
        .find(|s| s.available())
        .unwrap_or(Strategy::Portable);
    let k = CopyKernel::new(strategy)?;
    let mut rates: Vec<(usize, f64)> = Vec::new();
    let mut size = FROM;
    while size <= limit.max(FROM) {
        rates.push((size, hot_rate(&k, size)?));
        if let Some(level) = levelled(&rates) {
            return Ok(CacheEdge {
                edge: edge(&rates, level),
                found: true,
                rates,
            });
        }
        size = size.saturating_mul(2);
    }
    Ok(CacheEdge {
        edge: rates.last().map_or(FROM, |r| r.0),
        found: false,
        rates,
    })
}

/// GB/s of `k` copying `size` bytes over the same two buffers, warm: the
/// best of three timed copies after one untimed (the best, as anything
/// slower is the host's noise, not the cache).
fn hot_rate(k: &CopyKernel, size: usize) -> Result<f64, Error> {
    let map = |fill| {
        toolkit::prefaulted(size, true, fill).map_err(|e| Error::Measure {
            what: format!("cannot map {size} bytes to find the cache's edge: {e}"),
        })
    };
    let src = map(1)?;
    let mut dst = map(0)?;
    // Small sizes repeat the copy so one timing is long enough to read.
    let reps = ((8 << 20) / size).max(1);
    let mut best = 0.0f64;
    for round in 0..4 {
        let t = Instant::now();
        for _ in 0..reps {
            k.copy(dst.as_mut_slice(), src.as_slice());
        }
        let r = gbps(reps * size, t.elapsed());
        if round > 0 {
            best = best.max(r);
        }
    }
    std::hint::black_box(dst.as_slice()[size - 1]);
    Ok(best)
}

/// The memory-speed level, once the last three rates show it: the last
/// two within [`FLAT`] of each other and at most [`FALLEN`] x the peak.
fn levelled(rates: &[(usize, f64)]) -> Option<f64> {
    let n = rates.len();
    if n < 3 {
        return None;
    }
    let peak = rates.iter().fold(0.0f64, |p, r| p.max(r.1));
    let (a, b) = (rates[n - 2].1, rates[n - 1].1);
    let flat = (b / a - 1.0).abs() <= FLAT;
    (flat && b <= FALLEN * peak).then_some((a + b) / 2.0)
}

/// The largest size whose rate is at least halfway from `level` to the
/// peak before it.
fn edge(rates: &[(usize, f64)], level: f64) -> usize {
    let peak = rates.iter().fold(0.0f64, |p, r| p.max(r.1));
    let half = level + (peak - level) / 2.0;
    rates
        .iter()
        .rev()
        .find(|r| r.1 >= half)
        .map_or(FROM, |r| r.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mib(m: usize) -> usize {
        m << 20
    }

    #[test]
    fn the_edge_is_where_the_rate_falls_halfway_to_memory_speed() {
        // A 32 MiB cache: 60 GB/s to 16 MiB, 40 at 32, then 12 flat.
        let r = vec![
            (mib(4), 58.0),
            (mib(8), 60.0),
            (mib(16), 59.0),
            (mib(32), 40.0),
            (mib(64), 13.0),
            (mib(128), 12.0),
        ];
        let level = levelled(&r).expect("flat at memory speed");
        assert!((level - 12.5).abs() < 1e-9);
        assert_eq!(edge(&r, level), mib(32));
    }

    #[test]
    fn a_rate_still_falling_or_near_the_peak_is_not_level() {
        assert_eq!(
            levelled(&[(1, 60.0), (2, 59.0), (4, 58.0)]),
            None,
            "near the peak"
        );
        assert_eq!(
            levelled(&[(1, 60.0), (2, 30.0), (4, 15.0)]),
            None,
            "still falling"
        );
        assert_eq!(levelled(&[(1, 60.0), (2, 20.0)]), None, "too few");
    }

    #[test]
    fn a_noisy_dip_before_the_edge_does_not_end_the_cache() {
        // 16 MiB dips (a neighbour's burst) but recovers: the edge is
        // where it falls for good.
        let r = vec![
            (mib(8), 60.0),
            (mib(16), 45.0),
            (mib(32), 58.0),
            (mib(64), 14.0),
            (mib(128), 13.0),
        ];
        let level = levelled(&r).unwrap();
        assert_eq!(edge(&r, level), mib(32));
    }

    #[test]
    fn the_edge_is_found_on_this_machine() {
        let e = find(mib(64)).unwrap();
        assert!(
            !e.rates.is_empty() && e.rates.iter().all(|r| r.1 > 0.0),
            "{e:?}"
        );
        assert!(e.edge >= FROM && e.edge <= mib(64), "{e:?}");
    }
}
