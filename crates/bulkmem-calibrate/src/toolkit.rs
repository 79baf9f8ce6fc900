//! The measuring parts `bulkmem tune` and every `bulkmem bench` share
//! (docs/measurements.md, "How to measure"): pre-faulted buffers, a source
//! pattern that shows a copy from the wrong place, poisoned destinations,
//! scattered extents, the eviction pass, the read that stands for a
//! program using what it copied, interleaved rounds and the score a
//! choice is made on. Public so that the command measures exactly as the
//! calibration does.

use std::io;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use bulkmem::mapping::Mapping;
use bulkmem::Op;

mod score;
mod sliced;
pub use score::{interleave_pruned, lower_quartile, paired_ratio, Race, OUT_OF_RACE};
pub use sliced::{
    bench_pieces, interleave_sliced, slices, Piece, BENCH_PIECES, MAX_SLICES, STALLED,
};

/// What destinations hold before a kernel is verified, so one that writes
/// nothing cannot pass.
pub const POISON: u8 = 0x5A;

/// Maps `len` bytes (at least one page), advises transparent huge pages if
/// `huge_pages` (as the kernel's direct map is, so TLB misses do not
/// dominate; without it the system's default decides, as for any
/// allocation), and touches every page with `fill`, so no page fault lands
/// inside a timed region.
pub fn prefaulted(len: usize, huge_pages: bool, fill: u8) -> io::Result<Mapping> {
    let mut opts = Mapping::options();
    if huge_pages {
        opts = opts.huge_pages(true);
    }
    let mut m = opts.map(len.max(1))?;
    m.as_mut_slice().fill(fill);
    Ok(m)
}

/// Position-dependent source bytes (a splitmix64 of each word's index), so
/// a copy from the wrong place, or a stale one, shows.
pub fn pattern(buf: &mut [u8]) {
    for (i, w) in buf.chunks_mut(8).enumerate() {
        let mut z = (i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let b = (z ^ (z >> 31)).to_le_bytes();
        w.copy_from_slice(&b[..w.len()]);
    }
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

/// The first `count` extents of `size` bytes of `dst`, in a shuffled
/// order: a cold batch's destinations, scattered over its arena the way a
/// migration's folios are, so no prefetcher follows one extent into the
/// next. The same order on every run and machine.
pub fn scattered(dst: &mut [u8], size: usize, count: usize) -> Vec<&mut [u8]> {
    let mut slots: Vec<Option<&mut [u8]>> =
        dst.chunks_exact_mut(size).take(count).map(Some).collect();
    shuffled(slots.len(), 0x5eed_0001)
        .into_iter()
        .filter_map(|d| slots[d].take())
        .collect()
}

/// [`scattered`] destinations, each paired with a source extent of `src`
/// in another shuffled order (a copy's batch); as many pairs as both arenas
/// hold extents, up to `count`.
pub fn scattered_pairs<'a>(
    dst: &'a mut [u8],
    src: &'a [u8],
    size: usize,
    count: usize,
) -> Vec<(&'a mut [u8], &'a [u8])> {
    let src_slots: Vec<&[u8]> = src.chunks_exact(size).take(count).collect();
    let src_order = shuffled(src_slots.len(), 0x5eed_0002);
    scattered(dst, size, count)
        .into_iter()
        .zip(src_order)
        .map(|(d, s)| (d, src_slots[s]))
        .collect()
}

/// Bytes of the buffer [`evict`] reads through on a machine with `llc`
/// bytes of last-level cache: twice the LLC, so nothing measured before
/// survives it, and at least 64 MiB where the LLC is unknown or small.
pub fn eviction_bytes(llc: usize) -> usize {
    llc.saturating_mul(2).max(64 << 20)
}

/// The buffer [`evict`] reads through ([`eviction_bytes`] of it),
/// prefaulted, on huge pages where `huge_pages`.
pub fn eviction_buffer(llc: usize, huge_pages: bool) -> io::Result<Mapping> {
    prefaulted(eviction_bytes(llc), huge_pages, 1)
}

/// Reads `buf` one cache line at a time, so that afterwards the LLC holds
/// it instead of whatever was measured before (the kernel patches' eviction pass;
/// `buf` is at least twice the LLC).
pub fn evict(buf: &Mapping) {
    let mut acc = 0u64;
    for line in buf.as_slice().chunks(64) {
        acc = acc.wrapping_add(u64::from(line[0]));
    }
    std::hint::black_box(acc);
}

/// Writes back and drops `buf` from every cache level, so that the next
/// access finds it in memory: what a cold measurement needs of the buffers
/// it touched, at the cost of touching them once ([`evict`] reads twice
/// the LLC instead, 600 MiB a run where a VM reports 300 MiB of L3, and
/// that dominated a calibration's cold cells). Uses CLFLUSHOPT, 2.4 ns a
/// dirty line on the Emerald Rapids VM; plain CLFLUSH, serialising, took
/// 137 ns there, slower than the read it would replace, so without
/// CLFLUSHOPT this returns `false` and flushes nothing: evict then.
pub fn flush(buf: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if !has_clflushopt() {
            return false;
        }
        if buf.is_empty() {
            return true; // its pointer may dangle
        }
        let p = buf.as_ptr();
        // From the line holding the first byte to the one holding the last.
        let mut off = -((p as usize & 63) as isize);
        while off < buf.len() as isize {
            // `p + off` lies in `buf` or, for the first line, in the same
            // cache line (so the same page) as its first byte.
            // SAFETY: CLFLUSHOPT is present; the address is mapped (above);
            // the flush neither reads nor writes the bytes as Rust sees them.
            unsafe {
                std::arch::asm!(
                    "clflushopt [{}]",
                    in(reg) p.wrapping_offset(off),
                    options(nostack, preserves_flags)
                );
            }
            off += 64;
        }
        // SAFETY: no operands; CLFLUSHOPT is ordered only by a fence.
        unsafe { std::arch::x86_64::_mm_mfence() };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = buf;
        false
    }
}

