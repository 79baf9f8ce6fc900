//! Where the engine's workers run, and the calls a program that places its
//! own threads the way bulkmem does needs: how many ([`default_threads_here`],
//! at most [`max_threads`]), on which CPUs ([`place`] over a
//! [`Topology`](crate::topology::Topology) and [`allowed_cpus`]), and
//! pinning one there ([`pin_to`]). The sysfs readers and the counts' pure
//! forms belong to the workspace's crates (`bulkmem-machine`).

pub use crate::machine::placement::{
    allowed_cpus, default_threads_here, max_threads, pin_to, place, Placement,
};
