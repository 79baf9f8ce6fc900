//! Building and running C programs against the C library as a user
//! would: installed with `scripts/install-c` into a private prefix (once
//! per test binary), compiled with what pkg-config gives. Shared by the C
//! suite (c_suite.rs) and the examples' tests (examples.rs).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::{self, text};

/// The program's closing line says "N passed, 0 failed".
pub fn assert_all_passed(out: &str, bin: &Path) {
    common::assert_all_passed(out, &bin.display().to_string())
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The prefix the library is installed into, once per test binary.
pub fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        for t in ["cc", "c++", "pkg-config"] {
            common::require_tool(t, "gcc g++ pkg-config");
        }
        // One per test binary: two installing into one prefix could race.
        let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(concat!("c-prefix-", env!("CARGO_CRATE_NAME")));
        let o = Command::new(root().join("scripts/install-c"))
            .arg("--prefix")
            .arg(&p)
            .output()
            .expect("run scripts/install-c");
        assert!(o.status.success(), "install-c failed: {}", text(&o));
        p
    })
}

pub fn pkg(args: &[&str]) -> Vec<String> {
    let o = Command::new("pkg-config")
        .args(args)
        .arg("bulkmem")
        .env("PKG_CONFIG_PATH", prefix().join("lib/pkgconfig"))
        .output()
        .expect("run pkg-config");
    assert!(o.status.success(), "pkg-config {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Compiles `src` into `out` with `compiler` and the flags; panics with the
/// compiler's words on failure.
pub fn compile(compiler: &str, flags: &[&str], src: &Path, link: &[String], out: &Path) {
    let o = Command::new(compiler)
        .args(flags)
        .args(pkg(&["--cflags"]))
        .arg(src)
        .args(link)
        .arg("-o")
        .arg(out)
        .output()
        .expect("run the compiler");
    assert!(
        o.status.success(),
        "{compiler} {}: {}",
        src.display(),
        text(&o)
    );
}

pub const C_FLAGS: &[&str] = &[
    "-std=c99",
    "-D_GNU_SOURCE",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-pthread",
    "-O1",
];

/// Runs a compiled test; it must exit 0 and close with "N passed, 0 failed".
pub fn run(bin: &Path, args: &[&str]) -> String {
    let o = Command::new(bin)
        .args(args)
        .env("LD_LIBRARY_PATH", prefix().join("lib"))
        .output()
        .expect("run the C program");
    let out = text(&o);
    println!("{}:\n{out}", bin.display());
    assert!(
        o.status.success(),
        "{} failed ({}):\n{out}",
        bin.display(),
        o.status
    );
    out
}

pub fn out_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c-bin");
    std::fs::create_dir_all(&d).expect("create the binary directory");
    d.join(name)
}
