//! Configuration from the environment, read once as the program starts
//! (the loader opens the engine in its constructor when one of these is
//! set; otherwise every one is as if unset):
//!
//! * `BULKMEM_PRELOAD=off`: every call goes to the C library.
//! * `BULKMEM_PRELOAD_MIN=BYTES` (default 1 MiB): calls at or above go
//!   through bulkmem's `auto`; smaller ones to the C library.
//! * `BULKMEM_PRELOAD_MT_MIN=BYTES` (default 16 MiB): copies and clears at
//!   or above have helper threads beside the calling thread.
//! * `BULKMEM_PRELOAD_THREADS=N` threads per call, the caller included
//!   (default: the engine's worker count, one per core, at most two per
//!   LLC domain); 0 or 1: no helper, and no thread of the
//!   preload's in the process, ever (see the thread policy in the crate
//!   docs).
//! * `BULKMEM_PRELOAD_STATS=1`: calls and bytes per path, one line on
//!   stderr when the process exits (not when it leaves with `_exit`, as
//!   dash does: no exit handler runs then).
//! * `BULKMEM_PRELOAD_REPORT=DIR` (set by `bulkmem run`): large calls
//!   counted and timed, and one record written into DIR (an absolute path)
//!   at exit, for `run`'s summary of the process tree; nothing on stderr.
//!
//! Sizes take K/M/G suffixes. A value that cannot be used is one warning
//! on stderr (when the program starts, written best effort) and is ignored.
//! In set-user-ID and set-group-ID programs (`AT_SECURE`) the constructor
//! reads none of these: every one is as if unset.

use std::sync::atomic::{AtomicUsize, Ordering};

pub const DEFAULT_MIN: usize = bulkmem_preload_abi::abi::DEFAULT_MIN;
pub const DEFAULT_MT_MIN: usize = 16 << 20;

/// Calls below this are small. The loader's own threshold (its `MIN`,
/// below which calls never reach the engine) is this, or 0 with
/// `BULKMEM_PRELOAD_STATS=1`, so that every call reaches the engine, which
/// counts it.
pub static MIN_REAL: AtomicUsize = AtomicUsize::new(usize::MAX);
pub static MT_MIN: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Threads per large call, the caller included (0: the engine's default;
/// 1: no helper; set to 1 when
/// threads are forbidden later, see `sandbox`).
pub static THREADS: AtomicUsize = AtomicUsize::new(0);

/// What the environment asks for; `warnings` name what was ignored.
#[derive(Debug, PartialEq, Eq)]
pub struct Settings {
    pub off: bool,
    pub min: usize,
    pub mt_min: usize,
    pub threads: usize,
    pub stats: bool,
    /// Where the exit record goes (`BULKMEM_PRELOAD_REPORT`).
    pub report: Option<String>,
    pub warnings: Vec<String>,
}

pub fn parse(get: impl Fn(&str) -> Option<String>) -> Settings {
    let mut s = Settings {
        off: false,
        min: DEFAULT_MIN,
        mt_min: DEFAULT_MT_MIN,
        threads: 0,
        stats: false,
        report: None,
        warnings: Vec::new(),
    };
    if let Some(v) = get("BULKMEM_PRELOAD") {
        match v.trim().to_ascii_lowercase().as_str() {
            "off" | "0" | "no" => s.off = true,
            "on" | "1" | "yes" | "" => {}
            _ => s
                .warnings
                .push(format!("BULKMEM_PRELOAD={v:?} is not on or off; ignored")),
        }
    }
    s.min = bytes(&get, "BULKMEM_PRELOAD_MIN", s.min, &mut s.warnings);
    s.mt_min = bytes(&get, "BULKMEM_PRELOAD_MT_MIN", s.mt_min, &mut s.warnings);
    if let Some(v) = get("BULKMEM_PRELOAD_THREADS") {
        match v.trim().parse::<usize>() {
            // 0: no threads at all, the same as 1 (the caller's thread).
            Ok(0) => s.threads = 1,
            Ok(n) if n <= 4096 => s.threads = n,
            _ => s.warnings.push(format!(
                "BULKMEM_PRELOAD_THREADS={v:?} is not a thread count (0..4096); ignored"
            )),
        }
    }
    if let Some(v) = get("BULKMEM_PRELOAD_STATS") {
        match v.trim() {
            "1" | "yes" | "on" => s.stats = true,
            "0" | "no" | "off" | "" => {}
            _ => s.warnings.push(format!(
                "BULKMEM_PRELOAD_STATS={v:?} is not 1 or 0; ignored"
            )),
        }
    }
    if let Some(v) = get("BULKMEM_PRELOAD_REPORT").filter(|v| !v.is_empty()) {
        if v.starts_with('/') && !v.contains('\0') {
            s.report = Some(v);
        } else {
            s.warnings.push(
                "BULKMEM_PRELOAD_REPORT is not an absolute directory path; ignored".to_string(),
            );
        }
    }
    s
}

fn bytes(
    get: &impl Fn(&str) -> Option<String>,
    name: &str,
    default: usize,
    warnings: &mut Vec<String>,
) -> usize {
    match get(name) {
        None => default,
        Some(v) => bulkmem_machine::units::parse_bytes(&v).unwrap_or_else(|why| {
            warnings.push(format!("{name}: {why}; ignored"));
            default
        }),
    }
}

/// Publishes `s`: from here on the accelerated paths are used.
pub fn apply(s: &Settings) {
    crate::stats::SMALL_COUNTED.store(s.stats, Ordering::Relaxed);
    crate::stats::COUNTING.store(s.stats || s.report.is_some(), Ordering::Relaxed);
    if s.off {
        return;
    }
    THREADS.store(s.threads, Ordering::Relaxed);
    MT_MIN.store(s.mt_min, Ordering::Relaxed);
    MIN_REAL.store(s.min, Ordering::Relaxed);
    crate::loader::get()
        .min
        .store(if s.stats { 0 } else { s.min }, Ordering::Release);
}
