//! The output crate's `row_csv`, under the name the command's modules use.

pub use bulkmem_report::row_csv::*;
