//! NUMA page migration from user space (seeds 000 and 002): where pages
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

use std::fs;
use std::path::Path;

use crate::error::Error;
use crate::topology::parse_cpu_list;

pub use copy_remap::{migrate_by_copy, CopyOptions, CopyReport};
pub use move_pages::{
    migrate, node_of_pages, MigrateOptions, MigrateReport, PageStatus, DEFAULT_BATCH,
};

/// One NUMA node as sysfs describes it: the crate's only node model
/// ([`Topology::numa_nodes`](crate::topology::Topology::numa_nodes) holds
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
    /// The running machine's nodes.
    pub fn detect() -> Nodes {
        Nodes::read(Path::new("/"))
    }

    /// Reads `root/sys/devices/system/node`. A kernel without NUMA (no
    /// such directory) is one node holding every online CPU.
    pub fn read(root: &Path) -> Nodes {
        let dir = root.join("sys/devices/system/node");
        let mut nodes = Vec::new();
        if let Ok(entries) = fs::read_dir(&dir) {
            for e in entries.flatten() {
                let name = e.file_name();
                let Some(id) = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("node"))
                    .and_then(|n| n.parse::<usize>().ok())
                else {
                    continue;
                };
                let p = e.path();
                let read = |f: &str| fs::read_to_string(p.join(f)).unwrap_or_default();
                let (mem_total, mem_free) = parse_meminfo(&read("meminfo"));
                nodes.push(Node {
                    id,
                    cpus: parse_cpu_list(read("cpulist").trim()).unwrap_or_default(),
                    distances: read("distance")
                        .split_whitespace()
                        .filter_map(|d| d.parse().ok())
                        .collect(),
                    mem_total,
                    mem_free,
                });
            }
        }
        nodes.sort_by_key(|n| n.id);
        let with_memory = fs::read_to_string(dir.join("has_memory"))
            .ok()
            .and_then(|s| parse_cpu_list(s.trim()))
            .unwrap_or_else(|| {
                nodes
                    .iter()
                    .filter(|n| n.mem_total > 0)
                    .map(|n| n.id)
                    .collect()
            });
        if nodes.is_empty() {
            let cpus = fs::read_to_string(root.join("sys/devices/system/cpu/online"))
                .ok()
                .and_then(|s| parse_cpu_list(s.trim()))
                .unwrap_or_else(|| vec![0]);
            nodes.push(Node {
                id: 0,
                cpus,
                distances: vec![10],
                mem_total: 0,
                mem_free: 0,
            });
            return Nodes {
                nodes,
                with_memory: vec![0],
            };
        }
        Nodes { nodes, with_memory }
    }

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

    /// `id` as a migration target, or an error naming the nodes that are.
    pub fn target(&self, id: usize) -> Result<&Node, Error> {
        match self.get(id) {
            Some(n) if self.with_memory.contains(&id) => Ok(n),
            _ => Err(Error::NoSuchNode {
                node: id,
                nodes: self.with_memory.clone(),
            }),
        }
    }
}

/// (MemTotal, MemFree) in bytes from a node's meminfo
/// (`Node 0 MemTotal:  7694548 kB`).
fn parse_meminfo(s: &str) -> (u64, u64) {
    let field = |name: &str| {
        s.lines()
            .find_map(|l| {
                let (_, rest) = l.split_once(name)?;
                rest.trim_start_matches(':')
                    .split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .map_or(0, |kb| kb << 10)
    };
    (field(" MemTotal"), field(" MemFree"))
}

/// Parses a node list the way numactl does: `1`, `0,2`, `0-3`, `all`
/// (every node with memory).
pub fn parse_nodes(s: &str, nodes: &Nodes) -> Result<Vec<usize>, Error> {
    let list = if s.trim() == "all" {
        nodes.with_memory.clone()
    } else {
        parse_cpu_list(s).ok_or_else(|| {
            Error::Config(format!(
                "{s:?} is not a node list (examples: 1, 0,2, 0-3, all)"
            ))
        })?
    };
    for &n in &list {
        nodes.target(n)?;
    }
    if list.is_empty() {
        return Err(Error::Config(format!("{s:?} names no node")));
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_fields_are_bytes() {
        let s = "Node 1 MemTotal:        1024 kB\nNode 1 MemFree:          512 kB\nNode 1 MemUsed: 512 kB\n";
        assert_eq!(parse_meminfo(s), (1 << 20, 1 << 19));
        assert_eq!(parse_meminfo(""), (0, 0));
    }
}
