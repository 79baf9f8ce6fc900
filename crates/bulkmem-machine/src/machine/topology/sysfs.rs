//! Reading the layout from sysfs.
//!
//! Everything is read through a root directory (normally `/`) so tests can
//! feed fixtures copied from real machines; nothing here needs privileges.
//! Missing files give defaults (one CPU, one node, an assumed LLC) rather
//! than errors: a container or an odd kernel must still get a layout.

use std::fs;
use std::path::Path;

use super::{parse_cpu_list, Cache, CacheKind, Node, Nodes, Topology};

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

        let (llc_domains, cores) = domains_and_cores(&sys, &online_cpus, llc_index, None);

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
}

/// What the LLC domains and cores are read from: the first CPU's LLC
/// (its `indexN` name, level, type and sharing list).
type LlcIndex = (String, u8, CacheKind, Vec<usize>);

/// The LLC domains and cores of `cpus` (each domain and core only its
/// online CPUs, both sorted). One read per LLC instance and one per core,
/// not per CPU and cache level: a CPU a domain (core) already holds is
/// skipped, and of a new domain's first CPU only the first CPU's LLC index
/// is read (its level and type checked, the whole directory read only
/// where they differ). With `enough`, cores stop being read once there are
/// that many times as many as domains: the thread count's cap
/// ([`cpu_layout`]).
fn domains_and_cores(
    sys: &Path,
    cpus: &[usize],
    llc: Option<LlcIndex>,
    enough: Option<usize>,
) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let mut llc_domains: Vec<Vec<usize>> = Vec::new();
    if let Some((name, level, kind, first_shared)) = &llc {
        for (i, &cpu) in cpus.iter().enumerate() {
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
                .filter(|c| cpus.contains(c))
                .collect();
            llc_domains.push(if domain.is_empty() { vec![cpu] } else { domain });
        }
    } else {
        llc_domains.push(cpus.to_vec());
    }
    llc_domains.sort();

    let mut cores: Vec<Vec<usize>> = Vec::new();
    for &cpu in cpus {
        if enough.is_some_and(|k| cores.len() >= k * llc_domains.len()) {
            break;
        }
        if cores.iter().any(|c| c.contains(&cpu)) {
            continue;
        }
        let siblings = read_list(&sys.join(format!("cpu/cpu{cpu}/topology/thread_siblings_list")))
            .unwrap_or_default();
        let mut core: Vec<usize> = siblings.into_iter().filter(|c| cpus.contains(c)).collect();
        if !core.contains(&cpu) {
            core = vec![cpu];
        }
        cores.push(core);
    }
    cores.sort();
    (llc_domains, cores)
}

/// The online CPUs among `allowed` (all of them where it is empty), their
/// LLC domains and cores, as [`Topology::read`] finds them, but from the
/// few files a thread count needs: the online list, the level (and for the
/// highest, the type) of the first CPU's caches, one sharing list per
/// domain, and siblings lists until there are `enough` cores per domain.
/// [`Topology::read`] reads every file of every cache index, the nodes and
/// the page sizes as well: ten times the reads, each a few microseconds.
pub fn cpu_layout(
    root: &Path,
    allowed: &[usize],
    enough: usize,
) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
    let sys = root.join("sys/devices/system");
    let online = read_list(&sys.join("cpu/online")).unwrap_or_else(|| vec![0]);
    let cpus: Vec<usize> = if allowed.is_empty() {
        online
    } else {
        online.into_iter().filter(|c| allowed.contains(c)).collect()
    };
    let Some(&first) = cpus.first() else {
        return (Vec::new(), Vec::new());
    };
    let llc = llc_index_of(&sys.join(format!("cpu/cpu{first}/cache")));
    domains_and_cores(&sys, &cpus, llc, Some(enough))
}

/// The LLC of the CPU whose `cache` directory is `dir`, as
/// [`Topology::read`] picks it from the whole directory (the highest level
/// that holds data; of two such, the unified one), reading each index's
/// level and only the candidates' types.
fn llc_index_of(dir: &Path) -> Option<LlcIndex> {
    let mut levels: Vec<(u8, String)> = fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("index"))
        .filter_map(|n| {
            let level = read_trimmed(&dir.join(&n).join("level"))?
                .parse::<u8>()
                .ok()?;
            Some((level, n))
        })
        .collect();
    levels.sort();
    let mut best: Option<(u8, bool, String, CacheKind)> = None;
    for (level, name) in levels.into_iter().rev() {
        if best.as_ref().is_some_and(|b| b.0 > level) {
            break;
        }
        let p = dir.join(&name);
        let Some(kind) = parse_kind(read_trimmed(&p.join("type")).as_deref()) else {
            continue;
        };
        // The same order as `read`'s: a unified cache after a data one.
        if kind == CacheKind::Instruction
            || best
                .as_ref()
                .is_some_and(|b| (b.1, &b.2) >= (kind != CacheKind::Data, &name))
        {
            continue;
        }
        // Only where `read` would keep it: it needs a size too.
        if read_trimmed(&p.join("size"))
            .and_then(|s| parse_sysfs_size(&s))
            .is_none()
        {
            continue;
        }
        best = Some((level, kind != CacheKind::Data, name, kind));
    }
    let (level, _, name, kind) = best?;
    let shared = read_list(&dir.join(&name).join("shared_cpu_list")).unwrap_or_default();
    Some((name, level, kind, shared))
}

/// The caches in a CPU's sysfs `cache` directory, lowest level first.
pub fn read_caches(dir: &Path) -> Vec<Cache> {
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

#[cfg(test)]
mod tests {
    use super::super::ASSUMED_LLC;
    use super::*;

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

    #[test]
    fn meminfo_fields_are_bytes() {
        let s = "Node 1 MemTotal:        1024 kB\nNode 1 MemFree:          512 kB\nNode 1 MemUsed: 512 kB\n";
        assert_eq!(parse_meminfo(s), (1 << 20, 1 << 19));
        assert_eq!(parse_meminfo(""), (0, 0));
    }
}
