//! The calibration profile `bulkmem tune` writes and `auto` follows: for
//! each operation, request shape and size on a ladder, the GB/s every
//! strategy measured on this machine, the winner, its margin over the
//! runner-up, and the choice `auto` makes there.
//!
//! The file is TOML (a subset: `key = value` with strings, integers,
//! floats and booleans, a `[cpu]` table and `[[cell]]` arrays), readable
//! and diffable, parsed here without dependencies:
//!
//! ```toml
//! format = 3
//! bulkmem = "0.1.0"
//! created = 1795000000          # Unix seconds
//! cells = 2                     # a truncated file is detected
//!
//! [cpu]
//! vendor = "AMD"
//! family = 25
//! # ... model, stepping, features, l1d, l2, llc, llc_cpus, cpus
//!
//! [[cell]]
//! op = "copy"
//! shape = "single"              # or "batch-4K", "batch-2M"
//! size = 4096                   # the call's length, or the batch total
//! winner = "avx2"
//! runner_up = "libc"
//! margin = 1.507                # winner / runner-up
//! choice = "avx2"               # what auto uses (see below)
//! gbps = "per-page=38.2 libc=47.6 avx2=71.7"
//! ```
//!
//! `choice` is the winner unless the tuner kept the rules' or the previous
//! size's choice (within a few percent of the winner, fewer bands), a
//! re-check found another candidate better over both passes, or the
//! choice was slower than `per-page` over both (then `per-page`: a profile
//! never makes a size slower than the kernel's own loop).
//!
//! The profile is split by job: `model.rs` is what a profile holds,
//! `lookup.rs` how `auto` finds the cell for a request, `format.rs` the
//! file's text (written and read into tables), and `validation.rs` what
//! makes those tables a profile `auto` may follow. Reading and validation
//! are apart so that every check of a value, and every message about one,
//! is in one place whatever the file looked like.

mod cover;
mod format;
mod lookup;
mod model;
#[cfg(test)]
pub mod tests;
mod validation;

pub use model::{Cell, Identity, Profile, Shape, FORMAT, MAX_CELLS};
