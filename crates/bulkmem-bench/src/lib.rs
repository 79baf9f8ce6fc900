//! The experiments behind `bulkmem bench` and the default report: each
//! bench's flags, its measuring over the library's toolkit
//! (`bulkmem_calibrate::toolkit`) and the rows it hands to
//! `bulkmem_report`; beside them, the plumbing every subcommand of the
//! command shares (output flags and where output goes, progress, failures
//! and their exit codes, the build's provenance). The `bulkmem` binary
//! parses and dispatches (ripgrep's layout: small library crates under a
//! thin command).

pub mod arena;
pub mod bench;
pub mod cli;
pub mod failure;
pub mod harness;
pub mod out;
pub mod preflight;
pub mod preload_cmd;
pub mod progress;
pub mod provenance;
pub mod results;
pub mod size;
pub mod version;
