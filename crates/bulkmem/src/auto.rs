//! How `auto` picks a primitive for a copy or clear: from what was measured
//! on this machine when there is a profile, else from built-in rules, and
//! always under the user's environment overrides.
//!
//! In order, for each request (an operation, the batch total, how many
//! contiguous runs it arrives in, and the caller's [`Hint`](crate::Hint)):
//!
//! 1. **Overrides**: `BULKMEM_STRATEGY` forces a strategy;
//!    `BULKMEM_NT_THRESHOLD` sets the batch total from which hint `Auto`
//!    streams. Unknown names and values are reported once on stderr and in
//!    `bulkmem info`, then ignored.
//! 2. **A profile** written by `bulkmem tune` for this exact CPU (vendor,
//!    family/model/stepping, features, caches, CPUs, bulkmem version): the
//!    winner measured here for the request's shape (single call, batch of
//!    small or of large extents) and size. `BULKMEM_PROFILE=FILE` names
//!    another file, `BULKMEM_PROFILE=off` ignores profiles. A missing,
//!    corrupt, foreign or outdated profile is never fatal:
//!    [`profile_status`] says why the rules are used.
//! 3. **Built-in rules** ([`Policy::rules`]): a few measured rules keyed on
//!    CPU features and cache sizes.
//!
//! Everything is resolved once per process, lazily and thread-safely: a
//! single call then costs a short scan of precompiled length bands, a
//! plain one (hint `Auto`) one load from a static table, a batch one
//! [`Policy::decide`].
//!
//! One verb per question:
//!
//! - [`Policy::decide`]: which strategy, and why ([`Choice`]), for a
//!   [`Request`]: the steps above, a pure function of the policy's values
//!   ([`Policy::rules`] is the last step alone, for a machine that was
//!   never tuned).
//! - [`Policy::kernel`]: that decision as a kernel this CPU runs, typed by
//!   the operation ([`CopyKernel`](crate::CopyKernel) or [`ClearKernel`](crate::ClearKernel)).
//! - [`Policy::fill_mode`]: how a fill stores, under the same overrides,
//!   profile and rules as copies.
//! - [`profile_status`]: which profile is in use, or why none is (and
//!   where it was looked for).
//!
//! The profile's contents, the machine description the rules read and the
//! compiled bands are the `bulkmem-policy` crate's, which `bulkmem tune`
//! and `bulkmem info` use.

// The policy lives in bulkmem-policy; these are the users' items of it.
pub use bulkmem_policy::auto::{profile_status, Choice, Policy, ProfileStatus, Request};
// The calls ask the rest (`kernel`, `chosen`, `direct`, the checked
// twins) by these names.
pub(crate) use bulkmem_policy::auto::{chosen, direct, element_copy, fill, kernel, resolve};
