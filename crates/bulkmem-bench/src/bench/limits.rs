//! `bulkmem bench limits`: what this machine's memory can do, so that the
//! other tables can say how close to it bulkmem comes, not only how far
//! above the per-page loop.
//!
//! Per thread count, over per-thread buffers much larger than a cache:
//! read bandwidth (the library's `calibrate::read_bandwidth`: the widest
//! vector loads, summed, so nothing is written), the
//! non-temporal write bandwidth (the library's streaming clear with the
//! best median) and the temporal
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
//!
//! Batches of folios do not read or write one long run: they take pages
//! scattered over memory, and one core streams those slower than a long
//! run (docs/measurements.md, "Where the 4 KiB time went"). So the same figures
//! are also measured over each buffer's pages taken in a shuffled order,
//! for each `--pages` size: read four pages at once, the next four
//! requested meanwhile (`calibrate::read_pages`, the fastest shape found),
//! and the two writes page by page with one fence at the end. `bench
//! batch` takes each folio size's share from these.

use clap::Args;

use bulkmem::mapping::Mapping;
use bulkmem::{ClearKernel, Op, Options, Strategy};
use bulkmem_calibrate::toolkit::shuffled;
use bulkmem_calibrate::{read_bandwidth, read_pages};

use super::mem::timed;
use crate::arena;
use crate::cli::{
    check_memory, check_outputs, measuring_cpus, publish, warn_oversubscribed, with_progress,
    Failure, Output,
};
use crate::harness::{gbps, interleave, Rounds};
use crate::preflight::{times, Need};
use crate::results::{pivot, Pivot, Row};
use crate::size;
use bulkmem_machine::units::format_bytes;
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
    /// Page sizes to also measure scattered: each buffer's pages of this
    /// size read and written in a shuffled order ("none" for none)
    /// [default: 4K,64K, those no larger than --size].
    #[arg(long, value_delimiter = ',', value_parser = parse_page)]
    pages: Option<Vec<Option<usize>>>,
    #[command(flatten)]
    out: Output,
}

/// The scattered page sizes measured unless `--pages` says otherwise:
/// a base page and the 64 KiB of arm64's large pages and of mTHP folios.
const DEFAULT_PAGES: [usize; 2] = [4 << 10, 64 << 10];

/// `--pages`: a size (a multiple of 64 bytes, at least 4K) or `none`.
fn parse_page(s: &str) -> Result<Option<usize>, String> {
    if s == "none" {
        return Ok(None);
    }
    let p = size::parse_size(s)?;
    if p < 4096 || p % 64 != 0 {
        return Err(format!(
            "'{s}': a page is at least 4K and a multiple of 64 bytes"
        ));
    }
    Ok(Some(p))
}

/// One access pattern's figures (GB/s = 10^9 bytes/s).
#[derive(Clone, Debug)]
pub struct Figures {
    pub read: Stats,
    pub write_nt: Stats,
    pub write: Stats,
    /// `min(read, best write)` run by run.
    pub copy_bound: Stats,
    /// `bus_bound(read, best write)` run by run.
    pub bus_bound: Stats,
}

impl Figures {
    /// What an operation can reach with this pattern: a copy's bound, or
    /// the better write for a clear.
    pub fn bound(&self, op: Op) -> f64 {
        match op {
            Op::Copy => self.copy_bound.median,
            Op::Clear => self.write_nt.median.max(self.write.median),
        }
    }
}

/// One thread count's figures: one long run per thread, and each page
/// size's pages in a shuffled order.
#[derive(Clone, Debug)]
pub struct Limits {
    pub threads: usize,
    pub sequential: Figures,
    /// (page size, figures), in the order asked.
    pub scattered: Vec<(usize, Figures)>,
}

impl Limits {
    /// What an operation can reach over long runs.
    pub fn bound(&self, op: Op) -> f64 {
        self.sequential.bound(op)
    }

