//! `bulkmem run -- CMD`: an unmodified program under the preload library,
//! and, when it is done, one summary for its whole process tree.
//!
//! The program runs as a child, so that `run` is there to add up what
//! every process of the tree reported. Each preloaded process keeps one
//! record in a private directory (`BULKMEM_PRELOAD_REPORT`) from its
//! first large call on, its counters mapped from the file, so the record
//! is whole however the process ends (exit handlers or not: Go programs,
//! `_exit`, crashes, `exec`); nothing goes onto the program's own stderr,
//! which tests and servers read. As
//! `system(3)` does, `run` ignores SIGINT and SIGQUIT while it waits (the
//! terminal sends them to the program too) and passes SIGTERM, SIGHUP,
//! SIGUSR1 and SIGUSR2 on to it; it leaves with the program's exit status,
//! or dies of the program's signal. With `--compare N` it times the
//! program with and without the preload instead (compare.rs).

mod compare;
mod ending;
mod program;
mod records;
mod summary;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

use bulkmem_bench::cli::Failure;
use bulkmem_bench::preload_cmd::{ld_preload, library};

#[derive(clap::Args)]
pub struct RunArgs {
    /// Also count the calls below the threshold, and print one line per
    /// process before the summary.
    #[arg(long)]
    stats: bool,
    /// No summary at the end (the program runs the same).
    #[arg(long, conflicts_with = "stats")]
    no_summary: bool,
    /// Does bulkmem speed this program up? Run it N times without bulkmem
    /// and N times with it, in alternating pairs (output discarded), and
    /// report the wall-clock medians, the paired ratio with its 95%
    /// interval and a verdict. The program must succeed (see
    /// --allow-failure) and end the same way every time.
    #[arg(long, value_name = "N", conflicts_with_all = ["stats", "no_summary"],
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    compare: Option<u32>,
    /// With --compare: time a program that fails (exits non-zero or dies
    /// of a signal) all the same. Without it, a failing program is
    /// reported, with its exit status and the end of its stderr, and
    /// nothing is timed (exit status 1).
    #[arg(long, requires = "compare")]
    allow_failure: bool,
    /// With --compare: also write the comparison as JSON to FILE (`-` for
    /// stdout; the text then goes to stderr).
    #[arg(long, value_name = "FILE", requires = "compare")]
    json: Option<PathBuf>,
    /// The command and its arguments (after --).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        value_name = "CMD"
    )]
    cmd: Vec<OsString>,
}

/// The child the forwarded signals go to (0: none yet).
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

const FORWARDED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGHUP, libc::SIGUSR1, libc::SIGUSR2];
const IGNORED: [libc::c_int; 2] = [libc::SIGINT, libc::SIGQUIT];

/// Sets `sig`'s disposition to `handler`.
fn set(sig: libc::c_int, handler: libc::sighandler_t) {
    // SAFETY: sigaction is plain data; the handler, where one is given, is
    // an extern "C" fn doing only async-signal-safe work.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Blocks (`SIG_BLOCK`) or unblocks the forwarded signals; returns the
/// mask from before.
fn mask(how: libc::c_int) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, filled by sigemptyset/sigaddset;
    // sigprocmask writes the old mask into `old`.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in FORWARDED {
            libc::sigaddset(&mut set, sig);
        }
        libc::sigprocmask(how, &set, &mut old);
        old
    }
}

/// A private directory for the records: created by this process alone,
/// mode 0700, removed after the summary.
struct RecordDir(PathBuf);

impl RecordDir {
    fn new() -> Result<RecordDir, Failure> {
        let base = std::env::temp_dir();
        for n in 0..100u32 {
            let d = base.join(format!("bulkmem-run-{}-{n}", std::process::id()));
            let mut b = std::fs::DirBuilder::new();
            std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
            match b.create(&d) {
                Ok(()) => return Ok(RecordDir(d)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(bulkmem_bench::failure::runtime(format!(
                        "run: cannot make a directory for the summary in {}: {e} (--no-summary runs without one)",
                        base.display()
                    )))
                }
            }
        }
        Err(bulkmem_bench::failure::runtime(
            "run: cannot make a directory for the summary (--no-summary runs without one)",
        ))
    }
}

