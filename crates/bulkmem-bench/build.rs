//! Records the commit (with `-dirty` when the tree had uncommitted changes),
//! the compiler and the target features the command was built with, for
//! `bulkmem version --verbose` and every JSON document's provenance.

use std::process::Command;

/// `cmd`'s trimmed stdout, if it ran, succeeded and printed something.
fn output(cmd: &mut Command) -> Option<String> {
    let o = cmd.output().ok().filter(|o| o.status.success())?;
    let s = String::from_utf8(o.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn git(args: &[&str]) -> Option<String> {
    output(Command::new("git").args(args))
}

fn main() {
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) => {
            // Tracked files only: an untracked scratch file does not change
            // what was built, an edited source does.
            let dirty = Command::new("git")
                .args(["status", "--porcelain", "--untracked-files=no"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .is_some_and(|o| !o.stdout.is_empty());
            if dirty {
                format!("{c}-dirty")
            } else {
                c
            }
        }
        None => "unknown".into(),
    };
    println!("cargo:rustc-env=BULKMEM_COMMIT={commit}");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = output(Command::new(rustc).arg("--version")).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BULKMEM_RUSTC={version}");
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    println!("cargo:rustc-env=BULKMEM_TARGET_FEATURES={features}");
    // A commit or checkout moves HEAD or the branch it names; staging moves
    // the index; an edit anywhere in the sources can make the tree dirty or
    // clean again. (`--git-dir`, since a worktree's `.git` is a file.)
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = std::path::Path::new(&dir);
        for f in ["HEAD", "index"] {
            println!("cargo:rerun-if-changed={}", dir.join(f).display());
        }
        if let Some(r) = std::fs::read_to_string(dir.join("HEAD"))
            .ok()
            .and_then(|h| h.strip_prefix("ref: ").map(|r| r.trim().to_string()))
        {
            // A worktree's branch ref lives in the common directory.
            let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]);
            let base = common.as_deref().map_or(dir, std::path::Path::new);
            // Packed refs have no file; a missing path would rerun always.
            if base.join(&r).exists() {
                println!("cargo:rerun-if-changed={}", base.join(r).display());
            }
        }
        println!("cargo:rerun-if-changed=../../crates");
    }
}
