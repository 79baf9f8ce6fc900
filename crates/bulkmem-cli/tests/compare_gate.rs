//! `bulkmem compare --fail-on any` as a CI gate, through the built binary:
//! two documents of the same distribution pass, however many cells they
//! have; one cell really changed fails, and only that cell is named.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

fn compare(a: &Path, b: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .arg("compare")
        .args(extra)
        .args([a, b])
        .env_remove("BULKMEM_PROFILE")
        .output()
        .expect("bulkmem runs")
}

/// A fresh directory of this test's own.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bulkmem-gate-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Deterministic standard normal draws (xorshift64 and Box–Muller).
struct Noise(u64);

impl Noise {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

const STRATEGIES: [&str; 10] = [
    "per-page",
    "rep-movsq",
    "rep-movsb",
    "libc",
    "avx2",
    "avx2-nt",
    "avx512",
    "avx512-nt",
    "portable",
    "auto",
];
const SIZES: [u64; 3] = [4096, 65536, 2 << 20];
const REGIMES: [&str; 2] = ["hot", "cold"];

/// A `bench copy` document of 60 cells, 7 samples each around `mean(i)`
/// GB/s with a relative stdev of `spread(i)`, as `--json` writes it.
fn write_doc(
    path: &Path,
    noise: &mut Noise,
    mean: impl Fn(usize) -> f64,
    spread: impl Fn(usize) -> f64,
) {
    let mut results = Vec::new();
    for regime in REGIMES {
        for size in SIZES {
            for strategy in STRATEGIES {
                let i = results.len();
                let samples: Vec<f64> = (0..7)
                    .map(|_| mean(i) * (1.0 + spread(i) * noise.normal()))
                    .collect();
                let mut sorted = samples.clone();
                sorted.sort_by(f64::total_cmp);
                let avg = samples.iter().sum::<f64>() / 7.0;
                let sd = (samples.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / 6.0).sqrt();
                results.push(json!({
                    "op": "copy", "strategy": strategy, "chose": strategy, "size": size,
                    "total": 268435456u64, "regime": regime, "threads": 1, "runs": 7,
                    "gbps": {"median": sorted[3], "mean": avg, "stdev": sd,
                             "min": sorted[0], "max": sorted[6], "samples": samples},
                }));
            }
        }
    }
    let doc = json!({
        "bulkmem": "0.1.0", "schema": 1,
        "provenance": {"cpu": "CPU X", "commit": "abc"},
        "machine": {"cpu": "CPU X"},
        "results": results,
    });
    std::fs::write(path, doc.to_string()).unwrap();
}

fn base(i: usize) -> f64 {
    2.0 + (i * 37 % 100) as f64
}

#[test]
fn identical_noisy_runs_pass_the_gate() {
    let dir = scratch("noise");
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    // Ten pairs of documents from one distribution, spread 10%: with 60
    // cells each, an uncorrected 5% test calls about three cells a pair.
    let mut noise = Noise(0x2545_f491_4f6c_dd1d);
    let mut failed = 0;
    for _ in 0..10 {
        write_doc(&a, &mut noise, base, |_| 0.10);
        write_doc(&b, &mut noise, base, |_| 0.10);
        let o = compare(&a, &b, &["--fail-on", "any"]);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{o:?}");
        failed += usize::from(o.status.code() == Some(1));
    }
    assert!(
        failed <= 1,
        "{failed} of 10 identical pairs failed the gate"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn one_real_change_fails_the_gate_and_is_the_only_one_called() {
    let dir = scratch("change");
    let (a, b, json) = (
        dir.join("a.json"),
        dir.join("b.json"),
        dir.join("diff.json"),
    );
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    // Cell 23 (copy libc 2M hot) is 10% slower in B and measured tightly
    // (1%); the rest are one distribution with a 5% spread.
    let changed = 23;
    let spread = |i: usize| if i == changed { 0.01 } else { 0.05 };
    write_doc(&a, &mut noise, base, spread);
    write_doc(
        &b,
        &mut noise,
        |i| base(i) * if i == changed { 0.9 } else { 1.0 },
        spread,
    );
    let o = compare(
        &a,
        &b,
        &["--fail-on", "any", "--json", json.to_str().unwrap()],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--fail-on any: 0 faster, 1 slower"), "{err}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let called: Vec<(usize, &Value)> = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, c)| c["verdict"] != "unchanged")
        .collect();
    assert_eq!(called.len(), 1, "{called:?}");
    assert_eq!(called[0].0, changed);
    assert_eq!(called[0].1["verdict"], "slower");
    assert!(called[0].1["p_holm"].as_f64().unwrap() <= 0.05);
    // The same documents, under a gate wider than the change, pass.
    let o = compare(&a, &b, &["--fail-on", "any", "--threshold", "15%"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
