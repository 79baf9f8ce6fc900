//! A toy compacting garbage collector: a heap of pages with live objects
//! scattered among dead ones is compacted into a fresh region by moving the
//! live pages (UFFDIO_MOVE, seed 003), then the old heap is released.
//! Moving never copies a byte and never holds two copies of the live data.
//!
//!     cargo run --release -p bulkmem --example compact [heap MiB] [live %]

use std::time::Instant;

use bulkmem::uffd::{MoveOptions, Mover};
use bulkmem::Extent;

const PAGE: usize = 4096;

fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (pages * PAGE) as f64 / (1 << 20) as f64
}

fn map(len: usize) -> *mut u8 {
    // SAFETY: a fresh private anonymous mapping.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap failed");
    p.cast()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let heap_mib: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(256);
    let live_pct: usize = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(25)
        .min(100);
    let pages = heap_mib * 256;

    let mut mover = match Mover::new() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("compact: {e}");
            std::process::exit(1);
        }
    };
    let heap = map(pages * PAGE);
    // Every page holds objects; each page starts with its own number.
    for p in 0..pages {
        // SAFETY: page p of our heap.
        unsafe { heap.add(p * PAGE).cast::<u64>().write(p as u64 ^ 0xfeed) };
    }
    // Liveness from a deterministic hash: scattered, with some runs.
    let live: Vec<usize> = (0..pages)
        .filter(|&p| (p.wrapping_mul(0x9E37_79B9) >> 7) % 100 < live_pct)
        .collect();
    let rss_before = rss_mib();

    let to = map(live.len().max(1) * PAGE);
    mover
        .register(to, live.len().max(1) * PAGE)
        .expect("register the to-space");
    let extents: Vec<Extent> = live
        .iter()
        .enumerate()
        .map(|(slot, &p)| Extent {
            // SAFETY: slot < live.len() and p < pages: inside both mappings.
            dst: unsafe { to.add(slot * PAGE) },
            // SAFETY: p < pages: inside the heap.
            src: unsafe { heap.add(p * PAGE) },
            len: PAGE,
        })
        .collect();
    let t = Instant::now();
    // SAFETY: both mappings are ours and nothing references them meanwhile.
    let report = unsafe { mover.move_batch(&extents, MoveOptions::default().fallback_copy(true)) }
        .expect("compaction");
    let took = t.elapsed();
    // The old heap now holds only dead objects: give it back.
    // SAFETY: unmapping our own heap; no live data is left in it.
    unsafe { libc::munmap(heap.cast(), pages * PAGE) };
    mover
        .unregister(to, live.len().max(1) * PAGE)
        .expect("unregister");
    let bad = live
        .iter()
        .enumerate()
        .filter(|&(slot, &p)| {
            // SAFETY: slot < live.len(), so the page lies in the registered
            // destination range, and every slot was moved into (the report
            // is checked below).
            let v = unsafe { to.add(slot * PAGE).cast::<u64>().read() };
            v != p as u64 ^ 0xfeed
        })
        .count();

    println!(
        "heap {heap_mib} MiB, {} of {pages} pages live ({live_pct}%)",
        live.len()
    );
    println!(
        "moved {} pages (+{} copied) in {} ioctls, {:.2} ms ({:.1} GB/s of live data)",
        report.moved,
        report.copied,
        report.ioctls,
        took.as_secs_f64() * 1e3,
        (live.len() * PAGE) as f64 / took.as_secs_f64() / 1e9
    );
    println!("RSS before {rss_before:.1} MiB, after {:.1} MiB", rss_mib());
    if bad > 0 || !report.is_complete() {
        eprintln!("compact: {bad} pages wrong, failures {:?}", report.failures);
        std::process::exit(1);
    }
}
