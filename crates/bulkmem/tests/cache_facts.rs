//! The cheap cache facts (CPUID, `cpu::facts`) against the full sysfs walk
//! (`Topology::detect`) on the machine the tests run on: where they differ,
//! the built-in rules must still choose the same primitive for every
//! request, or the start-up shortcut changed what `auto` does.

use bulkmem::cpu::{CacheFacts, CacheSource};
use bulkmem::topology::Topology;
use bulkmem::{Hint, Op};
use bulkmem_policy::auto::{Machine, Policy, Request};

/// The facts as the full sysfs layout gives them: what the cheap path
/// stands in for.
fn from_topology(t: &Topology) -> CacheFacts {
    CacheFacts {
        l1d: t.data_cache_bytes(1),
        l2: t.data_cache_bytes(2),
        llc: t.llc_bytes(),
        llc_cpus: t.llc_domains.iter().map(Vec::len).max().unwrap_or(1).max(1),
        cpus: t.online_cpus.len().max(1),
        llc_assumed: t.llc_assumed,
        source: CacheSource::Sysfs,
    }
}

fn machine(c: &CacheFacts) -> Machine {
    let f = bulkmem::cpu::facts();
    // As `Machine::this` builds it, from `c` instead of the facts' caches.
    Machine {
        vendor: f.vendor,
        family: f.family,
        features: f.features,
        l1d_bytes: c.l1d.unwrap_or(32 << 10),
        l2_bytes: c.l2.unwrap_or(512 << 10),
        llc_bytes: c.llc,
        llc_cpus: c.llc_cpus,
        x86: cfg!(target_arch = "x86_64"),
    }
}

/// Every length at which either machine's rules may change their mind,
/// with its neighbours, plus the powers of two.
fn lengths(ms: &[&Machine]) -> Vec<usize> {
    let mut v: Vec<usize> = (0..40).map(|b| 1usize << b).collect();
    for m in ms {
        for op in [Op::Copy, Op::Clear] {
            for e in Policy::rules(m).edges(op) {
                v.extend([e.saturating_sub(1), e, e + 1]);
            }
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// The requests on which two machines' rules disagree.
fn disagreements(a: &Machine, b: &Machine) -> Vec<String> {
    let mut out = Vec::new();
    for len in lengths(&[a, b]) {
        for op in [Op::Copy, Op::Clear] {
            for &hint in Hint::ALL {
                for runs in [1, 8, 4096] {
                    let req = Request {
                        op,
                        total: len,
                        runs: runs.min(len.max(1)),
                        hint,
                    };
                    let (x, y) = (Policy::rules(a).decide(&req), Policy::rules(b).decide(&req));
                    if x.strategy != y.strategy {
                        out.push(format!(
                            "{req:?}: cpuid {} ({}), sysfs {} ({})",
                            x.strategy.name(),
                            x.reason,
                            y.strategy.name(),
                            y.reason
                        ));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn cpuid_facts_choose_as_the_sysfs_walk_does_here() {
    let cheap = bulkmem::cpu::facts().caches;
    let full = from_topology(&Topology::detect());
    if cheap.source == CacheSource::Cpuid && !full.llc_assumed {
        // Linux fills sysfs from the same leaves with the same formula.
        assert_eq!(
            (cheap.l1d, cheap.l2, cheap.llc),
            (full.l1d, full.l2, full.llc),
            "CPUID sizes differ from sysfs"
        );
    }
    assert_eq!(cheap.cpus, full.cpus, "online CPUs");
    let (a, b) = (machine(&cheap), machine(&full));
    let d = disagreements(&a, &b);
    assert!(
        d.is_empty(),
        "CPUID facts {cheap:?} and sysfs {full:?} choose differently:\n{}",
        d.join("\n")
    );
}

/// The comparison can fail: a machine whose LLC is shared by 16 times the
/// CPUs has a sixteenth of the per-thread share, and the stream threshold
/// moves with it (a factor of 2 may not: the threshold is capped, and a
/// VM claiming a 260 MiB L3 for 2 CPUs is at the cap either way).
#[test]
fn a_different_llc_share_is_caught() {
    let full = from_topology(&Topology::detect());
    let shared = CacheFacts {
        llc_cpus: full.llc_cpus * 16,
        ..full
    };
    assert_ne!(machine(&shared).stream_from(), machine(&full).stream_from());
    assert!(!disagreements(&machine(&shared), &machine(&full)).is_empty());
}

/// What the rules and the profile identity see is the cheap facts, the
/// same as `cpu::info()` reports after its sysfs walk.
#[test]
fn the_rules_see_the_cheap_facts() {
    let f = bulkmem::cpu::facts();
    let m = Machine::this();
    assert_eq!(m.llc_bytes, f.llc_bytes());
    assert_eq!(m.llc_cpus, f.llc_cpus());
    assert_eq!(bulkmem::cpu::info().llc_bytes(), f.llc_bytes());
}
