//! One set of command-line conventions, through the built binary: what is
//! a usage error (exit 2, before anything is measured) and what is not,
//! `--threads` above the CPUs, output and input paths, negative sizes,
//! where `info` says `auto` streams, and the exit status on Ctrl-C.

#[path = "support/cli.rs"]
mod support;
use support::{bulkmem, refused, scratch, stderr, stdout};

use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};

use std::process::{Command, Stdio};

#[path = "support/readme_sample.rs"]
mod readme_sample;

#[test]
fn the_default_command_takes_the_json_flag_its_last_line_names() {
    refused(
        &["--json", "/nonexistent/dir/x.json"],
        "--json /nonexistent/dir/x.json: the directory /nonexistent/dir does not exist",
    );
    // Before a command it would be silently the report's: refused.
    refused(&["--json", "x.json", "info"], "after the command");

    // The whole report (its sizes are fixed): the JSON alone on stdout,
    // the report with its hint on stderr.
    let o = bulkmem(&["--quiet", "--json", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("JSON with --json FILE"),
        "{}",
        stderr(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    let ops: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["op"].as_str().unwrap())
        .collect();
    assert!(ops.contains(&"copy") && ops.contains(&"clear"), "{ops:?}");
    // The same run checks the docs' sample of it and the README's time.
    readme_sample::check(&stderr(&o));
}

/// CPUs this process may run on.
fn usable_cpus() -> usize {
    bulkmem::placement::allowed_cpus()
        .unwrap_or_else(|| bulkmem::cpu::info().topology.online_cpus.clone())
        .len()
}

#[test]
fn more_threads_than_cpus_warn_and_run_in_every_command() {
    let t = (usable_cpus() + 1).to_string();
    let t = t.as_str();
    let cases: &[&[&str]] = &[
        &[
            "bench",
            "copy",
            "--threads",
            t,
            "--sizes",
            "4K",
            "--regime",
            "hot",
            "--strategies",
            "auto",
            "--runs",
            "1",
        ],
        &[
            "bench",
            "limits",
            "--threads",
            t,
            "--size",
            "4K",
            "--runs",
            "1",
        ],
        &[
            "bench",
            "batch",
            "--threads",
            t,
            "--folio",
            "64K",
            "--total",
            "256K",
            "--runs",
            "1",
            "--bound",
            "1000",
        ],
        &[
            "bench",
            "fill",
            "--threads",
            t,
            "--element",
            "64",
            "--sizes",
            "64K",
            "--runs",
            "1",
        ],
        &[
            "bench",
            "overlap",
            "--threads",
            t,
            "--total",
            "256K",
            "--extent",
            "64K",
            "--runs",
            "1",
        ],
    ];
    for args in cases {
        // --quiet silences progress, not the warning.
        let o = bulkmem(&[args, &["--quiet"][..]].concat());
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("warning: --threads {t} is more than the")),
            "{args:?}: {}",
            stderr(&o)
        );
        // And --help says so where --threads is described.
        let help = stdout(&bulkmem(&[&args[..2], &["--help"][..]].concat()));
        let threads = help.split("--threads").nth(1).unwrap_or_default();
        let threads = threads.split("\n  -").next().unwrap_or_default();
        assert!(
            threads.contains("with a warning"),
            "{args:?}: --help of --threads: {threads}"
        );
    }
}

