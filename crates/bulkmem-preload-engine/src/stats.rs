//! Calls and bytes per operation and path, kept only when asked: by
//! `BULKMEM_PRELOAD_STATS=1` (every call, the small ones too, and one line
//! on stderr at exit) or by `BULKMEM_PRELOAD_REPORT=DIR` (`bulkmem run`:
//! the large calls, and one record per process in DIR, which `run` adds up
//! for the process tree; nothing is written to the program's stderr). When
//! neither is set a large call pays one relaxed load for all of this.
//!
//! The counters are this process's alone: a forked child starts from zero
//! ([`reset_in_child`]), so the tree's sum counts each call once.

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
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

/// This process's counts, laid out as the record `bulkmem run` reads
/// (crates/bulkmem-cli/src/run/records.rs, `Counts::from_live`): little-
/// endian u64s after an 8-byte magic. They live in [`STATIC`] until a
/// report directory is set, then in a shared mapping of this process's
/// record file ([`live`](mod@crate::stats)), so the record is whole
/// however the process ends: through its exit handlers or not (a Go
/// program, `_exit`, a crash, an `exec`).
#[repr(C)]
pub struct Counters {
    /// [`MAGIC`], written last when the record is set up.
    magic: [u8; 8],
    pid: AtomicU64,
    calls: [[AtomicU64; 4]; 2],
    bytes: [[AtomicU64; 4]; 2],
    /// Nanoseconds of the calls bulkmem took, by kind (its part and the C
    /// library's rest after a fault or an interruption, as the caller
    /// waited).
    nanos: [AtomicU64; 2],
    /// Bytes bulkmem wrote with non-temporal stores (they left the cache).
    streamed: AtomicU64,
    /// 1 when calls below the threshold are counted too.
    small_counted: AtomicU64,
    /// The command name when the record was set up, NUL-padded.
    comm: [u8; 16],
}

/// A live record's first bytes (and its layout's version).
pub const MAGIC: [u8; 8] = *b"BMLIVE01";

impl Counters {
    const fn new() -> Counters {
        Counters {
            magic: [0; 8],
            pid: AtomicU64::new(0),
            calls: [const { [const { AtomicU64::new(0) }; 4] }; 2],
            bytes: [const { [const { AtomicU64::new(0) }; 4] }; 2],
            nanos: [const { AtomicU64::new(0) }; 2],
            streamed: AtomicU64::new(0),
            small_counted: AtomicU64::new(0),
            comm: [0; 16],
        }
    }

    fn each(&self) -> impl Iterator<Item = &AtomicU64> {
        self.calls
            .iter()
            .chain(&self.bytes)
            .flatten()
            .chain(&self.nanos)
            .chain([&self.streamed])
    }
}

/// The counters before a record file holds them (and where it cannot).
static STATIC: Counters = Counters::new();
/// Where the counters are now.
static HERE: AtomicPtr<Counters> = AtomicPtr::new(&STATIC as *const Counters as *mut Counters);

#[inline(always)]
fn here() -> &'static Counters {
    // SAFETY: HERE points at STATIC or at a mapping of a live record that
    // is never unmapped while this image runs (only replaced in a forked
    // child, where the old one is the parent's).
    unsafe { &*HERE.load(Ordering::Acquire) }
}

#[inline(always)]
pub fn counting() -> bool {
    COUNTING.load(Ordering::Relaxed)
}

