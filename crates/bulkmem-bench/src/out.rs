//! Everything a command writes on stdout goes through here, so that a
//! failed write is an error rather than a panic (`print!` panics, and Rust
//! ignores SIGPIPE, so even `| head` used to exit 101) or silence (a closed
//! stdout is quietly reopened on /dev/null by Rust's runtime, which lost
//! `--json -` output with exit 0).
//!
//! The first failed write is remembered; `main` turns it into the exit
//! status: a broken pipe (the reader stopped reading, as `head` does) exits
//! 0 without a word, as ripgrep does; any other error prints one line
//! `bulkmem: error writing output: WHY` and exits 1.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use crate::failure::{runtime, Failure};

/// The first error writing stdout: its kind and its text.
static FAILED: OnceLock<(io::ErrorKind, String)> = OnceLock::new();

/// Writes `text` to stdout and flushes it.
pub fn print(text: &str) -> Result<(), Failure> {
    write_bytes(text.as_bytes()).map_err(failed)
}

/// Writes `bytes` to stdout and flushes them; an `Err` is not yet recorded
/// (pass it to [`failed`]).
pub fn write_bytes(bytes: &[u8]) -> io::Result<()> {
    if closed_at_start() {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    let mut o = io::stdout().lock();
    o.write_all(bytes)?;
    o.flush()
}

/// Records `e` as the reason output failed and returns the failure that
/// ends the command (exit 1; see [`exit_status`]).
pub fn failed(e: io::Error) -> Failure {
    let f = runtime(format!("error writing output: {e}"));
    let _ = FAILED.set((e.kind(), e.to_string()));
    f
}

/// Whether stdout failed, and if so the exit status it deserves, having
/// said why on stderr (best-effort: stderr may be gone too).
pub fn exit_status() -> Option<u8> {
    let (kind, why) = FAILED.get()?;
    Some(report(*kind == io::ErrorKind::BrokenPipe, why))
}

fn report(broken_pipe: bool, why: &str) -> u8 {
    if broken_pipe {
        return 0;
    }
    let _ = writeln!(io::stderr(), "bulkmem: error writing output: {why}");
    1
}

/// Set before `main` (and before Rust's runtime reopens a closed fd 1 on
/// /dev/null) when the process started without a stdout.
static CLOSED_AT_START: AtomicBool = AtomicBool::new(false);

fn closed_at_start() -> bool {
    CLOSED_AT_START.load(Ordering::Relaxed)
}

#[cfg(target_os = "linux")]
extern "C" fn note_closed_stdout() {
    // SAFETY: fcntl(F_GETFD) only queries the descriptor table; on a
    // closed descriptor it fails with EBADF and changes nothing.
    let closed = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) } == -1;
    CLOSED_AT_START.store(closed, Ordering::Relaxed);
}

/// Run by the C runtime before `main` and before Rust's own start-up code,
/// which would otherwise hide a closed stdout behind /dev/null.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static NOTE_CLOSED_STDOUT: extern "C" fn() = note_closed_stdout;
