//! Topology and placement on real machine layouts, read through sysfs trees
//! unpacked into a temporary directory:
//!
//! * `fixtures/topology/*.sysfs`: snapshots taken with
//!   `scripts/capture-topology.sh` (this 2-vCPU VM);
//! * modelled servers (2-socket EPYC 9654 and 7713, 2-socket Xeon 8380),
//!   generated the way Linux numbers them: first hardware threads of socket
//!   0, then of socket 1, then the SMT siblings in the same order.

use std::path::{Path, PathBuf};

use bulkmem::placement::place;
use bulkmem::placement::Placement;
use bulkmem::topology::Topology;
use bulkmem_machine::machine::placement::{default_threads, default_threads_at};

/// A sysfs tree on disk, removed on drop.
struct Tree(PathBuf);

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Unpacks a snapshot ("path<TAB>content" lines; "path/<TAB>" makes an
/// empty directory; '#' starts a comment).
fn unpack(snapshot: &str) -> Tree {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    // tmpfs when there is one: thousands of tiny files are slow on disk.
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let root = base.join(format!(
        "bulkmem-topo-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    for line in snapshot
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (path, content) = line.split_once('\t').expect("path<TAB>content");
        let p = root.join(path);
        if path.ends_with('/') {
            std::fs::create_dir_all(&p).unwrap();
        } else {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, format!("{content}\n")).unwrap();
        }
    }
    Tree(root)
}

fn list(cpus: impl IntoIterator<Item = usize>) -> String {
    let v: Vec<String> = cpus.into_iter().map(|c| c.to_string()).collect();
    v.join(",")
}

/// A server as Linux presents it.
struct Model {
    sockets: usize,
    llcs_per_socket: usize,
    cores_per_llc: usize,
    smt: usize,
    nodes_per_socket: usize,
    l1d: &'static str,
    l2: &'static str,
    l3: &'static str,
}

impl Model {
    fn cores(&self) -> usize {
        self.sockets * self.llcs_per_socket * self.cores_per_llc
    }

    fn cpus(&self) -> usize {
        self.cores() * self.smt
    }

    /// Physical core of a CPU and its (socket, llc within socket).
    fn core_of(&self, cpu: usize) -> usize {
        cpu % self.cores()
    }

    fn socket_of(&self, cpu: usize) -> usize {
        self.core_of(cpu) / (self.llcs_per_socket * self.cores_per_llc)
    }

    fn llc_of(&self, cpu: usize) -> usize {
        self.core_of(cpu) / self.cores_per_llc
    }

    fn node_of(&self, cpu: usize) -> usize {
        let in_socket = self.core_of(cpu) % (self.llcs_per_socket * self.cores_per_llc);
        let per_node = self.llcs_per_socket * self.cores_per_llc / self.nodes_per_socket;
        self.socket_of(cpu) * self.nodes_per_socket + in_socket / per_node
    }

    fn siblings(&self, cpu: usize) -> Vec<usize> {
        (0..self.smt)
            .map(|t| self.core_of(cpu) + t * self.cores())
            .collect()
    }

    fn snapshot(&self) -> String {
        let n = self.cpus();
        let mut s = format!("sys/devices/system/cpu/online\t0-{}\n", n - 1);
        for cpu in 0..n {
            let sib = self.siblings(cpu);
            let llc: Vec<usize> = (0..n)
                .filter(|&c| self.llc_of(c) == self.llc_of(cpu))
                .collect();
            let caches: [(u8, &str, &str, Vec<usize>); 4] = [
                (1, "Data", self.l1d, sib.clone()),
                (1, "Instruction", "32K", sib.clone()),
                (2, "Unified", self.l2, sib.clone()),
                (3, "Unified", self.l3, llc),
            ];
            for (i, (level, kind, size, shared)) in caches.iter().enumerate() {
                let d = format!("sys/devices/system/cpu/cpu{cpu}/cache/index{i}");
                s += &format!("{d}/level\t{level}\n{d}/type\t{kind}\n{d}/size\t{size}\n");
                s += &format!("{d}/shared_cpu_list\t{}\n", list(shared.iter().copied()));
            }
            s += &format!(
                "sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list\t{}\n",
                list(sib)
            );
        }
        for node in 0..self.sockets * self.nodes_per_socket {
            let cpus = (0..n).filter(|&c| self.node_of(c) == node);
            s += &format!(
                "sys/devices/system/node/node{node}/cpulist\t{}\n",
                list(cpus)
            );
        }
        s += "sys/kernel/mm/hugepages/hugepages-2048kB/\t\nsys/kernel/mm/hugepages/hugepages-1048576kB/\t\n";
        s += "sys/kernel/mm/transparent_hugepage/enabled\talways [madvise] never\n";
        s
    }
}

/// AMD EPYC 9654 (Zen 4), 2 sockets x 12 CCDs x 8 cores, SMT2, NPS1.
static EPYC_9654: Model = Model {
    sockets: 2,
    llcs_per_socket: 12,
    cores_per_llc: 8,
    smt: 2,
    nodes_per_socket: 1,
    l1d: "32K",
    l2: "1024K",
    l3: "32768K",
};

/// AMD EPYC 7713 (Zen 3), 2 sockets x 8 CCDs x 8 cores, SMT2, NPS1.
static EPYC_7713: Model = Model {
    sockets: 2,
    llcs_per_socket: 8,
    cores_per_llc: 8,
    smt: 2,
    nodes_per_socket: 1,
    l1d: "32K",
    l2: "512K",
    l3: "32768K",
};

/// Intel Xeon Platinum 8380 (Ice Lake SP), 2 sockets x 40 cores, one L3
/// per socket, SMT2.
static XEON_8380: Model = Model {
    sockets: 2,
    llcs_per_socket: 1,
    cores_per_llc: 40,
    smt: 2,
    nodes_per_socket: 1,
    l1d: "48K",
    l2: "1280K",
    l3: "61440K",
};

fn read(m: &Model) -> (Tree, Topology) {
    let tree = unpack(&m.snapshot());
    let t = Topology::read(&tree.0);
    (tree, t)
}

fn partitions(parts: &[Vec<usize>], all: &[usize]) -> bool {
    let mut v: Vec<usize> = parts.concat();
    v.sort_unstable();
    v == all
}

#[test]
fn epyc_9654_layout_is_read_as_linux_shows_it() {
    let (_tree, t) = read(&EPYC_9654);
    assert_eq!(t.online_cpus.len(), 384);
    assert_eq!(t.llc_domains.len(), 24);
    assert!(t.llc_domains.iter().all(|d| d.len() == 16));
    assert_eq!(t.llc_bytes(), 32 << 20);
    assert_eq!(t.data_cache_bytes(1), Some(32 << 10));
    assert_eq!(t.data_cache_bytes(2), Some(1 << 20));
    assert!(partitions(&t.llc_domains, &t.online_cpus));
    assert!(partitions(&t.cores, &t.online_cpus));
    assert!(t.cores.iter().all(|c| c.len() == 2 && c[1] == c[0] + 192));
    assert_eq!(t.numa_nodes.len(), 2);
    assert_eq!(t.huge_page_sizes, vec![2 << 20, 1 << 30]);
    assert_eq!(t.thp_mode.as_deref(), Some("madvise"));
    assert!(!t.llc_assumed);
}

#[test]
fn spread_visits_every_ccd_alternating_sockets_before_any_smt_sibling() {
    let m = &EPYC_9654;
    let (_tree, t) = read(m);
    let cpus = place(&t, &[], 24, Placement::Spread);
    let mut ccds: Vec<usize> = cpus.iter().map(|&c| m.llc_of(c)).collect();
    ccds.sort_unstable();
    ccds.dedup();
    assert_eq!(ccds.len(), 24, "24 threads on 24 distinct CCDs: {cpus:?}");
    for (i, &c) in cpus.iter().enumerate() {
        assert_eq!(
            m.socket_of(c),
            i % 2,
            "thread {i} on CPU {c}: sockets alternate"
        );
    }
    let all_cores = place(&t, &[], 192, Placement::Spread);
    assert!(
        all_cores.iter().all(|&c| c < 192),
        "no SMT sibling while a core is idle"
    );
    let mut distinct = all_cores.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 192);
    let more = place(&t, &[], 193, Placement::Spread);
    assert!(more[192] >= 192, "the 193rd thread is the first sibling");
}

