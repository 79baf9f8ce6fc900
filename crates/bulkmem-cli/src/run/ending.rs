//! How the program `run` starts ended, in words and as `--json` writes it,
//! and the exit status of a program that could not be started (126 or
//! 127, as a shell reports it), one rule for `run` and `run --compare`.

use std::ffi::OsStr;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::ExitStatus;

use serde::Serialize;

use bulkmem_bench::cli::{runtime, Failure};

/// How a run of the program ended.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ending {
    /// It exited with status 0.
    pub success: bool,
    /// Its exit status, when it exited.
    pub exit_code: Option<i32>,
    /// The signal it died of, when it did.
    pub signal: Option<i32>,
}

impl Ending {
    pub fn of(s: ExitStatus) -> Ending {
        Ending {
            success: s.success(),
            exit_code: s.code(),
            signal: s.signal(),
        }
    }

    /// `exit status 1`, `killed by signal 11 (SIGSEGV)`.
    pub fn describe(&self) -> String {
        match (self.exit_code, self.signal) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => match signal_name(s) {
                Some(name) => format!("killed by signal {s} ({name})"),
                None => format!("killed by signal {s}"),
            },
            (None, None) => "an unknown ending".to_string(),
        }
    }
}

/// The names of the signals a failing program most often dies of.
fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return None,
    })
}

/// The failure of a program that could not be started: 127 when it was
/// not found, 126 otherwise, as a shell says it.
pub fn not_started(prog: &OsStr, e: &std::io::Error) -> Failure {
    let code = if e.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    Failure {
        code,
        msg: format!("cannot run {}: {e}", prog.to_string_lossy()),
    }
}

/// An unnamed file in `dir` (created, then unlinked at once, so nothing
/// is left behind however the run ends) to keep a program's stderr in.
pub fn unnamed_file(dir: &Path) -> Result<std::fs::File, Failure> {
    let path = dir.join("stderr");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|f| std::fs::remove_file(&path).map(|()| f))
        .map_err(|e| {
            runtime(format!(
                "run --compare: a file for the program's stderr: {e}"
            ))
        })?;
    Ok(f)
}

/// The last `lines` lines of `file` (at most 4 KiB of it), each indented
/// by four spaces: a failing program's last words.
pub fn last_lines(mut file: &std::fs::File, lines: usize) -> String {
    const KEEP: u64 = 4096;
    let len = file.seek(SeekFrom::End(0)).unwrap_or(0);
    let mut tail = Vec::new();
    if file.seek(SeekFrom::Start(len.saturating_sub(KEEP))).is_ok() {
        let _ = file.read_to_end(&mut tail);
    }
    let text = String::from_utf8_lossy(&tail);
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| format!("    {l}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endings_are_said_as_a_shell_would() {
        let exited = Ending::of(ExitStatus::from_raw(3 << 8));
        assert!(!exited.success);
        assert_eq!(exited.exit_code, Some(3));
        assert_eq!(exited.describe(), "exit status 3");
        let killed = Ending::of(ExitStatus::from_raw(libc::SIGSEGV));
        assert_eq!((killed.exit_code, killed.signal), (None, Some(11)));
        assert_eq!(killed.describe(), "killed by signal 11 (SIGSEGV)");
        assert!(Ending::of(ExitStatus::from_raw(0)).success);
    }

    #[test]
    fn the_last_lines_skip_blank_ones() {
        let path = std::env::temp_dir().join(format!("bulkmem-ending-{}", std::process::id()));
        std::fs::write(&path, "a\nb\n\nTraceback\nNo module named 'numpy'\n\n").unwrap();
        let f = std::fs::File::open(&path).unwrap();
        assert_eq!(
            last_lines(&f, 2),
            "    Traceback\n    No module named 'numpy'\n"
        );
        assert_eq!(last_lines(&f, 9).lines().count(), 4);
        let _ = std::fs::remove_file(&path);
    }
}
