//! Copies and clears that survive a bad page, in one place (the kernel
//! keeps `copy_mc_64.S` and its fixups side by side for the same reason):
//!
//! - `mc`: the routines, a checked twin in assembly of every kernel `auto`
//!   can choose, their exception tables and the SIGBUS/SIGSEGV handler that
//!   resumes a faulting routine at its fixup;
//! - [`fault`]: the public calls on them (`copy_checked`, `clear_checked`
//!   and their forms), the [`Fault`](fault::Fault) a caller is told of and
//!   the per-extent [`Outcome`](fault::Outcome) of a batch;
//! - `fault_log`: what a checked batch's workers record, turned into
//!   outcomes once the batch is joined.
//!
//! Two parts stay with what they extend: the engine's checked batches
//! (`Engine::copy_batch_checked` and the rest, `engine/checked.rs`) use the
//! engine's private batch machinery, and the typed handles that call the
//! routines are `crate::handle::checked`. The descriptor table names each
//! strategy's twin.

pub mod fault;
pub(crate) mod fault_log;
pub(crate) mod mc;
