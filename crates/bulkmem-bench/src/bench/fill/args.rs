//! `bench fill`'s flags and handler.

use std::path::PathBuf;

use clap::Args;

use super::table::{panels, table, PLOT_X};
use super::{run, Plan, BASELINE};
use crate::cli::{
    check_memory, check_outputs, measuring_cpus, plot_panels, publish, usage, with_progress,
    Failure, Measure, Output,
};
use crate::preflight::{self, eviction_bytes, Need};
use crate::size;
use bulkmem_machine::units::format_bytes;

#[derive(Args)]
pub struct FillArgs {
    /// Element (template) sizes in bytes.
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, allow_hyphen_values = true, default_value = "64,128,4096")]
    element: Vec<usize>,
    /// Region sizes; up to 1M they are measured hot, larger ones cold.
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, allow_hyphen_values = true, default_value = "64K,64M,1G")]
    sizes: Vec<usize>,
    /// Workers for the `engine` row. More workers than usable CPUs run
    /// with a warning: they share CPUs.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=4096))]
    threads: u32,
    #[command(flatten)]
    measure: Measure,
    /// Do not ask for transparent huge pages on the benchmark arenas.
    #[arg(long)]
    no_thp: bool,
    #[command(flatten)]
    out: Output,
    /// GB/s against region size, a panel per element size, a line per
    /// strategy (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

pub fn cmd(a: FillArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), a.plot.as_deref())?;
    for &el in &a.element {
        if let Some(&s) = a.sizes.iter().find(|&&s| s % el != 0) {
            return Err(usage(format!(
                "--sizes {} is not a whole number of {el}-byte elements",
                bulkmem_machine::units::format_bytes(s)
            )));
        }
    }
    let biggest = a.sizes.iter().copied().max().unwrap_or(0);
    check_memory(&[Need {
        bytes: biggest.saturating_add(eviction_bytes()),
        flags: format!("--sizes {}", format_bytes(biggest)),
        what: format!(
            "a region of {} and the {} eviction buffer",
            format_bytes(biggest),
            preflight::approx(eviction_bytes())
        ),
    }])?;
    crate::cli::warn_oversubscribed(a.threads as usize, crate::cli::usable_cpus());
    let plan = Plan {
        elements: a.element,
        sizes: a.sizes,
        threads: a.threads as usize,
        rounds: a.measure.rounds(),
        thp: !a.no_thp,
    };
    measuring_cpus(None)?;
    let mut rows = with_progress(quiet, plan.groups(), |p| run(&plan, p))?;
    crate::results::add_speedups_over(&mut rows, BASELINE);
    publish(&a.out, &table(&rows), &rows, None)?;
    match a.plot.as_deref() {
        Some(p) => plot_panels(p, "fill", PLOT_X, &panels(&rows)),
        None => Ok(()),
    }
}
