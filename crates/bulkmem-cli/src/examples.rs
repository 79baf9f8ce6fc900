//! The EXAMPLES at the end of `--help` (not `-h`, which stays short, as
//! ripgrep and hyperfine do) and of the man pages. Attached to the parsed
//! command in one place so that the subcommand modules keep only their
//! flags, and so that a test can walk the tree and find them all.

use clap::Command;

/// (path of subcommand names, examples); the empty path is `bulkmem`.
pub const EXAMPLES: &[(&[&str], &str)] = &[
    (
        &[],
        "bulkmem                          # the default report (~6 s): copy and clear, hot and cold
bulkmem info                     # what this CPU runs and what `auto` would choose
bulkmem bench copy --json a.json # measure, keep the samples
bulkmem compare a.json b.json    # what changed, and whether it is significant
bulkmem tune                     # measure this machine once; `auto` follows from then on",
    ),
    (
        &["bench", "copy"],
        "bulkmem bench copy                                   # every strategy, 4K..256M, hot and cold
bulkmem bench copy --strategies avx2-nt,libc --sizes 2M,256M --regime cold
bulkmem bench copy --threads 2 --runs 15 --json copy.json --plot copy.svg
bulkmem bench copy --format csv > copy.csv          # one row per cell, numbers only
bulkmem bench copy --hint stream --strategies auto  # what `auto` does when told the data streams",
    ),
    (
        &["bench", "clear"],
        "bulkmem bench clear                                  # every clear strategy, 4K..256M, hot and cold
bulkmem bench clear --strategies rep-stosb,avx512-nt,clzero --regime cold
bulkmem bench clear --format md --width 80           # a table to paste into a review or an email",
    ),
    (
        &["bench", "dispatch"],
        "bulkmem bench dispatch                        # auto over its kernel, checked over auto, the C calls over the Rust ones
bulkmem bench dispatch --op clear --runs 31     # clears, more rounds on a noisy machine
BULKMEM_PROFILE=/tmp/p.toml bulkmem bench dispatch   # the same after `bulkmem tune --out /tmp/p.toml`",
    ),
    (
        &["bench", "compact"],
        "bulkmem bench compact --heaps 1G --live 50 --mutators 1 --thp off   # one cell: every strategy
bulkmem bench compact --strategies concurrent-auto,floor --runs 5   # stalls against this machine's floor
bulkmem bench compact --heaps 1G,4G,16G --json gc.json --plot gc.svg",
    ),
    (
        &["tune"],
        "bulkmem tune                         # measure and write the profile `auto` follows here
bulkmem tune --quick                 # about a third of the time, fewer sizes
bulkmem tune --out /tmp/profile.toml # elsewhere; use it with BULKMEM_PROFILE=/tmp/profile.toml
BULKMEM_PROFILE=off bulkmem info     # the built-in rules, ignoring the profile",
    ),
    (
        &["info"],
        "bulkmem info                         # features, caches, NUMA, strategies, auto's choices
bulkmem info --json | jq .auto       # machine-readable
BULKMEM_DISABLE=avx512f bulkmem info # what an older CPU would choose",
    ),
    (
        &["run"],
        "bulkmem run -- python3 -c 'a = bytes(1 << 28); b = bytearray(a); exec(\"b[:] = a;\" * 50)'  # then: calls, bytes
bulkmem run --compare 10 -- ./app            # with and without bulkmem: is it faster?
bulkmem run --stats -- make -j8              # and a line per process of the tree
BULKMEM_PRELOAD_MIN=4M bulkmem run -- ./app  # only calls of 4 MiB and more",
    ),
    (
        &["compare"],
        "bulkmem compare before.json after.json                   # B/A per cell, verdicts, geometric mean
bulkmem compare --threshold 5% before.json after.json    # ignore changes under 5%
bulkmem compare --fail-on slower before.json after.json  # exit 1 on a significant slowdown (CI)
bulkmem compare --json diff.json --format csv a.json b.json",
    ),
];

/// `cmd` with every example attached as its `after_long_help`.
pub fn annotate(mut cmd: Command) -> Command {
    for (path, text) in EXAMPLES {
        cmd = attach(cmd, path, text);
    }
    cmd
}

fn attach(cmd: Command, path: &[&str], text: &'static str) -> Command {
    match path.split_first() {
        None => cmd.after_long_help(format!("Examples:\n{}", indent(text))),
        Some((first, rest)) => cmd.mut_subcommand(*first, |sub| attach(sub, rest, text)),
    }
}

/// Columns an example line may take once indented: help wraps at 100
/// (`max_term_width`), and a wrapped comment would land on a line of its
/// own without its `#`, which a pasted example then runs as a command.
const LINE: usize = 98;

/// The examples indented for help; a line whose comment would make it
/// wrap puts the comment on a line of its own above the command.
fn indent(text: &str) -> String {
    let mut out = String::new();
    for l in text.lines() {
        match l.split_once("  #") {
            Some((cmd, comment)) if 2 + l.chars().count() > LINE => {
                out += &format!("  #{}\n  {}\n", comment, cmd.trim_end());
            }
            _ => out += &format!("  {l}\n"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_example_line_wraps_in_help() {
        for (path, text) in EXAMPLES {
            for line in indent(text).lines() {
                assert!(
                    line.chars().count() <= LINE,
                    "{path:?}: {line} ({} columns)",
                    line.chars().count()
                );
            }
        }
        // A long line's comment moves above its command.
        let long = format!("bulkmem {}  # a comment", "x".repeat(90));
        assert_eq!(
            indent(&long),
            format!("  # a comment\n  bulkmem {}\n", "x".repeat(90))
        );
    }

    #[test]
    fn every_example_path_names_a_subcommand() {
        let mut cmd = Command::new("bulkmem")
            .subcommand(Command::new("bench").subcommand(Command::new("copy")))
            .subcommand(Command::new("tune"));
        cmd = attach(cmd, &["bench", "copy"], "bulkmem bench copy");
        let copy = cmd
            .find_subcommand("bench")
            .and_then(|b| b.find_subcommand("copy"))
            .unwrap();
        let help = copy.get_after_long_help().unwrap().to_string();
        assert_eq!(help, "Examples:\n  bulkmem bench copy\n");
        assert!(cmd
            .find_subcommand("tune")
            .unwrap()
            .get_after_long_help()
            .is_none());
    }
}
