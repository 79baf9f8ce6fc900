//! `bulkmem bench preload`: unmodified workloads in child processes,
//! without and with the preload library (the measuring is in
//! `crate::preload_cmd`, beside `bulkmem run`).

use clap::Args;

use crate::cli::{
    check_memory, check_outputs, publish, twice_the_largest, usage, with_progress, Failure, Output,
};
use crate::harness::Rounds;
use crate::preload_cmd;
use crate::size;

#[derive(Args)]
pub struct PreloadArgs {
    /// Bytes of the large-copy workloads.
    #[arg(long, value_parser = size::parse_size, allow_hyphen_values = true, default_value = "1G")]
    size: usize,
    /// Child processes per workload and setting (median).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Untimed rounds (child processes, off and on) before the timed ones.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    warmup: u32,
    /// Execs of a trivial program (/bin/true) per setting for the
    /// start-up row (0: no start-up row).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    execs: u32,
    /// Only the start-up row: no workload runs.
    #[arg(long)]
    startup_only: bool,
    #[command(flatten)]
    out: Output,
}

pub fn cmd(a: PreloadArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), None)?;
    if a.startup_only && a.execs == 0 {
        return Err(usage("--startup-only needs --execs of at least 1"));
    }
    if !a.startup_only {
        check_memory(&[twice_the_largest(
            "--size",
            &[a.size],
            "each workload's source and destination",
        )])?;
    }
    preload_cmd::library().map_err(usage)?;
    let rounds = Rounds {
        runs: a.runs as usize,
        warmup: a.warmup as usize,
    };
    let units = preload_cmd::units(rounds.runs + rounds.warmup);
    let execs = a.execs as usize;
    let startup = if execs > 0 {
        Some(with_progress(quiet, 2 * (execs + 2), |p| {
            preload_cmd::startup(execs, p)
        })?)
    } else {
        None
    };
    let rows = if a.startup_only {
        Vec::new()
    } else {
        with_progress(quiet, units, |p| preload_cmd::bench(a.size, rounds, p))?
    };
    let mut tables = if a.startup_only {
        Vec::new()
    } else {
        preload_cmd::table(&rows)
    };
    tables.extend(startup.as_ref().map(preload_cmd::startup_table));
    publish(&a.out, &tables, &rows, None)
}
