//! `bulkmem bench limits`: what this machine's memory can do, so that the
//! other tables can say how close to it bulkmem comes, not only how far
//! above the per-page loop.
//!
//! Per thread count, over per-thread buffers much larger than a cache:
//! read bandwidth (the library's `calibrate::read_bandwidth`: the widest
//! vector loads, summed, so nothing is written), the
//! non-temporal write bandwidth (the library's NT clear) and the temporal
//! one (`rep stosb`, which reads each line for ownership first). Two copy
//! bounds follow (W is the better write: a copy can always stream its
//! destination):
//! * `min(R, W)`: a copy reads every byte and writes it, so it is never
//!   faster than either alone. This one always holds, and the batch
//!   bench's share is of it.
//! * `1 / (1/R + 1/W)`: if reads and writes each saturate the same memory
//!   bus, a copy's 2n bytes share it. That holds once enough threads load
//!   DRAM; one thread is limited by its core's outstanding misses instead,
//!   and on a 2-vCPU Emerald Rapids VM one thread's non-temporal copy ran
//!   at 11 GB/s against this model's 8.4 (R 13.5, W 22.9).
//!
//! A clear's bound is W.

use clap::Args;

use bulkmem::calibrate::read_bandwidth;
use bulkmem::mapping::Mapping;
use bulkmem::{ClearKernel, Op, Strategy};

use super::mem::timed;
use crate::arena;
use crate::cli::{
    check_memory, check_outputs, measuring_cpus, publish, warn_oversubscribed, with_progress,
    Failure, Output,
};
use crate::harness::{gbps, interleave, Rounds};
use crate::preflight::{times, Need};
use crate::report::{pivot, Pivot, Row};
use crate::size::{self, fmt_size};
use bulkmem_report::stats::Stats;

#[derive(Args)]
pub struct LimitsArgs {
    /// Thread counts, each thread pinned to its own CPU [default: 1 and
    /// every allowed CPU]. More threads than CPUs run with a warning:
    /// they share CPUs.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: Vec<u32>,
    /// Bytes per thread: well above the LLC share, so the figures are
    /// DRAM's (K, M, G are powers of two).
    #[arg(long, value_parser = size::parse_size, allow_hyphen_values = true, default_value = "256M")]
    size: usize,
    /// Timed runs per figure (medians ± stdev).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    #[command(flatten)]
    out: Output,
}

/// One thread count's figures (GB/s = 10^9 bytes/s).
#[derive(Clone, Debug)]
pub struct Limits {
    pub threads: usize,
    pub read: Stats,
    pub write_nt: Stats,
    pub write: Stats,
    /// `min(read, best write)` run by run.
    pub copy_bound: Stats,
    /// `bus_bound(read, best write)` run by run.
    pub bus_bound: Stats,
}

impl Limits {
    /// What an operation can reach here: a copy's bound, or the better
    /// write for a clear.
    pub fn bound(&self, op: Op) -> f64 {
        match op {
            Op::Copy => self.copy_bound.median,
            Op::Clear => self.write_nt.median.max(self.write.median),
        }
    }
}

/// A copy's bound when reads (at most `read` GB/s) and writes (`write`)
/// share one saturated bus: the bus's time is spent on both.
pub fn bus_bound(read: f64, write: f64) -> f64 {
    if read <= 0.0 || write <= 0.0 {
        return 0.0;
    }
    1.0 / (1.0 / read + 1.0 / write)
}

pub fn cmd(a: LimitsArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), None)?;
    let cpus = measuring_cpus(None)?;
    let mut threads: Vec<usize> = if a.threads.is_empty() {
        vec![1, cpus.len()]
    } else {
        a.threads.iter().map(|&t| t as usize).collect()
    };
    threads.dedup();
    let size = a.size.next_multiple_of(4096);
    let most = threads.iter().copied().max().unwrap_or(1);
    warn_oversubscribed(most, cpus.len());
    check_memory(&[Need {
        bytes: times(size, most),
        flags: format!("--size {}", fmt_size(size)),
        what: format!("{} per thread for {most} threads", fmt_size(size)),
    }])?;
    let rounds = Rounds {
        runs: a.runs as usize,
        warmup: 1,
    };
    let found = with_progress(quiet, threads.len(), |p| {
        let mut out = Vec::new();
        for (i, &t) in threads.iter().enumerate() {
            p(i, threads.len(), &format!("{t} thread(s)"));
            out.push(measure(t, size, rounds, &cpus)?);
        }
        p(threads.len(), threads.len(), "done");
        Ok(out)
    })?;
    let rows: Vec<Row> = found.iter().flat_map(|l| rows_of(l, size)).collect();
    let table = pivot(
        &rows,
        Pivot {
            title: format!(
                "memory limits, {} per thread: GB/s median±stdev of {} runs (summed over threads); R = read, W = the better write",
                fmt_size(size),
                a.runs
            ),
            corner: "",
            row: &|r: &Row| Some(r.strategy.clone()),
            col: &|r: &Row| format!("{} thread{}", r.threads, if r.threads == 1 { "" } else { "s" }),
            baseline: "",
        },
    );
    publish(&a.out, &[table], &rows, None)
}

