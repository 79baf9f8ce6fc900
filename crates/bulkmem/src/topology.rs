//! Cache, CPU and NUMA layout from sysfs.
//!
//! Everything is read through a root directory (normally `/`) so tests can
//! feed fixtures copied from real machines; nothing here needs privileges.

use std::fs;
use std::path::Path;

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

/// The former name of [`Node`], kept so code
/// written against it still compiles: a node is read from sysfs in one
/// place, [`Nodes::read`].
pub type NumaNode = Node;

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
    /// The running machine.
    pub fn detect() -> Topology {
        let mut t = Topology::read(Path::new("/"));
        // SAFETY: sysconf has no memory-safety preconditions.
        let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if ps > 0 {
            t.page_size = ps as usize;
        }
        t
    }

    /// Reads the layout from `root/sys/...`; missing files give defaults
    /// (one CPU, one node, an assumed LLC) rather than errors.
    pub fn read(root: &Path) -> Topology {
        let sys = root.join("sys/devices/system");
        let online_cpus = read_list(&sys.join("cpu/online")).unwrap_or_else(|| vec![0]);

        let first = online_cpus
            .first()
            .map(|&cpu| read_caches_named(&sys.join(format!("cpu/cpu{cpu}/cache"))))
            .unwrap_or_default();
        let llc_index = first
            .iter()
            .filter(|(_, c)| c.kind != CacheKind::Instruction)
            .max_by_key(|(_, c)| c.level)
            .map(|(name, c)| (name.clone(), c.level, c.kind, c.shared_cpus.clone()));
        let caches: Vec<Cache> = first.into_iter().map(|(_, c)| c).collect();
        let llc_level = llc_index.as_ref().map(|(_, level, _, _)| *level);

        // One read per LLC instance, not per CPU and cache level: a CPU a
        // domain already holds is skipped, and of a new domain's first CPU
        // only the first CPU's LLC index is read (its level and type checked,
        // the whole directory read only where they differ).
        let mut llc_domains: Vec<Vec<usize>> = Vec::new();
        if let Some((name, level, kind, first_shared)) = &llc_index {
            for (i, &cpu) in online_cpus.iter().enumerate() {
                if llc_domains.iter().any(|d| d.contains(&cpu)) {
                    continue;
                }
                let shared = if i == 0 {
                    Some(first_shared.clone())
                } else {
                    llc_shared(
                        &sys.join(format!("cpu/cpu{cpu}/cache")),
                        name,
                        *level,
                        *kind,
                    )
                };
                let domain: Vec<usize> = shared
                    .unwrap_or_else(|| vec![cpu])
                    .into_iter()
                    .filter(|c| online_cpus.contains(c))
                    .collect();
                llc_domains.push(if domain.is_empty() { vec![cpu] } else { domain });
            }
        } else {
            llc_domains.push(online_cpus.clone());
        }
        llc_domains.sort();

        let mut cores: Vec<Vec<usize>> = Vec::new();
        for &cpu in &online_cpus {
            if cores.iter().any(|c| c.contains(&cpu)) {
                continue;
            }
            let siblings =
                read_list(&sys.join(format!("cpu/cpu{cpu}/topology/thread_siblings_list")))
                    .unwrap_or_default();
            let mut core: Vec<usize> = siblings
                .into_iter()
                .filter(|c| online_cpus.contains(c))
                .collect();
            if !core.contains(&cpu) {
                core = vec![cpu];
            }
            cores.push(core);
        }
        cores.sort();

        // One sysfs node parser for placement and migration, so they cannot
        // disagree on the nodes; its no-NUMA fallback (one node of every
        // online CPU, from the same `cpu/online`) is this layout's.
        let numa_nodes = Nodes::read(root).nodes;

        let mut huge_page_sizes = Vec::new();
        if let Ok(dir) = fs::read_dir(root.join("sys/kernel/mm/hugepages")) {
            for entry in dir.flatten() {
                if let Some(kb) = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.strip_prefix("hugepages-"))
                    .and_then(|n| n.strip_suffix("kB"))
                    .and_then(|n| n.parse::<usize>().ok())
                {
                    huge_page_sizes.push(kb << 10);
                }
            }
        }
        huge_page_sizes.sort_unstable();

        let thp_mode = fs::read_to_string(root.join("sys/kernel/mm/transparent_hugepage/enabled"))
            .ok()
            .and_then(|s| {
                let start = s.find('[')?;
                let end = s[start..].find(']')? + start;
                Some(s[start + 1..end].to_string())
            });

        Topology {
            online_cpus,
            llc_assumed: llc_level.is_none(),
            caches,
            llc_domains,
            cores,
            numa_nodes,
            page_size: 4096,
            huge_page_sizes,
            thp_mode,
        }
    }

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

/// The caches in a CPU's sysfs `cache` directory, lowest level first.
pub(crate) fn read_caches(dir: &Path) -> Vec<Cache> {
    read_caches_named(dir).into_iter().map(|(_, c)| c).collect()
}

/// [`read_caches`] with each cache's `indexN` directory name.
fn read_caches_named(dir: &Path) -> Vec<(String, Cache)> {
    let mut caches = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return caches;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("index"))
        .collect();
    names.sort();
    for name in names {
        if let Some(c) = read_cache(&dir.join(&name)) {
            caches.push((name, c));
        }
    }
    caches.sort_by_key(|(_, c)| (c.level, c.kind != CacheKind::Data));
    caches
}

