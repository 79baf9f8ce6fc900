//! `bench limits` (read, write and the copy bounds) and the share of the
//! bound that `bench batch` reports for each engine row.

use std::process::Command;

/// Runs `bulkmem` with `args` split at spaces.
fn bulkmem(args: &str) -> (String, String, bool) {
    let o = Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .args(args.split_whitespace())
        .output()
        .expect("run bulkmem");
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.success(),
    )
}

fn median(doc: &serde_json::Value, name: &str) -> f64 {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["strategy"].as_str().unwrap().starts_with(name))
        .unwrap_or_else(|| panic!("no {name} row in {doc}"))["gbps"]["median"]
        .as_f64()
        .unwrap()
}

/// The per-run rates of `name`'s row, in the order they were measured.
fn samples(doc: &serde_json::Value, name: &str) -> Vec<f64> {
    doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["strategy"].as_str().unwrap().starts_with(name))
        .unwrap_or_else(|| panic!("no {name} row in {doc}"))["gbps"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn limits_give_rates_and_bounds_no_rate_exceeds() {
    let (out, err, ok) = bulkmem("bench limits --threads 1 --size 16M --runs 2 --quiet --json -");
    assert!(ok, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let read = median(&doc, "read");
    let nt = median(&doc, "write (non-temporal)");
    let temporal = median(&doc, "write (temporal)");
    let min = median(&doc, "copy bound: min");
    let bus = median(&doc, "copy bound, one bus");
    assert!(read > 0.0 && temporal > 0.0 && nt >= 0.0, "{doc}");
    // Each run's bounds come from that run's read and better write (the
    // medians of separate columns need not: two runs' writes can trade
    // places between the non-temporal and the temporal column).
    let (r, n, t) = (
        samples(&doc, "read"),
        samples(&doc, "write (non-temporal)"),
        samples(&doc, "write (temporal)"),
    );
    let (mins, buses) = (
        samples(&doc, "copy bound: min"),
        samples(&doc, "copy bound, one bus"),
    );
    assert_eq!(mins.len(), r.len(), "{doc}");
    for i in 0..r.len() {
        let w = n[i].max(t[i]);
        assert!(
            (mins[i] - r[i].min(w)).abs() <= 1e-9 * mins[i],
            "run {i}: {doc}"
        );
        let one_bus = 1.0 / (1.0 / r[i] + 1.0 / w);
        assert!(
            (buses[i] - one_bus).abs() <= 1e-9 * one_bus,
            "run {i}: {doc}"
        );
    }
    assert!(min <= read * 1.0001, "{min} vs {read}");
    assert!(bus < min && bus >= min / 2.0 * 0.9, "{bus} vs {min}");
    assert!(err.contains("copy bound") || out.contains("copy bound"));
}

#[test]
fn batch_rows_report_their_share_of_a_given_bound() {
    let (out, err, ok) = bulkmem(
        "bench batch --folio 64K --total 4M --threads 1 --runs 2 --bound 1000 --quiet --json -",
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("of the memory bound") && err.contains("engine 1"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let engine = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["strategy"] == "engine")
        .expect("an engine row");
    let share = engine["bound_share"].as_f64().expect("bound_share");
    let median = engine["gbps"]["median"].as_f64().unwrap();
    assert!((share - median / 1000.0).abs() < 1e-9, "{engine}");
    // Each engine's workers on as many CPUs as it has threads, where the
    // process may use that many (an engine built on a pinned thread had
    // one CPU for all).
    let (out, err, ok) = bulkmem(
        "bench batch --folio 64K --total 4M --threads 1,2 --runs 1 --bound 1000 --quiet --json -",
    );
    assert!(ok, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let usable = std::thread::available_parallelism().map_or(1, |n| n.get());
    for r in doc["results"].as_array().unwrap() {
        if r["strategy"] == "engine" {
            let threads = r["threads"].as_u64().unwrap() as usize;
            assert_eq!(r["cpus"].as_u64(), Some(threads.min(usable) as u64), "{r}");
        }
    }
    let (_, err, ok) = bulkmem("bench batch --bound 0");
    assert!(!ok && err.contains("--bound"), "{err}");
}

#[test]
fn scattered_pages_get_their_own_figures_and_bounds() {
    let (out, err, ok) =
        bulkmem("bench limits --threads 1 --size 16M --runs 2 --pages 4K,16K --quiet --json -");
    assert!(ok, "{err}");
    assert!(err.contains("scattered pages"), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    for page in ["4K", "16K"] {
        let name = |what: &str| format!("{page} pages: {what}");
        let (r, n, t) = (
            samples(&doc, &name("read")),
            samples(&doc, &name("write (non-temporal)")),
            samples(&doc, &name("write (temporal)")),
        );
        let mins = samples(&doc, &name("copy bound: min"));
        assert!(r.iter().all(|&x| x > 0.0), "{doc}");
        for i in 0..r.len() {
            assert!(
                (mins[i] - r[i].min(n[i].max(t[i]))).abs() <= 1e-9 * mins[i],
                "{doc}"
            );
        }
        let row = doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["strategy"] == name("read"))
            .unwrap();
        let bytes = if page == "4K" { 4096 } else { 16384 };
        assert_eq!(row["size"].as_u64(), Some(bytes), "{row}");
    }
    let names: Vec<&str> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["strategy"].as_str().unwrap())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("64K")), "{names:?}");
    // None asked: none measured; a page no buffer holds, or not whole
    // lines, is refused before anything is measured.
    let (out, err, ok) =
        bulkmem("bench limits --threads 1 --size 16M --runs 1 --pages none --quiet --json -");
    assert!(ok, "{err}");
    assert!(!out.contains(" pages: "), "{out}");
    for (args, what) in [
        ("--pages 32M --size 16M", "larger than --size"),
        ("--pages 4100", "multiple of 64"),
    ] {
        let (_, err, ok) = bulkmem(&format!("bench limits --runs 1 {args}"));
        assert!(!ok && err.contains(what), "{args}: {err}");
    }
}

#[test]
fn batch_shares_are_of_the_bound_of_their_folio_size() {
    let (out, err, ok) =
        bulkmem("bench batch --folio 16K,64K --total 4M --threads 1 --runs 1 --quiet --json -");
    assert!(ok, "{err}");
    assert!(
        err.contains("share of the memory bound") && err.contains("16K / 64K"),
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let engines: Vec<&serde_json::Value> = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["strategy"] == "engine")
        .collect();
    assert_eq!(engines.len(), 2, "{doc}");
    for r in &engines {
        let bound = r["bound"].as_f64().expect("bound");
        let share = r["bound_share"].as_f64().expect("bound_share");
        let median = r["gbps"]["median"].as_f64().unwrap();
        assert!(bound > 0.0 && (share - median / bound).abs() < 1e-9, "{r}");
    }
    // Each folio size has a bound of its own (measured over its pages),
    // not one bound for all.
    assert_ne!(engines[0]["bound"], engines[1]["bound"], "{doc}");
}