/// Untimed calls before a hot run of `len` bytes, so that it starts from
/// the cache state its own kernel leaves rather than the previous cell's.
/// One is enough in L2 and past the caches; between them a cache-
/// allocating kernel needs several passes to win the L3 back after a
/// non-temporal one ran over the same buffers: on the Emerald Rapids VM a
/// consumed 32 MiB `rep stosb` clear measured 8.5 and 11.8 GB/s (±3.4-3.9)
/// after one warm-up call and 13.2 and 14.5 (±1.3-1.4) after four, and the
/// `auto` row running the same kernel at 16 MiB 12.0 and 8.8 against 14.3
/// and 13.5: which kernel ran before decided the figure.
pub fn warm_calls(len: usize) -> usize {
    if (WARM_FROM..=WARM_TO).contains(&len) {
        4
    } else {
        1
    }
}

/// The range [`warm_calls`] warms four times: from past an L2 to well past
/// the L3 share of the machines measured.
pub const WARM_FROM: usize = 1 << 20;
/// See [`WARM_FROM`].
pub const WARM_TO: usize = 32 << 20;

/// Cells up to this size are verified byte by byte; larger ones on a
/// sample ([`poison`], [`first_wrong`]): checking every byte of a 1 GiB
/// cell for each strategy cost as much as measuring it.
pub const FULL_CHECK: usize = 16 << 20;

/// What a verification looks at in a buffer of `len` bytes: everything,
/// or (`sparse`) the first and last 8 bytes of every 4 KiB, where a kernel
/// that skipped, stopped short or misplaced a block shows.
fn sample(len: usize, sparse: bool) -> Box<dyn Iterator<Item = std::ops::Range<usize>>> {
    if !sparse {
        return Box::new(std::iter::once(0..len));
    }
    Box::new((0..len).step_by(4096).flat_map(move |p| {
        let end = (p + 4096).min(len);
        [p..(p + 8).min(end), end.saturating_sub(8).max(p)..end]
    }))
}

/// Fills with [`POISON`] what [`first_wrong`] will look at: every byte,
/// or (`sparse`) a sample.
pub fn poison(buf: &mut [u8], sparse: bool) {
    for r in sample(buf.len(), sparse) {
        buf[r].fill(POISON);
    }
}

/// The first byte of `dst` that a copy from `src` (or, with `src` empty,
/// a clear) left wrong, among every byte or (`sparse`) the sample
/// [`poison`] poisoned.
pub fn first_wrong(dst: &[u8], src: &[u8], sparse: bool) -> Option<usize> {
    sample(dst.len(), sparse)
        .flatten()
        .find(|&i| match src.get(i) {
            Some(&b) => dst[i] != b,
            None if src.is_empty() => dst[i] != 0,
            None => true, // a source shorter than the destination
        })
}

