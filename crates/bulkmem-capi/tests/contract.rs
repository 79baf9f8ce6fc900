//! The compaction producer's contract is written once, in bulkmem.h, and
//! docs/guide/moves.md quotes it word for word: a rule changed in one and
//! not the other fails here. The header must also keep answering what a
//! runtime author asks first (what `page` and `from_space` are, what
//! `first_source` returns for the free pages at the end, whether memcpy
//! may run in `produce`, whether mutators may run across finish, how the
//! SIGBUS handlers chain, which pages BM_COMPACT_AUTO moves).

use std::path::Path;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The contract as the header's comment states it, from "The producer's
/// contract:" to the comment's end, without the comment's ` * ` margin.
fn header_contract(header: &str) -> String {
    let start = header
        .find(" * The producer's contract:\n")
        .expect("bulkmem.h states the producer's contract");
    let end = start
        + header[start..]
            .find("*/")
            .expect("the contract's comment ends");
    let mut out = String::new();
    for line in header[start..end].lines() {
        let line = line
            .strip_prefix(" * ")
            .or_else(|| line.strip_prefix(" *"))
            .unwrap_or(line);
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.trim_end().to_string() + "\n"
}

#[test]
fn the_guide_quotes_the_header_contract_word_for_word() {
    let contract = header_contract(&read("crates/bulkmem-capi/include/bulkmem.h"));
    let guide = read("docs/guide/moves.md");
    let quoted = format!("```text\n{contract}```\n");
    assert!(
        guide.contains(&quoted),
        "docs/guide/moves.md must quote bulkmem.h's producer contract as a ```text block, \
         word for word:\n{quoted}"
    );
    // And show the same steps in both languages.
    for step in [
        "Compaction::prepare",
        "bm_compact_prepare",
        "s.ensure(",
        "bm_compact_ensure(c,",
    ] {
        assert!(guide.contains(step), "moves.md lacks {step}");
    }
}

#[test]
fn the_contract_answers_a_runtime_authors_questions() {
    let c = header_contract(&read("crates/bulkmem-capi/include/bulkmem.h"));
    let flat = c.split_whitespace().collect::<Vec<_>>().join(" ");
    for (question, answer) in [
        (
            "what `page` is",
            "`page` is the index of the to-space page to build",
        ),
        (
            "what `from_space` is",
            "`from_space` is the address of the heap's pages as they were in the pause",
        ),
        (
            "first_source of the free pages at the end",
            "(trailing free space) return the heap's page count",
        ),
        ("memcpy inside produce", "memcpy and memset are fine"),
        (
            "mutators across finish",
            "across bm_compact_finish and after it",
        ),
        (
            "a runtime's own SIGBUS handler",
            "a handler the program installed before is chained to",
        ),
        (
            "a handler installed afterwards",
            "calls it first for every SIGBUS it does not own",
        ),
        (
            "which pages AUTO moves",
            "BM_COMPACT_AUTO moves only such pages",
        ),
    ] {
        assert!(
            flat.contains(answer),
            "the contract no longer says {question}: {answer:?}"
        );
    }
}

#[test]
fn the_contract_is_read_without_its_margin() {
    let h = "/* x\n * The producer's contract:\n *   a\n *\n * b. */\nint y;";
    assert_eq!(header_contract(h), "The producer's contract:\n  a\n\nb.\n");
}
