//! Result rows and their tables (the output crate's), with what only the
//! command knows: this machine, what `auto` follows here, and where the
//! JSON document goes.

use std::path::Path;

use serde::Serialize;

pub use bulkmem_report::document::*;

use crate::provenance::{self, Provenance};
use bulkmem_report::table::Table;

/// The machine a document was measured on.
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
    /// Why (`bulkmem_policy::auto::profile_status`).
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
            profile: bulkmem_policy::auto::profile_status().to_string(),
        }
    }
}

/// The document as this command writes it.
type Written<'a> = Document<Provenance, Machine, &'a [Row]>;

/// Writes the JSON document to `path` (`-` is stdout).
pub fn write_json(path: &Path, rows: &[Row]) -> Result<(), String> {
    let doc: Written = Document {
        bulkmem: env!("CARGO_PKG_VERSION").to_string(),
        schema: Some(provenance::SCHEMA.into()),
        provenance: Provenance::this(),
        machine: Machine::this(),
        results: rows,
    };
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    if path == Path::new("-") {
        // Recorded as an output error: `main` exits as for any failed stdout.
        crate::out::write_bytes((text + "\n").as_bytes()).map_err(|e| crate::out::failed(e).msg)
    } else {
        bulkmem_report::write_file::write_file(path, (text + "\n").as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// `tuned` when `auto` follows a profile in this process, else `built-in`.
pub fn auto_kind() -> &'static str {
    if bulkmem_policy::auto::profile().is_some() {
        "tuned"
    } else {
        "built-in"
    }
}

/// [`bulkmem_report::document::tables_over`], saying beside `auto`'s rows
/// what it followed in this process.
pub fn tables_over(rows: &[Row], unavailable: &[String], baseline: &str) -> Vec<Table> {
    bulkmem_report::document::tables_over(rows, unavailable, baseline, auto_kind())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkmem_report::stats::Stats;

    fn sample() -> Vec<Row> {
        let row = |strategy: &str, median: f64| Row {
            op: "copy",
            strategy: strategy.into(),
            chose: strategy.into(),
            hint: (strategy == "auto").then(|| "auto".into()),
            size: 4096,
            total: 256 << 20,
            regime: "cold",
            threads: 1,
            runs: 1,
            gbps: Stats::or_zero(&[median]),
            ..Default::default()
        };
        let mut v: Vec<Row> = (1..7).map(|i| row("per-page", f64::from(i))).collect();
        add_speedups(&mut v);
        v
    }

    #[test]
    fn auto_rows_say_what_auto_followed() {
        let mut v = sample();
        v.push(Row {
            strategy: "auto".into(),
            hint: Some("auto".into()),
            ..v[0].clone()
        });
        let t = bulkmem_report::table::text(&tables_over(&v, &[], "per-page"));
        assert!(t.contains(&format!("auto ({})", auto_kind())), "{t}");
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
