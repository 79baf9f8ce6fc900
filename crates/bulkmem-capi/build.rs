//! Gives the shared library its soname, so programs linked against
//! libbulkmem.so record libbulkmem.so.0 and keep working across compatible
//! releases (scripts/install installs the links); versions every exported
//! symbol with bulkmem.map (BULKMEM_0.1, nothing else exported); and refuses to build
//! when bulkmem.h's version macros disagree with Cargo's version: a program
//! compares the two at run time (bm_check_version), so a stale header would
//! make that check lie.
use std::env;

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libbulkmem.so.0");
    let dir = env::var("CARGO_MANIFEST_DIR").expect("Cargo sets the manifest directory");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/bulkmem.map");
    println!("cargo:rerun-if-changed=bulkmem.map");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=include/bulkmem.h");
    let header = std::fs::read_to_string("include/bulkmem.h").expect("read include/bulkmem.h");
    for part in ["MAJOR", "MINOR", "PATCH"] {
        let want = env::var(format!("CARGO_PKG_VERSION_{part}")).expect("Cargo sets the version");
        let line = format!("#define BULKMEM_VERSION_{part} {want}\n");
        assert!(
            header.contains(&line),
            "include/bulkmem.h lacks `{}`: update its version macros to Cargo's {}",
            line.trim_end(),
            env::var("CARGO_PKG_VERSION").unwrap_or_default()
        );
    }
}
