//! The measurements behind a profile, on the calling thread, the way the
//! seeds measure (docs/design.md, "How to measure"):
//!
//! * single calls hot and consumed: the same source and destination every
//!   call, each call followed by one read of the whole destination
//!   ([`read_once`]) and timed with it, repeated until a run has moved
//!   [`HOT_BYTES`], each run preceded by one untimed call of the same
//!   strategy (so it starts from the cache state it leaves, not the
//!   previous strategy's: at 32 MiB a clear after a temporal loop's dirty
//!   lines measured 0.75x of the same clear after a non-temporal one). A
//!   single call with hint `auto` is every preloaded `memcpy`, and programs
//!   read what they copy: timed alone, a copy that streams its destination
//!   to DRAM wins cells its caller then loses (docs/design.md, "The whole
//!   use");
//! * batches cold: extents scattered (shuffled) over arenas of the batch
//!   total, an eviction pass before each run, every strategy through the
//!   library's batch call, as `auto` runs it.
//!
//! Strategies take turns run by run, so a noisy neighbour slows all of them
//! alike; every strategy is verified once per cell from a poisoned
//! destination, so a broken kernel cannot report a fast number. Each
//! strategy's figure is its lower quartile over the runs
//! ([`lower_quartile`]): a kernel that is fast only some of the time is
//! scored by the rest.

use std::time::Instant;

use super::choose::Measured;
use crate::auto::Shape;
use crate::calls::{clear_batch_with, copy_batch_with};
use crate::error::Error;
use crate::handle::Kernel;
use crate::mapping::Mapping;
use crate::strategy::{Op, Options, Strategy};

/// Bytes a hot run moves at least (by repeating the call).
pub const HOT_BYTES: usize = 64 << 20;

/// What destinations hold before a strategy is verified.
const POISON: u8 = 0x5A;

/// Maps `len` bytes advised to huge pages (as the kernel's direct map is,
/// so TLB misses do not dominate) and touches every page with `fill`.
fn prefaulted(len: usize, fill: u8) -> Result<Mapping, Error> {
    let mut m = Mapping::options()
        .huge_pages(true)
        .map(len.max(1))
        .map_err(|e| Error::Calibration {
            what: format!("cannot map {len} bytes: {e}"),
        })?;
    m.as_mut_slice().fill(fill);
    Ok(m)
}

/// Position-dependent source bytes, so a copy from the wrong place shows.
fn pattern(buf: &mut [u8]) {
    for (i, w) in buf.chunks_mut(8).enumerate() {
        let z = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5851_F42D_4C95_7F2D;
        w.copy_from_slice(&z.to_le_bytes()[..w.len()]);
    }
}

/// A deterministic shuffle of 0..n (xorshift Fisher-Yates).
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
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

/// A strategy's figure for a cell: its lower quartile over the runs (the
/// 2nd slowest of 7, the slowest of 3), not its median. On a shared
/// machine a cache-allocating kernel near the cache's edge is fast only
/// while the neighbours leave the cache alone: a hot 32 MiB clear with
/// `libc` ran 12.8-22.7 GB/s within one measurement and 26.8 in another,
/// while `avx2-nt` held 22.5-23.3. Scored by its median it was chosen and
/// then ran at 0.67x; scored by its slow runs, the steady kernel wins.
fn lower_quartile(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n => v[(n - 1) / 4],
    }
}

/// Reads every byte of `buf` once, as a program reads what it has just
/// copied or cleared (a checksum, a parse, a `write` to a socket), and
/// returns a sum of it so the reads cannot be optimised away. Reads 64
/// bytes per step in eight independent sums, so on any x86 it runs well
/// above DRAM speed and the time it adds is where `buf` was found (cache
/// or memory), not the arithmetic.
#[inline(never)]
pub fn read_once(buf: &[u8]) -> u64 {
    // SAFETY: every bit pattern is a valid u64; align_to returns the
    // aligned middle as u64s and the unaligned ends as bytes.
    let (head, body, tail) = unsafe { buf.align_to::<u64>() };
    let mut acc = [0u64; 8];
    let mut lines = body.chunks_exact(8);
    for line in &mut lines {
        for (a, w) in acc.iter_mut().zip(line) {
            *a = a.wrapping_add(*w);
        }
    }
    let words = lines
        .remainder()
        .iter()
        .fold(0u64, |s, w| s.wrapping_add(*w));
    let bytes = head
        .iter()
        .chain(tail)
        .fold(0u64, |s, &b| s.wrapping_add(u64::from(b)));
    acc.iter()
        .fold(words.wrapping_add(bytes), |s, a| s.wrapping_add(*a))
}