/// A cold batch's memory: a source arena in [`pattern`] (one byte for a
/// clear, which reads none), a destination arena in [`POISON`], both
/// prefaulted, and the [`Cooler`] that makes them cold before each run.
/// Sized once for the largest batch, so smaller ones reuse them.
pub struct ColdArenas {
    /// Where copies read from.
    pub src: Mapping,
    /// Where every op writes.
    pub dst: Mapping,
    /// Makes the arenas cold before a run.
    pub cooler: Cooler,
}

impl ColdArenas {
    /// Arenas for `op` batches of up to `total` bytes on a machine with
    /// `llc` bytes of last-level cache, on huge pages where `huge_pages`.
    pub fn new(op: Op, total: usize, llc: usize, huge_pages: bool) -> io::Result<ColdArenas> {
        let mut src = prefaulted(if op == Op::Copy { total } else { 1 }, huge_pages, 0)?;
        pattern(src.as_mut_slice());
        Ok(ColdArenas {
            src,
            dst: prefaulted(total, huge_pages, POISON)?,
            cooler: Cooler::new(llc, huge_pages)?,
        })
    }
}

/// What makes a cold run's buffers cold before it: [`flush`] of what the
/// last run touched, or, where lines cannot be flushed, [`evict`] through
/// a buffer of twice the LLC (at least 64 MiB), mapped only then. Of a run
/// that touched twice the LLC or more only the last twice-the-LLC is
/// flushed: the rest left the caches during the run, but what it left
/// behind, dirty lines of a cache-allocating kernel, would be written back
/// during the next run and charged to whichever strategy comes next (a
/// 256 MiB cold clear in 4 KiB extents by `clzero` measured 4-8% slower
/// after `portable` than after `avx2-nt`). Without CLFLUSHOPT such a run
/// is left as it is: the eviction read would cost as much as the run.
pub struct Cooler {
    evict: Option<Mapping>,
    llc: usize,
}

impl Cooler {
    /// A cooler for a machine with `llc` bytes of last-level cache.
    pub fn new(llc: usize, huge_pages: bool) -> io::Result<Cooler> {
        let evict = if flush(&[]) {
            None
        } else {
            Some(eviction_buffer(llc, huge_pages)?)
        };
        Ok(Cooler { evict, llc })
    }

    /// Makes `bufs`, `touched` bytes in all (what the last run touched, in
    /// the order it touched them), cold.
    pub fn cool<'a>(&self, touched: usize, bufs: impl IntoIterator<Item = &'a [u8]>) {
        let reach = self.llc.max(32 << 20).saturating_mul(2);
        match &self.evict {
            Some(_) if touched >= reach => {}
            Some(e) => evict(e),
            None => last_touched(touched, reach, bufs).for_each(|b| {
                flush(b);
            }),
        }
    }
}

/// The last `reach` bytes of `bufs` (`touched` bytes in all, in the order
/// they were touched): only those can still be cached.
fn last_touched<'a>(
    touched: usize,
    reach: usize,
    bufs: impl IntoIterator<Item = &'a [u8]>,
) -> impl Iterator<Item = &'a [u8]> {
    let mut skip = touched.saturating_sub(reach);
    bufs.into_iter().filter_map(move |b| {
        if skip >= b.len() {
            skip -= b.len();
            None
        } else {
            let tail = &b[skip..];
            skip = 0;
            Some(tail)
        }
    })
}

/// CPUID.(EAX=7,ECX=0):EBX\[23\], read once.
#[cfg(target_arch = "x86_64")]
fn has_clflushopt() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        use std::arch::x86_64::{__cpuid, __cpuid_count};
        // CPUID is unprivileged and present on every x86-64 CPU.
        __cpuid(0).eax >= 7 && (__cpuid_count(7, 0).ebx >> 23) & 1 == 1
    })
}

/// The shortest a benchmark's hot run should last. A run of a fixed
/// 64 MiB lasted 0.7-2 ms from 4 KiB to 2 MiB, and on the Zen 3 VM such
/// runs were the noisiest of all: the middle half of the ratios of two
/// runs of one kernel spread +-4-6% at 1-2 ms, +-1-2% at 0.1-0.5 ms and
/// at 4-8 ms (hot 64 KiB and 2 MiB clears, 201 pairs each). Something
/// costing tens of microseconds lands every few milliseconds (the guest's
/// 250 Hz tick, with the exit it costs the VM, fits), and a run about as
/// long as its period gets it once, twice or not at all; a run of several
/// periods averages it. Long runs, unlike short ones, hold wherever that
/// period lies.
pub const MIN_RUN: Duration = Duration::from_millis(10);

