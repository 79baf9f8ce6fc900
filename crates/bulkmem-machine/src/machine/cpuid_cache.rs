//! The cache facts `auto` needs (L1d, L2, LLC bytes, CPUs sharing the LLC,
//! online CPUs), from CPUID rather than sysfs, so that a process pays a few
//! CPUID instructions and one small file read for them, not a walk of
//! every CPU's cache directories: under the preload every exec pays this.
//!
//! Linux fills `/sys/devices/system/cpu/cpuN/cache` from the same leaves
//! (4 on Intel, 0x8000001D on AMD with TOPOEXT), with the same size formula,
//! so the sizes agree with sysfs by construction. The sharing count does
//! not come out exactly: EAX\[25:14\] is the *APIC-id space* sharing the
//! cache (a power of two on most parts, 128 on a 56-core Xeon whose L3 is
//! shared by 112 threads), so it is clamped to the package's logical CPUs
//! (leaf 0xB's core level, or 0x80000008 on AMD) and to the online CPUs. The test
//! `tests/cache_facts.rs` checks the result against sysfs on the machine
//! it runs on and fails where the difference changes a rule's choice.
//!
//! Sysfs (the first online CPU's cache directory only) is read where CPUID
//! says nothing (no leaf 4, AMD without TOPOEXT, a hypervisor hiding the
//! leaves) and on hybrid Intel parts, whose P- and E-cores report different
//! caches: CPUID describes the core the caller happens to run on, sysfs the
//! first CPU, and the profile identity must not depend on scheduling.

use std::path::Path;

use super::topology::{self, CacheKind};

/// LLC size assumed when neither CPUID nor sysfs says (as [`topology`]).
const ASSUMED_LLC: usize = 32 << 20;

/// Where [`CacheFacts`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheSource {
    /// CPUID leaf 4 (Intel) or 0x8000001D (AMD).
    Cpuid,
    /// The first online CPU's sysfs cache directory.
    Sysfs,
}

/// The cache facts the built-in rules and the profile identity use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheFacts {
    /// Bytes of L1 data cache (data or unified level 1), if known.
    pub l1d: Option<usize>,
    /// Bytes of L2, if known.
    pub l2: Option<usize>,
    /// Bytes of one LLC instance (32 MiB assumed when unknown).
    pub llc: usize,
    /// Online CPUs sharing one LLC instance, at least 1.
    pub llc_cpus: usize,
    /// Online CPUs (sysfs `cpu/online`), at least 1.
    pub cpus: usize,
    /// True when no source gave an LLC and `llc` is the assumed size.
    pub llc_assumed: bool,
    /// Where the sizes came from.
    pub source: CacheSource,
}

/// One cache level as a CPUID cache leaf describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// 1 for L1, ...
    pub level: u8,
    /// What it holds.
    pub kind: CacheKind,
    /// Bytes: ways x partitions x line x sets.
    pub size: usize,
    /// Logical CPUs (APIC ids) sharing it, EAX\[25:14\] + 1.
    pub sharing: usize,
}

/// The facts from CPUID cache leaves, given the package's logical CPUs
/// (`None`: unknown) and the online CPUs; `None` where the leaves list no
/// data or unified cache.
pub fn from_leaves(leaves: &[Leaf], package: Option<usize>, online: usize) -> Option<CacheFacts> {
    let data = |level: u8| {
        leaves
            .iter()
            .find(|l| l.level == level && l.kind != CacheKind::Instruction)
    };
    let llc = leaves
        .iter()
        .filter(|l| l.kind != CacheKind::Instruction)
        .max_by_key(|l| l.level)?;
    let online = online.max(1);
    let llc_cpus = llc
        .sharing
        .min(package.unwrap_or(usize::MAX))
        .min(online)
        .max(1);
    Some(CacheFacts {
        l1d: data(1).map(|l| l.size),
        l2: data(2).map(|l| l.size),
        llc: llc.size,
        llc_cpus,
        cpus: online,
        llc_assumed: false,
        source: CacheSource::Cpuid,
    })
}

