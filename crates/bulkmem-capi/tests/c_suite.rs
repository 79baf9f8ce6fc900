//! The C suite: installs the C library with `scripts/install-c` into a
//! private prefix, then compiles every `tests/c/*.c` as C99 and
//! `tests/c/header.cpp` as C++17 (`-Wall -Wextra -Werror`) against it with
//! pkg-config, runs them and links one statically (the examples of
//! examples/c/ are examples.rs's). Needs `cc`, `c++` and `pkg-config`
//! (`scripts/c-deps` installs them).

use std::path::PathBuf;
use std::process::Command;

mod c_build;
mod common;
use c_build::{assert_all_passed, compile, here, out_dir, pkg, prefix, run, C_FLAGS};
use common::text;

fn c_tests() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(here().join("tests/c"))
        .expect("tests/c")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    v.sort();
    assert!(v.len() >= 3, "the C suite has too few files: {v:?}");
    v
}

#[test]
fn every_c_test_compiles_cleanly_and_passes() {
    let link = pkg(&["--libs"]);
    for src in c_tests() {
        let bin = out_dir(src.file_stem().unwrap().to_str().unwrap());
        compile("cc", C_FLAGS, &src, &link, &bin);
        let out = run(&bin, &[]);
        assert_all_passed(&out, &bin);
    }
}

#[test]
fn the_header_is_clean_cxx17_and_pedantic_c99() {
    let bin = out_dir("header_cxx");
    compile(
        "c++",
        &["-std=c++17", "-Wall", "-Wextra", "-Werror"],
        &here().join("tests/c/header.cpp"),
        &pkg(&["--libs"]),
        &bin,
    );
    assert_all_passed(&run(&bin, &[]), &bin);
    let o = Command::new("cc")
        .args([
            "-std=c99",
            "-pedantic",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            "-x",
            "c",
        ])
        .arg(prefix().join("include/bulkmem.h"))
        .output()
        .expect("run cc");
    assert!(o.status.success(), "the header alone as C99: {}", text(&o));
}

#[test]
fn the_static_library_links_through_pkg_config_static() {
    let src = here().join("tests/c/test_api.c");
    let bin = out_dir("test_api_static");
    let mut link: Vec<String> = vec![
        "-Wl,-Bstatic".into(),
        "-lbulkmem".into(),
        "-Wl,-Bdynamic".into(),
    ];
    link.extend(pkg(&["--static", "--libs"]));
    compile("cc", C_FLAGS, &src, &link, &bin);
    let o = Command::new("readelf")
        .arg("-d")
        .arg(&bin)
        .output()
        .expect("run readelf");
    let needed = String::from_utf8_lossy(&o.stdout);
    assert!(
        !needed.contains("libbulkmem"),
        "linked dynamically:\n{needed}"
    );
    // Without LD_LIBRARY_PATH pointing anywhere useful.
    let o = Command::new(&bin)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", text(&o));
    assert_all_passed(&text(&o), &bin);
}

#[test]
fn the_shared_library_has_its_soname() {
    let so = prefix().join("lib/libbulkmem.so");
    let o = Command::new("readelf")
        .arg("-d")
        .arg(&so)
        .output()
        .expect("readelf");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("Library soname: [libbulkmem.so.0]"),
        "{}",
        text(&o)
    );
}

/// The version node every symbol of this release is under.
const NODE: &str = "BULKMEM_0.1";

/// The defined dynamic symbols of the installed library and their version
/// (`objdump -T`: `ADDR FLAGS SECTION SIZE VERSION NAME`).
fn exported() -> Vec<(String, String)> {
    let o = Command::new("objdump")
        .arg("-T")
        .arg(prefix().join("lib/libbulkmem.so"))
        .output()
        .expect("run objdump");
    assert!(o.status.success(), "objdump -T: {}", text(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| {
            let addr = l.split_whitespace().next().unwrap_or("");
            addr.len() >= 8 && addr.chars().all(|c| c.is_ascii_hexdigit()) && !l.contains("*UND*")
        })
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = f[f.len() - 1].to_string();
            let version = f[f.len() - 2].trim_matches(|c| c == '(' || c == ')');
            (name, version.to_string())
        })
        // GNU ld also lists the node itself as an absolute symbol.
        .filter(|(name, version)| name != version)
        .collect()
}

/// The names bulkmem.map lists between `global:` and `local:`.
fn map_symbols() -> Vec<String> {
    let map = std::fs::read_to_string(here().join("bulkmem.map")).expect("read bulkmem.map");
    let mut code = String::new();
    let mut rest = map.as_str();
    while let Some(i) = rest.find("/*") {
        code.push_str(&rest[..i]);
        let j = rest[i..]
            .find("*/")
            .expect("an unterminated comment in bulkmem.map");
        rest = &rest[i + j + 2..];
    }
    code.push_str(rest);
    let mut out = Vec::new();
    let mut global = false;
    for item in code.split([';', '{', '}']) {
        let mut item = item.trim();
        for (label, g) in [("global:", true), ("local:", false)] {
            if let Some(r) = item.strip_prefix(label) {
                global = g;
                item = r.trim();
            }
        }
        if global && item.starts_with("bm_") {
            out.push(item.to_string());
        }
    }
    out
}

