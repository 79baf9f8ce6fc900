//! The guest scripts (scripts/guest/) keep what they build and fetch in
//! cargo's target directory, `CARGO_TARGET_DIR` when it is set, as cargo
//! does: their one rule (scripts/guest/target-dir), and no script naming
//! the checkout's target/ behind its back.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `guest_target_dir ROOT` in a shell started in `cwd`, with
/// `CARGO_TARGET_DIR` as given.
fn target_dir(cwd: &Path, cargo_target_dir: Option<&str>) -> String {
    let helper = root().join("scripts/guest/target-dir");
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(format!(
            ". '{}' && guest_target_dir /checkout",
            helper.display()
        ))
        .current_dir(cwd)
        .env_remove("CARGO_TARGET_DIR");
    if let Some(t) = cargo_target_dir {
        c.env("CARGO_TARGET_DIR", t);
    }
    let o = c.output().expect("run bash");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().trim_end().to_string()
}

#[test]
fn the_guest_scripts_use_cargos_target_directory() {
    let tmp = std::env::temp_dir().canonicalize().unwrap();
    assert_eq!(target_dir(&tmp, None), "/checkout/target");
    assert_eq!(target_dir(&tmp, Some("/work/t/")), "/work/t");
    // Relative: from where the script was started, as cargo reads it.
    assert_eq!(
        target_dir(&tmp, Some("build/t")),
        format!("{}/build/t", tmp.display())
    );
}

#[test]
fn no_guest_script_names_the_checkouts_target_directory() {
    let dir = root().join("scripts/guest");
    let mut seen = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        seen += 1;
        let code: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect();
        for l in code {
            assert!(
                !l.contains("$root/target") && !l.contains(" target/"),
                "{}: `{l}` ignores CARGO_TARGET_DIR: use guest_target_dir (scripts/guest/target-dir)",
                path.display()
            );
        }
    }
    assert!(seen >= 4, "{seen} scripts");
}
