//! bulkmem's page moves, the floor beside the engine: mappings
//! ([`mapping`]), batched `UFFDIO_MOVE` ([`uffd`]) and concurrent
//! compaction for moving collectors ([`compact`]). They move pages rather
//! than copy bytes through a kernel choice, so they need the machine
//! (the fault handler, latches, quiet threads) and nothing of the policy
//! or the engine.
//!
//! Users name `bulkmem`, which re-exports these modules and their error,
//! [`Error`] (`bulkmem::PagesError`); nothing here knows the crates above.

#![warn(missing_docs)]

// The unit tests compile bulkmem's test support (`compact/tests.rs`),
// which names the crate users name; here that is this crate.
#[cfg(test)]
extern crate self as bulkmem;

#[cfg(target_arch = "x86_64")]
pub mod compact;
mod error;
pub mod mapping;
mod move_report;
pub mod uffd;

pub use error::Error;

// The machine, under the names the modules here use (`crate::latch`,
// `crate::checked::mc`).
#[cfg(target_arch = "x86_64")]
use bulkmem_machine::checked;
use bulkmem_machine::{extents, latch, plan, strategy, threads};