/// The running machine's facts from CPUID `leaves` (as [`intel_leaves`]
/// or [`amd_leaves`] give them) where there are any, else from the first
/// online CPU's sysfs cache directory.
pub fn detect(leaves: Option<Leaves>) -> CacheFacts {
    let root = Path::new("/");
    let online = online_cpus(root);
    leaves
        .and_then(|(leaves, package)| from_leaves(&leaves, package, online.len()))
        .unwrap_or_else(|| from_sysfs(root, &online))
}

/// Cache leaves and the package's logical CPUs (`None`: unknown).
pub type Leaves = (Vec<Leaf>, Option<usize>);

/// The online CPUs (sysfs `cpu/online`, `\[0\]` if unreadable): one small file.
fn online_cpus(root: &Path) -> Vec<usize> {
    std::fs::read_to_string(root.join("sys/devices/system/cpu/online"))
        .ok()
        .and_then(|s| topology::parse_cpu_list(s.trim()).ok())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec![0])
}

/// The fallback: the first online CPU's caches, and the online CPUs its LLC
/// lists (not every CPU's: that is [`topology::Topology::read`]'s walk).
pub fn from_sysfs(root: &Path, online: &[usize]) -> CacheFacts {
    let first = online.first().copied().unwrap_or(0);
    let caches =
        topology::read_caches(&root.join(format!("sys/devices/system/cpu/cpu{first}/cache")));
    let data = |level: u8| {
        caches
            .iter()
            .find(|c| c.level == level && c.kind != CacheKind::Instruction)
            .map(|c| c.size)
    };
    let llc = caches
        .iter()
        .filter(|c| c.kind != CacheKind::Instruction)
        .max_by_key(|c| c.level);
    let llc_cpus = llc.map_or(online.len(), |c| {
        c.shared_cpus.iter().filter(|c| online.contains(c)).count()
    });
    CacheFacts {
        l1d: data(1),
        l2: data(2),
        llc: llc.map_or(ASSUMED_LLC, |c| c.size),
        llc_cpus: llc_cpus.max(1),
        cpus: online.len().max(1),
        llc_assumed: llc.is_none(),
        source: CacheSource::Sysfs,
    }
}

/// Intel's leaf 4 and the package's logical CPUs, given the maximum
/// basic leaf and whether the part is hybrid (leaf 7 EDX\[15\]); `None` where
/// they do not describe the caches (see the module docs).
#[cfg(target_arch = "x86_64")]
pub fn intel_leaves(max: u32, hybrid: bool) -> Option<Leaves> {
    if max < 4 || hybrid {
        return None;
    }
    let leaves = read_leaves(4);
    // The extended topology leaf's core level (type 2) counts the
    // package's logical CPUs; the leaf exists from max >= 0xb.
    let mut package = None;
    if max >= 0xb {
        for sub in 0..4 {
            let r = std::arch::x86_64::__cpuid_count(0xb, sub);
            match (r.ecx >> 8) & 0xff {
                0 => break,
                2 => {
                    package = Some((r.ebx & 0xffff) as usize).filter(|&n| n > 0);
                    break;
                }
                _ => {}
            }
        }
    }
    (!leaves.is_empty()).then_some((leaves, package))
}

/// AMD's leaf 0x8000001D (with TOPOEXT), given the maximum extended leaf
/// and the package's logical CPUs (0x80000008 ECX\[7:0\] + 1, which the
/// caller reads with the CLZERO bit).
#[cfg(target_arch = "x86_64")]
pub fn amd_leaves(max_ext: u32, package: Option<usize>) -> Option<Leaves> {
    use std::arch::x86_64::__cpuid;

    let topoext = max_ext >= 0x8000_0001 && __cpuid(0x8000_0001).ecx & (1 << 22) != 0;
    if !topoext || max_ext < 0x8000_001d {
        return None;
    }
    let leaves = read_leaves(0x8000_001d);
    (!leaves.is_empty()).then_some((leaves, package))
}

