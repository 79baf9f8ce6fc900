//! docs/bench-schema.json is the contract for `--json`: real documents of
//! several bench kinds must validate against it, and the schema must be
//! strict enough to reject a mistyped field. `bulkmem compare` reads them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn bulkmem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .args(args)
        .output()
        .expect("run bulkmem")
}

/// A path in the temp directory unique to this test process and `name`
/// (tests run in parallel threads of one process).
fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("bulkmem-schema-{}-{name}", std::process::id()))
}

/// Runs `bench <args> --json <tmp> --quiet` and returns the document.
fn bench_json(name: &str, args: &[&str]) -> Value {
    let path = temp(name);
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    let p = path.to_str().unwrap();
    all.extend_from_slice(&["--json", p, "--quiet"]);
    let o = bulkmem(&all);
    assert!(
        o.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&path).expect("the document was written");
    let _ = std::fs::remove_file(&path);
    serde_json::from_str(&text).expect("the document is JSON")
}

fn schema() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench-schema.json");
    let text = std::fs::read_to_string(&path).expect("docs/bench-schema.json");
    serde_json::from_str(&text).expect("the schema is JSON")
}

fn validator() -> jsonschema::Validator {
    let s = schema();
    assert_eq!(
        s["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "the schema names its draft"
    );
    jsonschema::draft202012::new(&s).expect("the schema is a valid draft 2020-12 schema")
}

fn assert_valid(doc: &Value, what: &str) {
    let errors: Vec<String> = validator()
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:#?}\n{doc:#}");
}

#[test]
fn copy_documents_follow_the_schema_and_carry_provenance() {
    let doc = bench_json(
        "copy.json",
        &[
            "copy",
            "--sizes",
            "4K",
            "--regime",
            "hot",
            "--strategies",
            "per-page,auto",
            "--runs",
            "2",
            // Every cell measured again: auto is never 100x per-page.
            "--remeasure-below",
            "100",
        ],
    );
    assert_valid(&doc, "bench copy");
    assert_eq!(doc["schema"], 1);
    let p = &doc["provenance"];
    assert_eq!(p["bulkmem"], env!("CARGO_PKG_VERSION"));
    let cmd: Vec<&str> = p["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        cmd.ends_with(&["--quiet"]) && cmd.contains(&"per-page,auto"),
        "{cmd:?}"
    );
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter().any(|r| r["hint"].is_string()),
        "auto has a hint"
    );
    for r in rows {
        assert_eq!(r["gbps"]["samples"].as_array().unwrap().len(), 2, "{r}");
    }
    let auto = rows.iter().find(|r| r["strategy"] == "auto").unwrap();
    let again = &auto["remeasured"];
    assert_eq!(again["runs"], 2, "{auto}");
    let names: Vec<&Value> = again["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["strategy"])
        .collect();
    assert_eq!(names, ["auto", "per-page"], "{auto}");
    assert!(rows
        .iter()
        .all(|r| r["strategy"] == "auto" || r.get("remeasured").is_none()));
}

#[test]
fn fill_documents_follow_the_schema() {
    let doc = bench_json(
        "fill.json",
        &[
            "fill",
            "--element",
            "64",
            "--sizes",
            "64K",
            "--threads",
            "1",
            "--runs",
            "2",
        ],
    );
    assert_valid(&doc, "bench fill");
    let rows = doc["results"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(rows
        .iter()
        .all(|r| r["element"] == 64 && r["patch"].is_boolean()));
}

#[test]
fn move_documents_follow_the_schema() {
    let doc = bench_json(
        "move.json",
        &["move", "--sizes", "2M", "--pages", "4K", "--runs", "2"],
    );
    assert_valid(&doc, "bench move");
    let rows = doc["results"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(rows
        .iter()
        .all(|r| r["page"] == "4K" && r["ms"]["median"].is_number()));
}

#[test]
fn compact_documents_follow_the_schema() {
    if bulkmem::compact::support().is_err() {
        eprintln!("skipping: no concurrent compaction here");
        return;
    }
    let doc = bench_json(
        "compact.json",
        &[
            "compact",
            "--heaps",
            "8M",
            "--live",
            "50",
            "--mutators",
            "1",
            "--thp",
            "off",
            "--strategies",
            "stop-the-world,concurrent-auto",
            "--runs",
            "1",
        ],
    );
    assert_valid(&doc, "bench compact");
    let rows = doc["results"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows
        .iter()
        .all(|r| r["live"] == 50 && r["stall_us"].as_array().unwrap().len() == 4));
}

#[test]
fn batch_documents_follow_the_schema() {
    let doc = bench_json(
        "batch.json",
        &[
            "batch",
            "--folio",
            "4K",
            "--threads",
            "1",
            "--total",
            "1M",
            "--runs",
            "2",
        ],
    );
    assert_valid(&doc, "bench batch");
    let rows = doc["results"].as_array().unwrap();
    assert!(rows
        .iter()
        .any(|r| r["count"] == 256 && r["layout"] == "scattered"));
}

/// A schema that accepted anything would pass the tests above.
#[test]
fn the_schema_rejects_missing_or_mistyped_fields() {
    let doc = bench_json(
        "strict.json",
        &[
            "copy",
            "--sizes",
            "4K",
            "--regime",
            "hot",
            "--strategies",
            "per-page",
            "--runs",
            "2",
        ],
    );
    let v = validator();
    assert!(v.is_valid(&doc));
    let mut bad = doc.clone();
    bad["results"][0]["gbps"]["median"] = Value::String("fast".into());
    assert!(!v.is_valid(&bad), "a string median was accepted");
    let mut bad = doc.clone();
    bad["provenance"].as_object_mut().unwrap().remove("commit");
    assert!(
        !v.is_valid(&bad),
        "a document without provenance.commit was accepted"
    );
    let mut bad = doc.clone();
    bad["results"][0]["threads"] = Value::from(-1);
    assert!(!v.is_valid(&bad), "negative threads were accepted");
    let mut bad = doc.clone();
    bad["results"][0]["typo"] = Value::from(1);
    assert!(!v.is_valid(&bad), "an undocumented row field was accepted");
    let mut bad = doc;
    bad["results"][0]["placement"] = Value::from("spread");
    assert!(
        !v.is_valid(&bad),
        "a batch row without layout/count was accepted"
    );
}

#[test]
fn compare_reads_two_documents() {
    let args = [
        "copy",
        "--sizes",
        "4K",
        "--regime",
        "hot",
        "--strategies",
        "per-page",
        "--runs",
        "3",
    ];
    let (a, b) = (temp("cmp-a.json"), temp("cmp-b.json"));
    for p in [&a, &b] {
        let doc = bench_json(p.file_name().unwrap().to_str().unwrap(), &args);
        std::fs::write(p, doc.to_string()).unwrap();
    }
    let o = bulkmem(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("copy per-page 4K hot 1t"))
        .unwrap_or_else(|| panic!("no row for the cell: {out}"));
    assert!(
        ["faster", "slower", "~"]
            .iter()
            .any(|v| line.trim_end().ends_with(v)),
        "{line}"
    );
    assert!(out.contains("geometric mean of B/A"), "{out}");
    // Same build and CPU: nothing to warn about.
    assert!(!err.contains("warning"), "{err}");

    let o = bulkmem(&["compare", a.to_str().unwrap(), "Cargo.toml"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Cargo.toml"),
        "the error names the file"
    );
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
}
