//! `bulkmem compare A.json B.json`: which cells of two bench documents
//! really differ. Medians alone move by a few percent between identical
//! runs, so a change is only called when Welch's t-test on the kept samples
//! says so and it is larger than a threshold the user finds worth acting on.
//!
//! Documents are read as untyped JSON so that every bench kind, and
//! documents written before or after this build, can be compared.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::cli::{runtime, Failure};
use crate::out;
use crate::size::fmt_size;
use crate::stats::Stats;
use crate::table::{fixed, Format, Table};

/// Fields that are measured (or follow from a measurement, like what `auto`
/// chose) rather than configured: they differ between runs of the same cell.
const MEASURED: [&str; 5] = ["gbps", "ms", "speedup", "chose", "runs"];

/// Key fields every row has, shown positionally rather than as `k=v`.
const BASIC: [&str; 6] = ["op", "strategy", "size", "regime", "threads", "total"];

/// Text tables are narrow (five columns); this only bounds pathological labels.
const WIDTH: usize = 120;

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// The baseline document (`--json` of any `bulkmem bench`).
    pub a: PathBuf,
    /// The document compared with it; ratios are B/A.
    pub b: PathBuf,
    /// Changes smaller than this (`2%` or `0.02`) are never called
    /// significant, however consistent.
    #[arg(long, default_value = "2%", value_parser = parse_threshold)]
    pub threshold: f64,
    /// Table format: aligned text, Markdown, or CSV.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.strip_suffix('%') {
        Some(p) => (p, 100.0),
        None => (s, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a threshold like 2% or 0.02"))?;
    let v = v / scale;
    // A bare `2` most likely means 2%, not 200%: refuse rather than guess.
    if !(0.0..1.0).contains(&v) {
        return Err(format!(
            "threshold '{s}' is outside 0%..100%; write 2% or 0.02"
        ));
    }
    Ok(v)
}

pub fn cmd(args: CompareArgs) -> Result<(), Failure> {
    let a = Doc::load(&args.a).map_err(runtime)?;
    let b = Doc::load(&args.b).map_err(runtime)?;
    for w in warnings(&a, &b) {
        eprintln!("bulkmem: warning: {w}");
    }
    out::print(&report(&a, &b, args.threshold, args.format))
}

/// One bench document: its rows, and the provenance to warn about.
struct Doc {
    name: String,
    value: Value,
    rows: Vec<Map<String, Value>>,
}

impl Doc {
    fn load(path: &Path) -> Result<Doc, String> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {name}: {e}"))?;
        Doc::parse(name, &text)
    }

    fn parse(name: String, text: &str) -> Result<Doc, String> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("{name} is not JSON: {e}"))?;
        let not_bench = |why: &str| {
            format!("{name} is not a bulkmem bench document ({why}); expected the file of `bulkmem bench ... --json FILE`")
        };
        let results = value
            .get("results")
            .and_then(Value::as_array)
            .ok_or_else(|| not_bench("no \"results\" array"))?;
        let mut rows = Vec::with_capacity(results.len());
        for (i, r) in results.iter().enumerate() {
            let row = r
                .as_object()
                .filter(|o| o.get("op").is_some_and(Value::is_string))
                .filter(|o| {
                    o.get("gbps")
                        .and_then(|g| g.get("median"))
                        .is_some_and(Value::is_number)
                })
                .ok_or_else(|| not_bench(&format!("results[{i}] has no op or gbps.median")))?;
            rows.push(row.clone());
        }
        Ok(Doc { name, value, rows })
    }

    /// A provenance field, falling back to `machine` for the CPU so that
    /// documents from before provenance still get the check.
    fn origin(&self, field: &str) -> Option<&str> {
        self.value
            .get("provenance")
            .and_then(|p| p.get(field))
            .or_else(|| (field == "cpu").then(|| self.value.get("machine")?.get("cpu"))?)
            .and_then(Value::as_str)
    }
}

fn warnings(a: &Doc, b: &Doc) -> Vec<String> {
    let mut out = Vec::new();
    for (field, what) in [("cpu", "CPUs"), ("commit", "commits")] {
        if let (Some(x), Some(y)) = (a.origin(field), b.origin(field)) {
            if x != y {
                out.push(format!(
                    "{} and {} come from different {what} ({} / {}): differences may not be the code's",
                    a.name,
                    b.name,
                    printable(x),
                    printable(y)
                ));
            }
        }
    }
    for d in [a, b] {
        if let Some(v) = d.value.get("schema").and_then(Value::as_u64) {
            if v > u64::from(crate::provenance::SCHEMA) {
                out.push(format!(
                    "{} follows schema {v}, newer than this bulkmem's {}; fields it added are ignored",
                    d.name,
                    crate::provenance::SCHEMA
                ));
            }
        }
    }
    out
}

