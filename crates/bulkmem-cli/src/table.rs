//! The output crate's `table`, under the name the command's modules use.

pub use bulkmem_report::table::*;
