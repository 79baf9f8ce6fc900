//! The routines that survive a bad page, in one place (the kernel keeps
//! `copy_mc_64.S` and its fixups side by side for the same reason): `mc`,
//! a checked twin in assembly of every kernel `auto` can choose, their
//! exception tables and the SIGBUS/SIGSEGV handler that resumes a
//! faulting routine at its fixup. They sit below the descriptor table,
//! which names each strategy's twin.
//!
//! The calls on them are beside the other calls, in the crates above: the public
//! checked calls and their batch outcomes (`crate::fault`, with `log.rs`,
//! what a checked batch's workers record), the typed handles
//! (`crate::handle::checked`) and the engine's checked batches
//! (`engine/checked.rs`).

pub mod mc;