/// A cell's identity: (field, value as JSON) pairs.
type Key = Vec<(String, String)>;

/// What identifies a cell: every configured field, sorted by name so that
/// field order in the file does not matter.
fn key(row: &Map<String, Value>) -> Key {
    let mut k: Vec<(String, String)> = row
        .iter()
        .filter(|(f, _)| !MEASURED.contains(&f.as_str()))
        .map(|(f, v)| (f.clone(), v.to_string()))
        .collect();
    k.sort();
    k
}

/// `s` without control characters: labels come from the documents, and an
/// ANSI escape in one must not reach the terminal.
fn printable(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).collect()
}

/// `copy per-page 4K hot 1t` and any extras as `k=v`; `total` only where it
/// is needed to tell rows apart. Free of control characters.
fn label(row: &Map<String, Value>, with_total: bool) -> String {
    let size_of = |f: &str| match row.get(f) {
        Some(Value::Number(n)) => n
            .as_u64()
            .map_or_else(|| n.to_string(), |v| fmt_size(v as usize)),
        Some(v) => plain(v),
        None => String::new(),
    };
    let mut parts: Vec<String> = Vec::new();
    for f in ["op", "strategy"] {
        if let Some(v) = row.get(f) {
            parts.push(plain(v));
        }
    }
    if row.contains_key("size") {
        parts.push(size_of("size"));
    }
    if let Some(v) = row.get("regime") {
        parts.push(plain(v));
    }
    if let Some(v) = row.get("threads") {
        parts.push(format!("{}t", plain(v)));
    }
    for (f, v) in row {
        if BASIC.contains(&f.as_str()) || MEASURED.contains(&f.as_str()) {
            continue;
        }
        let v = if f == "element" { size_of(f) } else { plain(v) };
        parts.push(format!("{f}={v}"));
    }
    if with_total && row.contains_key("total") {
        parts.push(format!("total={}", size_of("total")));
    }
    printable(&parts.join(" "))
}

/// `0.02` as `2`, `0.025` as `2.5`: the threshold as the user wrote it.
fn percent(x: f64) -> String {
    let s = format!("{:.2}", x * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A row's `gbps` (fields a document lacks read as 0 / no samples).
fn measured(row: &Map<String, Value>) -> Stats {
    serde_json::from_value(row["gbps"].clone()).unwrap_or_default()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Faster,
    Slower,
    Same,
    Unknown,
}

impl Verdict {
    fn mark(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "~",
            Verdict::Unknown => "?",
        }
    }
}

/// Two-sided 5% critical values of Student's t for df 1..=30.
const T_975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The critical value for a Welch–Satterthwaite df, which is fractional:
/// rounding it down errs towards "no change".
fn t_critical(df: f64) -> f64 {
    if df > 30.0 {
        1.96
    } else {
        T_975[(df.floor() as usize).clamp(1, 30) - 1]
    }
}

/// Welch's t-test at 5%, two-sided: `Some(sign of mean(b) - mean(a))` when
/// the means differ significantly, `Some(0)` when not, `None` when either
/// side has fewer than two samples (no variance to test against).
fn welch(a: &[f64], b: &[f64]) -> Option<i8> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (a_, b_) = (Stats::of(a)?, Stats::of(b)?);
    let (ma, va) = (a_.mean, a_.stdev * a_.stdev);
    let (mb, vb) = (b_.mean, b_.stdev * b_.stdev);
    let (sa, sb) = (va / a.len() as f64, vb / b.len() as f64);
    let se2 = sa + sb;
    let sign = if mb > ma { 1 } else { -1 };
    if se2 == 0.0 {
        // Noise-free samples (a timer at its resolution): any difference is real.
        return Some(if ma == mb { 0 } else { sign });
    }
    let t = (mb - ma) / se2.sqrt();
    let df = se2 * se2 / (sa * sa / (a.len() - 1) as f64 + sb * sb / (b.len() - 1) as f64);
    Some(if t.abs() > t_critical(df) { sign } else { 0 })
}

