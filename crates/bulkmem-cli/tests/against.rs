//! `bench copy|clear --against LIB[:SYMBOL]`: foreign routines as rows,
//! byte-checked, loaded without replacing the process's own memcpy/memset.
//! Builds a small shared library with `cc` (scripts/c-deps installs it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Good and broken routines, and a `memcpy`/`memset` of its own that
/// would corrupt every copy of the process if the library were loaded
/// into the global scope.
const LIB: &str = r#"
#include <stddef.h>
void *good_copy(void *d, const void *s, size_t n) {
    unsigned char *dd = d; const unsigned char *ss = s;
    for (size_t i = 0; i < n; i++) dd[i] = ss[i];
    return d;
}
void *short_copy(void *d, const void *s, size_t n) {
    return n ? good_copy(d, s, n - 1) : d;
}
void *good_set(void *d, int c, size_t n) {
    unsigned char *dd = d;
    for (size_t i = 0; i < n; i++) dd[i] = (unsigned char)c;
    return d;
}
void *memcpy(void *d, const void *s, size_t n) {
    unsigned char *dd = d; (void)s;
    for (size_t i = 0; i < n; i++) dd[i] = 0xab;
    return d;
}
void *memset(void *d, int c, size_t n) {
    unsigned char *dd = d; (void)c;
    for (size_t i = 0; i < n; i++) dd[i] = 0xab;
    return d;
}
"#;

fn skip(why: &str) {
    use std::io::Write as _;
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let _ = writeln!(std::io::stderr(), "\nSKIPPED {test}: {why}");
}

/// The library, built once per test binary (tests run in parallel: each
/// building its own copy over the same path had one loading a half-written
/// file); `None`, and a skip line, without a C compiler.
fn lib() -> Option<PathBuf> {
    static LIB_SO: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match LIB_SO.get_or_init(build) {
        Ok(p) => Some(p.clone()),
        Err(why) => {
            skip(why);
            None
        }
    }
}

fn build() -> Result<PathBuf, String> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("against");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("libpeer.so");
    let src = dir.join("peer.c");
    std::fs::write(&src, LIB).unwrap();
    // -fno-builtin: the loops must stay loops, not calls to memcpy.
    match Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-fno-builtin", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
    {
        Ok(o) if o.status.success() => Ok(out),
        Ok(o) => panic!("cc failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => Err(format!(
            "no C compiler (cc: {e}); scripts/c-deps installs one"
        )),
    }
}

fn bench(op: &str, strategies: &str, against: &str, json: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bulkmem"));
    c.args(["bench", op, "--sizes", "4K,64K", "--regime", "both"])
        .args(["--total", "1M", "--runs", "2", "--quiet"])
        .args(["--strategies", strategies, "--against", against]);
    if let Some(j) = json {
        c.arg("--json").arg(j);
    }
    c.output().expect("run bulkmem")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_foreign_routine_is_a_verified_row_of_copy_and_clear() {
    let Some(lib) = lib() else { return };
    for (op, symbol, label) in [
        ("copy", "good_copy", "libpeer:good_copy"),
        ("clear", "good_set", "mine"),
    ] {
        let json = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("against-{op}.json"));
        let spec = if label == "mine" {
            format!("mine={}:{symbol}", lib.display())
        } else {
            format!("{}:{symbol}", lib.display())
        };
        let o = bench(op, "libc", &spec, Some(&json));
        assert!(o.status.success(), "{op}: {}", stderr(&o));
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let rows: Vec<&serde_json::Value> = doc["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["strategy"] == label)
            .collect();
        // Two sizes, hot and cold.
        assert_eq!(rows.len(), 4, "{op}: rows named {label} in {doc}");
        for r in rows {
            assert!(r["gbps"]["median"].as_f64().unwrap() > 0.0, "{r}");
            assert_eq!(r["chose"], label, "{r}");
        }
    }
}

#[test]
fn a_wrong_routine_fails_the_run_naming_its_row() {
    let Some(lib) = lib() else { return };
    let o = bench(
        "copy",
        "libc",
        &format!("{}:short_copy", lib.display()),
        None,
    );
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("verification failed") && e.contains("libpeer:short_copy"),
        "{e}"
    );
}

#[test]
fn missing_files_and_symbols_are_usage_errors_naming_them() {
    let Some(lib) = lib() else { return };
    let o = bench("copy", "libc", "/nonexistent/libnope.so", None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("/nonexistent/libnope.so"),
        "{}",
        stderr(&o)
    );
    let o = bench(
        "clear",
        "libc",
        &format!("{}:no_such_set", lib.display()),
        None,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no_such_set"), "{}", stderr(&o));
    let o = bench("copy", "libc", "/etc/hostname", None);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cannot load /etc/hostname"),
        "{}",
        stderr(&o)
    );
}

/// The library's own `memcpy`/`memset` write 0xab: had loading it replaced
/// the process's, the `libc` row (and every other) would fail to verify.
#[test]
fn loading_a_library_does_not_replace_the_process_memcpy() {
    let Some(lib) = lib() else { return };
    for (op, symbol, strategies) in [
        ("copy", "good_copy", "libc,rep-movsb,auto"),
        ("clear", "good_set", "libc,rep-stosb,auto"),
    ] {
        let o = bench(op, strategies, &format!("{}:{symbol}", lib.display()), None);
        assert!(o.status.success(), "{op}: {}", stderr(&o));
    }
    // And the library's memcpy itself, named, is caught as wrong.
    let o = bench("copy", "libc", &lib.display().to_string(), None);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("libpeer:memcpy"), "{}", stderr(&o));
}
