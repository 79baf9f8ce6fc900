//! The `bulkmem` command: which copy and clear primitive wins on this
//! machine, measured the way the Linux patches bulkmem grew from measure
//! it (docs/measurements.md, "How to measure"). This file
//! only parses and dispatches; each subcommand's flags and handler live in
//! its own module, the benches and what the subcommands share in
//! `bulkmem_bench`, the output in `bulkmem_report` (ripgrep's layout).

mod compare;
mod examples;
mod generate;
mod info;
mod migrate_cmd;
mod run;
mod tune;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use bulkmem_bench::{bench, failure, out, preflight, preload_cmd, version};
use clap::{Command, CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "bulkmem",
    version = version::SHORT,
    max_term_width = 100,
    about = "Copy, clear and move large runs of memory pages at the speed of the hardware",
    long_about = "Copy, clear and move large runs of memory pages at the speed of the hardware.\n\n\
                  Without a command, prints the default report for this machine: copy and \
                  clear throughput of every primitive at 4K/2M/64M, cache-hot, consumed and cache-cold, and \
                  which primitive wins here."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// No progress output on stderr (warnings and errors still go there).
    #[arg(long, global = true)]
    quiet: bool,
    /// Without a command: also write the default report's results as JSON
    /// to FILE (`-` for stdout; the tables then go to stderr), as `bench
    /// copy --json` does. The format is docs/bench-schema.json.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// CPU, features, caches, LLC domains, NUMA nodes, page sizes,
    /// strategies and what `auto` would choose.
    Info(info::InfoArgs),
    /// Measure the copy, clear, fill and page-move routines on this
    /// machine, one experiment per subcommand (tables, --json, --plot).
    Bench {
        #[command(subcommand)]
        what: Box<bench::BenchCmd>,
    },
    /// Compare two `bench --json` documents cell by cell: B/A and whether
    /// the change is real (Welch's t-test, Holm-corrected over the cells,
    /// between-run drift allowed for, at least --threshold 3%).
    Compare(compare::CompareArgs),
    /// Move pages to a NUMA node: a range of a process with move_pages(2),
    /// or --self-test (both of bulkmem's paths, there and back, checked).
    Migrate(migrate_cmd::MigrateArgs),
    /// Measure every strategy here (single calls hot, batches of 4K and 2M
    /// extents cold, 64 B to 32x the per-thread LLC share) and write
    /// the profile `auto` follows on this CPU from the next process on.
    Tune(tune::TuneArgs),
    /// Run an unmodified program with its large memcpy/memmove/memset going
    /// through bulkmem (LD_PRELOAD of libbulkmem_preload.so; variables:
    /// BULKMEM_PRELOAD_MIN, _MT_MIN, _THREADS, BULKMEM_PRELOAD=off), then
    /// summarise its process tree on stderr: calls and bytes that went
    /// through bulkmem and the C library. With --compare N, time it N
    /// times each with and without bulkmem instead, and say whether the
    /// difference is real.
    Run(run::RunArgs),
    /// Shell completions or the man pages.
    Generate(generate::GenerateArgs),
    /// The version; with --verbose, the commit, compiler and target
    /// features of the build.
    Version(version::VersionArgs),
    /// The child side of `bench preload` (not for direct use).
    #[command(hide = true)]
    PreloadWorkload(preload_cmd::WorkloadArgs),
}

/// The command as parsed and as documented: the derive, plus the examples
/// `--help` ends with.
fn command() -> Command {
    examples::annotate(negatives_reach_parsers(Cli::command()))
}

/// Every option that takes a value takes one starting with `-` when it
/// reads as a number, so `--runs -1` is the option's bad value, named as
/// such, rather than an "unexpected argument '-1'".
fn negatives_reach_parsers(cmd: Command) -> Command {
    cmd.mut_args(|a| {
        if a.get_action().takes_values() && !a.is_positional() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    })
    .mut_subcommands(negatives_reach_parsers)
}

fn main() -> ExitCode {
    let matches = command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let quiet = cli.quiet;
    if let (Some(path), Some(_)) = (&cli.json, &cli.cmd) {
        // The default report's flag; a command takes its own after its name.
        let _ = writeln!(
            std::io::stderr(),
            "bulkmem: error: --json {} before a command is the default report's: \
             put it after the command (bulkmem bench copy --json FILE)",
            path.display()
        );
        return ExitCode::from(2);
    }
    let result = match cli.cmd {
        None => bench::copy::default_report(quiet, cli.json.as_deref()),
        Some(Cmd::Info(a)) => info::cmd(a),
        Some(Cmd::Bench { what }) => bench::cmd(*what, quiet),
        // An input that cannot be read is a usage error (exit 2), like an
        // output that cannot be written; what the files hold is compare's.
        Some(Cmd::Compare(a)) => {
            preflight::check_inputs(&[("compare: A", &a.a), ("compare: B", &a.b)])
                .map_err(failure::usage)
                .and_then(|()| compare::cmd(a))
        }
        Some(Cmd::Migrate(a)) => migrate_cmd::cmd(a),
        Some(Cmd::Tune(a)) => tune::cmd(a, quiet),
        Some(Cmd::Run(a)) => run::run_cmd(a),
        Some(Cmd::Generate(a)) => generate::cmd(a, command()),
        Some(Cmd::Version(a)) => version::cmd(a),
        Some(Cmd::PreloadWorkload(a)) => preload_cmd::workload_cmd(a),
    };
    // A failed stdout decides the exit status whatever the command made of
    // it (see `out`: quiet 0 on a broken pipe, one line and 1 otherwise).
    if let Some(code) = out::exit_status() {
        return ExitCode::from(code);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            // Not eprintln!: it panics when stderr is gone too. (No message:
            // `run` passing on its program's exit status.)
            if !f.msg.is_empty() {
                let _ = writeln!(std::io::stderr(), "bulkmem: error: {}", f.msg);
            }
            ExitCode::from(f.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every example `--help` shows parses: its subcommand, flags and
    /// values exist (a renamed flag would leave a stale example).
    #[test]
    fn every_example_parses() {
        let mut seen = 0;
        for (path, text) in examples::EXAMPLES {
            for line in text.lines() {
                let line = line.split(" #").next().unwrap();
                let line = line.split(['|', '>']).next().unwrap();
                let words: Vec<&str> = line
                    .split_whitespace()
                    .skip_while(|w| w.contains('=') && !w.starts_with('-'))
                    .collect();
                assert_eq!(words.first(), Some(&"bulkmem"), "{line}");
                let m = command()
                    .try_get_matches_from(&words)
                    .unwrap_or_else(|e| panic!("{line}: {e}"));
                Cli::from_arg_matches(&m).unwrap_or_else(|e| panic!("{line}: {e}"));
                seen += 1;
            }
            // The examples hang where `--help` of that command shows them.
            let mut cmd = command();
            for p in path.iter() {
                cmd = cmd.find_subcommand(p).unwrap().clone();
            }
            assert!(cmd.get_after_long_help().is_some(), "{path:?}");
        }
        assert!(seen >= 20, "{seen}");
    }
}
