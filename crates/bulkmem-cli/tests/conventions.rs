//! Command-line conventions, through the built binary: the version line,
//! man pages and completions, `--help` examples, and `compare`'s outputs
//! and exit status for CI.

#[path = "support/cli.rs"]
mod support;
use support::{bulkmem, scratch, stderr, stdout};

use std::path::PathBuf;

#[test]
fn version_is_one_line_and_verbose_has_the_build() {
    for flag in ["--version", "-V"] {
        let o = bulkmem(&[flag]);
        let out = stdout(&o);
        assert!(o.status.success(), "{flag}: {}", stderr(&o));
        assert_eq!(out.lines().count(), 1, "{flag}: {out:?}");
        assert!(
            out.starts_with(&format!("bulkmem {} (commit ", env!("CARGO_PKG_VERSION"))),
            "{out}"
        );
    }
    let short = stdout(&bulkmem(&["--version"]));
    let verbose = stdout(&bulkmem(&["version", "--verbose"]));
    assert!(verbose.starts_with(&short), "{verbose}");
    assert!(verbose.contains("\nrustc: rustc "), "{verbose}");
    assert!(verbose.contains("\ntarget features: "), "{verbose}");
}

#[test]
fn man_page_has_a_one_line_title_and_the_reference_sections() {
    let o = bulkmem(&["generate", "man"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let man = stdout(&o);
    let lines: Vec<&str> = man.lines().collect();
    let th = lines
        .iter()
        .position(|l| l.starts_with(".TH "))
        .expect(".TH");
    // Whatever follows the title is a request, not the rest of a version
    // string that broke the .TH line.
    assert!(lines[th + 1].starts_with('.'), "{}", lines[th + 1]);
    for section in [
        ".SH \"EXIT STATUS\"",
        ".SH ENVIRONMENT",
        ".SH FILES",
        ".SH EXAMPLES",
    ] {
        assert!(lines.contains(&section), "no {section}");
    }
    for var in [
        "BULKMEM_PROFILE",
        "BULKMEM_STRATEGY",
        "BULKMEM_NT_THRESHOLD",
        "BULKMEM_DISABLE",
        "BULKMEM_PRELOAD_MIN",
        "BULKMEM_PRELOAD_MT_MIN",
        "BULKMEM_PRELOAD_THREADS",
        "BULKMEM_PRELOAD_STATS",
        "BULKMEM_PRELOAD_LIB",
    ] {
        assert!(man.contains(&format!("\\fB{var}")), "{var} undocumented");
    }
    assert!(man.contains("set\\-user\\-ID"), "setuid rule missing");
    assert!(man.contains("profile\\-<key>.toml"), "profile path missing");
}

#[test]
fn man_dir_writes_every_page_the_pages_refer_to() {
    let dir = scratch("conv", "man");
    let o = bulkmem(&["generate", "man", "--dir", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut referenced = Vec::new();
    let mut pages = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        pages += 1;
        assert!(text.contains(".SH NAME"), "{text}");
        for part in text.split("bulkmem\\-").skip(1) {
            if let Some(end) = part.find("(1)") {
                if part[..end]
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '\\' || c == '-')
                {
                    referenced.push(format!("bulkmem-{}", part[..end].replace("\\-", "-")));
                }
            }
        }
    }
    assert!(pages >= 10, "{pages} pages");
    assert!(
        referenced.iter().any(|r| r == "bulkmem-bench-copy"),
        "{referenced:?}"
    );
    for r in &referenced {
        assert!(
            dir.join(format!("{r}.1")).is_file(),
            "{r}(1) referenced, not written"
        );
    }
    assert!(!dir.join("bulkmem-preload-workload.1").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every page of help (the man pages carry each subcommand's long help)
/// speaks to someone who has not read the project's history: no "patch
/// threads", "seeds" or kernel function names as if the reader knew them.
#[test]
fn help_speaks_the_users_words() {
    let dir = scratch("conv", "words");
    let o = bulkmem(&["generate", "man", "--dir", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut pages = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        // roff escapes hyphens; read the words as printed.
        let text = std::fs::read_to_string(&path).unwrap().replace("\\-", "-");
        pages += 1;
        for jargon in [
            "patch thread",
            "patches measured",
            "seed",
            "cover letter",
            "folio_mc_copy",
            "memcpy_nt",
        ] {
            assert!(
                !text.to_lowercase().contains(jargon),
                "{}: {jargon:?} assumes the reader knows the project's history",
                path.display()
            );
        }
    }
    assert!(pages > 10, "{pages} pages");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A size that is no round number of K, M or G still reads as a size:
/// `17B` over its column, `~1M` for the batches of 17-byte extents that
/// fill 1M (1048560 bytes, which a table once printed bare, reading as a
/// count of batches).
#[test]
fn table_headers_print_sizes_with_units() {
    let o = bulkmem(&[
        "bench",
        "copy",
        "--sizes",
        "17,4K",
        "--regime",
        "cold",
        "--strategies",
        "libc",
        "--runs",
        "1",
        "--total",
        "1M",
        "--quiet",
    ]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    let header = out
        .lines()
        .find(|l| l.starts_with("strategy "))
        .expect("a header");
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["strategy", "17B", "4K"],
        "{out}"
    );
    assert!(out.contains("(~1M batches of shuffled extents"), "{out}");
    assert!(!out.contains("1048560"), "{out}");
}

#[test]
fn generate_refuses_what_it_cannot_make() {
    let o = bulkmem(&["generate", "man", "bash"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("'bash'"), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let o = bulkmem(&["generate", "completions"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("<SHELL>"), "{}", stderr(&o));
    let o = bulkmem(&["generate", "man", "--dir", "/nonexistent/bulkmem-man"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn bash_completion_offers_the_value_names() {
    let o = bulkmem(&["generate", "completions", "bash"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bash = stdout(&o);
    for words in [
        "all auto per-page",
        "avx512-nt",
        "hot cold both",
        "auto reuse stream",
        "copy clear",
        "spread fill",
    ] {
        assert!(
            bash.contains(&format!("compgen -W \"{words}")) || bash.contains(&format!(" {words}")),
            "no {words:?}"
        );
    }
    // The flags complete words, not file names.
    let hint = bash
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("--hint)"))
        .nth(1)
        .unwrap_or_default();
    assert!(hint.contains("reuse stream"), "{hint}");
}

#[test]
fn long_help_ends_with_examples_short_help_does_not() {
    for cmd in [
        &["bench", "copy"][..],
        &["bench", "clear"],
        &["tune"],
        &["info"],
        &["run"],
        &["compare"],
        &[],
    ] {
        let long = stdout(&bulkmem(&[cmd, &["--help"]].concat()));
        let examples = long
            .split("Examples:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{cmd:?}: {long}"));
        // The first command (a long example's comment stands above it).
        let first = examples
            .lines()
            .map(str::trim_start)
            .find(|l| !l.starts_with('#'))
            .unwrap();
        assert!(
            first.starts_with(
                &["bulkmem"]
                    .iter()
                    .chain(cmd)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ")
            ) || cmd.is_empty(),
            "{cmd:?}: {first}"
        );
        let short = stdout(&bulkmem(&[cmd, &["-h"]].concat()));
        assert!(!short.contains("Examples:"), "{cmd:?}");
    }
}

/// A bench document with one cell of `samples`.
fn doc(path: &PathBuf, samples: &[f64]) {
    let median = {
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    let text = serde_json::json!({
        "bulkmem": "0.1.0",
        "results": [{
            "op": "copy", "strategy": "avx2-nt", "chose": "avx2-nt", "size": 4096,
            "total": 268435456u64, "regime": "hot", "threads": 1, "runs": samples.len(),
            "gbps": {"median": median, "mean": mean, "stdev": 0.1, "min": 0.0, "max": 0.0,
                     "samples": samples},
        }],
    });
    std::fs::write(path, text.to_string()).unwrap();
}

#[test]
fn compare_fails_on_the_change_asked_for_and_writes_json_and_csv() {
    let dir = scratch("conv", "compare");
    let (a, b, json) = (
        dir.join("a.json"),
        dir.join("b.json"),
        dir.join("diff.json"),
    );
    doc(&a, &[10.0, 10.1, 9.9, 10.0, 10.05]);
    doc(&b, &[8.0, 8.1, 7.9, 8.0, 8.05]);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());

    let o = bulkmem(&["compare", "--fail-on", "slower", a, b]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--fail-on slower"), "{}", stderr(&o));
    assert!(stdout(&o).contains("slower"), "{}", stdout(&o));
    // The same change, asked about the other way, passes.
    let o = bulkmem(&["compare", "--fail-on", "faster", a, b]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        bulkmem(&["compare", "--fail-on", "any", b, a])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(bulkmem(&["compare", a, b]).status.code(), Some(0));

    let o = bulkmem(&[
        "compare",
        "--format",
        "csv",
        "--json",
        json.to_str().unwrap(),
        a,
        b,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = stdout(&o);
    let line = csv.lines().nth(1).expect("a cell line");
    assert!(
        line.starts_with("copy avx2-nt 4K hot 1t,10,0.1,5,8,0.1,5,0.8"),
        "{csv}"
    );
    assert!(line.ends_with(",slower"), "{csv}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["slower"], 1);
    assert_eq!(v["cells"][0]["a"]["median"], 10.0);
    assert_eq!(v["cells"][0]["verdict"], "slower");

    // `--json -`: the JSON alone on stdout.
    let o = bulkmem(&["compare", "--json", "-", a, b]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    assert_eq!(v["cells"][0]["b"]["runs"], 5);
    assert!(stderr(&o).contains("B/A"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}
