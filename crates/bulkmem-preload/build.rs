//! Links the unwinder into the preload library instead of loading
//! `libgcc_s.so.1` into every process it is preloaded into.
//!
//! Rust's standard library asks for `libgcc_s` (its unwinder). Most programs
//! never load it, and its constructor runs dozens of CPUID instructions,
//! each a VM exit under a hypervisor: on a 2-vCPU VM it was most of the
//! preload's start-up cost (`/bin/true` 1.31x plain; 1.15x without it).
//! The static `libgcc_eh.a` holds the same unwinder; linked whole, ahead of
//! the standard library's `-lgcc_s`, it defines every `_Unwind_*` symbol,
//! so the linker's `--as-needed` drops `libgcc_s` from the dependencies.
//! The copy stays private to this library (the export list in the linker
//! version script rustc writes names only our symbols), and unwinding never
//! crosses into the host program: every entry point catches panics.

fn main() {
    println!("cargo:rustc-link-lib=static:+whole-archive,-bundle=gcc_eh");
    println!("cargo:rerun-if-changed=build.rs");
}
