//! The preload under test: builds libbulkmem_preload.so (release, as users
//! run it), compiles the C programs in tests/c, and runs them and a real
//! test suite (CPython's own tests of bytes, buffers, mmap, pickle, io...)
//! with the library preloaded, under settings that send every call through
//! bulkmem and the engine. Needs cc and a python3 with its test package
//! (`scripts/c-deps` installs what is missing).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

#[path = "../../bulkmem-capi/tests/common/mod.rs"]
mod common;
use common::{assert_all_passed, text};

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The release library, built once per test binary.
fn library() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let o = Command::new(env!("CARGO"))
            .args(["build", "--release", "--quiet", "-p", "bulkmem-preload"])
            .current_dir(here())
            .output()
            .expect("run cargo");
        assert!(o.status.success(), "cargo build: {}", text(&o));
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| here().join("../../target"));
        let lib = target.join("release/libbulkmem_preload.so");
        assert!(lib.is_file(), "{} was not built", lib.display());
        lib
    })
}

fn compile(name: &str) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("preload-{name}"));
    let o = Command::new("cc")
        .args([
            "-std=c99",
            "-D_GNU_SOURCE",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pthread",
            "-O2",
        ])
        // check.h is the C ABI suite's.
        .arg(format!(
            "-I{}",
            here().join("../bulkmem-capi/tests/c").display()
        ))
        .arg(here().join(format!("tests/c/{name}.c")))
        .args(["-ldl", "-lrt", "-o"])
        .arg(&out)
        .output()
        .expect("run cc (scripts/c-deps installs it)");
    assert!(o.status.success(), "cc {name}.c: {}", text(&o));
    out
}

/// Runs `cmd` with the preload and `env`; it must succeed.
fn under_preload(cmd: &mut Command, env: &[(&str, &str)]) -> String {
    cmd.env("LD_PRELOAD", library());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("run the program");
    let out = text(&o);
    assert!(
        o.status.success(),
        "{cmd:?} with {env:?} failed ({}):\n{out}",
        o.status
    );
    out
}

/// Default thresholds; everything through bulkmem; everything from 4 KiB
/// on the engine; the preload switched off.
const SETTINGS: &[&[(&str, &str)]] = &[
    &[],
    &[("BULKMEM_PRELOAD_MIN", "0")],
    &[
        ("BULKMEM_PRELOAD_MIN", "0"),
        ("BULKMEM_PRELOAD_MT_MIN", "4K"),
    ],
    &[("BULKMEM_PRELOAD_MIN", "0"), ("BULKMEM_PRELOAD_STATS", "1")],
];

#[test]
fn every_size_alignment_and_overlap_through_the_preload() {
    let bin = compile("test_semantics");
    // Without the preload the same program passes against the C library.
    let o = Command::new(&bin)
        .env("BULKMEM_TEST_EXPECT_NO_PRELOAD", "1")
        .env_remove("LD_PRELOAD")
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", text(&o));
    for env in SETTINGS {
        let out = under_preload(&mut Command::new(&bin), env);
        assert_all_passed(&out, &format!("test_semantics {env:?}"));
    }
    // Switched off, it is loaded but inert: exactly one check fails, the
    // one that asks whether it is active.
    let o = Command::new(&bin)
        .env("LD_PRELOAD", library())
        .env("BULKMEM_PRELOAD", "off")
        .output()
        .expect("run");
    let off = text(&o);
    assert!(
        off.contains(" 1 failed") && off.contains("active()"),
        "{off}"
    );
}

#[test]
fn threads_fork_and_signal_handlers_under_the_preload() {
    let bin = compile("test_torture");
    for env in SETTINGS {
        let out = under_preload(&mut Command::new(&bin), env);
        assert_all_passed(&out, &format!("test_torture {env:?}"));
    }
}

#[test]
fn stats_name_every_path_and_the_process() {
    let bin = compile("test_semantics");
    let out = under_preload(
        &mut Command::new(&bin),
        &[
            ("BULKMEM_PRELOAD_STATS", "1"),
            ("BULKMEM_PRELOAD_MT_MIN", "2M"),
        ],
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("bulkmem preload ["))
        .unwrap_or_else(|| panic!("no stats line:\n{out}"));
    for path in [
        "small (C library)",
        "bulkmem auto",
        "bulkmem engine",
        "large, C library",
    ] {
        assert!(line.contains(path), "{line}");
    }
    // The process is named (/proc/self/comm: 15 characters at most).
    assert!(line.contains(" preload-test_se]"), "{line}");
    // Large copies happened, so the accelerated paths have non-zero counts.
    assert!(!line.contains("bulkmem auto 0 calls"), "{line}");
    // Bad settings warn once and are ignored; the program still passes.
    let out = under_preload(
        &mut Command::new(&bin),
        &[
            ("BULKMEM_PRELOAD_MIN", "lots"),
            ("BULKMEM_PRELOAD_THREADS", "0"),
        ],
    );
    assert!(out.contains("BULKMEM_PRELOAD_MIN: size 'lots'"), "{out}");
    assert!(out.contains("BULKMEM_PRELOAD_THREADS=\"0\""), "{out}");
    assert_all_passed(&out, "test_semantics with bad settings");
}

/// A python3 whose own test package is installed.
fn python() -> PathBuf {
    let o = Command::new("python3")
        .args(["-c", "import sys, test.regrtest; print(sys.executable)"])
        .output()
        .expect("python3 is not installed: run scripts/c-deps");
    assert!(
        o.status.success(),
        "python3 lacks its test package: run scripts/c-deps ({})",
        text(&o)
    );
    PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
}

#[test]
fn cpython_test_suites_pass_under_the_preload() {
    let py = python();
    let tests = [
        "test_bytes",
        "test_memoryview",
        "test_array",
        "test_struct",
        "test_buffer",
        "test_mmap",
        "test_zlib",
        "test_pickle",
        "test_bigmem",
        "test_io",
    ];
    // Every copy, move and clear through bulkmem, those of 64 KiB and more
    // on the engine's workers.
    let mut c = Command::new(&py);
    c.args(["-m", "test", "-q"]).args(tests);
    let out = under_preload(
        &mut c,
        &[
            ("BULKMEM_PRELOAD_MIN", "0"),
            ("BULKMEM_PRELOAD_MT_MIN", "64K"),
        ],
    );
    assert!(out.contains("Result: SUCCESS"), "{out}");
    println!(
        "{}",
        out.lines().rev().take(4).collect::<Vec<_>>().join("\n")
    );
}
