//! The output crate's `chart`, under the name the command's modules use.

pub use bulkmem_report::chart::*;
