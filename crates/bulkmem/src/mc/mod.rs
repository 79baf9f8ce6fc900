//! The routines that may take a SIGBUS and survive it, the user-space
//! `copy_mc_64.S`: assembly copy and clear routines (`copy_mc`,
//! `clear_mc`), their exception-table entries (`extable`) and the signal
//! handler that resumes a faulting routine at its fixup (`handler`).
//! `crate::fault` builds the public checked copies on them; the
//! descriptor table names them per strategy.

pub(crate) mod clear_mc;
pub(crate) mod copy_mc;
pub(crate) mod extable;
pub(crate) mod handler;

pub(crate) use clear_mc::McClear;
pub(crate) use copy_mc::McCopy;
