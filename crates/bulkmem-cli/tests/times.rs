//! The times a newcomer is told, stated in one set of figures: the README's
//! first commands give the report's seconds, the first build's minutes and
//! the tests' minutes with their build; `bulkmem --help` gives the same
//! report time, docs/guide/install.md the parts that add up to the tests'
//! total, and scripts/install the same first build. (The report's time is
//! tied to the measured sample in docs/guide/command.md by
//! conventions_usage.rs, which runs the report.) A figure changed in one
//! place and not the others fails here.

use std::path::Path;
use std::process::Command;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The number written right after the first `before` in `text`, which
/// must be followed by `after` (`number(t, "(~", " s")` reads `(~6 s`).
fn number(text: &str, before: &str, after: &str) -> f64 {
    let at = text
        .find(before)
        .unwrap_or_else(|| panic!("no `{before}` in: {text}"))
        + before.len();
    let rest = &text[at..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    assert!(
        rest[end..].starts_with(after),
        "`{before}N` is not followed by `{after}` in: {text}"
    );
    rest[..end]
        .parse()
        .unwrap_or_else(|_| panic!("`{before}` is not followed by a number in: {text}"))
}

/// The README's first fenced block: the commands it starts with.
fn first_commands(readme: &str) -> &str {
    let block = readme.split("```sh\n").nth(1).expect("a first sh block");
    &block[..block.find("```").expect("its end")]
}

#[test]
fn the_stated_times_are_one_set_of_figures() {
    let readme = read("README.md");
    let first = first_commands(&readme);
    let line = |start: &str| {
        first
            .lines()
            .find(|l| l.contains(start))
            .unwrap_or_else(|| panic!("no `{start}` among the README's first commands"))
    };
    let report_s = number(line("cargo run --release"), "report (~", " s");
    let build_min = number(line("cargo run --release"), "first build of ~", " min");
    let tests = line("cargo test --workspace");
    let tests_min = number(tests, "every test (~", " min");
    let tests_build_min = number(tests, "min, ~", " of them building");
    assert!(
        readme.contains("Times from a fresh clone on an idle 2-CPU VM"),
        "the README must say where its times come from"
    );

    // --help's example of the default report quotes the same time.
    let o = Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    let quoted = format!("the default report (~{report_s} s)");
    assert!(
        help.contains(&quoted),
        "`bulkmem --help` lacks {quoted:?}:\n{help}"
    );

    // install.md's parts add up to the README's total, its build first.
    let guide = read("docs/guide/install.md");
    let guide = guide.split_whitespace().collect::<Vec<_>>().join(" ");
    let build = number(
        &guide,
        "fresh clone: about ",
        " minutes to build every test",
    );
    let host = number(&guide, "the library optimised), ", " for the host tests");
    let guest = number(&guide, "host tests and ", " for the guest suite");
    assert_eq!(
        build, tests_build_min,
        "install.md's test build and the README's"
    );
    assert!(
        (build + host + guest - tests_min).abs() <= 0.5,
        "install.md's {build} + {host} + {guest} minutes are not the README's {tests_min}"
    );
    let release = number(&guide, "builds for about ", " minutes (release profile)");
    assert_eq!(
        release, build_min,
        "install.md's first build and the README's"
    );

    // What scripts/install says as it starts building.
    let install = read("scripts/install");
    let says = format!("a first build takes about {build_min} minutes on 2 CPUs");
    assert!(
        install.contains(&says),
        "scripts/install does not say {says:?}"
    );
}

#[test]
fn numbers_are_read_where_they_are_written() {
    assert_eq!(number("report (~6 s, x", "report (~", " s"), 6.0);
    assert_eq!(number("and 4.5 for the host", "and ", " for"), 4.5);
}