fn wrong(op: Op, s: Strategy, size: usize, at: usize) -> Error {
    Error::Calibration {
        what: format!(
            "{op} strategy {s} left byte {at} wrong ({size}-byte cell); its numbers would be meaningless"
        ),
    }
}

/// Figures of `strategies` for one single-call `size`, hot and consumed
/// (each call followed by [`read_once`] of its destination), over `runs`
/// interleaved runs.
pub(super) fn hot(
    op: Op,
    size: usize,
    strategies: &[Strategy],
    runs: usize,
) -> Result<Measured, Error> {
    let mut src = prefaulted(size, 0)?;
    pattern(src.as_mut_slice());
    let mut dst = prefaulted(size, POISON)?;
    let kernels: Vec<Kernel> = strategies
        .iter()
        .map(|&s| Kernel::new(s, op))
        .collect::<Result<_, _>>()?;
    let call = |k: &Kernel, dst: &mut [u8], src: &[u8]| match op {
        Op::Copy => k.copy(dst, src),
        Op::Clear => k.clear(dst),
    };
    let call_and_read = |k: &Kernel, dst: &mut [u8], src: &[u8]| {
        call(k, dst, src);
        std::hint::black_box(read_once(dst));
    };
    for k in &kernels {
        dst.as_mut_slice().fill(POISON);
        call(k, dst.as_mut_slice(), src.as_slice());
        let bad = match op {
            Op::Copy => dst
                .as_slice()
                .iter()
                .zip(src.as_slice())
                .position(|(a, b)| a != b),
            Op::Clear => dst.as_slice().iter().position(|&b| b != 0),
        };
        if let Some(at) = bad {
            return Err(wrong(op, k.strategy(), size, at));
        }
    }
    let reps = (HOT_BYTES / size.max(1)).max(1);
    let mut samples = vec![Vec::with_capacity(runs); kernels.len()];
    for _ in 0..runs {
        for (k, out) in kernels.iter().zip(samples.iter_mut()) {
            call_and_read(k, dst.as_mut_slice(), src.as_slice());
            let t = Instant::now();
            for _ in 0..reps {
                call_and_read(k, dst.as_mut_slice(), src.as_slice());
            }
            out.push((reps * size) as f64 / t.elapsed().as_secs_f64().max(1e-9) / 1e9);
        }
    }
    Ok(Measured {
        op,
        shape: Shape::Single,
        size,
        gbps: strategies
            .iter()
            .copied()
            .zip(samples.into_iter().map(lower_quartile))
            .collect(),
    })
}

/// Arenas for cold batches of one shape, sized for the largest total.
pub(super) struct Arenas {
    src: Mapping,
    dst: Mapping,
    evict: Mapping,
}

impl Arenas {
    /// Arenas for totals up to `total`; the eviction buffer is twice the
    /// LLC (at least 64 MiB).
    pub(super) fn new(op: Op, total: usize, llc: usize) -> Result<Arenas, Error> {
        let mut src = prefaulted(if op == Op::Copy { total } else { 1 }, 0)?;
        pattern(src.as_mut_slice());
        Ok(Arenas {
            src,
            dst: prefaulted(total, POISON)?,
            evict: prefaulted(llc.saturating_mul(2).max(64 << 20), 1)?,
        })
    }
}

