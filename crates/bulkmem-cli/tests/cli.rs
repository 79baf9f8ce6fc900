//! The command's contract: exit codes, error messages and the JSON schema
//! that scripts depend on.

#[path = "support/cli.rs"]
mod support;
use support::ensure_preload;

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn bulkmem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .args(args)
        .output()
        .expect("run bulkmem")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_input_exits_2_and_says_what_was_wrong() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "copy", "--sizes", "12Q"], "unknown suffix 'Q'"),
        (&["bench", "copy", "--sizes", "4K,0"], "greater than zero"),
        (
            &["bench", "clear", "--strategies", "avx3"],
            "unknown strategy 'avx3'",
        ),
        (&["bench", "copy", "--strategies", "clzero"], "cannot copy"),
        (
            &["bench", "clear", "--strategies", "rep-movsb"],
            "cannot clear",
        ),
        (&["bench", "copy", "--hint", "fast"], "unknown hint 'fast'"),
        (&["bench", "copy", "--runs", "0"], "--runs"),
        (&["bench", "copy", "--regime", "warm"], "warm"),
        (
            &["bench", "copy", "--cpu", "100000", "--sizes", "4K"],
            "not an online CPU",
        ),
        (&["bench", "frobnicate"], "frobnicate"),
        (&["--no-such-flag"], "--no-such-flag"),
    ];
    for (args, needle) in cases {
        support::refused(args, needle);
    }
}

