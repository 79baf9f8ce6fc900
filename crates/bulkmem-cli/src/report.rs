//! Result rows, the JSON document of docs/design.md, and the human tables.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::provenance::{self, Provenance};
use crate::size::fmt_size;
use crate::stats::Stats;
use crate::table::{cell, noise_note, Table};

/// One measured cell. Field names are the JSON contract.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub op: &'static str,
    pub strategy: String,
    /// The primitive that ran (for `auto`, what it chose).
    pub chose: String,
    /// The hint given to `auto` (absent on named strategies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    pub size: usize,
    pub total: usize,
    pub regime: &'static str,
    pub threads: usize,
    pub runs: usize,
    pub gbps: Stats,
    /// Median over the [`baseline`](Row::baseline)'s median of the same
    /// cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// The row `speedup` divides by (`libc` in `bench copy|clear` and the
    /// default report unless `--baseline` names another).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// Cold rows of `bench copy|clear`: `batch` when a run's extents went
    /// through one batch call (the library's `copy_batch`, as `auto` runs
    /// them), `each` when every extent was its own call (the kernel's
    /// per-folio loops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calls: Option<&'static str>,
    /// Batch-engine rows only (`bench batch`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchCell>,
    /// Template-fill rows only (`bench fill`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub fill: Option<FillCell>,
    /// Page-move rows only (`bench move`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub moved: Option<MoveCell>,
    /// NUMA migration rows only (`bench migrate`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub migrated: Option<MigrateCell>,
}

/// The extra columns of a `bench migrate` row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MigrateCell {
    pub from: usize,
    pub to: usize,
    /// `4K` or `thp`.
    pub page: &'static str,
}

/// The extra columns of a `bench move` row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MoveCell {
    /// `4K` or `thp`.
    pub page: &'static str,
    /// Milliseconds per move.
    pub ms: Stats,
}

/// The extra columns of a `bench fill` row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FillCell {
    /// Template (element) bytes.
    pub element: usize,
    /// Whether each element was patched after the copy.
    pub patch: bool,
}

/// The extra columns of a `bench batch` row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchCell {
    pub placement: &'static str,
    pub layout: &'static str,
    /// Folios in the batch (`total / size`).
    pub count: usize,
    /// Process CPU time over wall time during the batch (median over runs):
    /// how much CPU a configuration spends, offload rows included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_busy: Option<f64>,
    /// Engine rows: the median over this machine's memory bound for the
    /// row's thread count (`bench limits`: min(read, write) for a copy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_share: Option<f64>,
    /// Engine rows: the distinct CPUs its workers run on (fewer than its
    /// threads when they share CPUs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<usize>,
}

impl Row {
    /// Rows with the same key compare against the same baseline: same op,
    /// regime and size, and the same extras (batch layout and count, fill
    /// element, page kind, migration direction), never across them.
    fn key(&self) -> String {
        let mut k = format!("{} {} {}", self.op, self.regime, self.size);
        if let Some(b) = &self.batch {
            let _ = write!(k, " {} {}", b.layout, b.count);
        }
        if let Some(f) = &self.fill {
            let _ = write!(k, " {}", f.element);
        }
        if let Some(m) = &self.moved {
            let _ = write!(k, " {}", m.page);
        }
        if let Some(m) = &self.migrated {
            let _ = write!(k, " {}>{} {}", m.from, m.to, m.page);
        }
        k
    }
}

/// Fills `speedup` from the `per-page` row of the same cell.
pub fn add_speedups(rows: &mut [Row]) {
    add_speedups_over(rows, "per-page")
}

/// Fills `speedup` from the `baseline` row of the same cell.
pub fn add_speedups_over(rows: &mut [Row], baseline: &str) {
    let base: Vec<_> = rows
        .iter()
        .filter(|r| r.strategy == baseline)
        .map(|r| (r.key(), r.gbps.median))
        .collect();
    for r in rows.iter_mut() {
        r.speedup = base
            .iter()
            .find(|b| b.0 == r.key())
            .filter(|b| b.1 > 0.0)
            .map(|b| r.gbps.median / b.1);
        r.baseline = r.speedup.map(|_| baseline.to_string());
    }
}

#[derive(Serialize)]
pub struct Machine {
    pub cpu: String,
    pub vendor: &'static str,
    pub features: Vec<&'static str>,
    pub disabled: Vec<String>,
    pub llc_bytes: usize,
    pub cpus: usize,
    /// How many LLC domains (`bulkmem info --json` lists their CPUs).
    pub llc_domain_count: usize,
    /// How many NUMA nodes.
    pub numa_node_count: usize,
    pub page_size: usize,
    pub thp: Option<String>,
    /// What `auto` followed: `tuned` (a profile) or `built-in` (the rules).
    pub auto: &'static str,
    /// Why (`bulkmem::auto::profile_status`).
    pub profile: String,
}

