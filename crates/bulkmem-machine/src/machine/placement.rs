//! Where the engine's workers run. Seed 002 (tables 3a/3b) found that
//! spreading copy threads across last-level-cache domains (CCDs) scales
//! almost linearly while filling one CCD first saturates its link to memory
//! early; both policies are offered so the bench can show the difference.

use std::fmt;
use std::str::FromStr;

use super::topology::Topology;
use crate::strategy::ParseNameError;

/// How workers are assigned to CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Round-robin across LLC domains (alternating NUMA nodes), one core of
    /// each before a second of any; SMT siblings last.
    #[default]
    Spread,
    /// Fill one LLC domain (cores, then SMT siblings) before the next.
    Fill,
}

impl Placement {
    /// Every placement, the default first.
    pub const ALL: &'static [Placement] = &[Placement::Spread, Placement::Fill];

    /// The placement's name as the CLI and the JSON write it (what
    /// [`FromStr`] accepts): "spread" or "fill".
    pub fn name(self) -> &'static str {
        match self {
            Placement::Spread => "spread",
            Placement::Fill => "fill",
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Placement {
    type Err = ParseNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Placement::ALL
            .iter()
            .copied()
            .find(|p| p.name() == wanted)
            .ok_or_else(|| ParseNameError {
                what: "placement",
                given: s.to_string(),
                expected: Placement::ALL.iter().map(|p| p.name()).collect(),
            })
    }
}

/// The allowed CPUs of each LLC domain, each ordered one CPU per core first
/// (SMT siblings after), domains ordered by (NUMA node, first CPU).
fn domains(t: &Topology, allowed: &[usize]) -> Vec<(usize, Vec<usize>)> {
    let mut out = Vec::new();
    for d in &t.llc_domains {
        let cpus: Vec<usize> = d.iter().copied().filter(|c| allowed.contains(c)).collect();
        if cpus.is_empty() {
            continue;
        }
        // Rank of each CPU among its core's siblings: 0 for the first thread.
        let rank = |cpu: usize| {
            t.cores
                .iter()
                .find(|c| c.contains(&cpu))
                .and_then(|c| c.iter().position(|&x| x == cpu))
                .unwrap_or(0)
        };
        let mut ordered = cpus.clone();
        ordered.sort_by_key(|&c| (rank(c), c));
        out.push((t.node_of(cpus[0]), ordered));
    }
    out.sort_by_key(|(node, cpus)| (*node, cpus[0]));
    out
}

/// CPUs for `threads` workers among `allowed` (empty: every online CPU).
/// With more threads than CPUs the list wraps around.
pub fn place(t: &Topology, allowed: &[usize], threads: usize, policy: Placement) -> Vec<usize> {
    let allowed: &[usize] = if allowed.is_empty() {
        &t.online_cpus
    } else {
        allowed
    };
    let doms = domains(t, allowed);
    let order: Vec<usize> = match policy {
        Placement::Fill => doms.into_iter().flat_map(|(_, cpus)| cpus).collect(),
        Placement::Spread => {
            // Interleave nodes: node 0's first domain, node 1's first, node
            // 0's second... so early threads land on every socket.
            let mut nodes: Vec<usize> = doms.iter().map(|d| d.0).collect();
            nodes.dedup();
            let per_node: Vec<Vec<&Vec<usize>>> = nodes
                .iter()
                .map(|&n| doms.iter().filter(|d| d.0 == n).map(|d| &d.1).collect())
                .collect();
            let most = per_node.iter().map(Vec::len).max().unwrap_or(0);
            let mut ring: Vec<&Vec<usize>> = Vec::new();
            for i in 0..most {
                for node in &per_node {
                    if let Some(d) = node.get(i) {
                        ring.push(d);
                    }
                }
            }
            let deepest = ring.iter().map(|d| d.len()).max().unwrap_or(0);
            let mut v = Vec::new();
            for i in 0..deepest {
                for d in &ring {
                    if let Some(&c) = d.get(i) {
                        v.push(c);
                    }
                }
            }
            v
        }
    };
    if order.is_empty() {
        return Vec::new();
    }
    (0..threads).map(|i| order[i % order.len()]).collect()
}

/// The default thread count: one per physical core among `allowed`, at most
/// two per LLC domain (on the Zen parts of the kernel's multi-threaded migration patches, two threads already
/// saturate one CCD's link to memory), and at least one.
pub fn default_threads(t: &Topology, allowed: &[usize]) -> usize {
    let allowed: &[usize] = if allowed.is_empty() {
        &t.online_cpus
    } else {
        allowed
    };
    let cores = t
        .cores
        .iter()
        .filter(|c| c.iter().any(|x| allowed.contains(x)))
        .count();
    let doms = domains(t, allowed).len();
    capped(cores, doms)
}

/// Threads per LLC domain at most (see [`default_threads`]).
const PER_DOMAIN: usize = 2;

fn capped(cores: usize, domains: usize) -> usize {
    cores.min(PER_DOMAIN * domains).max(1)
}

/// [`default_threads`] for the CPUs this thread may use, what an engine
/// built with the defaults runs here, read from the few sysfs files the
/// count needs rather than the whole layout [`super::cpu::info`] reads
/// (every cache index, the nodes, the page sizes: about ten times the
/// files, 0.3-0.4 ms in a VM). For a program that sizes its own threads
/// the way bulkmem does, and for the preload, which counts its helpers at
/// the first call that may start them.
pub fn default_threads_here() -> usize {
    default_threads_at(
        std::path::Path::new("/"),
        &allowed_cpus().unwrap_or_default(),
    )
}

/// [`default_threads_here`] for the sysfs tree under `root` and the CPUs
/// `allowed` (every online CPU where it is empty): the same count as
/// [`default_threads`] over [`Topology::read`]`(root)`.
pub fn default_threads_at(root: &std::path::Path, allowed: &[usize]) -> usize {
    let (domains, cores) = super::topology::cpu_layout(root, allowed, PER_DOMAIN);
    capped(cores.len(), domains.len())
}

/// The CPU the calling thread runs on now (it may move the next moment,
/// unless pinned); 0 if the kernel will not say.
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu has no preconditions and touches no memory.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).unwrap_or(0)
}