fn verdict(a: &Stats, b: &Stats, threshold: f64) -> (Option<f64>, Verdict) {
    let ratio = (a.median > 0.0 && b.median.is_finite()).then(|| b.median / a.median);
    let Some(r) = ratio else {
        return (None, Verdict::Unknown);
    };
    let v = match welch(&a.samples, &b.samples) {
        None => Verdict::Unknown,
        // Means and medians can disagree on direction with skewed samples;
        // a change is only called when both point the same way.
        Some(1) if r - 1.0 >= threshold => Verdict::Faster,
        Some(-1) if 1.0 - r >= threshold => Verdict::Slower,
        Some(_) => Verdict::Same,
    };
    (Some(r), v)
}

/// Paired (row of A, row of B), then the rows only in A, only in B.
type Matching = (Vec<(usize, usize)>, Vec<usize>, Vec<usize>);

/// Rows of `a` and `b` with the same key, paired in order (the first row of
/// `a` with a key gets the first row of `b` with it, and so on), then the
/// indices of the rows of each left without a partner. Linear in the rows:
/// one hash lookup per row, where a scan of `b` for each row of `a` took
/// 21 s on 40,000 rows.
fn match_rows(a: &[Key], b: &[Key]) -> Matching {
    let mut waiting: HashMap<&Key, VecDeque<usize>> = HashMap::with_capacity(b.len());
    for (j, k) in b.iter().enumerate() {
        waiting.entry(k).or_default().push_back(j);
    }
    let mut used_b = vec![false; b.len()];
    let mut pairs = Vec::new();
    let mut only_a = Vec::new();
    for (i, k) in a.iter().enumerate() {
        match waiting.get_mut(k).and_then(VecDeque::pop_front) {
            Some(j) => {
                used_b[j] = true;
                pairs.push((i, j));
            }
            None => only_a.push(i),
        }
    }
    let only_b = (0..b.len()).filter(|&j| !used_b[j]).collect();
    (pairs, only_a, only_b)
}

