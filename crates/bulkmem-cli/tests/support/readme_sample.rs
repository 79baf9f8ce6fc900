//! The sample of the default report (docs/guide/command.md) and the run
//! times it and the README quote, checked against the report the built
//! binary prints now: a change of the report's form that leaves the sample
//! behind fails here, and so does a quoted time that is not the sample's
//! own.
//!
//! Included by `conventions_usage.rs`, whose test runs the whole default
//! report once for both (it takes tens of seconds unoptimised).

use std::path::Path;

/// A file of the repository.
fn read(path: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(path),
    )
    .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The fenced block under "## The default report on one machine".
fn sample(readme: &str) -> &str {
    let at = readme
        .find("## The default report on one machine")
        .expect("docs/guide/command.md has a default-report section");
    let rest = &readme[at..];
    let open = rest.find("\n```\n").expect("a fenced sample") + 5;
    let close = rest[open..].find("\n```").expect("its end") + open;
    &rest[open..close]
}

/// A line with its numbers, spacing and noise marks dropped: what stays
/// the same from run to run and machine to machine.
fn shape(line: &str) -> String {
    let mut out = String::new();
    let mut prev_digit = false;
    for c in line.chars() {
        let digit = c.is_ascii_digit() || (prev_digit && c == '.');
        if digit {
            if !prev_digit {
                out.push('#');
            }
        } else if c != '~' {
            out.push(c);
        }
        prev_digit = digit;
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The lines of a report that do not depend on the CPU: titles, column
/// headers, the summary's parts and the last line (the strategy rows
/// differ with the CPU's features).
fn skeleton(report: &str) -> Vec<String> {
    report
        .lines()
        .filter(|l| {
            l.starts_with("copy,")
                || l.starts_with("clear,")
                || l.starts_with("strategy ")
                || l.starts_with("GB/s =")
                || l.starts_with("(measured in")
        })
        .map(shape)
        .chain(report.lines().filter_map(|l| {
            // The summary lines, from their last `;` on (the winners
            // before it differ by machine).
            let l = l
                .strip_prefix("copy: fastest here: ")
                .or(l.strip_prefix("clear: fastest here: "))?;
            Some(shape(&l[l.rfind("; auto")?..]))
        }))
        .map(|s| {
            // "(lowest: consume 2M)" names a cell that changes by machine.
            match s.find("(lowest:") {
                Some(i) => {
                    s[..i].to_string() + &s[s[i..].find(')').map_or(s.len(), |j| i + j + 1)..]
                }
                None => s,
            }
        })
        .collect()
}

/// The seconds in a report's last line.
fn took(report: &str) -> f64 {
    let l = report
        .lines()
        .find_map(|l| l.strip_prefix("(measured in "))
        .expect("a last line with the time");
    l.split(" s;").next().unwrap().parse().expect("seconds")
}

/// Checks the sample and the README against `report`, the default
/// report's text as the built binary prints it.
pub fn check(report: &str) {
    let guide = read("docs/guide/command.md");
    let readme = read("README.md");
    let sample = sample(&guide);
    let (want, have) = (skeleton(report), skeleton(sample));
    assert!(
        want.len() >= 10,
        "too little of the report recognised:\n{report}"
    );
    assert_eq!(
        have, want,
        "docs/guide/command.md's default-report sample is not in the current form: \
         regenerate it with `cargo run --release` (left: the sample, right: now)"
    );
    // Every quoted time of the report is the sample's own, rounded.
    let t = took(sample);
    let measured = format!("Measured with `cargo run --release` ({t:.1} s)");
    assert!(
        guide.contains(&measured),
        "the sample section must say: {measured}"
    );
    let quoted = format!("(~{} s", t.round());
    let first = readme
        .split("\n```sh\n")
        .nth(1)
        .expect("the first commands");
    let first = &first[..first.find("\n```").unwrap()];
    assert!(
        first.contains(&quoted),
        "the README's first commands must quote the sample's time: {quoted}\n{first}"
    );
}

#[test]
fn shapes_keep_words_and_drop_numbers() {
    assert_eq!(
        shape("per-page  ~53.0±0.96 1.11x   14.3±0.35"),
        "per-page #±# #x #±#"
    );
    assert_eq!(took("x\n(measured in 9.8 s; more: a)\n"), 9.8);
    let r = "copy, hot (a; 1 thread): GB/s median±stdev of 7 runs; x = over libc\nstrategy 4K 2M\n\
             copy: fastest here: hot 4K avx512 1.4x; auto 0.9x-1.2x over libc (lowest: cold 2M), 1.1x-3x over per-page\n";
    assert_eq!(
        skeleton(r),
        [
            "copy, hot (a; # thread): GB/s median±stdev of # runs; x = over libc",
            "strategy #K #M",
            "; auto #x-#x over libc , #x-#x over per-page"
        ]
    );
}