/// Measures one thread count: read, NT write and temporal write take turns
/// run by run, each thread on its own buffer and on its own CPU while
/// `cpus` last (thread i on `cpus[i % len]`: more threads share them).
pub fn measure(
    threads: usize,
    size: usize,
    rounds: Rounds,
    cpus: &[usize],
) -> Result<Limits, String> {
    if cpus.is_empty() {
        return Err("no CPU to measure on".into());
    }
    let nt = [Strategy::Avx512Nt, Strategy::Avx2Nt]
        .into_iter()
        .find_map(|s| ClearKernel::new(s).ok());
    let temporal = [Strategy::RepStosb, Strategy::Portable]
        .into_iter()
        .find_map(|s| ClearKernel::new(s).ok())
        .ok_or("no temporal clear runs here")?;
    let mut bufs: Vec<Mapping> = (0..threads)
        .map(|_| arena::prefaulted(size, true, 1))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot map {}: {e}", fmt_size(size)))?;
    let bytes = size * threads;
    let stats = interleave(3, rounds, |cell| {
        let t = match cell {
            0 => timed(&mut bufs, cpus, |m| {
                std::hint::black_box(read_bandwidth(m.as_slice()));
            }),
            1 => match nt {
                Some(k) => timed(&mut bufs, cpus, |m| k.clear(m.as_mut_slice())),
                None => return Ok(0.0),
            },
            _ => timed(&mut bufs, cpus, |m| temporal.clear(m.as_mut_slice())),
        };
        Ok(gbps(bytes, t))
    })?;
    let (read, write_nt, write) = (stats[0].clone(), stats[1].clone(), stats[2].clone());
    let best = |i: usize| write_nt.samples[i].max(write.samples[i]);
    let runs = 0..read.samples.len();
    let mins: Vec<f64> = runs.clone().map(|i| read.samples[i].min(best(i))).collect();
    let buses: Vec<f64> = runs.map(|i| bus_bound(read.samples[i], best(i))).collect();
    Ok(Limits {
        threads,
        read,
        write_nt,
        write,
        copy_bound: Stats::or_zero(&mins),
        bus_bound: Stats::or_zero(&buses),
    })
}

fn rows_of(l: &Limits, size: usize) -> Vec<Row> {
    [
        ("read", &l.read),
        ("write (non-temporal)", &l.write_nt),
        ("write (temporal)", &l.write),
        ("copy bound: min(R, W)", &l.copy_bound),
        ("copy bound, one bus: 1/(1/R+1/W)", &l.bus_bound),
    ]
    .into_iter()
    .map(|(name, s)| Row {
        op: "limits",
        strategy: name.to_string(),
        chose: name.to_string(),
        hint: None,
        size,
        total: size * l.threads,
        regime: "cold",
        threads: l.threads,
        runs: s.samples.len(),
        gbps: s.clone(),
        ..Default::default()
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bus_bound_is_the_harmonic_sum() {
        // Equal read and write: half of either.
        assert!((bus_bound(20.0, 20.0) - 10.0).abs() < 1e-12);
        // 30 read, 15 write: 1 / (1/30 + 1/15) = 10.
        assert!((bus_bound(30.0, 15.0) - 10.0).abs() < 1e-12);
        assert_eq!(bus_bound(0.0, 10.0), 0.0);
        for (r, w) in [(1.0, 100.0), (50.0, 7.0), (12.5, 12.5)] {
            let b = bus_bound(r, w);
            assert!(b < r.min(w) && b >= r.min(w) / 2.0, "{r} {w} {b}");
        }
    }
}
