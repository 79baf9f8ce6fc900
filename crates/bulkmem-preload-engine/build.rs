//! Builds the preload's two stages.
//!
//! **The engine** (this crate, `libbulkmem_preload_engine.so`) links the
//! unwinder in instead of loading `libgcc_s.so.1` into every process it is
//! opened in. Rust's standard library asks for `libgcc_s` (its unwinder),
//! whose constructor runs dozens of CPUID instructions, each a VM exit
//! under a hypervisor. The static `libgcc_eh.a` holds the same unwinder;
//! linked whole, ahead of the standard library's `-lgcc_s`, it defines
//! every `_Unwind_*` symbol, so the linker's `--as-needed` drops
//! `libgcc_s` from the dependencies. The copy stays private to this
//! library (the export list in the linker version script rustc writes
//! names only our symbol), and unwinding never crosses into the host
//! program: every entry point catches panics.
//!
//! **The loader** (`libbulkmem_preload.so`, the file programs preload)
//! is crates/bulkmem-preload, a `no_std` library that must be built with
//! `-C panic=abort`, and so must the crate it shares with this one
//! (crates/bulkmem-preload-abi): a cargo profile cannot give one crate of
//! a workspace its own panic strategy, so this script runs rustc on both
//! and puts the library beside the engine, in target/<profile>/. Each
//! stage computes the interface's version from the shared file itself
//! (`abi::VERSION`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=gcc_eh");
    println!("cargo:rerun-if-changed=build.rs");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let src = manifest.join("../bulkmem-preload/src");
    let abi_src = manifest.join("../bulkmem-preload-abi/src");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed={}", abi_src.display());
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64") {
        // The loader is x86_64 assembly where it matters; no preload
        // elsewhere.
        println!("cargo:warning=the preload's loader is built for x86_64 only");
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let abi = out.join("libbulkmem_preload_abi.rlib");
    rustc(
        &abi_src.join("lib.rs"),
        "rlib",
        "bulkmem_preload_abi",
        &abi,
        &[],
    );
    let built = out.join("libbulkmem_preload.so");
    let extern_abi = format!("bulkmem_preload_abi={}", abi.display());
    rustc(
        &src.join("lib.rs"),
        "cdylib",
        "bulkmem_preload",
        &built,
        &["--extern", &extern_abi],
    );
    // OUT_DIR is target/[TRIPLE/]PROFILE/build/PACKAGE-HASH/out.
    let Some(profile_dir) = out.ancestors().nth(3) else {
        panic!("unexpected OUT_DIR {}", out.display());
    };
    let dest = profile_dir.join("libbulkmem_preload.so");
    // Written beside, then renamed: a program starting meanwhile sees the
    // old file or the new one, never half of one.
    let tmp = profile_dir.join(".libbulkmem_preload.so.tmp");
    std::fs::copy(&built, &tmp)
        .and_then(|_| std::fs::rename(&tmp, &dest))
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", dest.display()));
}

/// Compiles the crate rooted at `lib_rs` as the loader needs it (no
/// unwinding, optimised whatever the profile), into `output`.
fn rustc(lib_rs: &Path, crate_type: &str, name: &str, output: &Path, extra: &[&str]) {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let target = std::env::var("TARGET").expect("cargo sets it");
    let debug = std::env::var("DEBUG").as_deref() == Ok("true");
    let mut cmd = Command::new(rustc);
    cmd.args(["--edition", "2021", "--crate-type", crate_type])
        .args(["--crate-name", name, "--target", &target])
        .args([
            "-C",
            "panic=abort",
            "-C",
            "opt-level=3",
            "-C",
            "codegen-units=1",
        ])
        .args(["-C", if debug { "debuginfo=1" } else { "debuginfo=0" }])
        // A newer compiler's new lint must not fail a user's build: CI
        // lints this source as a crate of the workspace (with -D warnings).
        .args(["--cap-lints", "warn"])
        .arg("-o")
        .arg(output)
        .arg(lib_rs)
        // The outer build's flags are for the engine (a crt-static build
        // of the command, say), not for this library.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .args(extra);
    let result = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run rustc for {name}: {e}"));
    let stderr = String::from_utf8_lossy(&result.stderr);
    if result.status.success() {
        for line in stderr.lines().filter(|l| l.starts_with("warning")) {
            println!("cargo:warning={name}: {line}");
        }
        return;
    }
    panic!("building {name} ({}) failed:\n{stderr}", lib_rs.display());
}
