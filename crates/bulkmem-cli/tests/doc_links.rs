//! Every link and repository path in the README and docs/ leads somewhere:
//! a relative link names a file that exists (and, with `#anchor`, a
//! heading of it), and a path of the tree written in backticks
//! (`crates/...`, `scripts/...`, `docs/...`) exists. The README moved most
//! of its text into docs/guide/ once, and left links behind that pointed
//! at headings that had moved; this keeps the next move honest.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Markdown files checked: the README, CONTRIBUTING, and docs/.
fn documents() -> Vec<PathBuf> {
    let r = root();
    let mut v = vec![r.join("README.md"), r.join("CONTRIBUTING.md")];
    let mut dirs = vec![r.join("docs")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                v.push(p);
            }
        }
    }
    v
}

/// GitHub's anchor for a heading: lower case, spaces to dashes, every
/// character but letters, digits, `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The lines of a Markdown text outside fenced blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside fenced blocks).
fn anchors(text: &str) -> Vec<String> {
    prose(text)
        .into_iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The targets of `[text](target)` links outside fenced blocks.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for l in prose(text) {
        let mut rest = l;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(j) = after.find(')') else { break };
            out.push(after[..j].to_string());
            rest = &after[j..];
        }
    }
    out
}

/// Paths of the tree in backticks: `crates/...`, `scripts/...`, `docs/...`
/// (without wildcards or placeholders).
fn tree_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            ["crates/", "scripts/", "docs/"]
                .iter()
                .any(|p| s.starts_with(p))
        })
        .filter(|s| !s.contains(['*', '<', '{', ' ', '$']) && !s.contains("NAME"))
        .map(|s| s.trim_end_matches([':', ',', '.']).to_string())
        .collect()
}

#[test]
fn every_link_and_path_in_the_docs_exists() {
    let root = root();
    let mut broken = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let dir = doc.parent().unwrap();
        let name = doc
            .strip_prefix(&root)
            .unwrap_or(&doc)
            .display()
            .to_string();
        for target in links(&text) {
            if target.starts_with("http://") || target.starts_with("https://") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                doc.clone()
            } else {
                dir.join(file)
            };
            if !path.exists() {
                broken.push(format!("{name}: link to {target}: no such file"));
                continue;
            }
            if let Some(a) = anchor {
                let there = std::fs::read_to_string(&path).unwrap_or_default();
                if !anchors(&there).iter().any(|x| x == a) {
                    broken.push(format!("{name}: link to {target}: no such heading"));
                }
            }
        }
        for p in tree_paths(&text) {
            if !root.join(&p).exists() {
                broken.push(format!("{name}: `{p}` does not exist"));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn the_readme_fits_a_first_read_and_shows_code_first() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    assert!(lines.len() <= 250, "README.md has {} lines", lines.len());
    // Rust and C within the first screenful or two.
    let at = |fence: &str| lines.iter().position(|l| *l == fence);
    assert!(
        at("```rust").is_some_and(|i| i < 40),
        "no Rust near the top"
    );
    assert!(at("```c").is_some_and(|i| i < 60), "no C near the top");
    // Every guide is linked from it.
    for doc in documents() {
        if doc.parent().is_some_and(|d| d.ends_with("guide")) {
            let name = doc.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                readme.contains(&format!("docs/guide/{name}")),
                "{name} unlinked"
            );
        }
    }
}

/// The fenced blocks of `text` opened with exactly ```` ```lang ````, each
/// with its lines' newlines, as a file of those lines would read.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let (mut out, mut open): (Vec<String>, Option<String>) = (Vec::new(), None);
    for line in text.lines() {
        match &mut open {
            Some(b) if line.starts_with("```") => out.push(std::mem::take(b)),
            Some(b) => {
                b.push_str(line);
                b.push('\n');
                continue;
            }
            None if line == format!("```{lang}") => {
                open = Some(String::new());
                continue;
            }
            None => continue,
        }
        open = None;
    }
    out
}

/// The programs the READMEs print are example files, byte for byte: the
/// tests build and run the files (crates/bulkmem/tests/readme_example.rs,
/// crates/bulkmem-capi/tests/c_suite.rs), so what a newcomer pastes is
/// what CI ran.
#[test]
fn the_readmes_programs_are_the_example_files_verbatim() {
    let read = |p: &str| std::fs::read_to_string(root().join(p)).unwrap();
    for (readme, lang, file) in [
        ("README.md", "rust", "crates/bulkmem/examples/try_it.rs"),
        ("README.md", "c", "examples/c/try_it.c"),
        (
            "crates/bulkmem/README.md",
            "rust",
            "crates/bulkmem/examples/try_it.rs",
        ),
    ] {
        let text = read(readme);
        let found = blocks(&text, lang);
        assert_eq!(found.len(), 1, "{readme}: one ```{lang} block");
        assert_eq!(
            found[0],
            read(file),
            "{readme}'s ```{lang} block is not {file}: paste the file into it"
        );
        let name = Path::new(file).file_name().unwrap().to_str().unwrap();
        assert!(text.contains(name), "{readme} does not name {file}");
    }
}

#[test]
fn the_checks_see_what_they_check() {
    assert_eq!(
        slug(" The batch engine (crates/bulkmem/src/engine/)"),
        "the-batch-engine-cratesbulkmemsrcengine"
    );
    assert_eq!(anchors("# A b\n```\n# not\n```\n## C-d"), ["a-b", "c-d"]);
    assert_eq!(
        blocks("```c\nint x;\n\n```\n```sh\nls\n```\n```c\ny\n```", "c"),
        ["int x;\n\n", "y\n"]
    );
    assert_eq!(
        links("see [x](a.md#b) and [y](c.md)\n```\n[z](no)\n```"),
        ["a.md#b", "c.md"]
    );
    assert_eq!(
        tree_paths("`crates/bulkmem/src/` and `scripts/install`, not `cargo test` or `crates/*/x`"),
        ["crates/bulkmem/src/", "scripts/install"]
    );
}
