//! `bulkmem compare A.json B.json`: which cells of two bench documents
//! really differ. Medians alone move by a few percent between identical
//! runs, so a change is only called when Welch's t-test on the kept samples
//! says so, corrected for the number of cells tested and for the drift
//! between the two runs (`significance`), and it is larger than a
//! threshold the user finds worth acting on.
//!
//! Documents are read as untyped JSON so that every bench kind, and
//! documents written before or after this build, can be compared.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use clap::ValueEnum as _;
use serde::Serialize;
use serde_json::{Map, Value};

mod render;
mod significance;

use render::render;

use crate::cli::{runtime, Failure};
use crate::out;
use crate::size::fmt_size;
use crate::stats::Stats;
use crate::table::Format;

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
    /// The smallest change worth calling (`3%` or `0.03`): a cell is
    /// faster or slower only when its median B/A moved at least this far
    /// and the test is significant after the correction for the number of
    /// cells; smaller changes are never called, however consistent.
    #[arg(long, default_value = "3%", value_parser = parse_threshold)]
    pub threshold: f64,
    /// Table format: aligned text, Markdown, or CSV (one line per cell,
    /// numbers only).
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Also write every cell's figures and verdict as JSON to FILE (`-`
    /// for stdout; the tables then go to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit 1 when a cell changed significantly in that direction (for
    /// CI); without it, the exit status says only whether the comparison ran.
    #[arg(long, value_enum, value_name = "CHANGE")]
    pub fail_on: Option<FailOn>,
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
    crate::cli::check_outputs(args.json.as_deref(), None)?;
    let o = outcome(&a, &b, args.threshold);
    let text = render(&o, args.format);
    if let Some(path) = args.json.as_deref() {
        let json = serde_json::to_string_pretty(&o).expect("plain data serializes") + "\n";
        if path == Path::new("-") {
            // The JSON owns stdout; the tables are a courtesy on stderr.
            let _ = std::io::Write::write_all(&mut std::io::stderr(), text.as_bytes());
            out::write_bytes(json.as_bytes()).map_err(out::failed)?;
        } else {
            out::print(&text)?;
            crate::write_file::write_file(path, json.as_bytes())
                .map_err(|e| runtime(format!("cannot write {}: {e}", path.display())))?;
        }
    } else {
        out::print(&text)?;
    }
    match args.fail_on {
        Some(f) if fails(&o, f) => Err(runtime(format!(
            "--fail-on {}: {} faster, {} slower",
            f.to_possible_value()
                .expect("no skipped variants")
                .get_name(),
            o.faster,
            o.slower
        ))),
        _ => Ok(()),
    }
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

impl serde::Serialize for Verdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl Verdict {
    fn name(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "unchanged",
            Verdict::Unknown => "cannot-tell",
        }
    }

    fn mark(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "~",
            Verdict::Unknown => "?",
        }
    }
}

/// A matched cell's ratio, verdict and p-values (raw, Holm-adjusted).
struct Judged {
    ratio: Option<f64>,
    verdict: Verdict,
    p: Option<f64>,
    p_holm: Option<f64>,
}