#[inline(always)]
pub fn count(k: Kind, p: Path, n: usize) {
    if counting() {
        let c = here();
        c.calls[k as usize][p as usize].fetch_add(1, Ordering::Relaxed);
        c.bytes[k as usize][p as usize].fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// The monotonic clock in nanoseconds (vDSO, async-signal-safe), when
/// counting; 0 otherwise.
#[inline(always)]
pub fn clock() -> u64 {
    if !counting() {
        return 0;
    }
    now_ns()
}

/// `CLOCK_MONOTONIC` in nanoseconds (the vDSO: no system call on x86-64).
pub fn now_ns() -> u64 {
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
        here().nanos[k as usize].fetch_add(clock().saturating_sub(start), Ordering::Relaxed);
    }
}

/// Counts `n` bytes bulkmem's part of a call wrote with non-temporal
/// stores: the program's next read of them goes to memory, so the report
/// shows how much of what it copied the preload chose to stream.
#[inline(always)]
pub fn streamed(n: usize) {
    if counting() {
        here().streamed.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// `pthread_atfork` child handler: the child's calls are its own, in a
/// record of its own.
pub extern "C" fn reset_in_child() {
    let parent = HERE.swap(
        &STATIC as *const Counters as *mut Counters,
        Ordering::AcqRel,
    );
    STATIC.each().for_each(|c| c.store(0, Ordering::Relaxed));
    if !core::ptr::eq(parent, &STATIC) {
        // SAFETY: the parent's record mapping, inherited; the child drops
        // its view of it (the parent's counts stay the parent's).
        unsafe { libc::munmap(parent.cast(), core::mem::size_of::<Counters>()) };
        if let Some(dir) = LIVE_IN.get() {
            go_live(dir);
        }
    }
}

/// Whether the counts live in a record file (see [`go_live`]).
pub fn is_live() -> bool {
    !core::ptr::eq(HERE.load(Ordering::Acquire), &STATIC)
}

/// The directory live records go in, once set.
static LIVE_IN: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();

/// Moves the counters into a record file of this process's own in `dir`
/// (`PID.live`, or `PID.live.N` if an earlier image of this pid left one:
/// an `exec`), mapped shared: from now on every count is in the file.
/// Where the file cannot be made, the counts stay in memory and the
/// record written at exit is all there is.
pub fn go_live(dir: &std::ffi::CStr) {
    let _ = LIVE_IN.set(dir.to_owned());
    let len = core::mem::size_of::<Counters>();
    let pid = std::process::id();
    let Some((fd, path)) = new_record_file(dir, ".live", libc::O_RDWR) else {
        return;
    };
    // SAFETY: our fresh file, sized and mapped shared; closed after
    // (the mapping keeps it).
    let m = unsafe {
        let ok = libc::ftruncate(fd, len as libc::off_t) == 0;
        let m = if ok {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        } else {
            libc::MAP_FAILED
        };
        libc::close(fd);
        m
    };
    if m == libc::MAP_FAILED {
        // SAFETY: our own file, empty: nothing to keep.
        unsafe { libc::unlink(path.as_ptr()) };
        return;
    }
    let live = m.cast::<Counters>();
    // SAFETY: a fresh, zeroed shared mapping of a Counters, ours
    // alone until published below.
    unsafe {
        let l = &*live;
        let from = here();
        for (to, from) in l.each().zip(from.each()) {
            to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        l.pid.store(u64::from(pid), Ordering::Relaxed);
        l.small_counted.store(
            u64::from(SMALL_COUNTED.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
        let comm = comm.trim().as_bytes();
        let at = (&raw mut (*live).comm).cast::<u8>();
        core::ptr::copy_nonoverlapping(comm.as_ptr(), at, comm.len().min(15));
        (&raw mut (*live).magic).write(MAGIC);
    }
    HERE.store(live, Ordering::Release);
}

/// Creates this process's record file in `dir` for writing, `PID` +
/// `suffix` or, where an earlier image of this pid left one (an `exec`),
/// the same with `.N` (exclusive, never following a link, close-on-exec,
/// mode 0600): its descriptor and path. None where it cannot be made.
pub fn new_record_file(
    dir: &std::ffi::CStr,
    suffix: &str,
    access: libc::c_int,
) -> Option<(libc::c_int, std::ffi::CString)> {
    let pid = std::process::id();
    for n in 0..16 {
        // The directory's bytes as given (it need not be UTF-8).
        let mut name = dir.to_bytes().to_vec();
        let tail = if n == 0 {
            format!("/{pid}{suffix}")
        } else {
            format!("/{pid}{suffix}.{n}")
        };
        name.extend_from_slice(tail.as_bytes());
        let path = std::ffi::CString::new(name).ok()?;
        // SAFETY: a NUL-terminated path; open has no memory preconditions.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                access | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd >= 0 {
            return Some((fd, path));
        }
        // A record of an earlier image under this pid: take the next
        // name; any other failure loses the record, and nothing else.
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return None;
        }
    }
    None
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
            sum(&here().calls, *p),
            mib(sum(&here().bytes, *p))
        ));
    }
    s.push_str(&format!(
        "; non-temporal stores {:.1} MiB",
        mib(here().streamed.load(Ordering::Relaxed))
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
                here().calls[k as usize][p as usize].load(Ordering::Relaxed),
                here().bytes[k as usize][p as usize].load(Ordering::Relaxed),
            );
            s.push_str(&format!(
                " {kname}_{pname}_calls={c} {kname}_{pname}_bytes={b}"
            ));
        }
        s.push_str(&format!(
            " {kname}_ns={}",
            here().nanos[k as usize].load(Ordering::Relaxed)
        ));
    }
    s.push_str(&format!(
        " streamed_bytes={} small_counted={}",
        here().streamed.load(Ordering::Relaxed),
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