impl Drop for RecordDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `bulkmem run`: runs the program under the preload, then prints the
/// summary on stderr; returns the program's exit status (a signal it died
/// of is raised again here).
pub fn run_cmd(a: RunArgs) -> Result<(), Failure> {
    let lib = library().map_err(bulkmem_bench::cli::usage)?;
    let (prog, args) = a.cmd.split_first().ok_or_else(|| {
        bulkmem_bench::cli::usage("run: no command given (bulkmem run -- CMD ARGS...)")
    })?;
    if let Some(n) = a.compare {
        return compare_cmd(&a, n as usize, &lib);
    }
    let dir = if a.no_summary {
        None
    } else {
        Some(RecordDir::new()?)
    };
    let mut c = Command::new(prog);
    c.args(args).env("LD_PRELOAD", ld_preload(&lib));
    if a.stats {
        c.env("BULKMEM_PRELOAD_STATS", "1");
    }
    if let Some(d) = &dir {
        c.env("BULKMEM_PRELOAD_REPORT", &d.0);
    }
    // Ctrl-C is ignored and the forwarded signals held from before the
    // program starts (it may signal its readiness at once); the program
    // gets them back as they were.
    for sig in IGNORED {
        set(sig, libc::SIG_IGN);
    }
    let held = mask(libc::SIG_BLOCK);
    // SAFETY: the closure runs in the child between fork and exec and calls
    // only async-signal-safe functions (sigaction, sigprocmask).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut c, move || {
            for sig in IGNORED {
                set(sig, libc::SIG_DFL);
            }
            libc::sigprocmask(libc::SIG_SETMASK, &held, std::ptr::null_mut());
            Ok(())
        });
    }
    let spawned = c.spawn();
    if let Ok(child) = &spawned {
        CHILD.store(child.id() as i32, Ordering::Relaxed);
        for sig in FORWARDED {
            set(
                sig,
                forward as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    mask(libc::SIG_UNBLOCK);
    let mut child = spawned.map_err(|e| ending::not_started(prog, &e))?;
    let status = child.wait();
    for sig in IGNORED.into_iter().chain(FORWARDED) {
        set(sig, libc::SIG_DFL);
    }
    let status = status.map_err(|e| {
        bulkmem_bench::failure::runtime(format!("run: waiting for the program: {e}"))
    })?;
    if let Some(d) = &dir {
        let (records, unreadable) = records::collect(&d.0);
        let mut text = String::new();
        if a.stats {
            records.iter().for_each(|r| text += &per_process(r));
        }
        let run = summary::Run {
            program: &prog.to_string_lossy(),
            records: &records,
            unreadable,
            min: threshold(),
            not_preloaded: program::why_not_preloaded(prog),
        };
        text += &summary::text(&run);
        let text = summary::wrap(&text);
        // Best effort: the program's status matters more than the summary.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
    }
    drop(dir);
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        // SAFETY: the default disposition, then the signal the program
        // died of, so the shell sees what it would have seen.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return Err(Failure {
            code: (128 + sig) as u8,
            msg: String::new(),
        });
    }
    match status.code() {
        Some(0) | None => Ok(()),
        Some(code) => Err(Failure {
            code: code as u8,
            msg: String::new(),
        }),
    }
}

/// `run --compare N`: the comparison on stderr (stdout where no JSON
/// takes it), progress on a terminal.
fn compare_cmd(a: &RunArgs, n: usize, lib: &std::path::Path) -> Result<(), Failure> {
    bulkmem_bench::cli::check_outputs(a.json.as_deref(), None)?;
    if let Some(why) = program::why_not_preloaded(&a.cmd[0]) {
        eprintln!("bulkmem run --compare: {why}; both sides will run the C library's routines");
    }
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut progress = |done: usize, of: usize| {
        if tty {
            eprint!("\rbulkmem run --compare: pair {done} of {of}\x1b[K");
            if done == of {
                eprint!("\r\x1b[K");
            }
        }
    };
    let c = compare::compare(&a.cmd, n, lib, a.allow_failure, &mut progress)?;
    let text = summary::wrap(&compare::text(&c, threshold()));
    let to_stdout = a.json.as_deref() != Some(std::path::Path::new("-"));
    if to_stdout {
        bulkmem_bench::out::print(&text)?;
    } else {
        eprint!("{text}");
    }
    if let Some(path) = a.json.as_deref() {
        let doc = serde_json::json!({
            "bulkmem": env!("CARGO_PKG_VERSION"),
            "provenance": bulkmem_bench::provenance::Provenance::this(),
            "run_compare": c,
        });
        let body = serde_json::to_string_pretty(&doc).expect("plain data") + "\n";
        if to_stdout {
            bulkmem_report::write_file::write_file(path, body.as_bytes()).map_err(|e| {
                bulkmem_bench::failure::runtime(format!("cannot write {}: {e}", path.display()))
            })?;
        } else {
            bulkmem_bench::out::write_bytes(body.as_bytes()).map_err(bulkmem_bench::out::failed)?;
        }
    }
    Ok(())
}

/// The preload's threshold as the child sees it (`BULKMEM_PRELOAD_MIN`).
fn threshold() -> usize {
    std::env::var("BULKMEM_PRELOAD_MIN")
        .ok()
        .and_then(|v| bulkmem_machine::units::parse_bytes(&v).ok())
        .unwrap_or(1 << 20)
}

/// The `--stats` line of one process: calls and bytes per path, copies
/// and sets together.
fn per_process(r: &records::Counts) -> String {
    let names = [
        "small",
        "bulkmem",
        "bulkmem threads",
        "large to the C library",
    ];
    let parts: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(p, name)| {
            (
                name,
                r.calls[0][p] + r.calls[1][p],
                r.bytes[0][p] + r.bytes[1][p],
            )
        })
        .filter(|&(_, calls, _)| calls > 0)
        .map(|(name, calls, bytes)| {
            format!(
                "{name} {calls} calls ({})",
                bulkmem_machine::units::format_bytes(bytes as usize)
            )
        })
        .collect();
    let body = if parts.is_empty() {
        "no calls".to_string()
    } else {
        parts.join("; ")
    };
    format!("bulkmem preload [{} {}]: {body}\n", r.pid, r.comm)
}
