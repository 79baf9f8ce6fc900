//! `compare` end to end on documents built here, and its statistics on
//! deterministic noise.

use std::collections::HashMap;

use serde_json::json;

use super::judge::{judge, match_rows, Verdict};
use super::*;
use crate::stats::Stats;
use crate::table::Format;

/// The whole report, in `format`.
fn report(a: &Doc, b: &Doc, threshold: f64, format: Format) -> String {
    render(&outcome(a, b, threshold), format)
}

/// `v` read as a document's row.
fn record(v: Value) -> Record {
    serde_json::from_value(v).unwrap()
}

fn row(strategy: &str, size: u64, samples: &[f64]) -> Value {
    let s = Stats::or_zero(samples);
    json!({
        "op": "copy", "strategy": strategy, "chose": strategy, "size": size,
        "total": 268435456u64, "regime": "hot", "threads": 1, "runs": samples.len(),
        "gbps": s,
    })
}

fn doc(name: &str, cpu: &str, commit: &str, rows: Vec<Value>) -> Doc {
    let v = json!({
        "bulkmem": "0.1.0", "schema": 1,
        "provenance": {"cpu": cpu, "commit": commit},
        "machine": {"cpu": cpu},
        "results": rows,
    });
    Doc::parse(name.into(), &v.to_string()).unwrap()
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

    /// `n` samples around `mean` with a relative stdev of `spread`.
    fn samples(&mut self, n: usize, mean: f64, spread: f64) -> Stats {
        let v: Vec<f64> = (0..n)
            .map(|_| mean * (1.0 + spread * self.normal()))
            .collect();
        Stats::or_zero(&v)
    }
}

fn verdicts(cells: &[(Stats, Stats)], threshold: f64) -> Vec<Verdict> {
    let refs: Vec<(&Stats, &Stats)> = cells.iter().map(|(a, b)| (a, b)).collect();
    judge(&refs, threshold)
        .0
        .iter()
        .map(|j| j.verdict)
        .collect()
}

/// 60 cells of 7 samples each, spread 10%, means from 1 to 100 GB/s;
/// B's `scale(i)` times A's.
fn family(noise: &mut Noise, spread: f64, scale: impl Fn(usize) -> f64) -> Vec<(Stats, Stats)> {
    (0..60)
        .map(|i| {
            let mean = 1.0 + (i * 37 % 100) as f64;
            let a = noise.samples(7, mean, spread);
            (a, noise.samples(7, mean * scale(i), spread))
        })
        .collect()
}

#[test]
fn pure_noise_in_many_cells_calls_no_change() {
    // 20 comparisons of 60 cells, A and B from one distribution: at a
    // family-wise 5%, about one comparison in 20 may call a cell; an
    // uncorrected 5% per cell calls three cells in each.
    let mut noise = Noise(0x2545_f491_4f6c_dd1d);
    let (mut families_calling, mut raw_calls) = (0, 0);
    for _ in 0..20 {
        let cells = family(&mut noise, 0.10, |_| 1.0);
        let refs: Vec<(&Stats, &Stats)> = cells.iter().map(|(a, b)| (a, b)).collect();
        let (judged, _) = judge(&refs, 0.0);
        families_calling += usize::from(judged.iter().any(|j| j.verdict != Verdict::Same));
        raw_calls += judged.iter().filter(|j| j.p.unwrap() <= 0.05).count();
    }
    assert!(
        families_calling <= 2,
        "{families_calling} of 20 called a change"
    );
    assert!(
        raw_calls >= 20,
        "only {raw_calls} uncorrected calls: no noise to correct?"
    );
}

#[test]
fn a_real_shift_in_one_cell_is_called_and_only_it() {
    let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
    let mut cells = family(&mut noise, 0.05, |_| 1.0);
    // One cell 10% slower, measured with a 1% spread.
    cells[17] = (noise.samples(7, 40.0, 0.01), noise.samples(7, 36.0, 0.01));
    let v = verdicts(&cells, 0.03);
    assert_eq!(v[17], Verdict::Slower);
    let others: Vec<usize> = (0..60)
        .filter(|&i| i != 17 && v[i] != Verdict::Same)
        .collect();
    assert!(others.is_empty(), "called {others:?}");
    // The same cell among cells that agree with their samples, on
    // the other side of the ratio.
    cells.swap(0, 17);
    let (b, a) = cells[0].clone();
    cells[0] = (a, b);
    assert_eq!(verdicts(&cells, 0.03)[0], Verdict::Faster);
}