/// Every `bm_*` function a C program can name: the header's declarations,
/// the export list (src/exports.rs) and any `#[no_mangle]` function in
/// src/.
fn declared_functions() -> Vec<String> {
    let mut names = Vec::new();
    let header = std::fs::read_to_string(here().join("include/bulkmem.h")).unwrap();
    for word in header.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if word.starts_with("bm_") && header.contains(&format!("{word}(")) && !word.ends_with("_fn")
        {
            names.push(word.to_string());
        }
    }
    for e in std::fs::read_dir(here().join("src")).expect("src") {
        let src = std::fs::read_to_string(e.expect("entry").path()).unwrap();
        let lines: Vec<&str> = src.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim();
            if let Some((name, _)) = t.split_once(" => crate::") {
                names.push(name.trim().to_string());
            }
            if t.starts_with("#[no_mangle]") || t.starts_with("#[unsafe(no_mangle)]") {
                let f = lines[i..]
                    .iter()
                    .find(|l| l.contains("fn "))
                    .expect("a function");
                let name = f.split("fn ").nth(1).unwrap().split('(').next().unwrap();
                names.push(name.trim().to_string());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

#[test]
fn every_export_is_a_bm_function_under_its_version_node() {
    let syms = exported();
    assert!(syms.len() > 10, "too few exports: {syms:?}");
    for (name, version) in &syms {
        assert!(
            name.starts_with("bm_"),
            "exports beyond bm_*: {name} ({version})"
        );
        assert_eq!(
            version, NODE,
            "{name} is exported with version {version}, not {NODE}: list it in bulkmem.map \
             (and src/exports.rs, not #[no_mangle])"
        );
    }
    let map = map_symbols();
    for name in declared_functions() {
        assert!(
            map.contains(&name),
            "{name} is declared (bulkmem.h or src/) but has no version node in bulkmem.map"
        );
        assert!(
            syms.iter().any(|(s, _)| *s == name),
            "{name} is declared but not exported"
        );
    }
    for name in &map {
        assert!(
            syms.iter().any(|(s, _)| s == name),
            "bulkmem.map lists {name}, which the library does not define"
        );
    }
    // Nothing only tests use: every export is a function of the header.
    let header = std::fs::read_to_string(here().join("include/bulkmem.h")).unwrap();
    for (name, _) in &syms {
        assert!(
            header.contains(&format!("{name}(")),
            "{name} is exported but not declared in bulkmem.h (a test-only symbol?)"
        );
    }
}

/// A program built against the 0.1 header as it was before the sized
/// structs (tests/c/fixtures/bulkmem-0.1-pre.h) still compiles and passes
/// against this library: its structs and functions are unchanged.
#[test]
fn programs_built_against_the_pre_sized_header_still_run() {
    let old = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("old-header");
    std::fs::create_dir_all(&old).expect("create the old-header directory");
    std::fs::copy(
        here().join("tests/c/fixtures/bulkmem-0.1-pre.h"),
        old.join("bulkmem.h"),
    )
    .expect("copy the fixture");
    let inc = format!("-I{}", old.display());
    let mut flags = C_FLAGS.to_vec();
    flags.push(&inc); // before pkg-config's -I: the old header wins
    for name in ["test_engine", "test_api"] {
        let bin = out_dir(&format!("{name}_old_header"));
        compile(
            "cc",
            &flags,
            &here().join(format!("tests/c/{name}.c")),
            &pkg(&["--libs"]),
            &bin,
        );
        assert_all_passed(&run(&bin, &[]), &bin);
    }
}

#[path = "../src/sized.rs"]
#[allow(dead_code)]
mod sized;
#[path = "../src/structs.rs"]
#[allow(dead_code)]
mod structs;

/// A public C struct as Rust lays it out: its C name, its fields in
/// declaration order with `offset_of!`, and `size_of`.
struct Layout {
    c: &'static str,
    fields: Vec<(&'static str, usize)>,
    size: usize,
}

/// Every `#[repr(C)]` definition of a public struct (src/structs.rs,
/// src/sized.rs), listed with the fields in Rust's order.
fn rust_layouts() -> Vec<Layout> {
    use std::mem::{offset_of, size_of};
    macro_rules! layouts {
        ($($rs:ty => $c:literal: $($f:ident),*;)*) => {
            vec![$(Layout {
                c: $c,
                fields: vec![$((stringify!($f), offset_of!($rs, $f))),*],
                size: size_of::<$rs>(),
            }),*]
        };
    }
    layouts! {
        structs::BmExtent => "bm_extent": dst, src, len;
        structs::BmFault => "bm_fault": offset, addr, side, code;
        structs::BmEngineOpts => "bm_engine_opts": threads, placement, chunk, strategy, hint;
        structs::BmCtl => "bm_ctl": progress, ctx, cancel;
        structs::BmReport => "bm_report": total, bytes_done, extents_done, workers, cancelled,
            strategy;
        structs::BmMoveReport => "bm_move_report": moved, copied, holes, failures, ioctls;
        structs::BmMigrateReport => "bm_migrate_report": moved, already, not_present, failed;
        structs::BmCompactOptions => "bm_compact_options": mode, workers, batch, huge_pages;
        structs::BmCompactSpace => "bm_compact_space": heap, len, produce, first_source,
            last_source, ctx;
        structs::BmCompactStats => "bm_compact_stats": pages, by_collector, by_mutators, faults,
            waits, refaults, ioctls, moved, copied, zeroed, move_fallbacks, eexist, released,
            failed, pause_us, stall_p50_us, stall_p99_us, stall_p999_us, stall_max_us;
        sized::BmEngineOptsV2 => "bm_engine_opts_v2": size, threads, placement, chunk, strategy,
            hint;
        sized::BmCtlV2 => "bm_ctl_v2": size, progress, ctx, cancel, cancel_handle;
        sized::BmReportV2 => "bm_report_v2": size, total, bytes_done, extents_done, workers,
            cancelled, strategy, chunks, offloaded, offload_redone, partial, partial_extent,
            partial_bytes;
        structs::BmCompactStatsV2 => "bm_compact_stats_v2": size, stats, memory_waits;
    }
}

/// The header's `typedef struct NAME { ... } NAME;` definitions: each name
/// with its field names in order (opaque `typedef struct x x;` have none
/// and are skipped).
fn header_structs(header: &str) -> Vec<(String, Vec<String>)> {
    let mut code = String::new();
    let mut rest = header;
    while let Some(i) = rest.find("/*") {
        code.push_str(&rest[..i]);
        let j = rest[i..]
            .find("*/")
            .expect("an unterminated comment in bulkmem.h");
        rest = &rest[i + j + 2..];
    }
    code.push_str(rest);
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("typedef struct ") {
        rest = &rest[i + "typedef struct ".len()..];
        let head = &rest[..rest.find(';').expect("a typedef ends with ;")];
        let Some(open) = head.find('{') else { continue };
        let name = head[..open].trim().to_string();
        let close = rest.find('}').expect("a struct body ends with }");
        let fields = rest[open + 1..close]
            .split(';')
            .filter_map(|decl| {
                decl.rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .find(|w| !w.is_empty())
                    .map(String::from)
            })
            .collect();
        out.push((name, fields));
        rest = &rest[close..];
    }
    out
}

/// `_Static_assert`s that every field of every public struct sits where
/// the Rust `#[repr(C)]` definitions put it, that the sizes agree, and
/// that the `*_SIZE_VER0` macros match; compiled against the installed
/// header.
fn layout_asserts(layouts: &[Layout]) -> String {
    let mut c = String::from("#include <stddef.h>\n#include \"bulkmem.h\"\n");
    for l in layouts {
        let ty = l.c;
        for (field, off) in &l.fields {
            c.push_str(&format!(
                "_Static_assert(offsetof({ty}, {field}) == {off}, \"{ty}.{field}: C offset differs from Rust's {off}\");\n"
            ));
        }
        let size = l.size;
        c.push_str(&format!(
            "_Static_assert(sizeof({ty}) == {size}, \"sizeof({ty}) differs from Rust's {size}\");\n"
        ));
    }
    for (mac, v) in [
        ("BM_ENGINE_OPTS_V2_SIZE_VER0", sized::ENGINE_OPTS_V2_VER0),
        ("BM_CTL_V2_SIZE_VER0", sized::CTL_V2_VER0),
        ("BM_REPORT_V2_SIZE_VER0", sized::REPORT_V2_VER0),
    ] {
        c.push_str(&format!(
            "_Static_assert({mac} == {v}, \"{mac} differs from Rust's {v}\");\n"
        ));
    }
    c
}

/// Every struct the header defines has a Rust twin with the same fields in
/// the same order, and the compiler agrees on each offset and size: a
/// reordered, added or removed field on either side fails here, not in a
/// program built against an older header.
#[test]
fn every_public_struct_has_the_rust_layout() {
    let layouts = rust_layouts();
    let header = std::fs::read_to_string(prefix().join("include/bulkmem.h")).unwrap();
    let structs = header_structs(&header);
    assert!(
        structs.len() >= layouts.len(),
        "too few structs parsed: {structs:?}"
    );
    for (name, fields) in &structs {
        let l = layouts.iter().find(|l| l.c == name).unwrap_or_else(|| {
            panic!("bulkmem.h defines struct {name}, which has no Rust layout checked here: add it to rust_layouts()")
        });
        let rust: Vec<&str> = l.fields.iter().map(|(f, _)| *f).collect();
        assert_eq!(
            fields, &rust,
            "{name}: the header's fields (left) differ from the ones checked against Rust (right)"
        );
    }
    for l in &layouts {
        assert!(
            structs.iter().any(|(n, _)| n == l.c),
            "{} is checked but the header does not define it",
            l.c
        );
    }
    let src = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("layout_check.c");
    std::fs::write(&src, layout_asserts(&layouts)).expect("write the layout check");
    let o = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"])
        .arg(format!("-I{}", prefix().join("include").display()))
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(
        o.status.success(),
        "the header's layout differs from the library's ({}):\n{}",
        src.display(),
        text(&o)
    );
}

/// The installed header's `#define BULKMEM_VERSION_{part} N`.
fn header_version(header: &str, part: &str) -> u32 {
    let key = format!("#define BULKMEM_VERSION_{part} ");
    let line = header.lines().find_map(|l| l.strip_prefix(&key));
    line.and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("bulkmem.h lacks `{key}N`"))
}

/// tests/c/fixtures/version_check.c built against a copy of the installed
/// header with `part` set to `value` (the macros are plain #defines, so a
/// -D on the command line would only draw a redefinition warning and the
/// header's value would win); run on the library. Returns its exit status
/// and output.
fn version_check_with(part: &str, value: u32) -> (Option<i32>, String) {
    let header = std::fs::read_to_string(prefix().join("include/bulkmem.h")).unwrap();
    let old = format!(
        "#define BULKMEM_VERSION_{part} {}\n",
        header_version(&header, part)
    );
    let new = format!("#define BULKMEM_VERSION_{part} {value}\n");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("header-{part}-{value}"));
    std::fs::create_dir_all(&dir).expect("create the header directory");
    std::fs::write(dir.join("bulkmem.h"), header.replace(&old, &new)).expect("write the header");
    let inc = format!("-I{}", dir.display());
    let mut flags = C_FLAGS.to_vec();
    flags.push(&inc); // before pkg-config's -I: this header wins
    let bin = out_dir(&format!("version_check_{part}_{value}"));
    let src = here().join("tests/c/fixtures/version_check.c");
    compile("cc", &flags, &src, &pkg(&["--libs"]), &bin);
    let o = Command::new(&bin)
        .env("LD_LIBRARY_PATH", prefix().join("lib"))
        .output()
        .expect("run version_check");
    let out = text(&o);
    println!("{part}={value}:\n{out}");
    (o.status.code(), out)
}

/// A program built for a newer minor (or another major) than the library
/// it runs with is told so by BM_CHECK_VERSION(): -ENOTSUP and a message
/// naming both versions, returned normally (an exit status, no signal);
/// one built with the library's own header passes the same check.
#[test]
fn a_program_built_for_a_newer_library_is_refused_cleanly() {
    let header = std::fs::read_to_string(prefix().join("include/bulkmem.h")).unwrap();
    let [major, minor, patch] = ["MAJOR", "MINOR", "PATCH"].map(|p| header_version(&header, p));
    let lib = format!("{major}.{minor}.{patch}");

    let (code, out) = version_check_with("MINOR", minor);
    assert_eq!(code, Some(0), "the matching header is refused:\n{out}");
    assert!(out.contains("rc=0 ") && out.contains("last=\n"), "{out}");

    let (code, out) = version_check_with("MINOR", minor + 1);
    assert_eq!(
        code,
        Some(3),
        "a newer minor is not refused cleanly:\n{out}"
    );
    let number = major * 10000 + (minor + 1) * 100 + patch;
    assert!(
        out.contains(&format!("number={number}\n")),
        "the copy was not used:\n{out}"
    );
    assert!(out.contains("enotsup=1"), "not -ENOTSUP:\n{out}");
    let want = format!(
        "last=built for bulkmem {major}.{}, running with the older {lib}\n",
        minor + 1
    );
    assert!(out.contains(&want), "expected `{want}`:\n{out}");

    let (code, out) = version_check_with("MAJOR", major + 1);
    assert_eq!(
        code,
        Some(3),
        "another major is not refused cleanly:\n{out}"
    );
    assert!(out.contains("enotsup=1"), "not -ENOTSUP:\n{out}");
    let want = format!(
        "last=built for bulkmem {}.x, running with {lib}\n",
        major + 1
    );
    assert!(out.contains(&want), "expected `{want}`:\n{out}");
}
