//! The output crate's `write_file`, under the name the command's modules use.

pub use bulkmem_report::write_file::*;