/// Every matched cell's verdict, and the drift between the runs (relative
/// stdev of a cell's B/A that no cell's samples account for). A cell is
/// faster or slower only when the test, corrected for the number of cells,
/// is significant and its median ratio moved by at least `threshold` the
/// same way.
fn judge(pairs: &[(&Stats, &Stats)], threshold: f64) -> (Vec<Judged>, f64) {
    let cells: Vec<Option<significance::Cell>> = pairs
        .iter()
        .map(|(a, b)| significance::Cell::of(&a.samples, &b.samples))
        .collect();
    let tested: Vec<significance::Cell> = cells.iter().flatten().copied().collect();
    let drift = significance::drift(&tested);
    let tests: Vec<(i8, f64)> = tested
        .iter()
        .map(|c| significance::welch(c, drift, tested.len()))
        .collect();
    let adjusted = significance::holm(&tests.iter().map(|t| t.1).collect::<Vec<_>>());
    let mut next = tests.iter().zip(adjusted);
    let judged = pairs
        .iter()
        .zip(&cells)
        .map(|((a, b), cell)| {
            let ratio = (a.median > 0.0 && b.median.is_finite()).then(|| b.median / a.median);
            let test = cell.and_then(|_| next.next());
            let verdict = match (ratio, test) {
                (Some(r), Some((&(sign, _), p))) if p <= significance::ALPHA => {
                    // Means and medians can disagree on direction with
                    // skewed samples; a change is only called when both
                    // point the same way.
                    if sign > 0 && r - 1.0 >= threshold {
                        Verdict::Faster
                    } else if sign < 0 && 1.0 - r >= threshold {
                        Verdict::Slower
                    } else {
                        Verdict::Same
                    }
                }
                (Some(_), Some(_)) => Verdict::Same,
                _ => Verdict::Unknown,
            };
            Judged {
                ratio,
                verdict,
                p: test.map(|t| t.0 .1),
                p_holm: test.map(|t| t.1),
            }
        })
        .collect();
    (judged, drift.sqrt())
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

/// A matched cell's side: the figures the verdict came from.
#[derive(Serialize)]
struct Side {
    median: f64,
    stdev: f64,
    runs: usize,
}

impl Side {
    fn of(s: &Stats) -> Side {
        Side {
            median: s.median,
            stdev: s.stdev,
            runs: s.samples.len(),
        }
    }
}

#[derive(Serialize)]
struct Cell {
    cell: String,
    a: Side,
    b: Side,
    /// B/A of the medians; `null` when A's is 0.
    ratio: Option<f64>,
    verdict: Verdict,
    /// Welch's two-sided p-value, drift included; `null` with fewer than
    /// two samples on a side.
    p: Option<f64>,
    /// `p` after Holm's correction over the comparison's tested cells:
    /// significant when at most 0.05.
    p_holm: Option<f64>,
}

/// What `--json` writes and the tables show. GB/s throughout.
#[derive(Serialize)]
struct Outcome {
    a: String,
    b: String,
    threshold: f64,
    /// Between-run drift: the relative stdev of a cell's B/A beyond what
    /// its samples explain, estimated from all the cells (0 on a quiet
    /// machine). Counted in every cell's test.
    drift: f64,
    cells: Vec<Cell>,
    only_in_a: Vec<String>,
    only_in_b: Vec<String>,
    faster: usize,
    slower: usize,
    unchanged: usize,
    cannot_tell: usize,
    /// Geometric mean of B/A over the cells with a ratio.
    geomean: Option<f64>,
}

fn outcome(a: &Doc, b: &Doc, threshold: f64) -> Outcome {
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
    let stats: Vec<(Stats, Stats)> = pairs
        .iter()
        .map(|&(i, j)| (measured(&a.rows[i]), measured(&b.rows[j])))
        .collect();
    let refs: Vec<(&Stats, &Stats)> = stats.iter().map(|(x, y)| (x, y)).collect();
    let (judged, drift) = judge(&refs, threshold);
    let cells: Vec<Cell> = pairs
        .iter()
        .zip(&stats)
        .zip(judged)
        .map(|((&(i, _), (ma, mb)), j)| Cell {
            cell: name(a, &short_a, i),
            a: Side::of(ma),
            b: Side::of(mb),
            ratio: j.ratio,
            verdict: j.verdict,
            p: j.p,
            p_holm: j.p_holm,
        })
        .collect();
    let count = |v: Verdict| cells.iter().filter(|c| c.verdict == v).count();
    let logs: Vec<f64> = cells
        .iter()
        .filter_map(|c| c.ratio.filter(|r| *r > 0.0 && r.is_finite()))
        .map(f64::ln)
        .collect();
    Outcome {
        a: a.name.clone(),
        b: b.name.clone(),
        threshold,
        drift,
        faster: count(Verdict::Faster),
        slower: count(Verdict::Slower),
        unchanged: count(Verdict::Same),
        cannot_tell: count(Verdict::Unknown),
        geomean: (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp()),
        only_in_a: only_a.iter().map(|&i| name(a, &short_a, i)).collect(),
        only_in_b: only_b.iter().map(|&j| name(b, &short_b, j)).collect(),
        cells,
    }
}

/// The whole report, in `format` (the tests' shorthand).
#[cfg(test)]
fn report(a: &Doc, b: &Doc, threshold: f64, format: Format) -> String {
    render(&outcome(a, b, threshold), format)
}

/// What `--fail-on` watches for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// A cell significantly slower in B.
    Slower,
    /// A cell significantly faster in B (an unexpected gain is suspect too).
    Faster,
    /// Either.
    Any,
}

/// Whether `o` has a change `fail_on` fails on.
fn fails(o: &Outcome, fail_on: FailOn) -> bool {
    match fail_on {
        FailOn::Slower => o.slower > 0,
        FailOn::Faster => o.faster > 0,
        FailOn::Any => o.slower + o.faster > 0,
    }
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
        // The default gate is 3%: a clean 2.5% change is not called, 3.5% is.
        #[derive(clap::Parser)]
        struct Cmd {
            #[command(flatten)]
            args: CompareArgs,
        }
        let default = <Cmd as clap::Parser>::try_parse_from(["compare", "a", "b"])
            .unwrap()
            .args
            .threshold;
        assert_eq!(default, 0.03);
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
    fn thresholds_parse_as_percent_or_fraction() {
        use render::percent;
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
