//! The C examples a newcomer is pointed at, built against the C library
//! installed with `scripts/install-c` and run: the README's program with
//! the build lines the README prints, exactly (examples/c/try_it.c; the
//! command's doc_links test checks the README shows the file verbatim),
//! the compaction example a runtime author copies from
//! (examples/c/compact_gc.c), and the engine examples. Needs `cc` and
//! `pkg-config` (`scripts/c-deps` installs them).

use std::process::Command;

mod c_build;
mod common;
use c_build::{compile, out_dir, pkg, prefix, root, run};
use common::text;

/// Builds examples/c/NAME.c as its comment says, in the C standard
/// `std`, warnings as errors; returns the program.
fn build(name: &str, std: &str) -> std::path::PathBuf {
    let bin = out_dir(name);
    compile(
        "cc",
        &["-O2", std, "-Wall", "-Wextra", "-Werror", "-pthread"],
        &root().join(format!("examples/c/{name}.c")),
        &pkg(&["--libs"]),
        &bin,
    );
    bin
}

/// The README's shell block that builds `examples/c/try_it.c`.
fn readme_build_lines() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    readme
        .split("```sh\n")
        .skip(1)
        .map(|b| &b[..b.find("```").expect("a closed block")])
        .find(|b| b.contains("examples/c/try_it.c"))
        .expect("a README block that builds examples/c/try_it.c")
        .to_string()
}

/// The README's lines run as printed, in a fresh directory holding the
/// checkout's examples/: its install line is the one this test binary ran
/// (into a private prefix in place of /opt/bulkmem), and the program runs
/// without LD_LIBRARY_PATH, so only the `-Wl,-rpath` the README prints lets
/// the loader find libbulkmem.so.0.
#[test]
fn the_readme_c_program_builds_and_runs_as_printed() {
    const README_PREFIX: &str = "/opt/bulkmem";
    let block = readme_build_lines();
    let (install, rest) = block.split_once('\n').expect("lines after the install");
    assert_eq!(
        install,
        format!("scripts/install-c --prefix {README_PREFIX}"),
        "the README installs differently from this test"
    );
    let p = prefix().display().to_string();
    let dir = out_dir("readme");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(root().join("examples"), dir.join("examples")).unwrap();
    let o = Command::new("sh")
        .args(["-e", "-c", &rest.replace(README_PREFIX, &p)])
        .current_dir(&dir)
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("PKG_CONFIG_PATH")
        .output()
        .expect("run sh");
    let out = text(&o);
    assert!(
        o.status.success(),
        "the README's lines failed:\n{rest}\n{out}"
    );
    assert!(
        out.starts_with("copied 64 MiB with bulkmem ") && out.trim_end().ends_with(": match"),
        "{out}"
    );
}

/// The compaction example: a 16 MiB heap compacted under two mutators,
/// every byte checked by the program itself. `BM_COMPACT_AUTO` moves the
/// pages reported `BM_FILL_SAME` (the heap's unchanged first eighth), all
/// of them where the kernel has UFFDIO_MOVE, and no other page.
#[test]
fn the_compaction_example_keeps_every_byte_under_two_mutators() {
    let bin = build("compact_gc", "-std=c11");
    let out = run(&bin, &["16"]);
    assert_eq!(out.lines().last(), Some("check: ok"), "{out}");
    if out.contains("concurrent compaction unavailable") {
        println!("SKIPPED the concurrent part: {out}");
        return;
    }
    assert!(
        out.contains("under 2 mutators") && out.contains("SIGSEGV handler ran: yes"),
        "{out}"
    );
    // "BM_FILL_SAME pages 512: moved 512, copied instead 0; ..."
    let same = out
        .lines()
        .find_map(|l| l.strip_prefix("BM_FILL_SAME pages "))
        .expect("a line on the BM_FILL_SAME pages");
    let num = |after: &str| -> usize {
        let at = same
            .find(after)
            .unwrap_or_else(|| panic!("{after}: {same}"))
            + after.len();
        same[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (pages, moved, fell_back) = (num(""), num("moved "), num("copied instead "));
    assert_eq!(pages, 16 << 20 >> 12 >> 3, "{same}");
    if same.ends_with("(UFFDIO_MOVE yes)") {
        assert_eq!(moved + fell_back, pages, "{same}");
        assert!(moved > 0, "{same}");
    } else {
        assert_eq!(moved, 0, "{same}");
    }
}

#[test]
fn the_example_builds_with_pkg_config_and_runs() {
    let bin = build("engine_copy", "-std=c99");
    let out = run(&bin, &["64"]);
    assert!(out.contains("GB/s"), "{out}");
}

#[test]
fn the_double_buffer_example_overlaps_copies_and_checks_every_block() {
    let bin = build("double_buffer", "-std=c99");
    // The checksum of what was processed equals the source's only if every
    // block's background copy was whole before the block was read.
    let out = run(&bin, &["6", "2"]);
    assert!(
        out.contains("processed 6 blocks") && out.contains(": match"),
        "{out}"
    );
    assert!(!out.contains("MISMATCH"), "{out}");
}
