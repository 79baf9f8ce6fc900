//! The measurement loop every bench shares: cells are verified once by the
//! caller, then measured in interleaved rounds (every cell once per round,
//! so drift on a shared machine hits all cells alike), after `warmup`
//! untimed rounds; each cell's samples become [`Stats`].

use std::time::Duration;

use crate::stats::Stats;

/// How many rounds a bench measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounds {
    /// Timed rounds; every cell gets one sample per round.
    pub runs: usize,
    /// Untimed rounds before them (page faults, frequency ramp, caches).
    pub warmup: usize,
}

/// Measures `cells` cells: `measure(i)` runs cell `i` once and returns its
/// figure (GB/s, or whatever the bench reports). Rounds go cell 0..n, then
/// again; a failing cell stops the bench with its error.
pub fn interleave(
    cells: usize,
    rounds: Rounds,
    mut measure: impl FnMut(usize) -> Result<f64, String>,
) -> Result<Vec<Stats>, String> {
    for _ in 0..rounds.warmup {
        for i in 0..cells {
            measure(i)?;
        }
    }
    let mut samples = vec![Vec::with_capacity(rounds.runs); cells];
    for _ in 0..rounds.runs {
        for (i, s) in samples.iter_mut().enumerate() {
            s.push(measure(i)?);
        }
    }
    Ok(samples.iter().map(|s| Stats::or_zero(s)).collect())
}

/// What destinations hold before a cell is verified, so a kernel that
/// writes nothing cannot pass.
pub const POISON: u8 = 0x5A;

/// GB/s for `bytes` moved in `t`.
pub fn gbps(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64().max(1e-9) / 1e9
}

/// A deterministic shuffle of 0..n (xorshift Fisher-Yates): scattered
/// extents, the same on every run and machine.
pub fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut x = seed | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// Position-dependent source bytes, so a copy from the wrong place shows.
pub fn fill_pattern(buf: &mut [u8]) {
    for (i, w) in buf.chunks_mut(8).enumerate() {
        let mut z = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let b = (z ^ (z >> 31)).to_le_bytes();
        w.copy_from_slice(&b[..w.len()]);
    }
}

/// CPU time this process has used so far, all threads (ended ones too).
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage writes one rusage into the zeroed struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_interleave_cells_after_the_warmup() {
        let mut order = Vec::new();
        let stats = interleave(2, Rounds { runs: 3, warmup: 1 }, |i| {
            order.push(i);
            Ok((order.len() * 10 + i) as f64)
        })
        .unwrap();
        assert_eq!(order, [0, 1, 0, 1, 0, 1, 0, 1]);
        // Warm-up figures (10, 21) are dropped.
        assert_eq!(stats[0].samples, [30.0, 50.0, 70.0]);
        assert_eq!(stats[1].samples, [41.0, 61.0, 81.0]);
        let err = interleave(1, Rounds { runs: 2, warmup: 0 }, |_| Err("bad".into()));
        assert_eq!(err.unwrap_err(), "bad");
    }
}