/// The subleaves of a deterministic cache leaf (4 or 0x8000001D), which
/// the caller checked exists, up to the first of type 0.
#[cfg(target_arch = "x86_64")]
fn read_leaves(leaf: u32) -> Vec<Leaf> {
    let mut leaves = Vec::new();
    for sub in 0..16 {
        // CPUID is unprivileged; the leaf exists (the caller checked).
        let r = std::arch::x86_64::__cpuid_count(leaf, sub);
        let kind = match r.eax & 0x1f {
            0 => break,
            1 => CacheKind::Data,
            2 => CacheKind::Instruction,
            3 => CacheKind::Unified,
            _ => continue,
        };
        let ways = (r.ebx >> 22) as usize + 1;
        let partitions = ((r.ebx >> 12) & 0x3ff) as usize + 1;
        let line = (r.ebx & 0xfff) as usize + 1;
        let sets = r.ecx as usize + 1;
        leaves.push(Leaf {
            level: ((r.eax >> 5) & 0x7) as u8,
            kind,
            size: ways * partitions * line * sets,
            sharing: ((r.eax >> 14) & 0xfff) as usize + 1,
        });
    }
    leaves
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn leaf(level: u8, kind: CacheKind, size: usize, sharing: usize) -> Leaf {
        Leaf {
            level,
            kind,
            size,
            sharing,
        }
    }

    /// Xeon 8380 (40 cores, 80 threads a socket, 2 sockets): leaf 4 says
    /// 128 APIC ids share the L3; Linux (and so sysfs) says 80 CPUs.
    #[test]
    fn sharing_is_clamped_to_the_package() {
        let leaves = [
            leaf(1, CacheKind::Data, 48 << 10, 2),
            leaf(1, CacheKind::Instruction, 32 << 10, 2),
            leaf(2, CacheKind::Unified, 5 * MIB / 4, 2),
            leaf(3, CacheKind::Unified, 60 * MIB, 128),
        ];
        let f = from_leaves(&leaves, Some(80), 160).unwrap();
        assert_eq!(f.l1d, Some(48 << 10));
        assert_eq!(f.l2, Some(5 * MIB / 4));
        assert_eq!(f.llc, 60 * MIB);
        assert_eq!(f.llc_cpus, 80);
        assert_eq!(f.cpus, 160);
        // Without the package count, the online CPUs bound it.
        assert_eq!(from_leaves(&leaves, None, 2).unwrap().llc_cpus, 2);
    }

    /// EPYC 9654: 0x8000001D says 16 threads share one CCX's 32 MiB L3.
    #[test]
    fn amd_ccx_sharing_stands() {
        let leaves = [
            leaf(1, CacheKind::Data, 32 << 10, 2),
            leaf(2, CacheKind::Unified, MIB, 2),
            leaf(3, CacheKind::Unified, 32 * MIB, 16),
        ];
        let f = from_leaves(&leaves, Some(192), 384).unwrap();
        assert_eq!((f.llc, f.llc_cpus), (32 * MIB, 16));
    }

    #[test]
    fn instruction_caches_are_never_the_llc() {
        let only_i = [leaf(1, CacheKind::Instruction, 32 << 10, 1)];
        assert_eq!(from_leaves(&only_i, None, 4), None);
        let f = from_leaves(
            &[
                leaf(1, CacheKind::Data, 32 << 10, 1),
                leaf(2, CacheKind::Instruction, 64 << 10, 1),
            ],
            None,
            4,
        )
        .unwrap();
        assert_eq!((f.llc, f.l2), (32 << 10, None));
    }

    #[test]
    fn missing_sysfs_gives_the_assumed_llc() {
        let f = from_sysfs(Path::new("/nonexistent/bulkmem"), &[0]);
        assert!(f.llc_assumed);
        assert_eq!((f.llc, f.llc_cpus, f.cpus), (ASSUMED_LLC, 1, 1));
    }
}
