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
    #[arg(long, value_parser = size::parse_size, default_value = "1G")]
    size: usize,
    /// Child processes per workload and setting (median).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Untimed rounds (child processes, off and on) before the timed ones.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1000))]
    warmup: u32,
    #[command(flatten)]
    out: Output,
}

pub fn cmd(a: PreloadArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), None)?;
    check_memory(&[twice_the_largest(
        "--size",
        &[a.size],
        "each workload's source and destination",
    )])?;
    preload_cmd::library().map_err(usage)?;
    let rounds = Rounds {
        runs: a.runs as usize,
        warmup: a.warmup as usize,
    };
    let units = preload_cmd::units(rounds.runs + rounds.warmup);
    let rows = with_progress(quiet, units, |p| preload_cmd::bench(a.size, rounds, p))?;
    publish(&a.out, &preload_cmd::table(&rows), &rows, None)
}