#[test]
fn drift_between_runs_is_not_called_a_change() {
    // Identical builds on a busy machine: every cell of B moved by
    // its own ±15% (log-normal) for the whole run, while each cell's 7 samples
    // agree within 1%. Welch alone, even with Holm, calls most of them.
    let mut noise = Noise(0x0123_4567_89ab_cdef);
    let shifts: Vec<f64> = (0..60).map(|_| (0.15 * noise.normal()).exp()).collect();
    let cells = family(&mut noise, 0.01, |i| shifts[i]);
    let refs: Vec<(&Stats, &Stats)> = cells.iter().map(|(a, b)| (a, b)).collect();
    let (judged, drift) = judge(&refs, 0.03);
    let called = judged.iter().filter(|j| j.verdict != Verdict::Same).count();
    assert_eq!(called, 0, "drift {drift}");
    assert!((0.08..0.3).contains(&drift), "drift {drift}");
    let no_drift = cells
        .iter()
        .map(|(a, b)| significance::Cell::of(&a.samples, &b.samples).unwrap())
        .filter(|c| significance::welch(c, 0.0, 60).1 * 60.0 <= 0.05)
        .count();
    assert!(no_drift > 30, "{no_drift}");
}

#[test]
fn a_change_common_to_every_cell_of_a_quiet_run_is_called() {
    // The drift is measured around the cells' common shift, so a build
    // 10% slower everywhere is not mistaken for drift.
    let mut noise = Noise(0x5851_f42d_4c95_7f2d);
    let cells = family(&mut noise, 0.01, |_| 0.9);
    let v = verdicts(&cells, 0.03);
    assert!(v.iter().all(|&v| v == Verdict::Slower), "{v:?}");
}

#[test]
fn threshold_gates_small_significant_changes() {
    let m = |s: &[f64]| Stats::or_zero(s);
    let a = m(&[10.0, 10.001, 9.999, 10.0]);
    let b = m(&[10.1, 10.101, 10.099, 10.1]);
    let one = |a: &Stats, b: &Stats, t| verdicts(&[(a.clone(), b.clone())], t)[0];
    // A 1% change, far beyond its noise: called only under a 1% gate.
    assert_eq!(one(&a, &b, 0.02), Verdict::Same);
    assert_eq!(one(&a, &b, 0.005), Verdict::Faster);
    assert_eq!(one(&b, &a, 0.005), Verdict::Slower);
    assert_eq!(one(&m(&[10.0]), &b, 0.0), Verdict::Unknown);
    // The command's default gate is 3%: a clean 2.5% change is not called, 3.5% is.
    let default = 0.03;
    let scaled = |f: f64| m(&a.samples.iter().map(|x| x * f).collect::<Vec<_>>());
    assert_eq!(one(&a, &scaled(1.025), default), Verdict::Same);
    assert_eq!(one(&a, &scaled(1.035), default), Verdict::Faster);
    // Significant but pointing the other way by the medians: no call.
    let skewed = m(&[[9.9; 8].as_slice(), &[12.5; 7]].concat());
    let flat = m(&[10.0, 10.01, 9.99, 10.0, 10.02, 9.98, 10.0]);
    let (j, _) = judge(&[(&flat, &skewed)], 0.0);
    assert!(j[0].p_holm.unwrap() < 0.05 && j[0].ratio.unwrap() < 1.0);
    assert_eq!(j[0].verdict, Verdict::Same);
}

#[test]
fn thresholds_show_as_the_user_wrote_them() {
    assert_eq!(
        (percent(0.02), percent(0.025), percent(0.0)),
        ("2".into(), "2.5".into(), "0".into())
    );
}

#[test]
fn keys_ignore_measurements_and_field_order() {
    let a = row("auto", 4096, &[1.0, 2.0]);
    let mut b = row("auto", 4096, &[3.0, 4.0, 5.0]);
    b["chose"] = "avx2-nt".into();
    b["speedup"] = 1.5.into();
    assert_eq!(key(a.as_object().unwrap()), key(b.as_object().unwrap()));
    b["threads"] = 2.into();
    assert_ne!(key(a.as_object().unwrap()), key(b.as_object().unwrap()));
    // A batch cell's CPU share, bound and bound share change from run to
    // run; a document from before rows had a bound still pairs.
    let batch = |busy: f64, share: f64, bound: Option<f64>| {
        let mut r = row("engine", 2 << 20, &[1.0, 2.0]);
        r["placement"] = "spread".into();
        r["layout"] = "scattered".into();
        r["count"] = 512.into();
        r["cpu_busy"] = busy.into();
        r["bound_share"] = share.into();
        if let Some(b) = bound {
            r["bound"] = b.into();
        }
        r["cpus"] = 2.into();
        key(r.as_object().unwrap())
    };
    assert_eq!(batch(1.9, 0.81, None), batch(1.7, 0.77, Some(30.5)));
    assert_eq!(batch(1.9, 0.81, Some(29.0)), batch(1.7, 0.77, Some(30.5)));
    let mut extra = row("engine", 4096, &[1.0, 2.0]);
    extra["placement"] = "spread".into();
    extra["count"] = 64.into();
    assert_eq!(
        label(&record(extra), false),
        "copy engine 4K hot 1t count=64 placement=spread"
    );
}

