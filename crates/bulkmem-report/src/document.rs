//! Result rows and the JSON document of docs/cli-contract.md (written by the
//! benches, read back by `compare`), and the human tables of rows.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use crate::stats::Stats;

mod auto_best;
mod tables;

pub use auto_best::{to_remeasure, Remeasure, AHEAD_MOST};
pub use tables::{by_strategy, pivot, summary, tables_over, Pivot};

/// The version of docs/bench-schema.json the documents follow. The rules for
/// bumping it are in that file's `description`.
pub const SCHEMA: u32 = 1;

/// A label the benches write from their constants (op, regime, page...).
/// An alias so that serde does not take `&'static str` for text borrowed
/// from the document (the `'de: 'static` a file's text cannot give):
/// documents are read back through `interned` (below).
pub type Label = &'static str;

/// One measured cell. Field names are the JSON contract. `Default` is for
/// building one: a bench names what it measured and leaves the extras
/// (`..Default::default()`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Row {
    #[serde(deserialize_with = "interned")]
    pub op: Label,
    pub strategy: String,
    /// The primitive that ran (for `auto`, what it chose).
    pub chose: String,
    /// The hint given to `auto` (absent on named strategies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    pub size: usize,
    pub total: usize,
    #[serde(deserialize_with = "interned")]
    pub regime: Label,
    pub threads: usize,
    pub runs: usize,
    pub gbps: Stats,
    /// Median over the [`baseline`](Row::baseline)'s median of the same
    /// cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup: Option<f64>,
    /// The row `speedup` divides by (`libc` in `bench copy|clear` and the
    /// default report unless `--baseline` names another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// Cold rows of `bench copy|clear`: `batch` when a run's extents went
    /// through one batch call (the library's `copy_batch`, as `auto` runs
    /// them), `each` when every extent was its own call (the kernel's
    /// per-folio loops).
    #[serde(
        default,
        deserialize_with = "interned_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub calls: Option<Label>,
    /// Batch-engine rows only (`bench batch`).
    #[serde(
        flatten,
        deserialize_with = "extra",
        skip_serializing_if = "Option::is_none"
    )]
    pub batch: Option<BatchCell>,
    /// Template-fill rows only (`bench fill`).
    #[serde(
        flatten,
        deserialize_with = "extra",
        skip_serializing_if = "Option::is_none"
    )]
    pub fill: Option<FillCell>,
    /// Page-move rows only (`bench move`).
    #[serde(
        flatten,
        deserialize_with = "extra",
        skip_serializing_if = "Option::is_none"
    )]
    pub moved: Option<MoveCell>,
    /// NUMA migration rows only (`bench migrate`).
    #[serde(
        flatten,
        deserialize_with = "extra",
        skip_serializing_if = "Option::is_none"
    )]
    pub migrated: Option<MigrateCell>,
    /// Concurrent compaction rows only (`bench compact`).
    #[serde(
        flatten,
        deserialize_with = "extra",
        skip_serializing_if = "Option::is_none"
    )]
    pub compacted: Option<CompactCell>,
    /// `bench preload`, small workloads: each child process's calls of
    /// `memcpy` as the program links it over the same calls to the C
    /// library's own function, in alternating rounds (the fastest of
    /// each), summarised over the children. About 1 for `off`, where
    /// both are the C library's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_c_library: Option<Stats>,
    /// `auto` rows of `bench copy|clear` whose cell the run measured again
    /// ([`to_remeasure`]): auto and the rows it trailed, in rounds of
    /// their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remeasured: Option<Remeasured>,
    /// Bytes the source started past a page boundary (`bench copy
    /// --src-offset`, hot regimes); absent: page-aligned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_offset: Option<usize>,
    /// The same for the destination (`--dst-offset`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_offset: Option<usize>,
}

/// A cell measured again: `auto` and the rows this run put it furthest
/// behind, in rounds of their own, where the run's best row is not also
/// picked by the noise it is measured with (docs/measurements.md, "auto/best").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Remeasured {
    /// Timed rounds.
    pub runs: usize,
    /// `auto`, then the rows ahead of it, each with its GB/s of those
    /// rounds (samples in round order).
    pub rows: Vec<RemeasuredRow>,
}

