//! Calls and bytes per operation and path, kept only when asked: by
//! `BULKMEM_PRELOAD_STATS=1` (every call, the small ones too, and one line
//! on stderr at exit) or by `BULKMEM_PRELOAD_REPORT=DIR` (`bulkmem run`:
//! the large calls, and one record per process in DIR, which `run` adds up
//! for the process tree; nothing is written to the program's stderr). When
//! neither is set a large call pays one relaxed load for all of this.
//!
//! The counters are this process's alone: a forked child starts from zero
//! ([`reset_in_child`]), so the tree's sum counts each call once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// The tool the process runs under (a sanitizer, valgrind), which made the
/// preload hand every call to the C library.
static INERT: OnceLock<&'static str> = OnceLock::new();

/// Records that `tool` keeps the preload out of the way.
pub fn set_inert(tool: &'static str) {
    let _ = INERT.set(tool);
}

/// Whether calls are counted (`STATS` or a report directory).
pub static COUNTING: AtomicBool = AtomicBool::new(false);
/// Whether the calls below the threshold reach the counters too (`STATS`):
/// set with [`COUNTING`] by the settings, read by the exit line.
pub static SMALL_COUNTED: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Copy)]
pub enum Path {
    /// Below the threshold: the C library.
    Small,
    /// bulkmem's `auto` on the calling thread.
    Cpu,
    /// bulkmem's helper threads beside the calling thread.
    Helpers,
    /// Above the threshold but sent to the C library: overlapping memmove,
    /// non-zero memset, re-entered, or bulkmem not ready.
    Passed,
}

/// What a call asked for: a copy (memcpy, memmove, mempcpy and their
/// checked forms) or a set (memset).
#[derive(Clone, Copy)]
pub enum Kind {
    Copy,
    Set,
}

const PATHS: [(&str, &str, Path); 4] = [
    ("small (C library)", "small", Path::Small),
    ("bulkmem auto", "cpu", Path::Cpu),
    ("bulkmem threads", "threads", Path::Helpers),
    ("large, C library", "passed", Path::Passed),
];
const KINDS: [(&str, Kind); 2] = [("copy", Kind::Copy), ("set", Kind::Set)];

static CALLS: [[AtomicU64; 4]; 2] = [const { [const { AtomicU64::new(0) }; 4] }; 2];
static BYTES: [[AtomicU64; 4]; 2] = [const { [const { AtomicU64::new(0) }; 4] }; 2];
/// Nanoseconds of the calls bulkmem took, by kind (its part and the C
/// library's rest after a fault or an interruption, as the caller waited).
static NANOS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];
/// Bytes bulkmem wrote with non-temporal stores (they left the cache).
static STREAMED: AtomicU64 = AtomicU64::new(0);

#[inline(always)]
pub fn counting() -> bool {
    COUNTING.load(Ordering::Relaxed)
}

#[inline(always)]
pub fn count(k: Kind, p: Path, n: usize) {
    if counting() {
        CALLS[k as usize][p as usize].fetch_add(1, Ordering::Relaxed);
        BYTES[k as usize][p as usize].fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// The monotonic clock in nanoseconds (vDSO, async-signal-safe), when
/// counting; 0 otherwise.
#[inline(always)]
pub fn clock() -> u64 {
    if !counting() {
        return 0;
    }
    // SAFETY: timespec is plain data; clock_gettime writes one.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Adds the time since `start` (a [`clock`]) to the calls bulkmem took.
#[inline(always)]
pub fn took(k: Kind, start: u64) {
    if start != 0 {
        NANOS[k as usize].fetch_add(clock().saturating_sub(start), Ordering::Relaxed);
    }
}

/// Counts `n` bytes bulkmem's part of a call wrote with non-temporal
/// stores: the program's next read of them goes to memory, so the report
/// shows how much of what it copied the preload chose to stream.
#[inline(always)]
pub fn streamed(n: usize) {
    if counting() {
        STREAMED.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// `pthread_atfork` child handler: the child's calls are its own.
pub extern "C" fn reset_in_child() {
    for k in &CALLS {
        k.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    }
    for k in &BYTES {
        k.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    }
    NANOS.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    STREAMED.store(0, Ordering::Relaxed);
}

fn sum(a: &[[AtomicU64; 4]; 2], p: Path) -> u64 {
    a.iter()
        .map(|k| k[p as usize].load(Ordering::Relaxed))
        .sum()
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

/// The line `BULKMEM_PRELOAD_STATS=1` prints on stderr at exit: one per
/// process (a preloaded program's children inherit the preload, and
/// report too).
pub fn report() -> String {
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    let mut s = format!("bulkmem preload [{} {}]:", std::process::id(), comm.trim());
    for (i, (name, _, p)) in PATHS.iter().enumerate() {
        let sep = if i == 0 { " " } else { "; " };
        s.push_str(&format!(
            "{sep}{name} {} calls {:.1} MiB",
            sum(&CALLS, *p),
            mib(sum(&BYTES, *p))
        ));
    }
    s.push_str(&format!(
        "; non-temporal stores {:.1} MiB",
        mib(STREAMED.load(Ordering::Relaxed))
    ));
    if let Some(tool) = INERT.get() {
        s.push_str(&format!(
            "; inert under {tool}: every call to the C library"
        ));
    }
    s.push('\n');
    s
}

/// This process's record for `bulkmem run` (one line of `key=value`
/// fields, numbers only but `comm` and `inert`, which come last):
/// `{kind}_{path}_calls`, `{kind}_{path}_bytes` for kinds copy and set and
/// paths small, cpu, threads and passed, `{kind}_ns`, `streamed_bytes`,
/// `small_counted` (1 when small calls were counted), `pid`, `comm`.
pub fn record() -> String {
    let mut s = format!("pid={}", std::process::id());
    for (kname, k) in KINDS {
        for (_, pname, p) in PATHS {
            let (c, b) = (
                CALLS[k as usize][p as usize].load(Ordering::Relaxed),
                BYTES[k as usize][p as usize].load(Ordering::Relaxed),
            );
            s.push_str(&format!(
                " {kname}_{pname}_calls={c} {kname}_{pname}_bytes={b}"
            ));
        }
        s.push_str(&format!(
            " {kname}_ns={}",
            NANOS[k as usize].load(Ordering::Relaxed)
        ));
    }
    s.push_str(&format!(
        " streamed_bytes={} small_counted={}",
        STREAMED.load(Ordering::Relaxed),
        u8::from(SMALL_COUNTED.load(Ordering::Relaxed))
    ));
    if let Some(tool) = INERT.get() {
        s.push_str(&format!(" inert={tool}"));
    }
    // The command name is the program's to choose: keep it one field.
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    let comm: String = comm
        .trim()
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect();
    s.push_str(&format!(" comm={comm}\n"));
    s
}