impl Machine {
    pub fn this() -> Machine {
        let i = bulkmem::cpu::info();
        let t = &i.topology;
        Machine {
            cpu: i.brand.clone(),
            vendor: i.vendor.name(),
            features: i.features.names(),
            disabled: i.disabled.clone(),
            llc_bytes: i.llc_bytes(),
            cpus: t.online_cpus.len(),
            llc_domain_count: t.llc_domains.len(),
            numa_node_count: t.numa_nodes.len(),
            page_size: t.page_size,
            thp: t.thp_mode.clone(),
            auto: auto_kind(),
            profile: bulkmem::auto::profile_status().to_string(),
        }
    }
}

/// docs/bench-schema.json describes this; `schema` and `provenance` were
/// added beside the original fields so readers of those keep working.
#[derive(Serialize)]
struct Document<'a> {
    bulkmem: &'static str,
    schema: u32,
    provenance: Provenance,
    machine: Machine,
    results: &'a [Row],
}

/// Writes the JSON document to `path` (`-` is stdout).
pub fn write_json(path: &Path, rows: &[Row]) -> Result<(), String> {
    let doc = Document {
        bulkmem: env!("CARGO_PKG_VERSION"),
        schema: provenance::SCHEMA,
        provenance: Provenance::this(),
        machine: Machine::this(),
        results: rows,
    };
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    if path == Path::new("-") {
        // Recorded as an output error: `main` exits as for any failed stdout.
        crate::out::write_bytes((text + "\n").as_bytes()).map_err(|e| crate::out::failed(e).msg)
    } else {
        crate::write_file::write_file(path, (text + "\n").as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// `tuned` when `auto` follows a profile in this process, else `built-in`.
pub fn auto_kind() -> &'static str {
    if bulkmem::auto::is_tuned() {
        "tuned"
    } else {
        "built-in"
    }
}

/// One table per (op, regime): a row per strategy, a column per size, each
/// cell `median±stdev` GB/s and the speed-up over `baseline` (rows whose
/// `speedup` came from [`add_speedups_over`] with the same name).
pub fn tables_over(rows: &[Row], unavailable: &[String], baseline: &str) -> Vec<Table> {
    let mut out = Vec::new();
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if !keys.contains(&(r.op, r.regime)) {
            keys.push((r.op, r.regime));
        }
    }
    for (op, regime) in keys {
        let cell_rows: Vec<&Row> = rows
            .iter()
            .filter(|r| r.op == op && r.regime == regime)
            .collect();
        let mut sizes: Vec<usize> = cell_rows.iter().map(|r| r.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let mut strategies: Vec<&str> = Vec::new();
        for r in &cell_rows {
            if !strategies.contains(&r.strategy.as_str()) {
                strategies.push(&r.strategy);
            }
        }
        let first = cell_rows[0];
        let per_run = |r: &&Row| r.total.max(r.size);
        let least = cell_rows.iter().map(per_run).min().unwrap_or(0);
        let most = cell_rows.iter().map(per_run).max().unwrap_or(0);
        let calls: Vec<&str> = cell_rows.iter().filter_map(|r| r.calls).collect();
        let batched = if calls.iter().all(|&c| c == "batch") {
            ", every row one batch call per run"
        } else if calls.contains(&"batch") {
            ", [batch] rows one batch call per run, the others a call per extent"
        } else {
            ""
        };
        let mixed = calls.contains(&"batch") && calls.contains(&"each");
        let how = match regime {
            "cold" if least == most => format!(
                "{} per run in shuffled extents, cache evicted{batched}",
                fmt_size(least)
            ),
            "cold" => format!(
                "{}-{} per run in shuffled extents, cache evicted{batched}",
                fmt_size(least),
                fmt_size(most)
            ),
            "consume" => "same buffers, each call then a read of its destination, timed together"
                .to_string(),
            "pipe" => {
                "same buffers, each call then write() of its destination to a drained pipe, timed together"
                    .to_string()
            }
            _ => "same buffers every call".to_string(),
        };
        let (lo, hi) = cell_rows.iter().fold((usize::MAX, 0), |(lo, hi), r| {
            (lo.min(r.threads), hi.max(r.threads))
        });
        let threads = match (lo, hi) {
            (lo, hi) if lo < hi => format!(
                "; {lo}-{hi} threads worked (one per extent at most), GB/s summed over them"
            ),
            (_, t) if t > 1 => format!("; {t} threads, GB/s summed over them"),
            _ => "; 1 thread".to_string(),
        };
        let mut header = vec!["strategy".to_string()];
        header.extend(sizes.iter().map(|&s| fmt_size(s)));
        let mut t = Table::new(
            format!(
                "{op}, {regime} ({how}{threads}): GB/s median±stdev of {} runs; x = over {baseline}",
                first.runs
            ),
            header,
        );
        for name in strategies {
            let first_of = cell_rows.iter().find(|r| r.strategy == name);
            let mut label = match first_of.and_then(|r| r.hint.as_deref()) {
                Some(h) if h != "auto" => format!("{name} ({}, {h})", auto_kind()),
                Some(_) => format!("{name} ({})", auto_kind()),
                _ => name.to_string(),
            };
            if mixed && first_of.and_then(|r| r.calls) == Some("batch") {
                label += " [batch]";
            }
            let find = |s: usize| cell_rows.iter().find(|r| r.strategy == name && r.size == s);
            let mut cells = vec![label];
            cells.extend(sizes.iter().map(|&s| match find(s) {
                Some(r) => cell(&r.gbps, r.speedup.filter(|_| name != baseline)),
                None => "-".to_string(),
            }));
            t.row(cells);
            if name == "auto" || name == "checked" {
                let what = if name == "auto" {
                    "  auto chose"
                } else {
                    "  checked ran"
                };
                let mut cells = vec![what.to_string()];
                cells.extend(
                    sizes
                        .iter()
                        .map(|&s| find(s).map_or("-".to_string(), |r| r.chose.clone())),
                );
                t.row(cells);
            }
        }
        t.notes
            .extend(noise_note(cell_rows.iter().map(|r| &r.gbps)));
        out.push(t);
    }
    if let (false, Some(last)) = (rows.iter().any(|r| r.strategy == baseline), out.last_mut()) {
        last.notes.push(format!(
            "no ratios: this run has no `{baseline}` row (--baseline names another)"
        ));
    }
    if let (false, Some(last)) = (unavailable.is_empty(), out.last_mut()) {
        last.notes.push(format!(
            "not run (this CPU lacks them): {}",
            unavailable.join(", ")
        ));
    }
    out
}

/// How [`pivot`] lays rows out: which table row and column a result goes
/// to (`None`: not in this table).
pub struct Pivot<'a> {
    pub title: String,
    /// Header of the name column.
    pub corner: &'a str,
    pub row: &'a dyn Fn(&Row) -> Option<String>,
    pub col: &'a dyn Fn(&Row) -> String,
    /// The strategy whose cells get no speed-up (it is the baseline).
    pub baseline: &'a str,
}

/// One table of `rows`, rows and columns in order of first appearance, each
/// cell `median±stdev` and the speed-up, with a noise note if needed.
pub fn pivot(rows: &[Row], p: Pivot) -> Table {
    let mut names: Vec<String> = Vec::new();
    let mut cols: Vec<String> = Vec::new();
    let mut placed: Vec<(String, String, &Row)> = Vec::new();
    for r in rows {
        let Some(name) = (p.row)(r) else { continue };
        let col = (p.col)(r);
        if !names.contains(&name) {
            names.push(name.clone());
        }
        if !cols.contains(&col) {
            cols.push(col.clone());
        }
        placed.push((name, col, r));
    }
    let mut header = vec![p.corner.to_string()];
    header.extend(cols.iter().cloned());
    let mut t = Table::new(p.title, header);
    for name in &names {
        let mut cells = vec![name.clone()];
        for c in &cols {
            let r = placed.iter().find(|(n, cc, _)| n == name && cc == c);
            cells.push(match r {
                Some((_, _, r)) => cell(&r.gbps, r.speedup.filter(|_| r.strategy != p.baseline)),
                None => "-".into(),
            });
        }
        t.row(cells);
    }
    t.notes
        .extend(noise_note(placed.iter().map(|(_, _, r)| &r.gbps)));
    t
}

/// [`pivot`] with a row per strategy, in one table.
pub fn by_strategy(
    rows: &[Row],
    title: String,
    col: &dyn Fn(&Row) -> String,
    baseline: &str,
) -> Vec<Table> {
    vec![pivot(
        rows,
        Pivot {
            title,
            corner: "strategy",
            row: &|r| Some(r.strategy.clone()),
            col,
            baseline,
        },
    )]
}

/// One line per op: which primitive wins each cell here and by how much
/// over the rows' baseline (their `speedup`), and the range `auto`
/// achieved over it and, where the baseline is another, over `per-page`
/// (the seeds' baseline: the kernel's loop).
pub fn summary(rows: &[Row]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut ops: Vec<&str> = rows.iter().map(|r| r.op).collect();
    ops.dedup();
    let baseline = rows.iter().find_map(|r| r.baseline.as_deref());
    for op in ops {
        let mut cells: Vec<(&str, usize)> = Vec::new();
        for r in rows.iter().filter(|r| r.op == op) {
            if !cells.contains(&(r.regime, r.size)) {
                cells.push((r.regime, r.size));
            }
        }
        let mut wins = Vec::new();
        let mut auto: Vec<(f64, String)> = Vec::new();
        let mut over_per_page: Vec<f64> = Vec::new();
        for (regime, size) in cells {
            let here: Vec<&Row> = rows
                .iter()
                .filter(|r| r.op == op && r.regime == regime && r.size == size)
                .collect();
            let named = |n: &str| here.iter().find(|r| r.strategy == n);
            if let Some(best) = here
                .iter()
                .filter(|r| r.strategy != "auto")
                .max_by(|a, b| a.gbps.median.total_cmp(&b.gbps.median))
            {
                let x = best.speedup.map_or(String::new(), |x| format!(" {x:.2}x"));
                // Batching can beat every primitive called extent by extent.
                let auto_beats = named("auto")
                    .filter(|r| r.gbps.median > best.gbps.median)
                    .and_then(|r| r.speedup)
                    .map_or(String::new(), |a| format!(" (auto {a:.2}x)"));
                wins.push(format!(
                    "{regime} {} {}{x}{auto_beats}",
                    fmt_size(size),
                    best.strategy
                ));
            }
            if let Some(a) = named("auto") {
                if let Some(x) = a.speedup {
                    auto.push((x, format!("{regime} {}", fmt_size(size))));
                }
                if let Some(p) = named("per-page").filter(|p| p.gbps.median > 0.0) {
                    over_per_page.push(a.gbps.median / p.gbps.median);
                }
            }
        }
        let mut line = format!("{op}: fastest here: {}", wins.join(", "));
        let lowest = auto.iter().min_by(|a, b| a.0.total_cmp(&b.0));
        let highest = auto.iter().map(|a| a.0).max_by(f64::total_cmp);
        if let (Some((lo, worst)), Some(hi), Some(base)) = (lowest, highest, baseline) {
            let _ = write!(
                line,
                "; auto {lo:.2}x-{hi:.2}x over {base} (lowest: {worst})"
            );
        }
        let lo = over_per_page.iter().copied().min_by(f64::total_cmp);
        let hi = over_per_page.iter().copied().max_by(f64::total_cmp);
        if let (Some(lo), Some(hi), true) = (lo, hi, baseline != Some("per-page")) {
            let _ = write!(line, ", {lo:.2}x-{hi:.2}x over per-page");
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(strategy: &str, regime: &'static str, size: usize, median: f64) -> Row {
        Row {
            op: "copy",
            strategy: strategy.into(),
            chose: if strategy == "auto" {
                "avx2-nt".into()
            } else {
                strategy.into()
            },
            hint: (strategy == "auto").then(|| "auto".into()),
            size,
            total: 256 << 20,
            regime,
            threads: 1,
            runs: 7,
            gbps: Stats::or_zero(&[median]),
            speedup: None,
            baseline: None,
            calls: None,
            batch: None,
            fill: None,
            moved: None,
            migrated: None,
        }
    }

    fn sample() -> Vec<Row> {
        let mut v = vec![
            r("per-page", "cold", 4096, 5.0),
            r("avx2-nt", "cold", 4096, 8.0),
            r("auto", "cold", 4096, 7.5),
            r("per-page", "cold", 2 << 20, 6.0),
            r("avx2-nt", "cold", 2 << 20, 9.0),
            r("auto", "cold", 2 << 20, 9.3),
        ];
        add_speedups(&mut v);
        v
    }

    #[test]
    fn speedups_divide_by_the_same_cells_per_page() {
        let v = sample();
        assert_eq!(v[0].speedup, Some(1.0));
        assert!((v[1].speedup.unwrap() - 1.6).abs() < 1e-9);
        assert!((v[5].speedup.unwrap() - 1.55).abs() < 1e-9);
    }

    #[test]
    fn tables_show_every_cell_and_the_choice() {
        let t = crate::table::text(&tables_over(
            &sample(),
            &["avx512 (needs avx512f)".into()],
            "per-page",
        ));
        assert!(t.contains("copy, cold"), "{t}");
        assert!(t.contains("x = over per-page"), "{t}");
        assert!(t.contains("1.60x") && t.contains("1.55x"), "{t}");
        assert!(t.contains("auto chose") && t.contains("avx2-nt"), "{t}");
        assert!(t.contains("4K") && t.contains("2M"), "{t}");
        assert!(t.contains("not run (this CPU lacks them): avx512"), "{t}");
    }

    /// The sample with a `libc` row per cell, ratios over it, and how each
    /// cold row was called (`auto` batched, the others `calls`).
    fn over_libc(calls: &'static str) -> Vec<Row> {
        let mut v = sample();
        v.push(r("libc", "cold", 4096, 6.0));
        v.push(r("libc", "cold", 2 << 20, 9.3 / 1.2));
        for r in &mut v {
            r.calls = Some(if r.strategy == "auto" { "batch" } else { calls });
        }
        add_speedups_over(&mut v, "libc");
        v
    }

    #[test]
    fn ratios_over_libc_say_so_and_name_batched_rows() {
        let v = over_libc("each");
        assert_eq!(v[2].baseline.as_deref(), Some("libc"));
        let t = crate::table::text(&tables_over(&v, &[], "libc"));
        assert!(t.contains("x = over libc"), "{t}");
        // auto 7.5 over libc 6.0 at 4K.
        assert!(t.contains("1.25x"), "{t}");
        assert!(t.contains("auto (") && t.contains(") [batch]"), "{t}");
        assert!(t.contains("the others a call per extent"), "{t}");
        assert!(!t.contains("per-page [batch]"), "{t}");
        assert!(!t.contains("no ratios"), "{t}");
        let t = crate::table::text(&tables_over(&v, &[], "avx512"));
        assert!(t.contains("no ratios: this run has no `avx512` row"), "{t}");
        // Every row batched: said once in the title, no row marked.
        let t = crate::table::text(&tables_over(&over_libc("batch"), &[], "libc"));
        assert!(t.contains("every row one batch call per run"), "{t}");
        assert!(!t.contains("[batch]"), "{t}");
    }

    #[test]
    fn summary_names_winners_and_auto_range() {
        let s = summary(&sample());
        assert_eq!(s.len(), 1);
        assert!(s[0].contains("cold 4K avx2-nt 1.60x,"), "{}", s[0]);
        assert!(
            s[0].contains("cold 2M avx2-nt 1.50x (auto 1.55x)"),
            "{}",
            s[0]
        );
        assert!(s[0].contains("auto 1.50x-1.55x over per-page"), "{}", s[0]);
        assert!(s[0].contains("lowest: cold 4K"), "{}", s[0]);
        // Over libc, with per-page's range beside it.
        let s = summary(&over_libc("batch"));
        assert!(
            s[0].contains("auto 1.20x-1.25x over libc (lowest: cold 2M)"),
            "{}",
            s[0]
        );
        assert!(s[0].ends_with(", 1.50x-1.55x over per-page"), "{}", s[0]);
    }

    #[test]
    fn json_has_the_contract_fields() {
        let v = sample();
        let j = serde_json::to_value(&v[2]).unwrap();
        for k in [
            "op", "strategy", "chose", "hint", "size", "total", "regime", "threads", "runs", "gbps",
        ] {
            assert!(j.get(k).is_some(), "missing {k}");
        }
        assert!(j["gbps"].get("median").is_some());
        assert!(serde_json::to_value(&v[0]).unwrap().get("hint").is_none());
    }

    #[test]
    fn document_carries_schema_and_provenance_beside_the_old_fields() {
        let path = std::env::temp_dir().join(format!("bulkmem-report-{}.json", std::process::id()));
        write_json(&path, &sample()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let j: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(j["schema"], provenance::SCHEMA);
        assert_eq!(j["bulkmem"], env!("CARGO_PKG_VERSION"));
        assert!(j["machine"]["cpu"].is_string());
        assert_eq!(j["results"].as_array().unwrap().len(), 6);
        let p = &j["provenance"];
        assert_eq!(p["commit"], env!("BULKMEM_COMMIT"));
        for k in ["kernel", "governor", "thp"] {
            assert!(p[k].is_string() || p[k].is_null(), "{k}: {}", p[k]);
        }
        assert!(p["target_features"].is_array() && p["command"].is_array());
        assert!(p["date"].as_str().unwrap().ends_with('Z'));
    }
}
