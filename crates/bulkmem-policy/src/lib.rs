//! bulkmem's policy floor: which primitive runs for a request (`auto`:
//! environment overrides, a profile tuned on this CPU, built-in rules) and
//! the typed kernel handles it hands out (`handle`: a copy or clear kernel
//! this CPU runs, its checked twin, the fence that orders non-temporal
//! stores), with the refusals of both (`StrategyError`,
//! `CheckedStrategyError`).
//!
//! Users name `bulkmem`, which re-exports what is theirs from here; the
//! workspace's other crates (the preload, the C library, the command) reach
//! the rest directly. It stands on `bulkmem-machine` and knows nothing of
//! the calls, the engine or the page moves above it.

pub mod auto;
mod error;
pub mod handle;

pub use error::{CheckedStrategyError, StrategyError};

// The floor below, under the names the modules here use (`crate::kernels`,
// `crate::machine::cpu`), as in `bulkmem`.
#[cfg(target_arch = "x86_64")]
use bulkmem_machine::checked;
use bulkmem_machine::{descriptor, gangs, kernels, machine, strategy, units};
