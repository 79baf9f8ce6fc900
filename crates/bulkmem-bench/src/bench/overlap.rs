//! `bulkmem bench overlap`: what an asynchronous batch buys. A compute
//! loop on the calling thread (pure arithmetic, sized once to take about
//! as long as the copy) and a cold batch copy of `--total` bytes, run one
//! after the other (compute, then a synchronous `copy_extents`) and
//! overlapped (`submit_copy`, compute, `wait`). Perfect overlap takes
//! max(compute, copy); the ideal speed-up is their sum over their max.

use std::hint::black_box;
use std::time::{Duration, Instant};

use clap::Args;

use bulkmem::{Control, Engine, Extent};

use crate::cli::{check_memory, runtime, twice_the_largest, usage, Failure};
use crate::harness::fill_pattern;
use crate::size;
use bulkmem_machine::units::format_bytes;
use bulkmem_report::stats::Stats;
use bulkmem_report::table::{fixed, Format, Table};

#[derive(Args)]
pub struct OverlapArgs {
    /// Bytes copied per batch. Larger than the last-level cache, so the
    /// copy is cold (every run streams from memory).
    #[arg(long, value_parser = size::parse_size, allow_hyphen_values = true, default_value = "256M")]
    total: usize,
    /// Bytes per extent of the batch.
    #[arg(long, value_parser = size::parse_size, allow_hyphen_values = true, default_value = "2M")]
    extent: usize,
    /// Engine worker threads. More than usable CPUs run with a warning:
    /// they share CPUs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: u32,
    /// Timed runs (the table shows medians).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Table format (no JSON: its rows are times, not the schema's GB/s
    /// cells).
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// The compute side: an xorshift chain, which the compiler can neither
/// vectorise nor shorten, and which touches no memory.
fn compute(iters: u64) -> u64 {
    let mut x = black_box(0x9E37_79B9_7F4A_7C15u64);
    for _ in 0..black_box(iters) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    black_box(x)
}

fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let t = Instant::now();
    let r = f();
    (t.elapsed(), r)
}

fn median(v: &[f64]) -> f64 {
    Stats::of(v).map_or(f64::NAN, |s| s.median)
}

struct Sample {
    compute: f64,
    copy: f64,
    sequential: f64,
    overlapped: f64,
}

pub fn cmd(a: OverlapArgs, quiet: bool) -> Result<(), Failure> {
    if a.extent > a.total {
        return Err(usage("--extent must not exceed --total"));
    }
    check_memory(&[twice_the_largest(
        "--total",
        &[a.total],
        "the copy's source and destination",
    )])?;
    crate::cli::warn_oversubscribed(a.threads as usize, crate::cli::usable_cpus());
    let engine = Engine::builder()
        .threads(a.threads as usize)
        .build()
        .map_err(|e| runtime(e.to_string()))?;
    let mut src = vec![0u8; a.total];
    fill_pattern(&mut src);
    // Written once, so no run pays for its page faults.
    let mut dst = vec![1u8; a.total];
    let extents: Vec<Extent> = dst
        .chunks_mut(a.extent)
        .zip(src.chunks(a.extent))
        .map(|(d, s)| Extent {
            dst: d.as_mut_ptr(),
            src: s.as_ptr(),
            len: d.len(),
        })
        .collect();
    let copy = || {
        // SAFETY: the extents tile `dst` and `src`, alive and otherwise
        // untouched for the whole command.
        unsafe { engine.copy_extents(&extents, Control::default()) }
            .map_err(|e| runtime(e.to_string()))
    };

    // Calibration: the copy's time (after one untimed copy), then the
    // compute loop scaled to match it.
    copy()?;
    let copy_t = (0..3)
        .map(|_| timed(copy).0.as_secs_f64())
        .fold(f64::INFINITY, f64::min);
    let probe = 1u64 << 22;
    let probe_t = timed(|| compute(probe)).0.as_secs_f64().max(1e-9);
    let iters = ((copy_t / probe_t) * probe as f64).max(1.0) as u64;
    if !quiet {
        eprintln!(
            "calibrated: copy {:.1} ms, compute {iters} xorshift steps",
            copy_t * 1e3
        );
    }

    let mut samples = Vec::new();
    for _ in 0..a.runs {
        let compute_t = timed(|| compute(iters)).0;
        let (copy_t, r) = timed(copy);
        r?;
        let (sequential, r) = timed(|| {
            compute(iters);
            copy()
        });
        r?;
        let (overlapped, r) = timed(|| {
            // SAFETY: as for `copy`; the ticket is waited on before the
            // closure returns.
            let t = unsafe { engine.submit_copy(&extents, None) }
                .map_err(|e| runtime(e.to_string()))?;
            compute(iters);
            t.wait().map_err(|e| runtime(e.to_string()))
        });
        r?;
        samples.push(Sample {
            compute: compute_t.as_secs_f64(),
            copy: copy_t.as_secs_f64(),
            sequential: sequential.as_secs_f64(),
            overlapped: overlapped.as_secs_f64(),
        });
    }
    let m = |f: fn(&Sample) -> f64| median(&samples.iter().map(f).collect::<Vec<_>>());
    let (c, k, s, o) = (
        m(|x| x.compute),
        m(|x| x.copy),
        m(|x| x.sequential),
        m(|x| x.overlapped),
    );
    let mut t = Table::new(
        format!(
            "overlap: compute on the caller vs a cold {} batch copy ({} x {}, {} engine thread{}), median of {} runs",
            format_bytes(a.total),
            extents.len(),
            format_bytes(a.extent),
            a.threads,
            if a.threads == 1 { "" } else { "s" },
            a.runs
        ),
        ["", "ms"].map(String::from).to_vec(),
    );
    for (name, v) in [
        ("compute alone", c),
        ("copy alone", k),
        ("sequential (compute, then copy)", s),
        ("overlapped (submit, compute, wait)", o),
    ] {
        t.row(vec![name.to_string(), fixed(v * 1e3)]);
    }
    t.notes.push(format!(
        "speed-up (sequential / overlapped): {}x; ideal (sum / max): {}x; overlapped / max(compute, copy): {}",
        fixed(s / o),
        fixed((c + k) / c.max(k)),
        fixed(o / c.max(k))
    ));
    crate::out::print(&t.render(a.format, 100))
}
