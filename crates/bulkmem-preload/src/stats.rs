//! Calls and bytes per path (`BULKMEM_PRELOAD_STATS=1`), printed on stderr
//! when the program exits. Counted only when asked: the small path then
//! costs one more relaxed load.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The tool the process runs under (a sanitizer, valgrind), which made the
/// preload hand every call to the C library.
static INERT: OnceLock<&'static str> = OnceLock::new();

/// Records that `tool` keeps the preload out of the way.
pub fn set_inert(tool: &'static str) {
    let _ = INERT.set(tool);
}

#[derive(Clone, Copy)]
pub enum Path {
    /// Below the threshold: the C library.
    Small,
    /// bulkmem's `auto` on the calling thread.
    Cpu,
    /// bulkmem's helper threads beside the calling thread.
    Engine,
    /// Above the threshold but sent to the C library: overlapping memmove,
    /// non-zero memset, re-entered, or bulkmem not ready.
    Passed,
}

const PATHS: [(&str, Path); 4] = [
    ("small (C library)", Path::Small),
    ("bulkmem auto", Path::Cpu),
    ("bulkmem threads", Path::Engine),
    ("large, C library", Path::Passed),
];

static CALLS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
static BYTES: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
/// Bytes bulkmem wrote with non-temporal stores (they left the cache).
static STREAMED: AtomicU64 = AtomicU64::new(0);

#[inline(always)]
pub fn count(p: Path, n: usize) {
    if crate::config::STATS.load(Ordering::Relaxed) {
        CALLS[p as usize].fetch_add(1, Ordering::Relaxed);
        BYTES[p as usize].fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Counts `n` bytes bulkmem's part of a call wrote with non-temporal
/// stores: the program's next read of them goes to memory, so the report
/// shows how much of what it copied the preload chose to stream.
#[inline(always)]
pub fn streamed(n: usize) {
    if crate::config::STATS.load(Ordering::Relaxed) {
        STREAMED.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// The report `bulkmem run --stats` shows: one line per process (a
/// preloaded program's children inherit the preload, and report too).
pub fn report() -> String {
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    let mut s = format!("bulkmem preload [{} {}]:", std::process::id(), comm.trim());
    for (i, (name, p)) in PATHS.iter().enumerate() {
        let c = CALLS[*p as usize].load(Ordering::Relaxed);
        let b = BYTES[*p as usize].load(Ordering::Relaxed);
        let sep = if i == 0 { " " } else { "; " };
        s.push_str(&format!(
            "{sep}{name} {c} calls {:.1} MiB",
            b as f64 / (1u64 << 20) as f64
        ));
    }
    s.push_str(&format!(
        "; non-temporal stores {:.1} MiB",
        STREAMED.load(Ordering::Relaxed) as f64 / (1u64 << 20) as f64
    ));
    if let Some(tool) = INERT.get() {
        s.push_str(&format!(
            "; inert under {tool}: every call to the C library"
        ));
    }
    s.push('\n');
    s
}
