//! Helpers shared by the tests that drive C programs (this crate's C suite
//! and the preload's, which includes this file by path). Each test file
//! uses part of it.
#![allow(dead_code)]

use std::process::{Command, Output};

/// A program's stdout and stderr together.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Panics unless `name` is on PATH, saying which packages bring it
/// (`scripts/c-deps` installs them all).
pub fn require_tool(name: &str, packages: &str) {
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{name} is not installed: run scripts/c-deps (apt-get install {packages})"
    );
}

/// The program's closing line says "N passed, 0 failed" with N > 0: a
/// program that ran no check has not passed.
pub fn assert_all_passed(out: &str, what: &str) {
    let last = out
        .lines()
        .rev()
        .find(|l| l.contains(" passed, "))
        .unwrap_or_else(|| panic!("{what}: no 'N passed, M failed' line:\n{out}"));
    assert!(last.trim_end().ends_with(" 0 failed"), "{what}: {last}");
    let passed = last
        .split(" passed, ")
        .next()
        .and_then(|head| head.split_whitespace().last())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(
        passed.is_some_and(|n| n > 0),
        "{what}: no check passed: {last}"
    );
}