    /// What it can reach over scattered pages of `page` bytes, if measured.
    pub fn scattered_bound(&self, op: Op, page: usize) -> Option<f64> {
        self.scattered
            .iter()
            .find(|(p, _)| *p == page)
            .map(|(_, f)| f.bound(op))
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
    let mut pages: Vec<usize> = match &a.pages {
        Some(given) => given.iter().flatten().copied().collect(),
        None => DEFAULT_PAGES.into_iter().filter(|&p| p <= size).collect(),
    };
    pages.dedup();
    if let Some(&p) = pages.iter().find(|&&p| p > size) {
        return Err(crate::cli::usage(format!(
            "--pages {} is larger than --size {}",
            format_bytes(p),
            format_bytes(size)
        )));
    }
    let most = threads.iter().copied().max().unwrap_or(1);
    warn_oversubscribed(most, cpus.len());
    check_memory(&[Need {
        bytes: times(size, most),
        flags: format!("--size {}", format_bytes(size)),
        what: format!("{} per thread for {most} threads", format_bytes(size)),
    }])?;
    let rounds = Rounds {
        runs: a.runs as usize,
        warmup: 1,
    };
    let found = with_progress(quiet, threads.len(), |p| {
        let mut out = Vec::new();
        for (i, &t) in threads.iter().enumerate() {
            p(i, threads.len(), &format!("{t} thread(s)"));
            out.push(measure(t, size, rounds, &cpus, &pages)?);
        }
        p(threads.len(), threads.len(), "done");
        Ok(out)
    })?;
    let rows: Vec<Row> = found.iter().flat_map(|l| rows_of(l, size)).collect();
    let col = |r: &Row| {
        format!(
            "{} thread{}",
            r.threads,
            if r.threads == 1 { "" } else { "s" }
        )
    };
    let mut tables = vec![pivot(
        &rows,
        Pivot {
            title: format!(
                "memory limits, {} per thread: GB/s median±stdev of {} runs (summed over threads); R = read, W = the better write",
                format_bytes(size),
                a.runs
            ),
            corner: "",
            row: &|r: &Row| (!r.strategy.contains(" pages: ")).then(|| r.strategy.clone()),
            col: &col,
            baseline: "",
        },
    )];
    if !pages.is_empty() {
        tables.push(pivot(
            &rows,
            Pivot {
                title: format!(
                    "the same over scattered pages (each thread's pages in a shuffled order; R reads four at once), GB/s median±stdev of {} runs",
                    a.runs
                ),
                corner: "",
                row: &|r: &Row| r.strategy.contains(" pages: ").then(|| r.strategy.clone()),
                col: &col,
                baseline: "",
            },
        ));
    }
    publish(&a.out, &tables, &rows, None)
}

/// One thread's buffer and, per scattered page size, its pages' shuffled
/// order, built before anything is timed; `spare` keeps the allocation
/// the batch clears' page list is built in.
struct Worker {
    buf: Mapping,
    pages: Vec<(usize, Vec<usize>)>,
    spare: Vec<&'static mut [u8]>,
}

/// Measures one thread count: each pattern's read, NT write and temporal
/// write take turns run by run, each thread on its own buffer and on its
/// own CPU while `cpus` last (thread i on `cpus[i % len]`: more threads
/// share them). `pages`: the page sizes to measure scattered as well.
pub fn measure(
    threads: usize,
    size: usize,
    rounds: Rounds,
    cpus: &[usize],
    pages: &[usize],
) -> Result<Limits, String> {
    if cpus.is_empty() {
        return Err("no CPU to measure on".into());
    }
    // Every streaming write this CPU has, the best of them (by median):
    // which one wins differs between CPUs and between long runs and pages.
    let nt: Vec<Strategy> = [Strategy::Avx512Nt, Strategy::Avx2Nt, Strategy::Clzero]
        .into_iter()
        .filter(|&s| ClearKernel::new(s).is_ok())
        .collect();
    let temporal = [Strategy::RepStosb, Strategy::Portable]
        .into_iter()
        .find(|&s| ClearKernel::new(s).is_ok())
        .ok_or("no temporal clear runs here")?;
    let mut workers: Vec<Worker> = (0..threads)
        .map(|t| {
            let buf = arena::prefaulted(size, true, 1)?;
            let pages: Vec<(usize, Vec<usize>)> = pages
                .iter()
                .map(|&p| (p, shuffled(size / p, 0x5ca7_7e4d + t as u64)))
                .collect();
            let least = pages.iter().map(|p| p.0).min().unwrap_or(size);
            let spare = Vec::with_capacity(size / least);
            Ok(Worker { buf, pages, spare })
        })
        .collect::<Result<_, std::io::Error>>()
        .map_err(|e| format!("cannot map {}: {e}", format_bytes(size)))?;
    let bytes = size * threads;
    // Pattern 0 is the long run, pattern 1 + j page size j; each has
    // `per` cells: its read, its temporal write, then each streaming one.
    let per = 2 + nt.len();
    let clear = |w: &mut Worker, j: Option<usize>, s: Strategy| match j {
        None => {
            let k = ClearKernel::new(s).expect("checked above");
            k.clear(w.buf.as_mut_slice());
        }
        Some(j) => {
            // The pages in their shuffled order, listed in the spare
            // allocation (from an empty Vec of the same layout: no
            // allocation while timed).
            let (page, order) = &w.pages[j];
            let mut list: Vec<&mut [u8]> = std::mem::take(&mut w.spare)
                .into_iter()
                .map(|_| unreachable!("the spare list is empty"))
                .collect();
            let base = w.buf.as_mut_slice().as_mut_ptr();
            for &i in order {
                // The order is a permutation, so the pages are disjoint; the
                // list is emptied before this call ends, while `w.buf` is
                // borrowed by it.
                // SAFETY: page i lies in the buffer (i < size / page), apart.
                list.push(unsafe { std::slice::from_raw_parts_mut(base.add(i * page), *page) });
            }
            bulkmem::clear_batch_opts(&mut list, Options::strategy(s))
                .expect("a batch of disjoint slices");
            list.clear();
            w.spare = list
                .into_iter()
                .map(|_| unreachable!("the list was emptied"))
                .collect();
        }
    };
    let stats = interleave(per * (1 + pages.len()), rounds, |cell| {
        let j = (cell / per).checked_sub(1);
        let t = match cell % per {
            0 => timed(&mut workers, cpus, |w| {
                let sum = match j {
                    None => read_bandwidth(w.buf.as_slice()),
                    Some(j) => read_pages(w.buf.as_slice(), w.pages[j].0, &w.pages[j].1),
                };
                std::hint::black_box(sum);
            }),
            1 => timed(&mut workers, cpus, |w| clear(w, j, temporal)),
            k => timed(&mut workers, cpus, |w| clear(w, j, nt[k - 2])),
        };
        Ok(gbps(bytes, t))
    })?;
    let figures = |p: usize| {
        let cells = &stats[per * p..per * (p + 1)];
        // The streaming write with the best median, whole: the best of
        // three run by run would add the noise's upper tail to the bound.
        let best = cells[2..]
            .iter()
            .max_by(|a, b| a.median.total_cmp(&b.median))
            .cloned()
            .unwrap_or_else(|| Stats::or_zero(&vec![0.0; cells[0].samples.len()]));
        figures(&cells[0], &best, &cells[1])
    };
    Ok(Limits {
        threads,
        sequential: figures(0),
        scattered: pages
            .iter()
            .enumerate()
            .map(|(j, &p)| (p, figures(1 + j)))
            .collect(),
    })
}

/// One pattern's figures from its three cells' runs.
fn figures(read: &Stats, write_nt: &Stats, write: &Stats) -> Figures {
    let best = |i: usize| write_nt.samples[i].max(write.samples[i]);
    let runs = 0..read.samples.len();
    let mins: Vec<f64> = runs.clone().map(|i| read.samples[i].min(best(i))).collect();
    let buses: Vec<f64> = runs.map(|i| bus_bound(read.samples[i], best(i))).collect();
    Figures {
        read: read.clone(),
        write_nt: write_nt.clone(),
        write: write.clone(),
        copy_bound: Stats::or_zero(&mins),
        bus_bound: Stats::or_zero(&buses),
    }
}

/// The rows of one thread count: the long run's figures (named as they
/// always were), then each page size's, named `<page> pages: ...` with the
/// page size as the row's size.
fn rows_of(l: &Limits, size: usize) -> Vec<Row> {
    let names = [
        "read",
        "write (non-temporal)",
        "write (temporal)",
        "copy bound: min(R, W)",
        "copy bound, one bus: 1/(1/R+1/W)",
    ];
    let patterns = std::iter::once((None, &l.sequential))
        .chain(l.scattered.iter().map(|(p, f)| (Some(*p), f)));
    patterns
        .flat_map(|(page, f)| {
            let stats = [&f.read, &f.write_nt, &f.write, &f.copy_bound, &f.bus_bound];
            names.iter().zip(stats).map(move |(name, s)| {
                let strategy = match page {
                    None => name.to_string(),
                    Some(p) => format!("{} pages: {name}", format_bytes(p)),
                };
                Row {
                    op: "limits",
                    chose: strategy.clone(),
                    strategy,
                    hint: None,
                    size: page.unwrap_or(size),
                    total: size * l.threads,
                    regime: "cold",
                    threads: l.threads,
                    runs: s.samples.len(),
                    gbps: s.clone(),
                    ..Default::default()
                }
            })
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