#[test]
fn fill_completes_one_ccd_cores_first_then_siblings() {
    let m = &EPYC_9654;
    let (_tree, t) = read(m);
    let cpus = place(&t, &[], 16, Placement::Fill);
    assert!(cpus.iter().all(|&c| m.llc_of(c) == 0), "{cpus:?}");
    assert!(
        cpus[..8].iter().all(|&c| c < 192) && cpus[8..].iter().all(|&c| c >= 192),
        "{cpus:?}"
    );
    let next = place(&t, &[], 17, Placement::Fill);
    assert_eq!(m.llc_of(next[16]), 1);
}

#[test]
fn allowed_cpus_keep_every_thread_on_the_node() {
    let m = &EPYC_9654;
    let (_tree, t) = read(m);
    let node1 = t
        .numa_nodes
        .iter()
        .find(|n| n.id == 1)
        .unwrap()
        .cpus
        .clone();
    for p in [Placement::Spread, Placement::Fill] {
        let cpus = place(&t, &node1, 40, p);
        assert!(cpus.iter().all(|&c| m.node_of(c) == 1), "{p}: {cpus:?}");
    }
    let spread = place(&t, &node1, 12, Placement::Spread);
    let mut ccds: Vec<usize> = spread.iter().map(|&c| m.llc_of(c)).collect();
    ccds.dedup();
    assert_eq!(ccds.len(), 12, "one thread per CCD of node 1");
}

