//! `bulkmem generate completions SHELL | man [--dir DIR]`: shell
//! completions and roff man pages, made from the same clap definitions the
//! command parses with, so they never drift from it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::builder::PossibleValuesParser;
use clap::{Args, Command, Subcommand};
use clap_complete::Shell;
use clap_mangen::roff::{bold, roman, Roff};

use bulkmem_bench::cli::{runtime, usage, Failure};

#[derive(Args)]
pub struct GenerateArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Shell completions on stdout (e.g. `bulkmem generate completions bash
    /// > /etc/bash_completion.d/bulkmem`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Man pages: bulkmem(1) on stdout, or with --dir, bulkmem.1 and one
    /// bulkmem-<command>.1 per subcommand (bulkmem-bench-copy.1, ...).
    Man {
        /// Write every page into this directory instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

pub fn cmd(a: GenerateArgs, command: Command) -> Result<(), Failure> {
    let mut command = with_value_names(command).disable_help_subcommand(true);
    command.build();
    match a.what {
        What::Completions { shell } => {
            // Made in memory first: clap_complete panics on a failed write,
            // and `out` turns one into an error.
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut command, "bulkmem", &mut out);
            bulkmem_bench::out::write_bytes(&out).map_err(bulkmem_bench::out::failed)
        }
        What::Man { dir: None } => bulkmem_bench::out::write_bytes(&page(&command, true))
            .map_err(bulkmem_bench::out::failed),
        What::Man { dir: Some(dir) } => {
            if !dir.is_dir() {
                return Err(usage(format!("--dir {}: not a directory", dir.display())));
            }
            // A directory that takes no files is as much a usage error as
            // a missing one: found before the first page, not by it.
            bulkmem_bench::preflight::writable("--dir", &dir.join("bulkmem.1")).map_err(usage)?;
            write_pages(&command, &dir, true)
        }
    }
}

/// `cmd`'s page, then those of its visible subcommands, into `dir`.
fn write_pages(cmd: &Command, dir: &Path, top: bool) -> Result<(), Failure> {
    let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
    let path = dir.join(format!("{name}.1"));
    bulkmem_report::write_file::write_file(&path, &page(cmd, top))
        .map_err(|e| runtime(format!("cannot write {}: {e}", path.display())))?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, dir, false)?;
    }
    Ok(())
}

/// One roff page: clap_mangen's sections, then EXAMPLES, and on bulkmem(1)
/// EXIT STATUS, ENVIRONMENT and FILES (the subcommands' pages point there).
fn page(cmd: &Command, top: bool) -> Vec<u8> {
    let examples = cmd.get_after_long_help().map(|h| h.to_string());
    let plain = cmd
        .clone()
        .after_long_help(None::<&str>)
        .after_help(None::<&str>);
    let mut out = Vec::new();
    clap_mangen::Man::new(plain)
        .render(&mut out)
        .expect("writing to a Vec cannot fail");
    let mut roff = Roff::new();
    if let Some(text) = examples {
        roff.control("SH", ["EXAMPLES"]);
        let body = text.strip_prefix("Examples:\n").unwrap_or(&text);
        roff.control("nf", []);
        for line in body.lines() {
            roff.text([roman(line.trim_start())]);
        }
        roff.control("fi", []);
    }
    if top {
        roff.control("SH", ["EXIT STATUS"]);
        for (code, what) in EXIT_STATUS {
            roff.control("TP", [])
                .text([bold(*code)])
                .text([roman(*what)]);
        }
        roff.control("SH", ["ENVIRONMENT"]);
        roff.text([roman(ENVIRONMENT_INTRO)]);
        for (var, what) in ENVIRONMENT {
            roff.control("TP", [])
                .text([bold(*var)])
                .text([roman(*what)]);
        }
        roff.control("SH", ["FILES"]);
        for (file, what) in FILES {
            roff.control("TP", [])
                .text([bold(*file)])
                .text([roman(*what)]);
        }
    } else {
        roff.control("SH", ["SEE ALSO"]);
        roff.text([
            bold("bulkmem"),
            roman("(1) for the environment variables, files and exit status."),
        ]);
    }
    // to_roff: the apostrophe preamble is already at the top of the page.
    let _ = out.write_all(roff.to_roff().as_bytes());
    out
}

/// docs/cli-contract.md, "Exit codes"; `failure.rs`, `out.rs`, `bench migrate`.
/// One convention for every command: 0 ok, 1 failed while running, 2 bad
/// usage (found before anything runs), 130 interrupted; 77 and 126/127
/// are the two documented exceptions.
pub const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Done. Also when stdout is a pipe whose reader went away (| head)."),
    ("1", "What was measured or run failed: a measurement or system call failed (the message says where), output could not be written at the end (a full disk), the program under `run --compare` failed (exited non-zero or died of a signal; --allow-failure times it anyway), or `compare --fail-on` found a change of that kind."),
    ("2", "Bad usage or bad input, refused before anything is measured: an unknown flag, a bad value (a negative size, an unknown strategy), an output file that cannot be written (--json, --plot, tune's profile, generate --dir: checked up front, its directory must exist and take files), an input file named on the command line that cannot be read or is not what the command reads (a missing file, a directory, or a file that is not a bench document given to `compare`; a library --against cannot load), or more memory than is available. More --threads than CPUs is not an error: it runs, with a warning."),
    ("77", "Skipped: the machine cannot run it (`bench migrate` on one NUMA node); no JSON is written."),
    ("126, 127", "`run` and `run --compare`: the program could not be executed (126) or was not found (127), as a shell reports it; once it runs under `run`, its own status is the exit status."),
    ("130", "Interrupted (Ctrl-C): bulkmem ends by SIGINT, which a shell reports as 130; no JSON is written."),
];

