//! Cache, CPU and NUMA layout: the model of the machine that placement,
//! the rules and migration ask questions of.
//!
//! The model is separate from how it is read (`sysfs.rs`, through a root
//! directory so tests can feed fixtures copied from real machines) so that
//! a layout can be built, compared and queried without touching the
//! filesystem; the kernel's CPU-list format (`cpu_list.rs`) is separate
//! again because users type it too (`--cpus`, `taskset -c`).

mod cpu_list;
mod sysfs;

pub use cpu_list::{format_cpu_list, parse_cpu_list};
pub use sysfs::{cpu_layout, read_caches};

/// What a cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheKind {
    /// Data only (sysfs `type` "Data", e.g. L1d).
    Data,
    /// Instructions only (sysfs `type` "Instruction", L1i): never the LLC.
    Instruction,
    /// Data and instructions (sysfs `type` "Unified", L2 and L3).
    Unified,
}

/// One cache as seen from one CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cache {
    /// 1 for L1, 2 for L2, ...
    pub level: u8,
    /// What the cache holds.
    pub kind: CacheKind,
    /// Capacity of this instance in bytes.
    pub size: usize,
    /// Coherency line size in bytes (64 where sysfs does not say).
    pub line: usize,
    /// CPUs that share this cache instance.
    pub shared_cpus: Vec<usize>,
}

/// The layout of the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Online CPU ids, ascending (sysfs `cpu/online`; `[0]` if unreadable).
    pub online_cpus: Vec<usize>,
    /// Caches of the first online CPU, lowest level first.
    pub caches: Vec<Cache>,
    /// Sets of CPUs that share one last-level cache, ordered by first CPU.
    pub llc_domains: Vec<Vec<usize>>,
    /// Sets of online CPUs that are SMT siblings of one core, ordered by
    /// first CPU (one CPU each where sysfs says nothing).
    pub cores: Vec<Vec<usize>>,
    /// NUMA nodes by id, as [`Nodes::read`] gives them (one node of every
    /// online CPU where the kernel has no NUMA). Their memory figures are
    /// those of when the layout was read: for current free memory read
    /// [`Nodes::detect`] again.
    pub numa_nodes: Vec<Node>,
    /// Base page size in bytes.
    pub page_size: usize,
    /// Huge page sizes the kernel offers (hugetlbfs), ascending.
    pub huge_page_sizes: Vec<usize>,
    /// Transparent huge page mode (`always`, `madvise`, `never`), if known.
    pub thp_mode: Option<String>,
    /// True when sysfs had no cache information and the LLC size is a guess.
    pub llc_assumed: bool,
}

/// LLC size assumed when sysfs says nothing (a common server L3 slice).
const ASSUMED_LLC: usize = 32 << 20;

impl Topology {
    /// The last-level (data or unified) cache of the first CPU.
    pub fn llc(&self) -> Option<&Cache> {
        self.caches
            .iter()
            .filter(|c| c.kind != CacheKind::Instruction)
            .max_by_key(|c| c.level)
    }

    /// Bytes of the first CPU's private data cache at `level` (data or
    /// unified), if sysfs lists one.
    pub fn data_cache_bytes(&self, level: u8) -> Option<usize> {
        self.caches
            .iter()
            .find(|c| c.level == level && c.kind != CacheKind::Instruction)
            .map(|c| c.size)
    }

    /// Bytes of last-level cache in one LLC domain.
    pub fn llc_bytes(&self) -> usize {
        self.llc().map_or(ASSUMED_LLC, |c| c.size)
    }

    /// The NUMA node of a CPU (node 0 if no node lists it).
    pub fn node_of(&self, cpu: usize) -> usize {
        self.numa_nodes
            .iter()
            .find(|n| n.cpus.contains(&cpu))
            .map_or(0, |n| n.id)
    }

    /// The LLC domain a CPU belongs to, as an index into `llc_domains`.
    pub fn llc_domain_of(&self, cpu: usize) -> Option<usize> {
        self.llc_domains.iter().position(|d| d.contains(&cpu))
    }
}

/// One NUMA node as sysfs describes it: the crate's only node model
/// ([`Topology::numa_nodes`](Topology::numa_nodes) holds
/// these too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The node number (`nodeN` in sysfs).
    pub id: usize,
    /// Online CPUs of the node (empty for memory-only nodes: CXL, HBM).
    pub cpus: Vec<usize>,
    /// SLIT distance to node `i` at index `i` of [`Nodes::ids`] order
    /// (10 = local).
    pub distances: Vec<u32>,
    /// Bytes of memory (MemTotal; 0 where sysfs does not say).
    pub mem_total: u64,
    /// Bytes free (MemFree) when the node was read.
    pub mem_free: u64,
}

/// The machine's NUMA nodes, ordered by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nodes {
    /// Every node, ordered by id.
    pub nodes: Vec<Node>,
    /// Nodes with memory (`has_memory`): the only valid migration targets.
    pub with_memory: Vec<usize>,
}

impl Nodes {
    /// The node ids, ascending.
    pub fn ids(&self) -> Vec<usize> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// Node `id`, if there is one.
    pub fn get(&self, id: usize) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// SLIT distance from `a` to `b`, if both exist.
    pub fn distance(&self, a: usize, b: usize) -> Option<u32> {
        let col = self.nodes.iter().position(|n| n.id == b)?;
        self.get(a)?.distances.get(col).copied()
    }
}