/// One row of a [`Remeasured`] cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RemeasuredRow {
    pub strategy: String,
    pub gbps: Stats,
}

/// The extra columns of a `bench migrate` row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MigrateCell {
    pub from: usize,
    pub to: usize,
    /// `4K` or `thp`.
    #[serde(deserialize_with = "interned")]
    pub page: Label,
}

/// The extra columns of a `bench compact` row: one heap compacted while
/// mutator threads run (`gbps`: heap bytes over the time from the pause to
/// the last page).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactCell {
    /// Percent of the heap's objects that are live.
    pub live: u32,
    /// Mutator threads.
    pub mutators: usize,
    /// Whether the heap was advised huge pages.
    pub thp: bool,
    /// The collector's pause, microseconds.
    pub pause_us: Stats,
    /// Mutator stalls (faulting accesses, end to end), microseconds, over
    /// every run's stalls together: p50, p99, p99.9 and max.
    pub stall_us: [f64; 4],
    /// Of each stall, the part inside bulkmem's handler (the library's
    /// own histogram), microseconds: p50 and p99, medians over runs.
    pub handler_us: [f64; 2],
    /// Faults per mutator thread (median over runs).
    pub faults_per_mutator: f64,
    /// Mutator operations per second during compaction over a run without
    /// a collection (median over runs; 0 for stop-the-world).
    pub mutator_share: f64,
    /// Pause to last page, milliseconds.
    pub total_ms: Stats,
    /// Peak resident memory above the heap's before compaction, bytes
    /// (median over runs).
    pub rss_extra: f64,
    /// What the mutators did: `random` (read and count random live
    /// objects) or `allocate` (fill fresh 2 MiB buffers in the free
    /// space). Absent in documents from before it: `random`.
    #[serde(default = "random_workload")]
    pub workload: String,
    /// `allocate`: faults taken per MiB the mutators allocated (median
    /// over runs; 0 for `random`).
    #[serde(default)]
    pub faults_per_mib: f64,
    /// `--cycles`: many sessions on one heap, one after the other.
    #[serde(default)]
    pub cycles: Option<CyclesCell>,
}

fn random_workload() -> String {
    "random".into()
}

/// What `bench compact --cycles N` measures of N sessions on one heap:
/// whether anything grows from one to the next.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CyclesCell {
    /// Sessions run.
    pub cycles: usize,
    /// Pause of every session, microseconds: p50, p99 and max.
    pub pause_us: [f64; 3],
    /// Lines of /proc/self/maps after the first and the last session.
    pub mappings: [usize; 2],
    /// Open descriptors after the first and the last session.
    pub descriptors: [usize; 2],
    /// The process's AnonHugePages after the first and the last session,
    /// bytes.
    pub huge: [u64; 2],
}

/// The extra columns of a `bench move` row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MoveCell {
    /// `4K` or `thp`.
    #[serde(deserialize_with = "interned")]
    pub page: Label,
    /// Milliseconds per move.
    pub ms: Stats,
}

/// The extra columns of a `bench fill` row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FillCell {
    /// Template (element) bytes.
    pub element: usize,
    /// Whether each element was patched after the copy.
    pub patch: bool,
}

/// The extra columns of a `bench batch` row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchCell {
    #[serde(deserialize_with = "interned")]
    pub placement: Label,
    #[serde(deserialize_with = "interned")]
    pub layout: Label,
    /// Folios in the batch (`total / size`).
    pub count: usize,
    /// Process CPU time over wall time during the batch (median over runs):
    /// how much CPU a configuration spends, offload rows included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_busy: Option<f64>,
    /// Engine rows: the median over this machine's memory bound for the
    /// row's thread count and pattern (`bench limits`: min(read, write) for
    /// a copy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_share: Option<f64>,
    /// Engine rows: that bound in GB/s (scattered folios: over pages of
    /// the folio size in a shuffled order; adjacent ones: one long run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<f64>,
    /// Engine rows: the distinct CPUs its workers run on (fewer than its
    /// threads when they share CPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
        if let Some(c) = &self.compacted {
            let _ = write!(k, " {}% {} {} {}", c.live, c.mutators, c.thp, c.workload);
            if let Some(y) = &c.cycles {
                let _ = write!(k, " x{}", y.cycles);
            }
        }
        k
    }
}