#[test]
fn default_threads_per_layout() {
    assert_eq!(
        default_threads(&read(&EPYC_9654).1, &[]),
        48,
        "2 per CCD x 24"
    );
    assert_eq!(
        default_threads(&read(&EPYC_7713).1, &[]),
        32,
        "2 per CCD x 16"
    );
    assert_eq!(
        default_threads(&read(&XEON_8380).1, &[]),
        4,
        "2 per socket-wide L3"
    );
}

#[test]
fn xeon_8380_has_one_llc_per_socket() {
    let m = &XEON_8380;
    let (_tree, t) = read(m);
    assert_eq!(t.online_cpus.len(), 160);
    assert_eq!(t.llc_domains.len(), 2);
    assert_eq!(t.llc_bytes(), 60 << 20);
    assert_eq!(t.data_cache_bytes(1), Some(48 << 10));
    assert_eq!(t.data_cache_bytes(2), Some(1280 << 10));
    let two = place(&t, &[], 2, Placement::Spread);
    assert_eq!((m.socket_of(two[0]), m.socket_of(two[1])), (0, 1));
    let fill = place(&t, &[], 41, Placement::Fill);
    assert!(
        fill[..40].iter().all(|&c| m.socket_of(c) == 0 && c < 80),
        "{fill:?}"
    );
    assert!(
        fill[40] >= 80 && m.socket_of(fill[40]) == 0,
        "the 41st is socket 0's first sibling"
    );
}

#[test]
fn epyc_7713_matches_seed_002s_machine() {
    let (_tree, t) = read(&EPYC_7713);
    assert_eq!(t.online_cpus.len(), 256);
    assert_eq!(t.llc_domains.len(), 16);
    assert_eq!(t.data_cache_bytes(2), Some(512 << 10));
}

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/topology")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_2_vcpu_vm_snapshot() {
    let tree = unpack(&fixture("vm-2core-epyc.sysfs"));
    let t = Topology::read(&tree.0);
    assert_eq!(t.online_cpus, vec![0, 1]);
    assert_eq!(t.llc_domains, vec![vec![0, 1]]);
    assert_eq!(t.cores, vec![vec![0], vec![1]]);
    assert_eq!(t.llc_bytes(), 32 << 20);
    assert_eq!(t.numa_nodes.len(), 1);
    assert_eq!(default_threads(&t, &[]), 2);
    assert_eq!(place(&t, &[], 2, Placement::Spread), vec![0, 1]);
    assert_eq!(
        place(&t, &[], 3, Placement::Fill),
        vec![0, 1, 0],
        "more threads than CPUs wrap"
    );
}

#[test]
fn capture_script_round_trips_this_machine() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/capture-topology.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .expect("run capture script");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = unpack(&String::from_utf8(out.stdout).unwrap());
    let mut captured = Topology::read(&tree.0);
    let live = Topology::detect();
    captured.page_size = live.page_size;
    // Free memory moves between the capture and the live read.
    for (c, l) in captured.numa_nodes.iter_mut().zip(&live.numa_nodes) {
        c.mem_free = l.mem_free;
    }
    assert_eq!(captured, live);
}

