//! The output crate's `stats`, under the name the command's modules use.

pub use bulkmem_report::stats::*;
