//! `bench compact --cycles N`: N sessions, one after the other, on one
//! heap, as a runtime collects its heap all its life. Each session has a
//! random mutator and is checked whole; between sessions the heap is laid
//! out again (outside the measured time). What must not grow does not:
//! the pause, the process's mappings and descriptors, and the heap's
//! huge-page backing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bulkmem::compact::{Compaction, Options};
use bulkmem_report::stats::Stats;
use bulkmem_report::table::{fixed, Table};

use super::heap::Heap;
use super::run::{join, mutate, status_kib};
use super::{CompactArgs, Toggle};
use crate::results::{CompactCell, CyclesCell, Row};
use bulkmem_machine::units::format_bytes;

/// Lines of /proc/self/maps, open descriptors, and AnonHugePages (bytes).
fn footprint() -> (usize, usize, u64) {
    let maps = std::fs::read_to_string("/proc/self/maps").map_or(0, |s| s.lines().count());
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count().saturating_sub(1));
    let huge = std::fs::read_to_string("/proc/self/smaps_rollup")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("AnonHugePages:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<u64>().ok())
        .map_or(0, |k| k * 1024);
    (maps, fds, huge)
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// The sessions of one heap size and live share.
fn one(bytes: usize, live: u32, thp: bool, cycles: usize) -> Result<Row, String> {
    let heap = Arc::new(Heap::new(bytes, live, thp)?);
    let (ptr, len) = (heap.map.as_mut_ptr(), heap.map.len());
    let opts = Options::default().huge_pages(thp);
    // Reserved up front: the bench's own bookkeeping must not map memory
    // between the first session and the last (it would show as a mapping
    // the sessions left, and as resident memory).
    let (mut pauses, mut stall_p99s, mut first) =
        (Vec::with_capacity(cycles), Vec::with_capacity(cycles), None);
    let mut busy = std::time::Duration::ZERO;
    let rss_before = status_kib("VmRSS:");
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    for i in 0..cycles {
        if i > 0 {
            heap.refill();
        }
        let t0 = Instant::now();
        // SAFETY: the mutator of the last session is joined; nothing
        // references the heap.
        let mut s = unsafe { Compaction::prepare(ptr, len, heap.clone(), opts) }
            .map_err(|e| format!("session {i}: {e}"))?;
        let pause = t0.elapsed();
        let stop = Arc::new(AtomicBool::new(false));
        let hs = mutate(&heap, 1, true, true, Arc::new(s.fault_counter()), &stop);
        s.start().map_err(|e| e.to_string())?;
        s.finish().map_err(|e| e.to_string())?;
        busy += t0.elapsed();
        stop.store(true, Ordering::Relaxed);
        let m = join(hs)?;
        heap.verify(m.iter().map(|m| m.ops).sum())
            .map_err(|e| format!("session {i}: {e}"))?;
        pauses.push(pause.as_secs_f64() * 1e6);
        let mut st: Vec<f64> = m
            .into_iter()
            .flat_map(|m| m.stalls)
            .map(|n| n as f64 / 1000.0)
            .collect();
        st.sort_by(f64::total_cmp);
        stall_p99s.push(quantile(&st, 0.99));
        drop(st);
        if i == 0 {
            first = Some(footprint());
        }
    }
    let (f, l) = (first.unwrap_or_default(), footprint());
    let mut sorted = pauses.clone();
    sorted.sort_by(f64::total_cmp);
    // Stalls: each session's p99, and their median and worst.
    stall_p99s.sort_by(f64::total_cmp);
    let q = |q| quantile(&stall_p99s, q);
    Ok(Row {
        op: "compact",
        strategy: "concurrent-auto".into(),
        chose: "concurrent-auto".into(),
        size: bytes,
        total: bytes,
        regime: "cold",
        threads: 1,
        runs: cycles,
        gbps: Stats::or_zero(&[(bytes * cycles) as f64 / busy.as_secs_f64() / 1e9]),
        compacted: Some(CompactCell {
            live,
            mutators: 1,
            thp,
            pause_us: Stats::or_zero(&pauses),
            stall_us: [0.0, q(0.5), q(0.99), q(1.0)],
            handler_us: [0.0, 0.0],
            faults_per_mutator: 0.0,
            mutator_share: 0.0,
            total_ms: Stats::or_zero(&[busy.as_secs_f64() * 1e3 / cycles as f64]),
            rss_extra: status_kib("VmHWM:") - rss_before,
            workload: "random".into(),
            faults_per_mib: 0.0,
            cycles: Some(CyclesCell {
                cycles,
                pause_us: [
                    quantile(&sorted, 0.5),
                    quantile(&sorted, 0.99),
                    quantile(&sorted, 1.0),
                ],
                mappings: [f.0, l.0],
                descriptors: [f.1, l.1],
                huge: [f.2, l.2],
            }),
        }),
        ..Default::default()
    })
}

pub fn run(
    a: &CompactArgs,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<Row>, String> {
    let thp = a.thp.first() == Some(&Toggle::On);
    let groups = a.heaps.len() * a.live.len();
    let mut rows = Vec::new();
    for &bytes in &a.heaps {
        for &live in &a.live {
            let what = format!("{} {live}% x{}", format_bytes(bytes), a.cycles);
            progress(rows.len(), groups, &what);
            rows.push(one(bytes, live, thp, a.cycles as usize)?);
        }
    }
    progress(rows.len(), groups, "done");
    Ok(rows)
}

pub fn table(rows: &[Row]) -> Vec<Table> {
    let mut t = Table::new(
        "compact --cycles: sessions one after the other on one heap, a random mutator each; first -> last session".to_string(),
        ["heap", "live", "thp", "sessions", "pause p50 µs", "p99", "max", "mappings", "descriptors", "AnonHuge MiB", "stall p99 µs, median session", "worst", "GB/s", "RSS+ MiB"]
            .map(String::from)
            .to_vec(),
    );
    for r in rows {
        let Some(c) = &r.compacted else { continue };
        let Some(y) = &c.cycles else { continue };
        let mib = |b: u64| b >> 20;
        t.row(vec![
            format_bytes(r.size),
            format!("{}%", c.live),
            if c.thp { "on" } else { "off" }.into(),
            y.cycles.to_string(),
            fixed(y.pause_us[0]),
            fixed(y.pause_us[1]),
            fixed(y.pause_us[2]),
            format!("{} -> {}", y.mappings[0], y.mappings[1]),
            format!("{} -> {}", y.descriptors[0], y.descriptors[1]),
            format!("{} -> {}", mib(y.huge[0]), mib(y.huge[1])),
            fixed(c.stall_us[1]),
            fixed(c.stall_us[3]),
            format!("{:.2}", r.gbps.median),
            format!("{:.0}", c.rss_extra / (1 << 20) as f64),
        ]);
    }
    vec![t]
}
