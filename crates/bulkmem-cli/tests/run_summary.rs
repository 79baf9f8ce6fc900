//! `bulkmem run`'s summary of a process tree, through the built binary and
//! the debug preload library: what it counts, that it writes nothing onto
//! the programs' own stderr, and that the program's exit status and
//! signals reach the shell as they would without `run`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

#[path = "support/cli.rs"]
mod support;
use support::{ensure_preload, scratch};

const BULKMEM: &str = env!("CARGO_BIN_EXE_bulkmem");

fn run(args: &[&str]) -> Output {
    ensure_preload();
    Command::new(BULKMEM)
        .arg("run")
        .args(args)
        .env_remove("BULKMEM_PRELOAD_MIN")
        .output()
        .expect("run bulkmem")
}

/// `bulkmem run --compare` with `flags` (its N first) on a `sh -c` script.
fn compare_sh(flags: &[&str], script: &str) -> Output {
    run(&[&["--compare"], flags, &["--", "sh", "-c", script]].concat())
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A summary with its lines' breaks joined: what it says, however wrapped.
fn joined(e: &str) -> String {
    e.lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

/// A shell line running `bulkmem preload-workload copy SIZE` (a memcpy of
/// SIZE through the C library, interposed under the preload) with its
/// stderr into `log`.
fn workload(size: &str, log: &Path) -> String {
    format!(
        "{BULKMEM} preload-workload copy {size} >/dev/null 2>>{}",
        log.display()
    )
}

#[test]
fn the_tree_is_summed_without_a_word_on_the_programs_stderr() {
    let d = scratch("run", "tree");
    let log = d.join("stderr");
    let line = format!("{}; {}", workload("32M", &log), workload("8M", &log));
    for stats in [false, true] {
        let mut args = vec!["--", "sh", "-c", &line];
        if stats {
            args.insert(0, "--stats");
        }
        let o = run(&args);
        let e = err(&o);
        assert_eq!(o.status.code(), Some(0), "{e}");
        // Two preloaded workloads (sh leaves by _exit and reports nothing,
        // or reports no large call).
        assert!(e.contains("processes of sh"), "{e}");
        // Lines fit 100 columns; what they say is read with the breaks
        // joined.
        assert!(e.lines().all(|l| l.chars().count() <= 100), "{e}");
        let e = joined(&e);
        assert!(
            e.contains("calls of 1M and more: 2 through bulkmem, copy 2 (40M)"),
            "{e}"
        );
        // No estimate of time saved, which flipped sign between runs of
        // one program: the command that measures it instead.
        assert!(
            e.contains("those calls spent") && e.contains("run --compare 10 -- sh"),
            "{e}"
        );
        assert!(!e.contains(" saved") && !e.contains(" lost"), "{e}");
        assert_eq!(e.contains("smaller calls, to the C library"), stats, "{e}");
        assert_eq!(e.contains("bulkmem preload ["), stats, "{e}");
        let theirs = std::fs::read_to_string(&log).unwrap();
        assert_eq!(theirs, "", "the programs' own stderr got: {theirs}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_forked_child_counts_its_own_calls_only() {
    let d = scratch("run", "fork");
    let src = d.join("fork.c");
    std::fs::write(
        &src,
        r#"
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    size_t n = 32 << 20;
    char *a = malloc(n), *b = malloc(n);
    memset(a, 1, n);
    memcpy(b, a, n);
    pid_t p = fork();
    if (p == 0) exit(b[n - 1] == 1 ? 0 : 1);
    int st;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}
"#,
    )
    .unwrap();
    let exe = d.join("fork");
    // No optimisation: gcc turns a memcpy from memset memory into a memset.
    let cc = Command::new("cc")
        .args(["-O0", "-fno-builtin"])
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status();
    assert!(
        cc.is_ok_and(|s| s.success()),
        "cc failed (scripts/c-deps installs it)"
    );
    let o = run(&["--", exe.to_str().unwrap()]);
    let e = joined(&err(&o));
    assert_eq!(o.status.code(), Some(0), "{e}");
    // Parent and child report; the copy is counted once.
    assert!(e.contains("2 processes of"), "{e}");
    assert!(e.contains(": 1 through bulkmem, copy 1 (32M)"), "{e}");
    // The non-zero memset went to the C library, and is said so.
    assert!(e.contains("; 1 (32M) left to the C library"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn nothing_large_is_said_with_why() {
    let o = run(&["--", "true"]);
    let e = joined(&err(&o));
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(
        e.contains("nothing reached 1M") && e.contains("copy_file_range"),
        "{e}"
    );
    let o = run(&["--no-summary", "--", "sh", "-c", "exit 4"]);
    assert_eq!((o.status.code(), err(&o)), (Some(4), String::new()));
}

#[test]
fn signals_reach_the_program_and_its_death_reaches_the_shell() {
    use std::os::unix::process::ExitStatusExt;
    ensure_preload();
    // The program announces itself, then waits on a signal: SIGINT to `run`
    // alone is ignored (the terminal sends it to the program too), SIGTERM
    // is passed on, and `run` dies of it as the program did.
    let mut c = Command::new(BULKMEM)
        .args(["run", "--", "sh", "-c", "echo up; exec sleep 30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(c.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), "up");
    let pid = c.id() as i32;
    // SAFETY: kill has no memory preconditions.
    unsafe { libc::kill(pid, libc::SIGINT) };
    // SAFETY: as above; `run` is alive (SIGINT is ignored), so the pid is
    // still its own.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let st = c.wait().unwrap();
    assert_eq!(st.signal(), Some(libc::SIGTERM), "{st:?}");
}

#[test]
fn compare_times_both_sides_and_says_what_it_can_resolve() {
    ensure_preload();
    let o = Command::new(BULKMEM)
        .args(["run", "--compare", "3", "--json", "-", "--", "true"])
        .output()
        .expect("run bulkmem");
    let e = err(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(e.lines().all(|l| l.chars().count() <= 100), "{e}");
    assert!(
        e.contains("without bulkmem") && e.contains("95% interval"),
        "{e}"
    );
    assert!(e.contains("no call of 1M or more reached bulkmem"), "{e}");
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let c = &doc["run_compare"];
    assert_eq!(c["runs"], 3, "{doc}");
    assert_eq!(c["without_s"]["samples"].as_array().unwrap().len(), 3);
    assert_eq!(c["with_s"]["samples"].as_array().unwrap().len(), 3);
    let (lo, hi) = (
        c["interval"][0].as_f64().unwrap(),
        c["interval"][1].as_f64().unwrap(),
    );
    let ratio = c["ratio"].as_f64().unwrap();
    assert!(lo <= ratio && ratio <= hi, "{c}");
    let verdict = c["verdict"].as_str().unwrap();
    assert_eq!(
        verdict,
        if hi < 1.0 {
            "faster"
        } else if lo > 1.0 {
            "slower"
        } else {
            "no difference resolved"
        },
        "{c}"
    );
    assert!(doc["provenance"]["commit"].is_string(), "{doc}");
}

#[test]
fn compare_refuses_a_program_that_ends_differently_under_bulkmem() {
    ensure_preload();
    // Succeeds without the preload, fails with it.
    let o = compare_sh(&["2"], "test -z \"$LD_PRELOAD\"");
    let e = err(&o);
    assert_ne!(o.status.code(), Some(0), "{e}");
    assert!(e.contains("with bulkmem") && e.contains("not timed"), "{e}");
    // Bad requests are usage errors, before anything runs.
    for args in [
        &["--compare", "0", "--", "true"][..],
        &["--json", "-", "--", "true"],
        &["--compare", "2", "--stats", "--", "true"],
        &["--allow-failure", "--", "true"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
    }
}

#[test]
fn compare_refuses_to_time_a_failing_program_unless_asked() {
    // Every run of `false` fails: said plainly, exit 1, nothing timed.
    let o = run(&["--compare", "3", "--json", "-", "--", "false"]);
    let e = err(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("false failed (exit status 1)") && e.contains("nothing was timed"),
        "{e}"
    );
    assert!(e.contains("--allow-failure"), "{e}");
    assert!(
        !e.contains("verdict"),
        "a failing program got a verdict: {e}"
    );
    assert!(o.stdout.is_empty(), "JSON of a refused comparison");
    // Its last words on stderr say why (numpy missing, in the issue).
    let o = compare_sh(
        &["2"],
        "echo starting >&2; echo \"No module named 'numpy'\" >&2; kill -SEGV $$",
    );
    let e = err(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("killed by signal 11 (SIGSEGV)") && e.contains("    No module named 'numpy'"),
        "{e}"
    );
    // Asked for: timed, and the text and the JSON both say it failed.
    let o = compare_sh(&["2", "--allow-failure", "--json", "-"], "exit 3");
    let e = err(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(
        joined(&e).contains("FAILED in every run (exit status 3; 6 of 6 runs)"),
        "{e}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let c = &doc["run_compare"];
    assert_eq!(c["ended"]["success"], false, "{c}");
    assert_eq!(c["ended"]["exit_code"], 3, "{c}");
    assert_eq!(c["failed_runs"], 6, "{c}");
    // A program that cannot be started: as a shell says it, as `run` does.
    let o = run(&["--compare", "2", "--", "/nonexistent/program"]);
    assert_eq!(o.status.code(), Some(127), "{}", err(&o));
    // A successful one says nothing of failure.
    let o = run(&["--compare", "2", "--json", "-", "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(!err(&o).contains("FAILED"), "{}", err(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(doc["run_compare"]["ended"]["success"], true, "{doc}");
    assert_eq!(doc["run_compare"]["failed_runs"], 0, "{doc}");
}