/// How many calls a run makes so that it lasts at least `min_run`, where
/// `reps` calls took `probe`: `reps` times a whole factor (at most 64;
/// never fewer than `reps`).
pub fn reps_lasting(reps: usize, probe: Duration, min_run: Duration) -> usize {
    let factor = if probe.is_zero() {
        64
    } else {
        min_run.as_nanos().div_ceil(probe.as_nanos()).clamp(1, 64) as usize
    };
    reps.saturating_mul(factor)
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

/// CPU time this process has used so far, all threads (ended ones too):
/// set against wall time, how busy a multi-threaded run kept its CPUs.
pub fn cpu_time() -> Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into the pointer it is given,
    // which points to a zeroed one (a valid rusage either way).
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs `work` on every worker at once, worker i pinned to `cpus[i % n]`
/// (worker 0 on the calling thread, which stays where it is), and returns
/// the time from their common start to the last finish: one timed run of
/// a multi-threaded measurement. A worker that cannot be pinned runs
/// where the system puts it. `cpus` must not be empty when there is more
/// than one worker.
pub fn timed_on<W: Send>(
    workers: &mut [W],
    cpus: &[usize],
    work: impl Fn(&mut W) + Sync,
) -> Duration {
    if workers.len() == 1 {
        let t = Instant::now();
        work(&mut workers[0]);
        return t.elapsed();
    }
    let barrier = Barrier::new(workers.len());
    let (first, rest) = workers.split_first_mut().expect("at least one worker");
    std::thread::scope(|scope| {
        for (i, w) in rest.iter_mut().enumerate() {
            let (barrier, work) = (&barrier, &work);
            let cpu = cpus[(i + 1) % cpus.len()];
            scope.spawn(move || {
                let _ = bulkmem::placement::pin_to(cpu);
                barrier.wait();
                work(w);
            });
        }
        barrier.wait();
        let t = Instant::now();
        work(first);
        // Leaving the scope joins the others: their finish is in the time.
        t
    })
    .elapsed()
}

/// GB/s (10^9 bytes per second) for `bytes` done in `t`.
pub fn gbps(bytes: usize, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64().max(1e-9) / 1e9
}

/// In which order a round of [`interleave`] visits the cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Timed round `r` starts at cell `r % cells` and wraps, so each cell
    /// runs in every position as often as the rounds allow. What a cell
    /// leaves behind (dirty lines to write back, a frequency step) then
    /// falls on every cell in turn, not always on the one after it: in one
    /// fixed-order run the `auto` row, last, measured 0.94x the row of the
    /// very kernel it ran (hot 32 MiB copy, Zen 3).
    Rotated,
    /// 0, 1, 2, ... every round: for cells that depend on the one before
    /// (a migration there, then back).
    Fixed,
}

/// Measures `cells` cells in interleaved rounds: `warmup` untimed rounds,
/// then `runs` rounds in which `measure(i)` runs cell `i` once and
/// returns its figure. Every cell runs once per round, so drift on a
/// shared machine (a neighbour, a frequency change) hits all cells alike
/// and their ratios stay honest; `order` says in which order. Returns
/// each cell's samples in round order (sample `r` of every cell comes
/// from round `r`, so ratios can be paired by round); the first error
/// stops the measurement.
pub fn interleave<E>(
    cells: usize,
    runs: usize,
    warmup: usize,
    order: Order,
    mut measure: impl FnMut(usize) -> Result<f64, E>,
) -> Result<Vec<Vec<f64>>, E> {
    for _ in 0..warmup {
        for i in 0..cells {
            measure(i)?;
        }
    }
    let mut samples = vec![Vec::with_capacity(runs); cells];
    for round in 0..runs {
        for i in visit(order, round, (0..cells).collect()) {
            samples[i].push(measure(i)?);
        }
    }
    Ok(samples)
}

/// The cells of one round in the order `order` runs them.
fn visit(order: Order, round: usize, mut cells: Vec<usize>) -> Vec<usize> {
    if order == Order::Rotated && !cells.is_empty() {
        let n = cells.len();
        cells.rotate_left(round % n);
    }
    cells
}

#[cfg(test)]
mod tests;