/// One `indexN` directory, or `None` where it lacks a level, type or size.
fn read_cache(p: &Path) -> Option<Cache> {
    let level = read_trimmed(&p.join("level")).and_then(|s| s.parse::<u8>().ok())?;
    let kind = parse_kind(read_trimmed(&p.join("type")).as_deref())?;
    let size = read_trimmed(&p.join("size")).and_then(|s| parse_sysfs_size(&s))?;
    let line = read_trimmed(&p.join("coherency_line_size"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    let shared_cpus = read_list(&p.join("shared_cpu_list")).unwrap_or_default();
    Some(Cache {
        level,
        kind,
        size,
        line,
        shared_cpus,
    })
}

fn parse_kind(s: Option<&str>) -> Option<CacheKind> {
    match s {
        Some("Data") => Some(CacheKind::Data),
        Some("Instruction") => Some(CacheKind::Instruction),
        Some("Unified") => Some(CacheKind::Unified),
        _ => None,
    }
}

/// The CPUs sharing a CPU's LLC: its `name` index when that is the same
/// level and type as the first CPU's LLC (three small reads), else the
/// whole directory searched for that level.
fn llc_shared(dir: &Path, name: &str, level: u8, kind: CacheKind) -> Option<Vec<usize>> {
    let p = dir.join(name);
    let same = read_trimmed(&p.join("level")).and_then(|s| s.parse::<u8>().ok()) == Some(level)
        && parse_kind(read_trimmed(&p.join("type")).as_deref()) == Some(kind);
    if same {
        return read_list(&p.join("shared_cpu_list"));
    }
    read_caches(dir)
        .into_iter()
        .find(|c| c.level == level && c.kind != CacheKind::Instruction)
        .map(|c| c.shared_cpus)
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_list(path: &Path) -> Option<Vec<usize>> {
    parse_cpu_list(&read_trimmed(path)?).ok()
}

/// Parses a kernel CPU (or node) list such as `0-3,8,10-11`, the form
/// sysfs, `taskset -c` and `numactl` use: numbers in the order given,
/// each once (a repeat keeps its first place, so a caller's order, e.g.
/// which CPU a first worker gets, survives). The error names the part
/// that is wrong.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |t: &str| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| format!("'{}' in '{s}' is not a number", t.trim()))
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo > hi {
            return Err(format!("'{part}' in '{s}': the range runs backwards"));
        }
        if hi - lo >= 1 << 20 {
            return Err(format!("'{part}' in '{s}': the range is implausibly long"));
        }
        for c in lo..=hi {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// A CPU list in the kernel's compressed form (`0-3,8,10-11`): the
/// inverse of [`parse_cpu_list`] for ascending lists.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Parses sysfs cache sizes such as `32768K`, `1M`, `512`.
fn parse_sysfs_size(s: &str) -> Option<usize> {
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mult)
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
            .and_then(|s| parse_cpu_list(s.trim()).ok())
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
                .and_then(|s| parse_cpu_list(s.trim()).ok())
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
}

/// (MemTotal, MemFree) in bytes from a node's meminfo
/// (`Node 0 MemTotal:  7694548 kB`).
pub(crate) fn parse_meminfo(s: &str) -> (u64, u64) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_compress_ranges() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[]), "");
        assert_eq!(format_cpu_list(&[5]), "5");
        let l = [0, 2, 3, 4, 9];
        assert_eq!(parse_cpu_list(&format_cpu_list(&l)), Ok(l.to_vec()));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Ok(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("5"), Ok(vec![5]));
        assert_eq!(parse_cpu_list(""), Ok(vec![]));
        // The caller's order stands; repeats keep their first place.
        assert_eq!(parse_cpu_list("3,1,3,0-1"), Ok(vec![3, 1, 0]));
        assert!(parse_cpu_list("3-1").unwrap_err().contains("backwards"));
        assert!(parse_cpu_list("0,a").unwrap_err().contains("'a'"));
        assert!(parse_cpu_list("0-99999999999")
            .unwrap_err()
            .contains("implausibly"));
    }

    #[test]
    fn sysfs_sizes() {
        assert_eq!(parse_sysfs_size("32768K"), Some(32 << 20));
        assert_eq!(parse_sysfs_size("1M"), Some(1 << 20));
        assert_eq!(parse_sysfs_size("512"), Some(512));
        assert_eq!(parse_sysfs_size("x"), None);
    }

    #[test]
    fn missing_root_gives_defaults() {
        let t = Topology::read(Path::new("/nonexistent/bulkmem"));
        assert_eq!(t.online_cpus, vec![0]);
        assert!(t.llc_assumed);
        assert_eq!(t.llc_bytes(), ASSUMED_LLC);
        assert_eq!(t.llc_domains, vec![vec![0]]);
        assert_eq!(t.numa_nodes.len(), 1);
    }

    #[test]
    fn this_machine_is_self_consistent() {
        let t = Topology::detect();
        assert!(t.page_size.is_power_of_two());
        let mut all: Vec<usize> = t.llc_domains.concat();
        all.sort_unstable();
        assert_eq!(all, t.online_cpus, "LLC domains partition the online CPUs");
        let mut all: Vec<usize> = t.cores.concat();
        all.sort_unstable();
        assert_eq!(all, t.online_cpus, "cores partition the online CPUs");
    }
}
