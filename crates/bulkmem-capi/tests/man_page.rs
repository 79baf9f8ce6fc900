//! bulkmem(3), `man/bulkmem.3`, is generated from bulkmem.h's comments by
//! `scripts/gen-man3`: the checked-in page must be what the script makes
//! of the header now (so the two cannot drift), and man must render it
//! without a warning. Needs `man` and `groff` (`scripts/c-deps` installs
//! them).

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::text;

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn page() -> PathBuf {
    here().join("man/bulkmem.3")
}

/// What `scripts/gen-man3` makes of the header now.
fn generated() -> String {
    let o = Command::new("sh")
        .arg(here().join("../../scripts/gen-man3"))
        .arg(here().join("include/bulkmem.h"))
        .output()
        .expect("run scripts/gen-man3");
    assert!(o.status.success(), "gen-man3 failed: {}", text(&o));
    String::from_utf8(o.stdout).expect("the page is UTF-8")
}

#[test]
fn the_checked_in_page_is_what_the_header_generates() {
    let want = generated();
    let have = std::fs::read_to_string(page()).expect("read man/bulkmem.3");
    if let Some((i, (w, h))) = want
        .lines()
        .zip(have.lines())
        .enumerate()
        .find(|(_, (w, h))| w != h)
    {
        panic!(
            "man/bulkmem.3 is stale at line {}: it has\n  {h}\nbut the header gives\n  {w}\n\
             regenerate it: scripts/gen-man3 > crates/bulkmem-capi/man/bulkmem.3",
            i + 1
        );
    }
    assert_eq!(
        want.lines().count(),
        have.lines().count(),
        "man/bulkmem.3 is stale (its length differs): \
         scripts/gen-man3 > crates/bulkmem-capi/man/bulkmem.3"
    );
    assert_eq!(want, have, "man/bulkmem.3 differs in line endings");
}

/// `man -l` at 80 columns, with groff's warnings on (and `groff -man
/// -ww -z` too); its rendering, after asserting that neither said
/// anything on stderr.
fn render(file: &Path) -> String {
    common::require_tool("man", "man-db groff-base");
    common::require_tool("groff", "man-db groff-base");
    let o = Command::new("groff")
        .args(["-man", "-ww", "-z"])
        .arg(file)
        .output()
        .expect("run groff");
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "groff -man -ww warns: {}",
        text(&o)
    );
    let o = Command::new("man")
        .args(["--warnings", "-l"])
        .arg(file)
        .env("MANWIDTH", "80")
        .env("LC_ALL", "C")
        .env_remove("MANPAGER")
        .env_remove("PAGER")
        .env_remove("MAN_KEEP_FORMATTING")
        .output()
        .expect("run man");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && stderr.is_empty(),
        "man -l {} warns ({}):\n{stderr}",
        file.display(),
        o.status
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The page renders cleanly, fits 80 columns, has the sections a library
/// page needs, and its SYNOPSIS names every function the header declares.
#[test]
fn the_page_renders_without_warnings_and_lists_every_function() {
    let out = render(&page());
    for l in out.lines() {
        assert!(
            l.chars().count() <= 80,
            "a rendered line is wider than 80 columns:\n{l}"
        );
    }
    let mut at = 0;
    for s in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "RETURN VALUE",
        "ENVIRONMENT",
        "SEE ALSO",
    ] {
        let i = out[at..]
            .find(&format!("\n{s}\n"))
            .unwrap_or_else(|| panic!("no {s} section after byte {at}:\n{out}"));
        at += i + 1;
    }
    let synopsis = &out[out.find("\nSYNOPSIS\n").unwrap()..out.find("\nDESCRIPTION\n").unwrap()];
    let header = std::fs::read_to_string(here().join("include/bulkmem.h")).unwrap();
    let mut functions: Vec<&str> = header
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("bm_") && !w.ends_with("_fn"))
        .filter(|w| header.contains(&format!("{w}(")))
        .collect();
    functions.sort();
    functions.dedup();
    for f in &functions {
        assert!(
            synopsis.contains(&format!("{f}(")),
            "SYNOPSIS lacks {f}:\n{synopsis}"
        );
    }
    let n = functions.len();
    assert!(n > 40, "too few functions found in the header: {n}");
    for s in [
        "bulkmem(1)",
        "BULKMEM_STRATEGY",
        "BM_CHECK_VERSION",
        "bm_report_v2",
        "-ENOTSUP",
    ] {
        assert!(out.contains(s), "the page does not mention {s}");
    }
}
