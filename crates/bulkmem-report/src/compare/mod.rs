//! `bulkmem compare A.json B.json`: which cells of two bench documents
//! really differ. Medians alone move by a few percent between identical
//! runs, so a change is only called when Welch's t-test on the kept samples
//! says so, corrected for the number of cells tested and for the drift
//! between the two runs (`significance`), and it is larger than a
//! threshold the user finds worth acting on.
//!
//! Documents are read into the rows the benches write ([`Row`]), and each
//! row's fields are kept as written besides: a cell is identified by the
//! configured fields ([`KEY`]), an explicit list, so that a field added to
//! the rows later (a measurement, as `remeasured` once was) never splits a
//! cell in two.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

mod judge;
mod render;
mod significance;
#[cfg(test)]
mod tests;

pub use judge::{fails, outcome, FailOn, Outcome};
pub use render::{percent, render};

use crate::document::{Document, Row, SCHEMA};
use bulkmem_machine::units::format_bytes;

/// The fields that say which cell a row is: what the bench was asked to
/// run, never what it measured. Everything else (rates, ratios, what
/// `auto` chose, cells measured again, shares of a bound, fields a later
/// build adds) is measured, and a cell keyed on it would pair with no
/// cell of another run. A later build's new configured field is not
/// here either: its rows pair with the older document's, field unseen.
const KEY: [&str; 18] = [
    "op",
    "strategy",
    "size",
    "regime",
    "threads",
    "total", // every row
    "hint",
    "baseline",
    "calls", // bench copy|clear|preload
    "placement",
    "layout",
    "count",
    "cpus", // bench batch
    "element",
    "patch", // bench fill
    "page",
    "from",
    "to", // bench move, bench migrate
];

/// `bench compact`'s configured fields, beside [`KEY`].
const KEY_COMPACT: [&str; 3] = ["live", "mutators", "thp"];

/// Whether `field` says which cell a row is.
fn configured(field: &str) -> bool {
    KEY.contains(&field) || KEY_COMPACT.contains(&field)
}

/// Key fields every row has, shown positionally rather than as `k=v`.
const BASIC: [&str; 6] = ["op", "strategy", "size", "regime", "threads", "total"];

/// One bench document: its rows, and the provenance to warn about.
pub struct Doc {
    pub name: String,
    schema: Option<u64>,
    cpu: Option<String>,
    commit: Option<String>,
    rows: Vec<Record>,
}

/// The parts of a document's `provenance` (or, in documents from before
/// it, `machine`) that say whether two documents are comparable.
#[derive(Default, Deserialize)]
struct Origin {
    cpu: Option<String>,
    commit: Option<String>,
}

/// A row as read: typed, and every field as the document has it.
#[derive(Deserialize)]
struct Record {
    #[serde(flatten)]
    row: Row,
    #[serde(flatten)]
    fields: Map<String, Value>,
}

impl Doc {
    pub fn load(path: &Path) -> Result<Doc, String> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {name}: {e}"))?;
        Doc::parse(name, &text)
    }

    pub fn parse(name: String, text: &str) -> Result<Doc, String> {
        type Read = Document<Option<Origin>, Option<Origin>, Vec<Record>>;
        let doc: Read = serde_json::from_str(text).map_err(|e| {
            if e.is_data() {
                // serde reads a struct from an array too, field by field,
                // and would complain about the first element's type.
                let why = if text.trim_start().starts_with('{') {
                    e.to_string()
                } else {
                    "not a JSON object".to_string()
                };
                format!(
                    "{name} is not a bulkmem bench document ({why}); \
                     expected the file of `bulkmem bench ... --json FILE`"
                )
            } else {
                format!("{name} is not JSON: {e}")
            }
        })?;
        let provenance = doc.provenance.unwrap_or_default();
        // Documents from before provenance still get the CPU check.
        let cpu = provenance.cpu.or(doc.machine.and_then(|m| m.cpu));
        Ok(Doc {
            name,
            schema: doc.schema,
            cpu,
            commit: provenance.commit,
            rows: doc.results,
        })
    }
}

/// Why the comparison may mislead: documents from different CPUs or
/// commits, or from a newer schema than this build reads.
pub fn warnings(a: &Doc, b: &Doc) -> Vec<String> {
    let mut out = Vec::new();
    let pairs = [
        (a.cpu.as_deref(), b.cpu.as_deref(), "CPUs"),
        (a.commit.as_deref(), b.commit.as_deref(), "commits"),
    ];
    for (x, y, what) in pairs {
        if let (Some(x), Some(y)) = (x, y) {
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
        if let Some(v) = d.schema.filter(|&v| v > u64::from(SCHEMA)) {
            out.push(format!(
                "{} follows schema {v}, newer than this bulkmem's {SCHEMA}; fields it added are ignored",
                d.name,
            ));
        }
    }
    out
}

/// A cell's identity: (field, value as JSON) pairs.
type Key = Vec<(String, String)>;

/// What identifies a cell: every configured field, sorted by name so that
/// field order in the file does not matter.
fn key(fields: &Map<String, Value>) -> Key {
    let mut k: Vec<(String, String)> = fields
        .iter()
        .filter(|(f, _)| configured(f))
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
fn label(rec: &Record, with_total: bool) -> String {
    let r = &rec.row;
    let mut parts = vec![
        r.op.to_string(),
        r.strategy.clone(),
        format_bytes(r.size),
        r.regime.to_string(),
        format!("{}t", r.threads),
    ];
    for (f, v) in &rec.fields {
        if BASIC.contains(&f.as_str()) || !configured(f) {
            continue;
        }
        let v = match (f.as_str(), v.as_u64()) {
            ("element", Some(n)) => format_bytes(n as usize),
            _ => plain(v),
        };
        parts.push(format!("{f}={v}"));
    }
    if with_total {
        parts.push(format!("total={}", format_bytes(r.total)));
    }
    printable(&parts.join(" "))
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