/// Two real `bench copy --sizes 4K,2M --runs 3 --json` documents of one
/// build, the first with an `auto` cell measured again (`remeasured`),
/// the second without: every cell pairs with its counterpart.
#[test]
fn real_documents_with_remeasured_auto_rows_pair_every_cell() {
    let a = Doc::parse(
        "a.json".into(),
        include_str!("../../tests/fixtures/copy-remeasured-a.json"),
    )
    .unwrap();
    let b = Doc::parse(
        "b.json".into(),
        include_str!("../../tests/fixtures/copy-remeasured-b.json"),
    )
    .unwrap();
    assert!(
        a.rows
            .iter()
            .any(|r| r.fields.contains_key("remeasured") && r.row.strategy == "auto"),
        "the fixture lost its remeasured row"
    );
    for (x, y) in [(&a, &b), (&b, &a), (&a, &a)] {
        let o = outcome(x, y, 0.03);
        assert!(
            o.only_in_a.is_empty() && o.only_in_b.is_empty(),
            "{:?} {:?}",
            o.only_in_a,
            o.only_in_b
        );
        assert_eq!(o.cells.len(), x.rows.len());
        assert!(o
            .cells
            .iter()
            .any(|c| c.cell.starts_with("copy auto 2M cold")));
    }
    // Nothing measured reaches a label either.
    let text = report(&a, &b, 0.03, Format::Text);
    assert!(
        !text.contains("remeasured") && !text.contains('{'),
        "{text}"
    );
}

#[test]
fn fields_outside_the_key_never_split_a_cell() {
    let a = row("auto", 4096, &[1.0, 2.0]);
    let mut b = row("auto", 4096, &[1.5, 2.5]);
    // A measurement a later build might add, and one that exists.
    b["novel_measure"] = json!({"x": 1});
    b["remeasured"] = json!({"runs": 3, "rows": []});
    assert_eq!(key(a.as_object().unwrap()), key(b.as_object().unwrap()));
    // A configured field still tells cells apart.
    b["hint"] = "stream".into();
    assert_ne!(key(a.as_object().unwrap()), key(b.as_object().unwrap()));
}

#[test]
fn report_matches_rows_and_lists_the_rest() {
    let fast = [12.0, 12.1, 11.9];
    let base = [10.0, 10.1, 9.9];
    let a = doc(
        "a.json",
        "CPU X",
        "abc",
        vec![
            row("per-page", 4096, &base),
            row("avx2-nt", 4096, &base),
            row("erms", 4096, &base),
        ],
    );
    let b = doc(
        "b.json",
        "CPU X",
        "abc",
        vec![
            row("avx2-nt", 4096, &fast),
            row("per-page", 4096, &base),
            row("clzero", 4096, &base),
        ],
    );
    assert!(warnings(&a, &b).is_empty());
    let text = report(&a, &b, 0.02, Format::Text);
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle}: {text}"))
            .to_string()
    };
    assert!(line("copy avx2-nt 4K hot 1t").ends_with("faster"), "{text}");
    assert!(line("copy avx2-nt 4K hot 1t").contains("1.200x"), "{text}");
    assert!(line("copy per-page 4K hot 1t").ends_with('~'), "{text}");
    assert!(
        text.contains("only in a.json") && text.contains("copy erms"),
        "{text}"
    );
    assert!(
        text.contains("only in b.json") && text.contains("copy clzero"),
        "{text}"
    );
    assert!(text.contains("1 faster, 0 slower, 1 unchanged"), "{text}");
    let csv = report(&a, &b, 0.02, Format::Csv);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("cell,a_median_gbps,"), "{csv}");
    // Two matched cells, then one only in each; every line has the
    // header's nine fields, the figures as plain numbers.
    assert_eq!(lines.len(), 5, "{csv}");
    assert!(lines.iter().all(|l| l.split(',').count() == 9), "{csv}");
    let avx = lines
        .iter()
        .find(|l| l.starts_with("copy avx2-nt 4K"))
        .unwrap();
    let f: Vec<&str> = avx.split(',').collect();
    assert_eq!((f[1], f[4], f[8]), ("10", "12", "faster"), "{csv}");
    assert!(
        lines.contains(&"copy erms 4K hot 1t,,,,,,,,only-a"),
        "{csv}"
    );
    let o = outcome(&a, &b, 0.02);
    assert!(fails(&o, FailOn::Faster) && fails(&o, FailOn::Any));
    assert!(!fails(&o, FailOn::Slower));
    let back = outcome(&b, &a, 0.02);
    assert!(fails(&back, FailOn::Slower) && !fails(&back, FailOn::Faster));
    let json = serde_json::to_value(&o).unwrap();
    assert_eq!(json["faster"], 1);
    assert_eq!(json["cells"][1]["verdict"], "faster");
    assert_eq!(json["only_in_b"][0], "copy clzero 4K hot 1t");
}