#[test]
fn every_output_path_is_checked_before_measuring() {
    // root may open /proc/version for writing; the write fails only
    // after the run, and a /sys file would take it as a setting.
    let quick = ["--runs", "1", "--quiet"];
    let benches: &[&[&str]] = &[
        &["bench", "copy", "--sizes", "4K", "--regime", "hot"],
        &["bench", "clear", "--sizes", "4K", "--regime", "hot"],
        &["bench", "limits", "--size", "4K"],
        &["bench", "batch", "--folio", "64K", "--total", "256K"],
        &["bench", "fill", "--element", "64", "--sizes", "64K"],
        &["bench", "move", "--sizes", "2M"],
        &["bench", "fault", "--sizes", "4K"],
    ];
    for b in benches {
        for json in ["/proc/version", "/nonexistent/dir/x.json"] {
            let args = [b, &quick[..], &["--json", json][..]].concat();
            refused(&args, &format!("--json {json}: "));
        }
    }
    refused(&["--json", "/proc/version"], "--json /proc/version: ");
    refused(
        &["bench", "copy", "--plot", "/proc/x.svg"],
        "--plot /proc/x.svg: ",
    );
    refused(&["tune", "--out", "/proc/version"], "--out: ");
    refused(
        &["tune", "--trace", "/nonexistent/dir/trace.tsv"],
        "--trace /nonexistent/dir/trace.tsv: the directory /nonexistent/dir does not exist",
    );
    refused(&["generate", "man", "--dir", "/proc"], "--dir /proc");

    // An existing file is checked without being truncated.
    let dir = scratch("usage", "outputs");
    let kept = dir.join("kept.json");
    std::fs::write(&kept, "kept").unwrap();
    refused(
        &[
            "bench",
            "copy",
            "--json",
            kept.to_str().unwrap(),
            "--sizes",
            "-4K",
        ],
        "cannot be negative",
    );
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "kept");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad input is exit 2 whatever is wrong with it: a file that cannot be
/// read, or one that is not what the command reads (the same status, so a
/// script tells "you gave me the wrong thing" from "what you measured
/// failed", which is 1).
#[test]
fn bad_input_files_are_usage_errors() {
    let dir = scratch("usage", "inputs");
    let missing = dir.join("missing.json");
    let (d, m) = (dir.to_str().unwrap(), missing.to_str().unwrap());
    refused(&["compare", d, d], &format!("A {d}: is a directory"));
    refused(&["compare", m, d], &format!("A {m}: no such file"));
    refused(&["compare", "/etc/passwd", "/etc/passwd"], "is not JSON");
    let other = dir.join("other.json");
    std::fs::write(&other, "{\"results\": 3}").unwrap();
    let o = other.to_str().unwrap();
    refused(&["compare", o, o], "is not a bulkmem bench document");
    let lib = dir.join("not-a-library.so");
    std::fs::write(&lib, "text").unwrap();
    let against = format!("{}:memcpy", lib.display());
    refused(
        &["bench", "copy", "--sizes", "4K", "--against", &against],
        "cannot load",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn negative_sizes_reach_the_size_parser() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "copy", "--sizes"], "--sizes"),
        (&["bench", "copy", "--total"], "--total"),
        (&["bench", "clear", "--sizes"], "--sizes"),
        (&["bench", "batch", "--folio"], "--folio"),
        (&["bench", "batch", "--total"], "--total"),
        (&["bench", "fill", "--element"], "--element"),
        (&["bench", "fill", "--sizes"], "--sizes"),
        (&["bench", "limits", "--size"], "--size"),
        (&["bench", "overlap", "--total"], "--total"),
        (&["bench", "overlap", "--extent"], "--extent"),
        (&["bench", "fault", "--sizes"], "--sizes"),
        (&["bench", "fault", "--total"], "--total"),
        (&["bench", "fault", "--demo"], "--demo"),
        (&["bench", "move", "--sizes"], "--sizes"),
        (&["bench", "migrate", "--sizes"], "--sizes"),
        (&["bench", "preload", "--size"], "--size"),
        (&["migrate", "--self-test", "--size"], "--size"),
    ];
    for (args, flag) in cases {
        for value in ["-4K", "-4K,8K"] {
            let o = bulkmem(&[args, &[value][..]].concat());
            assert_eq!(o.status.code(), Some(2), "{args:?} {value}: {}", stderr(&o));
            let err = stderr(&o);
            assert!(
                err.contains(&format!("for '{flag} <"))
                    && err.contains(">': -4K")
                    && err.contains("sizes cannot be negative"),
                "{args:?} {value}: {err}"
            );
        }
    }
}

