//! The README's Rust program is `examples/try_it.rs`, verbatim (the
//! command's `doc_links` test compares them): it must build and run as a
//! newcomer pastes it. `cargo test` builds every example; this runs it.

use std::process::Command;

#[test]
fn the_readme_rust_program_runs_as_printed() {
    // cargo rebuilds nothing when `cargo test` built the example already.
    let o = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--example", "try_it"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo");
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}\n{out}{err}", o.status);
    assert_eq!(
        out, "copied 64 MiB three ways: single call, streamed, engine batch\n",
        "{err}"
    );
}