#[test]
fn matching_pairs_rows_by_key_whatever_their_order() {
    // Large and shuffled: the hash matching must pair every row with
    // its own cell, and duplicates in order (first with first).
    let n = 50_000;
    let keys_a: Vec<Key> = (0..n)
        .map(|i| vec![("size".to_string(), (i % (n - 10)).to_string())])
        .collect();
    let mut order: Vec<usize> = (0..n).collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let mut keys_b: Vec<Key> = order.iter().map(|&i| keys_a[i].clone()).collect();
    // One row of B whose cell A lacks, and one of A's cells B lacks.
    let gone = order[0];
    keys_b[0] = vec![("size".to_string(), "new".to_string())];
    let (pairs, only_a, only_b) = match_rows(&keys_a, &keys_b);
    assert_eq!(pairs.len(), n - 1);
    assert_eq!(only_b, vec![0]);
    assert_eq!(only_a.len(), 1);
    assert_eq!(keys_a[only_a[0]], keys_a[gone]);
    let mut seen_b = vec![false; n];
    let mut last_b_of: HashMap<&Key, usize> = HashMap::new();
    for &(i, j) in &pairs {
        assert_eq!(keys_a[i], keys_b[j], "row {i} of A paired with {j} of B");
        assert!(!std::mem::replace(&mut seen_b[j], true), "{j} paired twice");
        // Rows with the same key pair in order on both sides.
        if let Some(prev) = last_b_of.insert(&keys_a[i], j) {
            assert!(prev < j, "duplicates of {:?} out of order", keys_a[i]);
        }
    }
}

#[test]
fn labels_and_warnings_carry_no_control_characters() {
    let mut r = row("per-page\u{1b}[31m", 4096, &[1.0, 2.0]);
    r["hint"] = "\u{1b}]0;title\u{7}x\ny".into();
    let l = label(&record(r.clone()), true);
    assert!(!l.chars().any(char::is_control), "{l:?}");
    assert!(
        l.contains("per-page[31m") && l.contains("hint=]0;titlexy"),
        "{l}"
    );
    let a = doc("a.json", "CPU \u{1b}[2J", "abc", vec![r.clone()]);
    let b = doc("b.json", "CPU Y", "abc", vec![r]);
    let w = warnings(&a, &b);
    assert!(!w[0].chars().any(char::is_control), "{w:?}");
    let text = report(&a, &b, 0.02, Format::Text);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
}

#[test]
fn different_cpu_or_commit_is_warned_about() {
    let a = doc("a.json", "CPU X", "abc", vec![]);
    let b = doc("b.json", "CPU Y", "def", vec![]);
    let w = warnings(&a, &b);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("CPU X") && w[1].contains("abc"), "{w:?}");
    // Documents from before provenance still get the CPU check.
    let old = Doc::parse(
        "old.json".into(),
        r#"{"bulkmem":"0.1.0","machine":{"cpu":"CPU Z"},"results":[]}"#,
    )
    .unwrap();
    assert_eq!(warnings(&a, &old).len(), 1);
}

#[test]
fn non_bench_files_are_errors_naming_the_file() {
    for text in [
        "not json",
        "{\"cpu\": 1}",
        "{\"results\": [{\"op\": \"copy\"}]}",
        "[1, 2]",
    ] {
        let e = Doc::parse("notes.json".into(), text).err().expect(text);
        assert!(e.contains("notes.json"), "{e}");
    }
    // What is wrong is named: the field a row lacks, or the document's shape.
    let e = Doc::parse("r.json".into(), r#"{"results": [{"op": "copy"}]}"#)
        .err()
        .unwrap();
    assert!(e.contains("missing field `strategy`"), "{e}");
    let e = Doc::parse("r.json".into(), "[1, 2]").err().unwrap();
    assert!(e.contains("(not a JSON object)"), "{e}");
    let missing = Path::new("/nonexistent/bulkmem-compare.json");
    let e = Doc::load(missing).err().unwrap();
    assert!(
        e.contains("cannot read /nonexistent/bulkmem-compare.json"),
        "{e}"
    );
}