/// Pins the calling thread to `cpu` (sched_setaffinity), so that what it
/// measures or copies runs where its placement says, and memory it touches
/// first is allocated on that CPU's node.
///
/// Errors: `InvalidInput` for a CPU number a `cpu_set_t` cannot hold;
/// otherwise the OS error (EINVAL for a CPU that is offline or outside the
/// process's cpuset).
pub fn pin_to(cpu: usize) -> std::io::Result<()> {
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    if cpu >= max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is out of range (a CPU set holds {max})"),
        ));
    }
    // SAFETY: cpu_set_t is plain data and all-zero is the empty set;
    // CPU_SET stays inside it (cpu < max, checked above) and
    // sched_setaffinity only reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The floor of [`max_threads`], whatever the CPU count.
pub const MAX_THREADS: usize = 4096;

/// The most worker threads (or offload channels) an engine may have: 64
/// per online CPU, and at least 4096. Far beyond any useful
/// count; it exists so that a garbage count (a negative number cast to
/// `size_t`, say) is an error instead of an allocation that aborts.
pub fn max_threads() -> usize {
    super::cpu::info()
        .topology
        .online_cpus
        .len()
        .saturating_mul(64)
        .max(MAX_THREADS)
}

/// The CPUs this thread may run on (`sched_getaffinity`: taskset, numactl,
/// container cpusets), ascending; `None` if the kernel will not say.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data (zeroed = empty); sched_getaffinity
    // writes at most its size into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some(
            (0..8 * std::mem::size_of::<libc::cpu_set_t>())
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::topology::Node;

    /// 2 nodes x 2 LLC domains x 2 cores x 2 SMT threads, Linux numbering
    /// (siblings are cpu and cpu + 8).
    fn small_2s() -> Topology {
        let mut t = Topology::read(std::path::Path::new("/nonexistent"));
        t.online_cpus = (0..16).collect();
        t.llc_domains = vec![
            vec![0, 1, 8, 9],
            vec![2, 3, 10, 11],
            vec![4, 5, 12, 13],
            vec![6, 7, 14, 15],
        ];
        t.cores = (0..8).map(|c| vec![c, c + 8]).collect();
        t.numa_nodes = vec![
            Node {
                id: 0,
                cpus: vec![0, 1, 2, 3, 8, 9, 10, 11],
                distances: vec![10, 32],
                mem_total: 0,
                mem_free: 0,
            },
            Node {
                id: 1,
                cpus: vec![4, 5, 6, 7, 12, 13, 14, 15],
                distances: vec![32, 10],
                mem_total: 0,
                mem_free: 0,
            },
        ];
        t
    }

    #[test]
    fn spread_alternates_nodes_and_domains_before_doubling_up() {
        let t = small_2s();
        assert_eq!(place(&t, &[], 4, Placement::Spread), vec![0, 4, 2, 6]);
        assert_eq!(
            place(&t, &[], 8, Placement::Spread),
            vec![0, 4, 2, 6, 1, 5, 3, 7]
        );
        // SMT siblings only after every core has one thread.
        assert_eq!(
            &place(&t, &[], 12, Placement::Spread)[8..],
            &[8, 12, 10, 14]
        );
    }

    #[test]
    fn fill_completes_a_domain_first() {
        let t = small_2s();
        assert_eq!(place(&t, &[], 4, Placement::Fill), vec![0, 1, 8, 9]);
        assert_eq!(place(&t, &[], 6, Placement::Fill), vec![0, 1, 8, 9, 2, 3]);
    }

    #[test]
    fn allowed_cpus_restrict_and_lists_wrap() {
        let t = small_2s();
        let node1 = &t.numa_nodes[1].cpus.clone();
        assert_eq!(place(&t, node1, 3, Placement::Spread), vec![4, 6, 5]);
        assert_eq!(place(&t, &[3], 3, Placement::Spread), vec![3, 3, 3]);
        assert_eq!(place(&t, &[99], 2, Placement::Fill), Vec::<usize>::new());
    }

    #[test]
    fn default_threads_is_cores_capped_at_two_per_domain() {
        let t = small_2s();
        assert_eq!(default_threads(&t, &[]), 8);
        assert_eq!(default_threads(&t, &[0, 8]), 1, "one core, two SMT threads");
        let mut one = t.clone();
        one.llc_domains = vec![(0..16).collect()];
        assert_eq!(default_threads(&one, &[]), 2);
    }

    #[test]
    fn placement_names_parse() {
        assert_eq!("Spread".parse::<Placement>(), Ok(Placement::Spread));
        assert!("scatter"
            .parse::<Placement>()
            .unwrap_err()
            .to_string()
            .contains("spread, fill"));
    }

    #[test]
    fn pin_to_pins_a_thread_and_refuses_impossible_cpus() {
        let e = pin_to(1 << 20).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        // In a thread of its own, so the test thread keeps its affinity.
        std::thread::spawn(|| {
            // SAFETY: sched_getcpu has no preconditions.
            let cpu = unsafe { libc::sched_getcpu() };
            assert!(cpu >= 0);
            pin_to(cpu as usize).unwrap();
            // SAFETY: as above.
            assert_eq!(unsafe { libc::sched_getcpu() }, cpu);
        })
        .join()
        .unwrap();
    }
}