/// The LLC domains as an exhaustive walk finds them: every online CPU's
/// every cache index read, the first CPU's highest data level matched.
/// `Topology::read` reads one index per domain instead; this is its oracle.
fn full_walk_llc_domains(root: &Path) -> Vec<Vec<usize>> {
    let sys = root.join("sys/devices/system/cpu");
    let read = |p: PathBuf| std::fs::read_to_string(p).map(|s| s.trim().to_string());
    let online = bulkmem_machine::machine::topology::parse_cpu_list(
        &read(sys.join("online")).unwrap_or_default(),
    )
    .unwrap_or_default();
    // (level, is-instruction, shared CPUs) of every index of a CPU.
    let caches = |cpu: usize| -> Vec<(u8, bool, Vec<usize>)> {
        let dir = sys.join(format!("cpu{cpu}/cache"));
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
            .filter_map(|e| {
                let p = e.path();
                let level = read(p.join("level")).ok()?.parse().ok()?;
                let instr = read(p.join("type")).ok()? == "Instruction";
                read(p.join("size")).ok()?;
                let shared = bulkmem_machine::machine::topology::parse_cpu_list(
                    &read(p.join("shared_cpu_list")).unwrap_or_default(),
                )
                .unwrap_or_default();
                Some((level, instr, shared))
            })
            .collect()
    };
    let Some(level) = online
        .first()
        .and_then(|&c| caches(c).iter().filter(|c| !c.1).map(|c| c.0).max())
    else {
        return vec![online];
    };
    let mut domains: Vec<Vec<usize>> = Vec::new();
    for &cpu in &online {
        let shared = caches(cpu)
            .into_iter()
            .find(|c| c.0 == level && !c.1)
            .map(|c| c.2)
            .unwrap_or_default();
        let mut d: Vec<usize> = shared.into_iter().filter(|c| online.contains(c)).collect();
        if d.is_empty() {
            d = vec![cpu];
        }
        d.sort_unstable();
        if !domains.contains(&d) {
            domains.push(d);
        }
    }
    domains.sort();
    domains
}

#[test]
fn llc_domains_match_the_full_walk_here_and_on_every_fixture() {
    let mut trees = vec![
        ("vm-2core-epyc", unpack(&fixture("vm-2core-epyc.sysfs"))),
        ("epyc-9654", unpack(&EPYC_9654.snapshot())),
        ("epyc-7713", unpack(&EPYC_7713.snapshot())),
        ("xeon-8380", unpack(&XEON_8380.snapshot())),
    ];
    // A part whose later CPUs number their caches differently (no L1i
    // index on cpu2-3: their index2 is the L3, not the L2): the one-index
    // read must notice and search the directory.
    let mut odd = String::from("sys/devices/system/cpu/online\t0-3\n");
    for cpu in 0..4 {
        let kinds: &[(u8, &str, &str, &str)] = if cpu < 2 {
            &[
                (1, "Data", "48K", "self"),
                (1, "Instruction", "32K", "self"),
                (2, "Unified", "2048K", "self"),
                (3, "Unified", "32768K", "0-1"),
            ]
        } else {
            &[
                (1, "Data", "32K", "self"),
                (2, "Unified", "4096K", "2-3"),
                (3, "Unified", "16384K", "2-3"),
            ]
        };
        for (i, (level, kind, size, shared)) in kinds.iter().enumerate() {
            let d = format!("sys/devices/system/cpu/cpu{cpu}/cache/index{i}");
            let shared = if *shared == "self" {
                cpu.to_string()
            } else {
                shared.to_string()
            };
            odd += &format!(
                "{d}/level\t{level}\n{d}/type\t{kind}\n{d}/size\t{size}\n{d}/shared_cpu_list\t{shared}\n"
            );
        }
    }
    trees.push(("odd-numbering", unpack(&odd)));
    for (name, tree) in &trees {
        let t = Topology::read(&tree.0);
        assert_eq!(t.llc_domains, full_walk_llc_domains(&tree.0), "{name}");
    }
    for (name, tree) in &trees {
        same_count_from_few_files(name, &tree.0);
    }
    same_count_from_few_files("this machine", Path::new("/"));
    let odd = Topology::read(&trees.last().unwrap().1 .0);
    assert_eq!(odd.llc_domains, vec![vec![0, 1], vec![2, 3]]);
    assert_eq!(
        Topology::detect().llc_domains,
        full_walk_llc_domains(Path::new("/")),
        "this machine"
    );
}

/// The thread count read from a few files ([`default_threads_at`]) is the
/// one the whole layout gives, for every CPU set a program may be held to:
/// all, one CPU, one core's siblings, one node, every other CPU, the
/// second half, a CPU that is not online.
fn same_count_from_few_files(name: &str, root: &Path) {
    let t = Topology::read(root);
    let online = t.online_cpus.clone();
    let half = online.len() / 2;
    let mut sets: Vec<Vec<usize>> = vec![
        Vec::new(),
        vec![online[0]],
        t.cores[0].clone(),
        online.iter().copied().step_by(2).collect(),
        online[half..].to_vec(),
        online[..half.max(1)].to_vec(),
        vec![online.last().unwrap() + 1],
    ];
    sets.extend(t.numa_nodes.iter().map(|n| n.cpus.clone()));
    for allowed in &sets {
        assert_eq!(
            default_threads_at(root, allowed),
            default_threads(&t, allowed),
            "{name}, CPUs {allowed:?}"
        );
    }
}