#[test]
fn negative_numbers_are_the_options_bad_values() {
    for (args, flag) in [
        (&["bench", "copy", "--runs", "-1"][..], "--runs"),
        (&["bench", "copy", "--threads", "-2"], "--threads"),
        (&["bench", "copy", "--src-node", "-1"], "--src-node"),
        (&["tune", "--runs", "-3"], "--runs"),
    ] {
        let o = bulkmem(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("for '{flag} <")) && !err.contains("unexpected argument"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn info_says_where_auto_streams_as_its_table_chooses() {
    let o = Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .args(["info", "--json"])
        .env("BULKMEM_PROFILE", "off")
        .env_remove("BULKMEM_STRATEGY")
        .env_remove("BULKMEM_NT_THRESHOLD")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let from = &v["profile"]["streams_from"];
    let mut batches = 0;
    for c in v["auto"].as_array().unwrap() {
        if c["hint"] != "auto" {
            continue;
        }
        let op = c["op"].as_str().unwrap();
        let kind = if c["runs"] == 1 {
            "single"
        } else {
            batches += 1;
            assert_eq!(
                c["total"].as_u64().unwrap() / c["runs"].as_u64().unwrap(),
                2 << 20
            );
            "batch_2m"
        };
        let threshold = from[format!("{op}_{kind}")].as_u64();
        let total = c["total"].as_u64().unwrap();
        let chose: bulkmem::Strategy = c["chose"].as_str().unwrap().parse().unwrap();
        assert_eq!(
            chose.is_non_temporal(),
            threshold.is_some_and(|t| total >= t),
            "{c}: streams_from {from}"
        );
    }
    assert_eq!(batches, 2);
    // The text says the same, per kind of call.
    let o = Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .arg("info")
        .env("BULKMEM_PROFILE", "off")
        .output()
        .unwrap();
    let text = stdout(&o);
    assert!(
        text.contains("single calls: copies ") && text.contains("batches of 2M extents: copies "),
        "{text}"
    );
}

#[test]
fn the_man_page_states_the_exit_convention() {
    let man = stdout(&bulkmem(&["generate", "man"]));
    let exit = man
        .split(".SH \"EXIT STATUS\"")
        .nth(1)
        .and_then(|s| s.split(".SH ").next())
        .expect("EXIT STATUS");
    for code in ["0", "1", "2", "130"] {
        assert!(
            exit.contains(&format!(".TP\n\\fB{code}")) || exit.contains(&format!("\\fB{code}\\fR")),
            "no {code}: {exit}"
        );
    }
    assert!(exit.contains("input file"), "{exit}");
    assert!(exit.contains("\\-\\-threads"), "{exit}");
    // The guide states the same convention, every code of it.
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide/command.md"),
    )
    .unwrap();
    let stated = guide
        .split("\n- Exit codes")
        .nth(1)
        .and_then(|s| s.split("\n- ").next())
        .expect("docs/guide/command.md has an `- Exit codes` item");
    let codes: Vec<&str> = exit
        .lines()
        .filter_map(|l| l.strip_prefix("\\fB"))
        .flat_map(|l| {
            l.split(|c: char| !c.is_ascii_digit())
                .filter(|w| !w.is_empty())
        })
        .collect();
    assert!(codes.len() >= 7, "{codes:?}");
    for code in codes {
        assert!(
            stated.contains(&format!(" {code} ")) || stated.contains(&format!("`{code}`")),
            "docs/guide/command.md's exit codes lack {code}: {stated}"
        );
    }
    assert!(stated.contains("bad input"), "{stated}");
}

#[test]
fn ctrl_c_ends_a_run_by_sigint() {
    // Long enough to be running when the signal comes; ended at once.
    let mut child = Command::new(env!("CARGO_BIN_EXE_bulkmem"));
    child
        .args([
            "bench",
            "copy",
            "--sizes",
            "4K",
            "--regime",
            "hot",
            "--strategies",
            "per-page",
            "--runs",
            "10000",
            "--warmup",
            "1000",
            "--quiet",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SIGINT as a terminal's shell leaves it: a test run started in the
    // background of a script inherits it ignored (POSIX shells ignore
    // SIGINT for asynchronous lists), and so would the child.
    // SAFETY: signal(2) is async-signal-safe and touches no memory.
    unsafe {
        child.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = child.spawn().unwrap();
    // SAFETY: kill only sends a signal to the child spawned above.
    let r = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(r, 0);
    let status = child.wait().unwrap();
    // A shell reports this as 128 + 2 = 130.
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
}