/// Medians of `strategies` for a cold batch of `total` bytes in extents of
/// `shape.extent()` bytes, scattered over `a`.
pub(super) fn cold(
    op: Op,
    shape: Shape,
    total: usize,
    strategies: &[Strategy],
    runs: usize,
    a: &mut Arenas,
) -> Result<Measured, Error> {
    let size = shape.extent();
    let count = (total / size).max(1);
    let dst_order = shuffled(count, 0x5eed_0001);
    let src_order = shuffled(count, 0x5eed_0002);
    let mut dst_slots: Vec<Option<&mut [u8]>> = a
        .dst
        .as_mut_slice()
        .chunks_exact_mut(size)
        .take(count)
        .map(Some)
        .collect();
    let mut samples = vec![Vec::with_capacity(runs); strategies.len()];
    // A batch that touches several times the LLC leaves nothing of the
    // previous run worth evicting: skip the pass (on a 260 MiB L3 it read
    // 520 MiB before every run and dominated the calibration's time).
    let evict = total < 2 * a.evict.len();
    let rate = |t: Instant| (count * size) as f64 / t.elapsed().as_secs_f64().max(1e-9) / 1e9;
    match op {
        Op::Copy => {
            let src_slots: Vec<&[u8]> = a.src.as_slice().chunks_exact(size).collect();
            let mut ops: Vec<(&mut [u8], &[u8])> = dst_order
                .iter()
                .zip(&src_order)
                .filter_map(|(&d, &s)| Some((dst_slots[d].take()?, *src_slots.get(s)?)))
                .collect();
            for &s in strategies {
                ops.iter_mut().for_each(|(d, _)| d.fill(POISON));
                copy_batch_with(Options::strategy(s), &mut ops)?;
                for (d, sr) in &ops {
                    if let Some(at) = d.iter().zip(sr.iter()).position(|(x, y)| x != y) {
                        return Err(wrong(op, s, total, at));
                    }
                }
            }
            for _ in 0..runs {
                for (&s, out) in strategies.iter().zip(samples.iter_mut()) {
                    if evict {
                        evict_lines(&a.evict);
                    }
                    let t = Instant::now();
                    copy_batch_with(Options::strategy(s), &mut ops)?;
                    out.push(rate(t));
                }
            }
        }
        Op::Clear => {
            let mut ops: Vec<&mut [u8]> = dst_order
                .iter()
                .filter_map(|&d| dst_slots[d].take())
                .collect();
            for &s in strategies {
                ops.iter_mut().for_each(|d| d.fill(POISON));
                clear_batch_with(Options::strategy(s), &mut ops)?;
                if let Some(at) = ops.iter().flat_map(|d| d.iter()).position(|&b| b != 0) {
                    return Err(wrong(op, s, total, at));
                }
            }
            for _ in 0..runs {
                for (&s, out) in strategies.iter().zip(samples.iter_mut()) {
                    if evict {
                        evict_lines(&a.evict);
                    }
                    let t = Instant::now();
                    clear_batch_with(Options::strategy(s), &mut ops)?;
                    out.push(rate(t));
                }
            }
        }
    }
    Ok(Measured {
        op,
        shape,
        size: total,
        gbps: strategies
            .iter()
            .copied()
            .zip(samples.into_iter().map(lower_quartile))
            .collect(),
    })
}

/// Reads the eviction buffer a line at a time, so the LLC holds it
/// instead of whatever was measured before.
fn evict_lines(m: &Mapping) {
    let mut acc = 0u64;
    for line in m.as_slice().chunks(64) {
        acc = acc.wrapping_add(u64::from(line[0]));
    }
    std::hint::black_box(acc);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffles_are_permutations() {
        let mut v = shuffled(1000, 7);
        assert_ne!(v, (0..1000).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn read_once_reads_every_byte_at_every_alignment() {
        let mut buf: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(read_once(&buf[5..5]), 0);
        for start in 0..17 {
            for end in [start + 1, start + 63, start + 64, start + 200, 300] {
                let before = read_once(&buf[start..end]);
                for i in start..end {
                    buf[i] ^= 0x10;
                    assert_ne!(
                        read_once(&buf[start..end]),
                        before,
                        "{start}..{end} byte {i}"
                    );
                    buf[i] ^= 0x10;
                }
            }
        }
    }

    #[test]
    fn lower_quartiles() {
        assert_eq!(lower_quartile(vec![3.0, 1.0, 2.0]), 1.0);
        assert_eq!(lower_quartile(vec![7.0, 1.0, 6.0, 2.0, 5.0, 3.0, 4.0]), 2.0);
        assert_eq!(lower_quartile(vec![4.0]), 4.0);
        assert_eq!(lower_quartile(vec![]), 0.0);
    }

    #[test]
    fn hot_and_cold_cells_measure_every_strategy_given() {
        let s = [Strategy::PerPage, Strategy::Portable];
        let m = hot(Op::Copy, 8192, &s, 1).unwrap();
        assert_eq!(m.gbps.len(), 2);
        assert!(m.gbps.iter().all(|g| g.1 > 0.0), "{m:?}");
        let mut a = Arenas::new(Op::Clear, 1 << 20, 0).unwrap();
        let m = cold(Op::Clear, Shape::SmallExtents, 1 << 20, &s, 1, &mut a).unwrap();
        assert_eq!((m.size, m.gbps.len()), (1 << 20, 2));
        assert!(m.gbps.iter().all(|g| g.1 > 0.0), "{m:?}");
    }
}
