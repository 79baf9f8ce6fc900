//! What the command's test files share: running the built binary, reading
//! its output, a scratch directory of a test's own, and the debug preload
//! library that `bulkmem run` loads. Each test file uses part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The built binary with `args`, with no profile named by the caller's
/// environment.
pub fn bulkmem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .args(args)
        .env_remove("BULKMEM_PROFILE")
        .output()
        .expect("bulkmem runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory of this test's own, `tag` naming the test file.
pub fn scratch(tag: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bulkmem-{tag}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `bulkmem run` and `bench preload` load target/debug/libbulkmem_preload.so,
/// which `cargo test` does not build (nothing links it): build it once.
pub fn ensure_preload() {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let o = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "bulkmem-preload-engine"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run cargo");
        assert!(
            o.status.success(),
            "cargo build -p bulkmem-preload-engine: {}",
            stderr(&o)
        );
    });
}

/// `args` exits 2 at once, saying `needle`, with nothing on stdout (it
/// measured nothing).
pub fn refused(args: &[&str], needle: &str) {
    let o = bulkmem(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    assert!(
        stderr(&o).contains(needle),
        "{args:?}: stderr lacks {needle:?}: {}",
        stderr(&o)
    );
    assert_eq!(stdout(&o), "", "{args:?} printed results: it measured");
}
