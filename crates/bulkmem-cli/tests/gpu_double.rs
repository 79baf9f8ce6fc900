//! The command's GPU paths on any machine: `bulkmem info` and `bench batch
//! --offload gpu` run against the library's CUDA test double (built by
//! scripts/cuda-double; crates/bulkmem/tests/cuda_double.rs drives the
//! backend through it in depth). The double copies with the CPU, so its
//! timings mean nothing: these tests check rows, verification and words.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn double_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let out = tmp.join("cuda-double");
        let include = tmp.parent().expect("target dir").join("cuda-include");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/cuda-double");
        let o = Command::new(script)
            .arg(&out)
            .arg(&include)
            .output()
            .expect("run scripts/cuda-double");
        assert!(
            o.status.success(),
            "scripts/cuda-double failed (scripts/c-deps installs a C compiler):\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
}

/// `bulkmem ARGS` with the double as libcuda.so.1, configured by `config`.
fn with_double(args: &[&str], config: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .args(args)
        .env("LD_LIBRARY_PATH", double_dir())
        .env("CUDA_DOUBLE", config)
        .output()
        .expect("run bulkmem")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn info_lists_each_gpu_the_driver_sees() {
    let o = with_double(&["info"], "devices=2;engines=3");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for i in 0..2 {
        let want = format!(
            "offload:     gpu {i} bulkmem CUDA test double {i}, not a GPU (3 copy engines, PCI 0000:{:02x}:00, 16.0G): bench batch --offload gpu",
            0x40 + i
        );
        assert!(out.contains(&want), "missing {want:?} in:\n{out}");
    }
    let o = with_double(&["info", "--json"], "devices=2;engines=3");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let gpus = v["offload"]["gpus"].as_array().expect("offload.gpus");
    assert_eq!(gpus.len(), 2, "{v}");
    assert_eq!(gpus[1]["copy_engines"], 3, "{v}");

    let o = with_double(&["info"], "devices=0");
    let out = text(&o.stdout);
    assert!(
        out.contains("offload:     none (the CUDA driver sees no GPU)"),
        "{out}"
    );
    let o = with_double(&["info"], "fail=cuInit:1:999");
    let out = text(&o.stdout);
    assert!(
        out.contains("offload:     none (cuInit failed: CUDA_ERROR_UNKNOWN (999): unknown error)"),
        "{out}"
    );
}

/// One small `bench batch` over the double, its rows as JSON on stdout.
fn bench_batch(offload: &str, folio: &str, threads: &str, config: &str) -> Output {
    let args = [
        "bench",
        "batch",
        "--offload",
        offload,
        "--folio",
        folio,
        "--threads",
        threads,
        "--total",
        "16M",
        "--runs",
        "1",
        "--json",
        "-",
        "--quiet",
    ];
    with_double(&args, config)
}

#[test]
fn bench_batch_offload_gpu_rows_are_verified_and_say_it_is_not_a_gpu() {
    let o = bench_batch("gpu:3", "64K,2M", "1,2", "engines=2");
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("with gpu 0 (bulkmem CUDA test double 0, not a GPU), 3 channels"),
        "the output names the stand-in: {err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let rows = v["results"].as_array().expect("results");
    let count = |s: &str| rows.iter().filter(|r| r["strategy"] == s).count();
    // Two folio sizes x two thread counts for the engine rows, one
    // offload-only row per folio size; each verified before it was timed.
    assert_eq!(count("engine+gpu"), 4, "{v}");
    assert_eq!(count("gpu only"), 2, "{v}");

    // A failing channel's chunks are redone on the CPU: still verified.
    let o = bench_batch("gpu", "2M", "1", "sticky=cuMemcpyDtoHAsync_v2:2:214");
    assert!(o.status.success(), "{}", text(&o.stderr));
}
