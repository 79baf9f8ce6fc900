//! bulkmem copies and clears large runs of memory at the speed of the
//! hardware, choosing the CPU primitive per machine, size and batch.
//!
//! ```
//! let src = vec![7u8; 1 << 20];
//! let mut dst = vec![0u8; 1 << 20];
//! bulkmem::copy(&mut dst, &src);             // auto: primitive chosen for this CPU
//! bulkmem::clear(&mut dst);                  // zero it again
//!
//! // A batch is chosen for as a whole: 128 separate 2 MiB copies are one
//! // 256 MiB stream, which a per-call memcpy cannot know.
//! let (a, b) = dst.split_at_mut(4096);
//! let mut batch = [(a, &src[..4096]), (b, &src[4096..])];
//! let report = bulkmem::copy_batch(&mut batch).unwrap();
//! assert!(report.strategy.supports(bulkmem::Op::Copy) && report.is_complete());
//!
//! // Or name the primitive; unavailable ones are refused, never executed.
//! use bulkmem::{Hint, Options, Strategy};
//! if Strategy::Avx2Nt.available() {
//!     bulkmem::copy_opts(&mut dst, &src, Options::strategy(Strategy::Avx2Nt)).unwrap();
//! }
//! bulkmem::copy_hint(&mut dst, &src, Hint::Stream); // write-once data
//! ```
//!
//! Template fills repeat a prepared element across a region, patching each
//! copy, with non-temporal stores for write-once data:
//!
//! ```
//! let mut pages = vec![0u8; 64 * 1024];
//! let template = [0xABu8; 64];
//! bulkmem::fill_patched(&mut pages, &template, |i, elem| {
//!     elem[..8].copy_from_slice(&(i as u64).to_le_bytes()); // per-element field
//! })
//! .unwrap();
//! assert_eq!(pages[64..72], 1u64.to_le_bytes());
//! ```
//!
//! Every strategy handles any length and alignment and touches nothing
//! outside the slices it is given. Non-temporal strategies end with a store
//! fence, so their data is ordered before anything the caller does next.

#![warn(missing_docs)]

// The unit tests share the integration tests' support code
// (`tests/common`), which names the crate `bulkmem`.
#[cfg(test)]
extern crate self as bulkmem;

pub mod auto;
mod calls;
mod control;
mod engine;
mod error;
mod extent;
#[cfg(target_arch = "x86_64")]
pub mod fault;
mod fill;
pub mod numa;
pub mod offload;
pub mod placement;
mod report;
pub mod topology;

// The floor below, bulkmem-machine, under the names the modules here use
// (`crate::kernels`, `crate::machine::cpu`): private to this crate, which
// re-exports only the users' items of it (below).
#[cfg(target_arch = "x86_64")]
use bulkmem_machine::checked;
use bulkmem_machine::{
    chunks, descriptor, gangs, kernels, latch, machine, plan, strategy, threads,
};
// The policy floor (bulkmem-policy): the kernel handles, named as before.
use bulkmem_policy::handle;

// The machine facts live together in `machine/`; these are their stable
// public paths (`bulkmem::cpu::info()`; `bulkmem::placement::pin_to` in
// `placement`, which like `topology` holds the users' items only).
// Code inside the crate names `machine::cpu` and the like, where they live.
pub use machine::cpu;

// The page moves are their own crate (bulkmem-pages), beside the engine:
// its modules and its error, under the paths users name.
#[cfg(target_arch = "x86_64")]
pub use bulkmem_pages::compact;
pub use bulkmem_pages::Error as PagesError;
pub use bulkmem_pages::{mapping, uffd};

pub use calls::{
    clear, clear_batch, clear_batch_opts, clear_extents, clear_hint, clear_opts, copy, copy_batch,
    copy_batch_opts, copy_extents, copy_hint, copy_opts,
};
pub use engine::{CancelToken, Control, Engine, EngineBuilder, Extent, Progress, Report, Ticket};
pub use error::{BatchError, CheckedStrategyError, CopyError, EngineError, Error, StrategyError};
pub use fill::{fill, fill_hint, fill_patched, fill_patched_hint, NtWriter};
#[cfg(target_arch = "x86_64")]
pub use handle::{CheckedClearKernel, CheckedCopyKernel};
pub use handle::{ClearKernel, CopyKernel, OpKernel};
pub use strategy::{FillMode, Hint, Op, Options, ParseNameError, Strategy};