#[test]
fn bench_json_rows_follow_the_schema() {
    let o = bulkmem(&[
        "bench",
        "copy",
        "--sizes",
        "4K,64K",
        "--regime",
        "both",
        "--total",
        "1M",
        "--runs",
        "2",
        "--strategies",
        "per-page,auto",
        "--hint",
        "stream",
        "--json",
        "-",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON only");
    assert_eq!(doc["bulkmem"], env!("CARGO_PKG_VERSION"));
    for k in ["cpu", "features", "llc_bytes", "cpus", "numa_node_count"] {
        assert!(doc["machine"].get(k).is_some(), "machine.{k} missing");
    }
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * 2 * 2, "regimes x sizes x strategies");
    for r in rows {
        assert_eq!(r["op"], "copy");
        assert!(["hot", "cold"].contains(&r["regime"].as_str().unwrap()));
        assert_eq!(r["threads"], 1);
        assert_eq!(r["runs"], 2);
        let g = &r["gbps"];
        let (min, med, max) = (
            g["min"].as_f64().unwrap(),
            g["median"].as_f64().unwrap(),
            g["max"].as_f64().unwrap(),
        );
        assert!(0.0 < min && min <= med && med <= max, "{g}");
        if r["strategy"] == "auto" {
            assert_eq!(r["hint"], "stream");
            assert_ne!(r["chose"], "auto");
        } else {
            assert_eq!(r["chose"], r["strategy"]);
            assert!(r.get("hint").is_none());
        }
        if r["regime"] == "cold" {
            assert_eq!(r["total"], 1 << 20);
        } else {
            assert_eq!(r["total"], r["size"]);
        }
    }
    // The table went to stderr, so stdout stayed parseable.
    assert!(stderr(&o).contains("per-page"));
}

#[test]
fn unavailable_strategies_are_reported_not_run() {
    // BULKMEM_DISABLE makes avx2 unavailable on any host, so the refusal is
    // exercised where every strategy runs, too.
    let o = bulkmem_env(
        &[
            "bench",
            "clear",
            "--sizes",
            "4K",
            "--regime",
            "hot",
            "--runs",
            "1",
            "--strategies",
            "per-page,avx2,avx2-nt",
            "--quiet",
        ],
        &[("BULKMEM_DISABLE", "avx2")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("not run (this CPU lacks them)"), "{out}");
    assert!(
        out.contains("avx2 (needs avx2)") && out.contains("avx2-nt (needs avx2)"),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("per-page")),
        "per-page still measured: {out}"
    );
    assert!(
        !out.lines()
            .any(|l| l.starts_with("avx2 ") || l.starts_with("avx2-nt ")),
        "an unavailable strategy has a row: {out}"
    );
}

#[test]
fn info_json_describes_the_machine() {
    let o = bulkmem(&["info", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["machine"]["llc_bytes"].as_u64().unwrap() > 0);
    assert!(!v["llc_domains"].as_array().unwrap().is_empty());
    // One name, one meaning: lists are lists of objects, counts are *_count.
    assert!(v["llc_domains"][0].is_array(), "{}", v["llc_domains"]);
    let numa = v["numa_nodes"].as_array().unwrap();
    assert_eq!(
        numa.len() as u64,
        v["machine"]["numa_node_count"].as_u64().unwrap()
    );
    assert!(numa[0]["mem_total"].as_u64().unwrap() > 0, "{}", numa[0]);
    assert!(numa[0]["cpus"].is_array(), "{}", numa[0]);
    assert_eq!(numa[0]["distances"].as_array().unwrap().len(), numa.len());
    assert!(v["checked"]["copy"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s == "rep-movsq"));
    let text = bulkmem(&["info"]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains("auto would choose"));
    assert!(text.contains("checked copy"), "{text}");
}

#[test]
fn bench_batch_rows_carry_placement_layout_and_count() {
    let o = bulkmem(&[
        "bench",
        "batch",
        "--op",
        "copy",
        "--folio",
        "4K,64K",
        "--threads",
        "1,2",
        "--total",
        "1M",
        "--placement",
        "spread",
        "--layout",
        "scattered,adjacent",
        "--runs",
        "1",
        "--json",
        "-",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON only");
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        2 * 2 * 3,
        "layouts x folios x (per-page + 2 engines)"
    );
    for r in rows {
        assert_eq!(r["op"], "copy");
        assert_eq!(r["regime"], "cold");
        assert_eq!(r["total"], 1 << 20);
        let count = r["count"].as_u64().unwrap();
        assert_eq!(count * r["size"].as_u64().unwrap(), 1 << 20);
        assert!(["scattered", "adjacent"].contains(&r["layout"].as_str().unwrap()));
        match r["strategy"].as_str().unwrap() {
            "per-page" => assert_eq!(r["threads"], 1),
            "engine" => {
                assert_eq!(r["placement"], "spread");
                assert!(r["speedup"].as_f64().unwrap() > 0.0);
            }
            other => panic!("unexpected strategy {other}"),
        }
    }
    assert!(stderr(&o).contains("engine 2"));
}

#[test]
fn bench_batch_bad_input_exits_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["bench", "batch", "--folio", "2M", "--total", "1M"],
            "larger than --total",
        ),
        (
            &["bench", "batch", "--placement", "scatter"],
            "unknown placement 'scatter'",
        ),
        (&["bench", "batch", "--layout", "diagonal"], "diagonal"),
        (&["bench", "batch", "--threads", "0"], "--threads"),
        (&["bench", "batch", "--op", "move"], "move"),
    ];
    for (args, needle) in cases {
        let o = bulkmem(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(needle),
            "{args:?}: stderr lacks {needle:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn bench_fill_rows_carry_element_and_patch() {
    let o = bulkmem(&[
        "bench",
        "fill",
        "--element",
        "64,128",
        "--sizes",
        "64K,2M",
        "--runs",
        "1",
        "--json",
        "-",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON only");
    let rows = doc["results"].as_array().unwrap();
    let names = [
        "memcpy-per-element",
        "memcpy-patch",
        "fill-temporal",
        "fill-nt",
        "fill-auto",
        "engine",
    ];
    assert_eq!(rows.len(), 2 * 2 * names.len());
    for r in rows {
        assert_eq!(r["op"], "fill");
        assert!(names.contains(&r["strategy"].as_str().unwrap()), "{r}");
        assert!([64, 128].contains(&r["element"].as_u64().unwrap()));
        assert_eq!(r["patch"], r["strategy"] != "memcpy-per-element");
        assert_eq!(r["regime"], if r["size"] == 65536 { "hot" } else { "cold" });
        if r["strategy"] == "fill-nt" {
            assert!(
                ["avx2-nt", "avx512-nt", "libc"].contains(&r["chose"].as_str().unwrap()),
                "{r}"
            );
        }
    }
    let o = bulkmem(&["bench", "fill", "--element", "64", "--sizes", "100"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not a whole number of 64-byte elements"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bench_move_rows_carry_page_and_ms() {
    if let Err(e) = bulkmem::uffd::Mover::new() {
        skip(&format!("no userfaultfd here: {e}"));
        return;
    }
    let o = bulkmem(&[
        "bench", "move", "--sizes", "2M,4M", "--pages", "4K,thp", "--runs", "1", "--json", "-",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON only");
    let rows = doc["results"].as_array().unwrap();
    let names = ["per-page-ioctl", "one-ioctl", "move-range", "copy-auto"];
    assert_eq!(rows.len(), 2 * 2 * names.len());
    for r in rows {
        assert_eq!(r["op"], "move");
        assert!(names.contains(&r["strategy"].as_str().unwrap()), "{r}");
        assert!(["4K", "thp"].contains(&r["page"].as_str().unwrap()), "{r}");
        assert!(r["ms"]["median"].as_f64().unwrap() > 0.0);
        assert!([2 << 20, 4 << 20].contains(&r["size"].as_u64().unwrap()));
    }
    let o = bulkmem(&["bench", "move", "--sizes", "3M"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("not a multiple of 2M"),
        "{}",
        stderr(&o)
    );
    let o = bulkmem(&["bench", "move", "--pages", "64K"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn bench_fault_rows_pair_checked_with_auto_and_the_demo_survives() {
    let o = bulkmem(&[
        "bench", "fault", "--sizes", "4K,64K", "--total", "1M", "--runs", "1", "--demo", "1M",
        "--json", "-", "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON only");
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2 * 2 * 2, "hot and cold, two sizes, two cells");
    for r in rows {
        assert_eq!(r["op"], "copy");
        let s = r["strategy"].as_str().unwrap();
        assert!(s == "auto" || s == "checked", "{r}");
        assert!(r["gbps"]["median"].as_f64().unwrap() > 0.0);
        if s == "checked" {
            assert!(r["speedup"].as_f64().unwrap() > 0.0, "ratio over auto: {r}");
        }
    }
    // The demonstration goes to the table's stream (stderr with --json -).
    let err = stderr(&o);
    if bulkmem::uffd::Mover::new().is_ok_and(|m| m.supports_poison()) {
        assert!(err.contains("copy_checked stopped"), "{err}");
        assert!(err.contains("15 extents done"), "{err}");
    }
    let o = bulkmem(&["bench", "fault", "--demo", "4K"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--demo"), "{}", stderr(&o));
}

#[test]
fn migrate_commands_explain_a_single_node_and_bad_input() {
    let nodes = bulkmem::topology::Nodes::detect();
    if nodes.with_memory.len() == 1 {
        // A skip is exit 77, never a silent success, and writes no JSON.
        let json =
            std::env::temp_dir().join(format!("bm-migrate-skip-{}.json", std::process::id()));
        let _ = std::fs::remove_file(&json);
        let o = bulkmem(&["bench", "migrate", "--json", json.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(77), "{}", stderr(&o));
        assert!(stderr(&o).contains("one NUMA node"), "{}", stderr(&o));
        assert!(!json.exists());
        let o = bulkmem(&["migrate", "--pid", "1", "--range", "1000-2000", "--to", "1"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(
            stderr(&o).contains("this machine has one node"),
            "{}",
            stderr(&o)
        );
        let o = bulkmem(&["migrate", "--self-test", "--size", "4M"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            out.contains("one NUMA node") && out.contains("self-test passed"),
            "{out}"
        );
    }
    for (args, want) in [
        (&["migrate"][..], "--self-test"),
        (
            &["migrate", "--pid", "1", "--range", "zz-2000", "--to", "0"],
            "not a hex address",
        ),
        (
            &["migrate", "--pid", "1", "--range", "2000-1000", "--to", "0"],
            "above the start",
        ),
        (
            &["migrate", "--pid", "1", "--range", "1000-2000"],
            "--to NODE",
        ),
        (&["migrate", "--to", "x", "--self-test"], "not a node list"),
        (
            &["migrate", "--self-test", "--size", "3M"],
            "multiple of 2M",
        ),
    ] {
        let o = bulkmem(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
}

fn bulkmem_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bulkmem"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run bulkmem")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn info_says_why_the_built_in_rules_are_used() {
    let dir = std::env::temp_dir().join(format!("bulkmem-cli-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.toml");
    std::fs::write(&garbage, "\u{0}\u{1}not a profile\n").unwrap();
    let truncated = dir.join("truncated.toml");
    std::fs::write(
        &truncated,
        format!(
            "format = {}\nbulkmem = \"0.1.0\"\ncells = 3\n",
            bulkmem_policy::auto::FORMAT
        ),
    )
    .unwrap();
    let cases: &[(&str, &str)] = &[
        (
            "/nonexistent/profile.toml",
            "no profile at /nonexistent/profile.toml",
        ),
        (garbage.to_str().unwrap(), "unreadable profile"),
        (truncated.to_str().unwrap(), "unreadable profile"),
        ("off", "BULKMEM_PROFILE=off"),
    ];
    for (value, needle) in cases {
        let o = bulkmem_env(&["info"], &[("BULKMEM_PROFILE", value)]);
        assert_eq!(o.status.code(), Some(0), "{value}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(
            out.contains(needle) && out.contains("built-in rules"),
            "{value}: {out}"
        );
        let o = bulkmem_env(&["info", "--json"], &[("BULKMEM_PROFILE", value)]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["profile"]["auto"], "built-in", "{value}");
        assert!(v["profile"]["status"].as_str().unwrap().contains(needle));
    }
}

#[test]
fn bad_overrides_warn_once_and_are_ignored() {
    let o = bulkmem_env(
        &["info"],
        &[
            ("BULKMEM_STRATEGY", "avx3,copy:libc"),
            ("BULKMEM_NT_THRESHOLD", "lots"),
            ("BULKMEM_PROFILE", "off"),
        ],
    );
    assert_eq!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert_eq!(
        err.matches("bulkmem: warning: BULKMEM_STRATEGY").count(),
        1,
        "{err}"
    );
    assert!(
        err.contains("'avx3'") && err.contains("BULKMEM_NT_THRESHOLD: size 'lots'"),
        "{err}"
    );
    let out = stdout(&o);
    assert!(out.contains("BULKMEM_STRATEGY: copy libc"), "{out}");
    // The valid part is in force: every copy choice is libc.
    let v: serde_json::Value = serde_json::from_slice(
        &bulkmem_env(&["info", "--json"], &[("BULKMEM_STRATEGY", "copy:libc")]).stdout,
    )
    .unwrap();
    for c in v["auto"].as_array().unwrap() {
        if c["op"] == "copy" {
            assert_eq!(c["chose"], "libc", "{c}");
        }
    }
}

#[test]
fn tune_refuses_an_unwritable_profile_before_measuring() {
    let o = bulkmem(&["tune", "--out", "/dev/null/profile.toml"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write the profile /dev/null/profile.toml"));
    // Refused before measuring: no summary was printed.
    assert!(!stdout(&o).contains("cells in"), "it measured first");
    let o = bulkmem(&["tune", "--runs", "0"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn tables_and_json_say_which_auto_ran() {
    let o = bulkmem_env(
        &[
            "bench",
            "clear",
            "--sizes",
            "4K",
            "--regime",
            "hot",
            "--strategies",
            "per-page,auto",
            "--runs",
            "1",
            "--json",
            "-",
        ],
        &[("BULKMEM_PROFILE", "off")],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("auto (built-in)"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["machine"]["auto"], "built-in");
    assert!(v["machine"]["profile"].as_str().unwrap().contains("off"));
}

#[test]
fn run_passes_exit_codes_and_reports_stats() {
    ensure_preload();
    let o = bulkmem(&["run", "--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let o = bulkmem(&["run", "--", "/nonexistent/program"]);
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot run /nonexistent/program"));
    let o = bulkmem(&["run"]);
    assert_eq!(o.status.code(), Some(2));
    // (echo makes no memcpy call: ls does.)
    let o = bulkmem(&["run", "--stats", "--", "/bin/ls", "/"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("usr"));
    assert!(
        stderr(&o).contains("bulkmem preload [") && stderr(&o).contains(" ls]: small"),
        "{}",
        stderr(&o)
    );
    let o = bulkmem_env(
        &["run", "--", "true"],
        &[("BULKMEM_PRELOAD_LIB", "/nonexistent.so")],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("BULKMEM_PRELOAD_LIB=/nonexistent.so is not a file"));
}

/// A process that leaves without running its exit handlers (`_exit`, as
/// Go programs always do, or a crash) after large calls is counted:
/// its record lives in a file from the first large call on.
#[test]
fn run_counts_processes_that_skip_their_exit_handlers() {
    ensure_preload();
    for (how, code) in [("os._exit(0)", Some(0)), ("os.kill(os.getpid(), 9)", None)] {
        let prog = format!("import os; b = bytearray(64 << 20); c = bytes(b); {how}");
        let o = bulkmem(&["run", "--", "python3", "-c", &prog]);
        assert_eq!(o.status.code(), code, "{how}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("copy 1 (64M)"), "{how}: {e}");
    }
}

/// A cgo program (Go exits without the C library's exit handlers) is
/// reported with its large calls.
#[test]
fn run_reports_a_go_programs_large_calls() {
    ensure_preload();
    let go = std::process::Command::new("sh")
        .args(["-c", "command -v go"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    if go.is_none() {
        eprintln!("SKIPPED run_reports_a_go_programs_large_calls: no go on PATH");
        return;
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bulkmem-preload-engine/tests/runtimes/cgo");
    let bin = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cgo-run");
    let o = Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg("main.go")
        .current_dir(&src)
        .env("CGO_ENABLED", "1")
        .env("GOTOOLCHAIN", "local")
        .env(
            "GOCACHE",
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gocache"),
        )
        .output()
        .expect("run go build");
    assert!(o.status.success(), "go build: {}", stderr(&o));
    let o = bulkmem(&["run", "--", bin.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    // The summary wraps at 100 columns, where depends on the path's
    // length: read it as one line.
    let flat = e.split_whitespace().collect::<Vec<_>>().join(" ");
    // Three 64 MiB copies (its sets are of non-zero bytes: the C
    // library's).
    assert!(
        flat.contains("1 process of") && flat.contains("copy 3 (192M)"),
        "{e}"
    );
}

#[test]
fn bench_preload_rows_pair_off_and_on() {
    ensure_preload();
    let o = bulkmem(&[
        "bench", "preload", "--size", "8M", "--runs", "1", "--execs", "2", "--json", "-", "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["results"].as_array().unwrap();
    let small = [
        "small-8-64",
        "small-64-512",
        "small-512-4K",
        "set-8-512",
        "stream-64K-4M",
    ];
    for w in ["copy", "fresh"].into_iter().chain(small) {
        for s in ["off", "on"] {
            let r = rows
                .iter()
                .find(|r| r["regime"] == w && r["strategy"] == s)
                .unwrap_or_else(|| panic!("no {w} {s} row"));
            assert_eq!(r["op"], "preload");
            assert!(r["gbps"]["median"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["speedup"].as_f64().unwrap() > 0.0, "{r}");
            // The small workloads compare with the C library's own
            // function in the same process; the large ones do not.
            let paired = r["over_c_library"]["median"].as_f64();
            assert_eq!(paired.is_some(), small.contains(&w), "{r}");
            assert!(paired.is_none_or(|x| x > 0.0), "{r}");
        }
    }
    assert!(
        stderr(&o).contains("over the C library's own"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("on over off"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("preload start-up: 2 execs"),
        "{}",
        stderr(&o)
    );
}

/// Every cell of `bench dispatch` runs and checks its result; the ratios
/// the table prints are of this run's rows, and the C interface's rows
/// are there when libbulkmem.so is beside the command.
#[test]
fn bench_dispatch_rows_cover_every_cell() {
    let o = bulkmem(&[
        "bench", "dispatch", "--sizes", "64,4K", "--runs", "1", "--json", "-", "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["results"].as_array().unwrap();
    let c = rows.iter().any(|r| r["strategy"] == "c-auto");
    let cells: &[&str] = if c {
        &[
            "kernel",
            "auto",
            "checked-twin",
            "checked",
            "c-auto",
            "c-checked",
        ]
    } else {
        &["kernel", "auto", "checked-twin", "checked"]
    };
    for size in [64, 4096] {
        for cell in cells {
            let r = rows
                .iter()
                .find(|r| r["size"] == size && r["strategy"] == *cell)
                .unwrap_or_else(|| panic!("no {cell} row at {size}"));
            assert!(r["gbps"]["median"].as_f64().unwrap() > 0.0, "{r}");
            assert_eq!(r["baseline"], "kernel", "{r}");
        }
    }
    let err = stderr(&o);
    assert!(
        err.contains("auto/kernel") && err.contains("checked/auto"),
        "{err}"
    );
    assert_eq!(
        err.contains("no C interface rows"),
        !c,
        "the note says whether the C rows ran:\n{err}"
    );
}

#[test]
fn bench_preload_startup_row_times_execs_off_and_on() {
    ensure_preload();
    let o = bulkmem(&[
        "bench",
        "preload",
        "--startup-only",
        "--execs",
        "3",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("preload start-up: 3 execs of"), "{out}");
    // No workload ran: only the start-up table.
    assert!(!out.contains("unmodified workloads"), "{out}");
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with('/') || l.trim_start().starts_with("true "))
        .unwrap_or_else(|| panic!("no program row in {out}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    let us = |c: &str| c.split('±').next().unwrap().parse::<f64>().unwrap();
    assert!(us(cells[1]) > 0.0 && us(cells[2]) > 0.0, "{row}");
    let ratio: f64 = cells[3].trim_end_matches('x').parse().unwrap();
    assert!(ratio > 0.0, "{row}");
    let o = bulkmem(&["bench", "preload", "--startup-only", "--execs", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--startup-only needs"),
        "{}",
        stderr(&o)
    );
}

/// Runs bulkmem, killing it if it has not finished after [`HANG`]: a run
/// that should be refused but measures instead must not hold the suite
/// for minutes. Its exit code (`None` when killed), stdout and stderr.
fn bulkmem_refused(args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bulkmem");
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = pipe.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().expect("piped")));
    let err = read(Box::new(child.stderr.take().expect("piped")));
    let pid = child.id() as libc::pid_t;
    let (finished, done) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done.recv_timeout(HANG) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            // SAFETY: kill has no memory preconditions; the child is not
            // reaped yet (wait below has not returned), so the pid is its.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let status = child.wait().expect("wait for bulkmem");
    drop(finished);
    watchdog.join().expect("watchdog");
    (
        status.code(),
        out.join().expect("stdout reader"),
        err.join().expect("stderr reader"),
    )
}

/// How long a refused run may take before it counts as hung: a hang guard
/// far above any refusal, not a speed bound.
const HANG: Duration = Duration::from_secs(120);

/// Each case exits 2 naming `needle` on stderr, having measured and
/// written nothing: no table on stdout, and the `--json` / `--plot` file
/// it names does not exist afterwards.
fn refused_at_once(cases: &[(Vec<String>, &str)]) {
    for (args, needle) in cases {
        let outputs: Vec<&String> = args
            .windows(2)
            .filter(|w| w[0] == "--json" || w[0] == "--plot")
            .map(|w| &w[1])
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = bulkmem_refused(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: stderr lacks {needle:?}: {err}"
        );
        assert_eq!(out, "", "{args:?} printed results: it measured");
        for f in outputs {
            assert!(!std::path::Path::new(f).exists(), "{args:?} wrote {f}");
        }
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn migrate_refuses_a_range_past_the_limit_at_once() {
    let me = std::process::id().to_string();
    let (code, out, err) = bulkmem_refused(&[
        "migrate",
        "--pid",
        &me,
        "--range",
        "1000-7ffffffff000",
        "--to",
        "0",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--range") && err.contains("at most 1.0 TiB"),
        "{err}"
    );
    // Refused before any page was asked about: no "N pages: ..." summary.
    assert_eq!(out, "", "it walked the range");
}

#[test]
fn migrate_walks_a_range_of_several_windows() {
    // 1.5 GiB reserved and never touched but for a page per 64 MiB: the
    // range spans two of migrate's 1 GiB windows and the totals add up.
    let node = bulkmem::topology::Nodes::detect().with_memory[0].to_string();
    let len = 3 << 29;
    let mut v: Vec<u8> = Vec::with_capacity(len + 4096);
    let start = (v.as_ptr() as usize).div_ceil(4096) * 4096;
    let skip = start - v.as_ptr() as usize;
    for i in (skip..skip + len).step_by(64 << 20) {
        v.spare_capacity_mut()[i].write(1);
    }
    let range = format!("{start:x}-{:x}", start + len);
    let me = std::process::id().to_string();
    let o = bulkmem(&["migrate", "--pid", &me, "--range", &range, "--to", &node]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with(&format!("{} pages: ", len / 4096)) && out.contains(" 0 failed"),
        "{out}"
    );
    let count = |what: &str| -> usize {
        let at = out.find(what).unwrap_or_else(|| panic!("{what:?}: {out}"));
        out[..at]
            .split_whitespace()
            .last()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        count(" moved to node") + count(" already there") + count(" not present"),
        len / 4096,
        "{out}"
    );
    assert!(count(" not present") >= len / 4096 - 24 * 512, "{out}");
    drop(v);
}

#[test]
fn migrate_errors_name_the_flag() {
    // A process that has come and gone: its pid names no process now.
    let mut gone = Command::new("true").spawn().expect("run true");
    gone.wait().unwrap();
    let pid = gone.id().to_string();
    refused_at_once(&[
        (strings(&["migrate", "--to", "x", "--self-test"]), "--to"),
        (
            strings(&[
                "migrate",
                "--pid",
                &pid,
                "--range",
                "1000-2000",
                "--to",
                "0",
            ]),
            &format!("--pid {pid}: no such process"),
        ),
    ]);
}

/// MemAvailable in whole GiB, rounded up.
fn available_gib() -> usize {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("MemAvailable");
    kb.div_ceil(1 << 20)
}

#[test]
fn runs_that_need_more_memory_than_is_available_are_refused() {
    let g = available_gib();
    let far = format!("{}G", 2 * g);
    // Each of these fits on its own but not as many times as the run
    // holds it: two threads' pairs, two cold arenas.
    let third = format!("{}G", g.div_ceil(3));
    let most = format!("{}G", (g * 3).div_ceil(5));
    let mut cases = vec![
        (strings(&["bench", "move", "--sizes", &far]), "--sizes"),
        (
            strings(&["migrate", "--self-test", "--size", &far]),
            "--size",
        ),
        (
            strings(&[
                "bench",
                "copy",
                "--sizes",
                &third,
                "--regime",
                "hot",
                "--threads",
                "2",
            ]),
            "--threads 2",
        ),
        (
            strings(&[
                "bench", "clear", "--sizes", "4K", "--regime", "cold", "--total", &most,
            ]),
            "--total",
        ),
        (
            strings(&["bench", "fill", "--element", "64", "--sizes", &far]),
            "--sizes",
        ),
        (
            strings(&["bench", "batch", "--folio", "2M", "--total", &far]),
            "--total",
        ),
        (
            strings(&["bench", "batch", "--counts", &(g * 1024).to_string()]),
            "--counts",
        ),
        (strings(&["bench", "fault", "--demo", &far]), "--demo"),
        (strings(&["bench", "preload", "--size", &far]), "--size"),
    ];
    if bulkmem::topology::Nodes::detect().with_memory.len() > 1 {
        cases.push((strings(&["bench", "migrate", "--sizes", &far]), "--sizes"));
    }
    for (args, _) in cases.iter_mut() {
        args.push("--quiet".into());
    }
    refused_at_once(&cases);
    let (_, _, err) = bulkmem_refused(&["bench", "move", "--sizes", &far]);
    assert!(
        err.contains("available") && err.contains("MemAvailable"),
        "{err}"
    );
}

#[test]
fn unwritable_outputs_are_refused_before_measuring() {
    let benches: &[&[&str]] = &[
        &["bench", "copy"],
        &["bench", "clear"],
        &["bench", "batch"],
        &["bench", "fill"],
        &["bench", "move"],
        &["bench", "fault"],
        &["bench", "migrate"],
        &["bench", "preload"],
    ];
    let mut cases = Vec::new();
    for b in benches {
        for json in ["/nonexistent/dir/x.json", "/proc/bulkmem-x.json"] {
            let mut args = strings(b);
            args.extend(strings(&["--json", json, "--quiet"]));
            cases.push((args, "--json"));
        }
    }
    for b in &benches[..5] {
        let mut args = strings(b);
        args.extend(strings(&["--plot", "x.jpg", "--quiet"]));
        cases.push((args, "--plot x.jpg: the file name must end in .svg or .png"));
        let mut args = strings(b);
        args.extend(strings(&["--plot", "/nonexistent/dir/x.svg", "--quiet"]));
        cases.push((args, "--plot"));
    }
    refused_at_once(&cases);

    // Writable places still get their files.
    let dir = std::env::temp_dir().join(format!("bulkmem-cli-outputs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, plot) = (dir.join("x.json"), dir.join("x.svg"));
    let o = bulkmem(&[
        "bench",
        "copy",
        "--sizes",
        "4K",
        "--regime",
        "hot",
        "--runs",
        "1",
        "--strategies",
        "per-page",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["results"].as_array().unwrap().len(), 1);
    assert!(std::fs::read_to_string(&plot).unwrap().contains("<svg"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn info_names_the_cpus_the_process_may_use() {
    let o = Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_bulkmem"), "info", "--json"])
        .output()
        .expect("taskset (util-linux)");
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["allowed_cpus"], serde_json::json!([0]));
    let o = Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_bulkmem"), "info"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let online = v["machine"]["cpus"].as_u64().unwrap();
    if online > 1 {
        assert!(out.contains("may use CPUs 0 (of"), "{out}");
    }
}

#[test]
fn tables_come_as_text_markdown_or_csv_and_fit_a_width() {
    let base = [
        "bench",
        "copy",
        "--sizes",
        "4K,64K,2M,32M",
        "--regime",
        "hot",
        "--strategies",
        "per-page,rep-movsb,auto",
        "--runs",
        "2",
        "--warmup",
        "1",
        "--quiet",
    ];
    let run = |extra: &[&str]| {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let o = bulkmem(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let narrow = run(&["--width", "80"]);
    assert!(narrow.lines().all(|l| l.chars().count() <= 80), "{narrow}");
    assert!(narrow.contains('±') && narrow.contains("32M"), "{narrow}");
    let md = run(&["--format", "md"]);
    assert!(md.contains("| strategy | 4K | 64K | 2M | 32M |"), "{md}");
    let csv = run(&["--format", "csv"]);
    // CSV is data, one row per cell, numbers in bytes and GB/s.
    let header = csv.lines().next().unwrap_or("");
    assert!(header.starts_with("op,strategy,chose,"), "{csv}");
    assert!(
        header.contains("size_bytes") && header.contains("gbps_median"),
        "{csv}"
    );
    for size in ["4096", "65536", "2097152", "33554432"] {
        assert!(
            csv.lines()
                .any(|l| l.starts_with("copy,per-page,") && l.contains(&format!(",{size},"))),
            "{size}: {csv}"
        );
    }
    let o = bulkmem(&["bench", "copy", "--cpus", "3-1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("runs backwards"), "{}", stderr(&o));
}

#[test]
fn version_completions_and_man_page_describe_this_build() {
    let o = bulkmem(&["--version"]);
    let v = String::from_utf8_lossy(&o.stdout);
    assert!(v.contains("commit ") && v.lines().count() == 1, "{v}");
    let o = bulkmem(&["generate", "completions", "bash"]);
    let bash = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && bash.contains("bulkmem") && bash.contains("--warmup"),
        "{bash}"
    );
    let o = bulkmem(&["generate", "man"]);
    let man = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && man.contains(".TH bulkmem"), "{man}");
    let o = bulkmem(&["generate", "completions"]);
    assert_eq!(o.status.code(), Some(2), "a shell is required");
}

#[test]
fn copy_places_sources_and_destinations_on_named_nodes() {
    let node = bulkmem::topology::Nodes::detect().with_memory[0].to_string();
    let o = bulkmem(&[
        "bench",
        "copy",
        "--sizes",
        "64K",
        "--strategies",
        "per-page",
        "--runs",
        "1",
        "--total",
        "4M",
        "--src-node",
        &node,
        "--dst-node",
        &node,
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Exit 0 means every page got there (a page left behind fails the
    // run); the note names where.
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "sources on node {node}, destinations on node {node}"
        )),
        "{err}"
    );
    assert!(stdout(&o).contains("per-page"), "{}", stdout(&o));
    let o = bulkmem(&["bench", "clear", "--dst-node", "999", "--sizes", "4K"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--dst-node: there is no NUMA node 999"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn batch_offload_rows_or_one_line_saying_why_not() {
    let o = bulkmem(&[
        "bench",
        "batch",
        "--offload",
        "emulated:2",
        "--folio",
        "2M",
        "--threads",
        "1",
        "--total",
        "16M",
        "--runs",
        "1",
        "--json",
        "-",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    for want in ["per-page", "engine", "engine+emulated", "emulated only"] {
        assert!(names.contains(&want), "{want} missing: {names:?}");
    }
    if bulkmem::offload::gpus().is_err() {
        let o = bulkmem(&["bench", "batch", "--offload", "gpu"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.contains("GPU offload"), "{err}");
    }
    let o = bulkmem(&["bench", "batch", "--offload", "tpu"]);
    assert_eq!(o.status.code(), Some(2));
}

/// One small, quick bench: 4K, hot, one run.
const QUICK_BENCH: [&str; 11] = [
    "bench",
    "copy",
    "--sizes",
    "4K",
    "--regime",
    "hot",
    "--runs",
    "1",
    "--strategies",
    "per-page",
    "--quiet",
];

/// Runs bulkmem with stdout on /dev/full (every write fails with ENOSPC).
fn bulkmem_into_dev_full(args: &[&str]) -> Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("open /dev/full");
    Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .args(args)
        .stdout(full)
        .output()
        .expect("run bulkmem")
}

#[test]
fn a_full_stdout_is_one_line_of_error_and_exit_1() {
    // info writes through `out`; the bench tables still print! (cli.rs) and
    // are caught by the panic hook: both must look the same.
    for args in [&["info"][..], &["info", "--json"], &QUICK_BENCH] {
        let o = bulkmem_into_dev_full(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("bulkmem: error writing output: "),
            "{args:?}: {err}"
        );
    }
}

/// A bench document of `n` copy rows whose strategy is `strategy`.
fn compare_doc(n: usize, strategy: &str) -> String {
    let rows: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            serde_json::json!({
                "op": "copy", "strategy": strategy, "chose": strategy,
                "size": 4096 * (i + 1), "total": 268435456u64, "regime": "hot",
                "threads": 1, "runs": 3,
                "gbps": {"min": 1.0, "median": 2.0, "max": 3.0, "mean": 2.0,
                         "stdev": 1.0, "samples": [1.0, 2.0, 3.0]},
            })
        })
        .collect();
    serde_json::json!({"bulkmem": "0.1.0", "results": rows}).to_string()
}

fn scratch_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("bulkmem-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn compare_into_a_closed_pipe_exits_quietly() {
    // Far more than a pipe holds (64 KiB), so writing must meet EPIPE.
    let doc = scratch_file("pipe.json", &compare_doc(5000, "per-page"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .args(["compare", doc.to_str().unwrap(), doc.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bulkmem");
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&doc);
    let err = stderr(&o);
    assert_ne!(o.status.code(), Some(101), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // docs/cli-contract.md, "Exit codes": a broken pipe exits 0 without a word.
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn json_to_a_closed_stdout_is_an_error() {
    // The shell closes fd 1 (`>&-`) before bulkmem starts.
    let mut args = vec!["exec \"$0\" \"$@\" >&-", env!("CARGO_BIN_EXE_bulkmem")];
    args.extend(QUICK_BENCH);
    args.extend(["--json", "-"]);
    let o = Command::new("sh").arg("-c").args(&args).output().unwrap();
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("bulkmem: error writing output: "), "{err}");
}

#[test]
fn compare_prints_no_escapes_from_the_documents() {
    let a = scratch_file("esc-a.json", &compare_doc(3, "per-page\u{1b}[31m"));
    let b = scratch_file("esc-b.json", &compare_doc(4, "per-page\u{1b}[31m"));
    let o = bulkmem(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("per-page[31m"), "{}", stdout(&o));
    assert!(!o.stdout.contains(&0x1b), "{}", stdout(&o));
    assert!(!o.stderr.contains(&0x1b), "{}", stderr(&o));
}

/// A skip libtest shows: written to stderr directly (libtest captures only
/// `print!`/`eprint!` of a passing test), prefixed like the library's
/// tests' skips (`SKIPPED <test>: <why>`).
fn skip(why: &str) {
    use std::io::Write as _;
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let _ = writeln!(std::io::stderr(), "\nSKIPPED {test}: {why}");
}