const ENVIRONMENT_INTRO: &str = "Read by the library in every process that uses it (this command, programs linked with it, and programs under `bulkmem run`). An unknown name or value is one warning on stderr and is otherwise ignored. In set-user-ID and set-group-ID programs (AT_SECURE), every BULKMEM_ variable is ignored, and so are user profiles.";

/// Every `BULKMEM_*` variable a user may set (the test-only ones left out).
pub const ENVIRONMENT: &[(&str, &str)] = &[
    ("BULKMEM_PROFILE=FILE|off", "Follow the profile in FILE instead of the one `bulkmem tune` wrote for this CPU; `off`: the built-in rules."),
    ("BULKMEM_STRATEGY=NAME | copy:NAME,clear:NAME", "Force what `auto` runs, for both operations or each."),
    ("BULKMEM_NT_THRESHOLD=BYTES", "Hint `auto` streams (non-temporal stores) from this batch total on; K, M, G suffixes are powers of two."),
    ("BULKMEM_DISABLE=FEATURE,...", "Hide CPU features (erms, fsrm, avx2, avx512f, ...), to see an older CPU's choices."),
    ("BULKMEM_PRELOAD=off", "Make libbulkmem_preload.so inert in this process."),
    ("BULKMEM_PRELOAD_MIN=BYTES", "Preload: calls below this (default 1M) go straight to the C library."),
    ("BULKMEM_PRELOAD_MT_MIN=BYTES", "Preload: calls of this size (default 16M) and more go to the engine's worker threads."),
    ("BULKMEM_PRELOAD_THREADS=N", "Preload: worker threads (default: the engine's); 0 or 1: none."),
    ("BULKMEM_PRELOAD_STATS=1", "Preload: one line per process at exit on its stderr, calls and bytes per path."),
    ("BULKMEM_PRELOAD_REPORT=DIR", "Preload, set by `bulkmem run`: each process writes one record of its large calls into a new file in DIR at exit, for run's summary; nothing on stderr."),
    ("BULKMEM_PRELOAD_LIB=FILE", "`bulkmem run` and `bench preload`: the library to preload (default: beside the bulkmem binary), with its engine, libbulkmem_preload_engine.so, beside it."),
];

const FILES: &[(&str, &str)] = &[
    ("$XDG_CACHE_HOME/bulkmem/profile-<key>.toml", "The profile `bulkmem tune` writes and `auto` follows, where <key> names the CPU (vendor, family, model, stepping, a hash of features, caches and CPUs). Read only if it is a regular file of at most 1 MiB."),
    ("~/.cache/bulkmem/profile-<key>.toml", "The same, when XDG_CACHE_HOME is unset."),
];

/// The flags whose values are names get them as possible values, so that
/// completions offer them and the man page lists them. Only the generated
/// text sees this: the command parses with the flags' own parsers, which
/// also take what completion cannot list (`--strategies a,b`).
fn with_value_names(cmd: Command) -> Command {
    let mut strategies: Vec<&'static str> = vec!["all"];
    strategies.extend(bulkmem::Strategy::ALL.iter().map(|s| s.name()));
    let hints: Vec<&'static str> = bulkmem::Hint::ALL.iter().map(|h| h.name()).collect();
    let placements: Vec<&'static str> = bulkmem::placement::Placement::ALL
        .iter()
        .map(|p| p.name())
        .collect();
    let values: [(&str, Vec<&'static str>); 5] = [
        ("strategies", strategies),
        ("regime", vec!["hot", "cold", "both"]),
        ("hint", hints),
        ("op", vec!["copy", "clear"]),
        ("placement", placements),
    ];
    name_values(cmd, &values)
}

fn name_values(mut cmd: Command, values: &[(&str, Vec<&'static str>)]) -> Command {
    for (id, names) in values {
        if cmd.get_arguments().any(|a| a.get_id() == *id) {
            let names = names.clone();
            // Hidden from the help text and man page, whose flag descriptions
            // already name the values; completion scripts still list them.
            cmd = cmd.mut_arg(*id, |a| {
                a.value_parser(PossibleValuesParser::new(names))
                    .hide_possible_values(true)
            });
        }
    }
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for s in subs {
        cmd = cmd.mut_subcommand(s, |sub| name_values(sub, values));
    }
    cmd
}