/// The JSON document (docs/bench-schema.json); `schema` and `provenance`
/// were added beside the original fields so readers of those keep working.
/// The command writes it with its provenance, machine and borrowed rows;
/// `compare` reads it back with what it needs of the first two.
#[derive(Serialize, Deserialize)]
pub struct Document<P, M, R> {
    #[serde(default)]
    pub bulkmem: String,
    /// Absent in documents from before it.
    #[serde(default)]
    pub schema: Option<u64>,
    #[serde(default)]
    pub provenance: P,
    #[serde(default)]
    pub machine: M,
    pub results: R,
}

/// A label read back from a document, as the `&'static str` the benches
/// write from their constants: each distinct text is leaked once and
/// shared after, so reading many documents (or rows) costs one copy of
/// each op, regime and page name, not one per row.
fn intern(s: String) -> &'static str {
    static SEEN: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(&s) = seen.get(s.as_str()) {
        return s;
    }
    let s: &'static str = Box::leak(s.into_boxed_str());
    seen.insert(s);
    s
}

fn interned<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    String::deserialize(d).map(intern)
}

fn interned_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'static str>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(intern))
}

/// A row's extra columns, when they are all there. Read from a copy of
/// the row's fields rather than by serde's own flattening, which takes each
/// field it matches as it goes: a move cell would take a migration row's
/// `page`, failing for want of `ms`, and leave the migration cell without.
fn extra<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    let fields = serde_json::Map::deserialize(d)?;
    Ok(T::deserialize(serde_json::Value::Object(fields)).ok())
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn r(strategy: &str, regime: &'static str, size: usize, median: f64) -> Row {
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
            ..Default::default()
        }
    }

    pub(crate) fn sample() -> Vec<Row> {
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

    /// The sample with a `libc` row per cell, ratios over it, and how each
    /// cold row was called (`auto` batched, the others `calls`).
    pub(crate) fn over_libc(calls: &'static str) -> Vec<Row> {
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
    fn speedups_divide_by_the_same_cells_per_page() {
        let v = sample();
        assert_eq!(v[0].speedup, Some(1.0));
        assert!((v[1].speedup.unwrap() - 1.6).abs() < 1e-9);
        assert!((v[5].speedup.unwrap() - 1.55).abs() < 1e-9);
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
    fn rows_read_back_as_written() {
        let mut v = over_libc("each");
        v[0].fill = Some(FillCell {
            element: 64,
            patch: true,
        });
        v[1].moved = Some(MoveCell {
            page: "thp",
            ms: Stats::or_zero(&[1.5, 2.5]),
        });
        // `page` again: the move cell must not take the migration's.
        v[2].migrated = Some(MigrateCell {
            from: 0,
            to: 1,
            page: "4K",
        });
        v[3].batch = Some(BatchCell {
            placement: "spread",
            layout: "scattered",
            count: 64,
            cpu_busy: Some(0.5),
            bound_share: None,
            bound: None,
            cpus: Some(4),
        });
        let text = serde_json::to_string(&v).unwrap();
        let back: Vec<Row> = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert_eq!(back[2].migrated.as_ref().unwrap().page, "4K");
        assert!(back[2].moved.is_none() && back[1].migrated.is_none());
        // Labels read back are shared, not one copy per row.
        assert!(std::ptr::eq(back[4].regime, back[5].regime));
        let e = serde_json::from_str::<Row>(r#"{"op": "copy"}"#).unwrap_err();
        assert!(e.to_string().contains("missing field"), "{e}");
    }
}