/// The whole report, in `format`.
fn report(a: &Doc, b: &Doc, threshold: f64, format: Format) -> String {
    let keys_a: Vec<Key> = a.rows.iter().map(key).collect();
    let keys_b: Vec<Key> = b.rows.iter().map(key).collect();
    let (pairs, only_a, only_b) = match_rows(&keys_a, &keys_b);

    // `total` is shown only where leaving it out would give two different
    // cells the same label: per short label, the first key seen under it and
    // whether a second one was.
    let short_a: Vec<String> = a.rows.iter().map(|r| label(r, false)).collect();
    let short_b: Vec<String> = b.rows.iter().map(|r| label(r, false)).collect();
    let mut keys_of: HashMap<&str, (&Key, bool)> = HashMap::new();
    for (l, k) in short_a
        .iter()
        .zip(&keys_a)
        .chain(short_b.iter().zip(&keys_b))
    {
        keys_of
            .entry(l)
            .and_modify(|(first, more)| *more |= *first != k)
            .or_insert((k, false));
    }
    let name = |doc: &Doc, short: &[String], i: usize| {
        if keys_of[short[i].as_str()].1 {
            label(&doc.rows[i], true)
        } else {
            short[i].clone()
        }
    };

    let mut out = String::new();
    let mut t = Table::new(
        format!("GB/s, median±stdev: A = {}, B = {}", a.name, b.name),
        ["cell", "A", "B", "B/A", "verdict"]
            .map(String::from)
            .to_vec(),
    );
    let (mut faster, mut slower, mut same, mut unknown) = (0, 0, 0, 0);
    let mut log_sum = 0.0;
    let mut logs = 0usize;
    for &(i, j) in &pairs {
        let (ma, mb) = (measured(&a.rows[i]), measured(&b.rows[j]));
        let (ratio, v) = verdict(&ma, &mb, threshold);
        match v {
            Verdict::Faster => faster += 1,
            Verdict::Slower => slower += 1,
            Verdict::Same => same += 1,
            Verdict::Unknown => unknown += 1,
        }
        if let Some(r) = ratio.filter(|r| *r > 0.0 && r.is_finite()) {
            log_sum += r.ln();
            logs += 1;
        }
        t.row(vec![
            name(a, &short_a, i),
            format!("{}±{}", fixed(ma.median), fixed(ma.stdev)),
            format!("{}±{}", fixed(mb.median), fixed(mb.stdev)),
            ratio.map_or("-".into(), |r| format!("{r:.3}x")),
            v.mark().into(),
        ]);
    }
    t.notes.push(format!(
        "faster/slower: Welch's t-test on the samples, 5% two-sided, and a change of at least {}%; ~ no change; ? fewer than 2 samples",
        percent(threshold)
    ));
    out.push_str(&t.render(format, WIDTH));
    for (rows, doc, short) in [(&only_a, a, &short_a), (&only_b, b, &short_b)] {
        if rows.is_empty() {
            continue;
        }
        let mut t = Table::new(format!("only in {}", doc.name), vec!["cell".into()]);
        for &i in rows.iter() {
            t.row(vec![name(doc, short, i)]);
        }
        out.push_str(&t.render(format, WIDTH));
    }
    let geo = if logs > 0 {
        format!("{:.3}x", (log_sum / logs as f64).exp())
    } else {
        "-".into()
    };
    let mut line = format!("{faster} faster, {slower} slower, {same} unchanged");
    if unknown > 0 {
        let _ = write!(line, ", {unknown} cannot tell");
    }
    let _ = write!(
        line,
        "; geometric mean of B/A {geo} over {logs} matched cell(s)"
    );
    if !only_a.is_empty() || !only_b.is_empty() {
        let _ = write!(
            line,
            "; {} only in A, {} only in B",
            only_a.len(),
            only_b.len()
        );
    }
    match format {
        Format::Csv => {
            let _ = writeln!(out, "# {line}");
        }
        _ => {
            let _ = writeln!(out, "\n{line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(strategy: &str, size: u64, samples: &[f64]) -> Value {
        let s = crate::stats::Stats::or_zero(samples);
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

    #[test]
    fn welch_calls_clear_differences_and_not_noise() {
        let a = [10.0, 10.2, 9.9, 10.1, 10.0];
        let b = [12.0, 12.1, 11.9, 12.2, 12.0];
        assert_eq!(welch(&a, &b), Some(1));
        assert_eq!(welch(&b, &a), Some(-1));
        assert_eq!(welch(&a, &a), Some(0));
        // Overlapping noisy samples whose means differ by less than the noise.
        assert_eq!(welch(&[10.0, 12.0, 8.0], &[10.5, 12.5, 8.5]), Some(0));
        assert_eq!(welch(&[5.0, 5.0], &[5.0, 5.0]), Some(0));
        assert_eq!(welch(&[5.0, 5.0], &[6.0, 6.0]), Some(1));
        assert_eq!(welch(&[5.0], &[6.0, 6.0]), None);
    }

    #[test]
    fn critical_values_shrink_towards_the_normal() {
        assert_eq!(t_critical(1.0), 12.706);
        assert_eq!(t_critical(2.9), 4.303);
        assert_eq!(t_critical(0.5), 12.706);
        assert_eq!(t_critical(30.0), 2.042);
        assert_eq!(t_critical(31.0), 1.96);
    }

    #[test]
    fn threshold_gates_small_significant_changes() {
        let m = |s: &[f64]| Stats::or_zero(s);
        let a = m(&[10.0, 10.001, 9.999, 10.0]);
        let b = m(&[10.1, 10.101, 10.099, 10.1]);
        assert_eq!(verdict(&a, &b, 0.02).1, Verdict::Same);
        assert_eq!(verdict(&a, &b, 0.005).1, Verdict::Faster);
        assert_eq!(verdict(&b, &a, 0.005).1, Verdict::Slower);
        assert_eq!(verdict(&m(&[10.0]), &b, 0.0).1, Verdict::Unknown);
    }

    #[test]
    fn thresholds_parse_as_percent_or_fraction() {
        assert_eq!(parse_threshold("2%"), Ok(0.02));
        assert_eq!(parse_threshold("0.05"), Ok(0.05));
        assert_eq!(parse_threshold("0%"), Ok(0.0));
        assert!(parse_threshold("2").is_err());
        assert!(parse_threshold("fast").is_err());
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
        let mut extra = row("engine", 4096, &[1.0, 2.0]);
        extra["placement"] = "spread".into();
        extra["count"] = 64.into();
        assert_eq!(
            label(extra.as_object().unwrap(), false),
            "copy engine 4K hot 1t count=64 placement=spread"
        );
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
        assert!(csv.contains("cell,A,B,B/A,verdict"), "{csv}");
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
        r["note\u{7}"] = "\u{1b}]0;title\u{7}x\ny".into();
        let l = label(r.as_object().unwrap(), true);
        assert!(!l.chars().any(char::is_control), "{l:?}");
        assert!(
            l.contains("per-page[31m") && l.contains("note=]0;titlexy"),
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
        let missing = Path::new("/nonexistent/bulkmem-compare.json");
        let e = Doc::load(missing).err().unwrap();
        assert!(
            e.contains("cannot read /nonexistent/bulkmem-compare.json"),
            "{e}"
        );
    }
}
