//! NUMA page migration from user space (the kernel's folio-copy and migration patches): where pages
//! are, and two ways to move them to another node.
//!
//! * [`migrate`]: `move_pages(2)`, in batches, with per-page status
//!   (moved, already there, not present, failed with errno), retries for
//!   transient `EBUSY`/`EAGAIN`, and `MPOL_MF_MOVE_ALL` where permitted. Works
//!   on any process's pages and on any memory the kernel can migrate.
//! * [`migrate_by_copy`]: for anonymous private memory the caller owns and
//!   quiesces: copy into a fresh region bound to the target node with the
//!   engine (threads on the target node's CPUs, non-temporal stores), then
//!   `mremap` it over the old range: the addresses stay, the pages change.
//!   Seed 002's multi-threaded batch copy, without the kernel's per-page
//!   unmap/copy/remap.
//!
//! [`Nodes`] reads the machine's nodes, distances, CPUs and free memory
//! from sysfs (any root, for tests); [`node_of_pages`] asks the kernel
//! where each page of a range is.

mod copy_remap;
mod maps;
mod move_pages;
mod sys;
mod vm_flags;

use crate::error::Error;
use crate::machine::topology::{Node, Nodes};
pub use copy_remap::{migrate_by_copy, CopyOptions, CopyReport};
pub use move_pages::{migrate, node_of_pages, MigrateOptions, MigrateReport, PageStatus};

/// Node `id` of `nodes` as a migration target, or an error naming the
/// nodes that are. Here rather than a method of `Nodes`: it speaks this
/// crate's `Error`, which bulkmem-machine, where `Nodes` lives, does not
/// know.
pub(crate) fn target(nodes: &Nodes, id: usize) -> Result<&Node, Error> {
    match nodes.get(id) {
        Some(n) if nodes.with_memory.contains(&id) => Ok(n),
        _ => Err(Error::NoSuchNode {
            node: id,
            nodes: nodes.with_memory.clone(),
        }),
    }
}
