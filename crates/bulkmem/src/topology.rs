//! Cache, CPU and NUMA layout: the model of the machine that placement,
//! the rules and migration ask questions of ([`Topology::detect`] for this
//! machine's). How it is read from sysfs, and the kernel's CPU-list
//! format, belong to the workspace's crates (`bulkmem-machine`).

pub use crate::machine::topology::{Cache, CacheKind, Node, Nodes, Topology};
