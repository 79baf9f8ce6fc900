//! What `bulkmem info` reports, gathered: the machine's facts, what `auto`
//! follows and what it would choose. The serialised form of these structs
//! is `info --json`.

use serde::Serialize;

use bulkmem::topology::{CacheKind, Topology};
use bulkmem::{Hint, Op, Strategy};
use bulkmem_policy::auto;
use bulkmem_policy::auto::Machine;
use bulkmem_policy::auto::Request;

use super::streams::{streams_from, StreamsFrom, BATCH_EXTENT};
use super::SIZES;
use bulkmem_bench::results;

#[derive(Serialize)]
pub(super) struct Cache {
    pub(super) level: u8,
    pub(super) kind: &'static str,
    pub(super) size: usize,
    pub(super) shared_cpus: Vec<usize>,
}

#[derive(Serialize)]
pub(super) struct Availability {
    pub(super) op: &'static str,
    pub(super) strategy: &'static str,
    pub(super) available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) needs: Option<&'static str>,
}

#[derive(Serialize)]
pub(super) struct AutoChoice {
    pub(super) op: &'static str,
    pub(super) hint: &'static str,
    /// Bytes in all.
    pub(super) total: usize,
    /// Contiguous runs the total arrives in (1 = a single call).
    pub(super) runs: usize,
    pub(super) chose: &'static str,
    pub(super) reason: &'static str,
}

#[derive(Serialize)]
pub(super) struct Info {
    pub(super) bulkmem: &'static str,
    pub(super) machine: results::Machine,
    pub(super) family: u32,
    pub(super) model: u32,
    pub(super) caches: Vec<Cache>,
    pub(super) llc_domains: Vec<Vec<usize>>,
    /// CPUs this process may run on (sched_getaffinity: taskset, numactl,
    /// cpusets); the engine's workers are placed among them.
    pub(super) allowed_cpus: Vec<usize>,
    /// Every node: its CPUs, memory, free memory and SLIT distances.
    pub(super) numa_nodes: Vec<NodeInfo>,
    pub(super) huge_page_sizes: Vec<usize>,
    pub(super) strategies: Vec<Availability>,
    /// Strategies with a checked (fault-surviving) form runnable here.
    pub(super) checked: Checked,
    /// What `auto` follows: a tuned profile or the built-in rules, and why.
    pub(super) profile: ProfileInfo,
    /// `BULKMEM_STRATEGY` / `BULKMEM_NT_THRESHOLD` in force, and the
    /// settings that were ignored (one line each).
    pub(super) overrides: OverrideInfo,
    /// Copy engines the engine can offload to (`bench batch --offload gpu`),
    /// or why there are none.
    pub(super) offload: OffloadInfo,
    pub(super) auto: Vec<AutoChoice>,
}

#[derive(Serialize)]
pub(super) struct ProfileInfo {
    /// `tuned` or `built-in`.
    pub(super) auto: &'static str,
    pub(super) status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) path: Option<String>,
    /// Seconds since the profile was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) age_s: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) quick: Option<bool>,
    /// One thread's share of the LLC.
    pub(super) llc_share: usize,
    /// The rules' stream threshold: twice the share, at most 64 MiB.
    /// Where each kind of call actually streams is `streams_from`.
    pub(super) stream_from: usize,
    /// Where untuned `auto` (hint auto) starts streaming, derived from
    /// the same rules the choices below come from.
    pub(super) streams_from: StreamsFrom,
}

#[derive(Serialize)]
pub(super) struct OverrideInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) copy: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) clear: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) nt_threshold: Option<usize>,
    pub(super) warnings: Vec<String>,
}

#[derive(Serialize)]
pub(super) struct OffloadInfo {
    pub(super) gpus: Vec<GpuRow>,
    /// Why there is no GPU offload here (absent when there is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) none: Option<String>,
}

#[derive(Serialize)]
pub(super) struct GpuRow {
    pub(super) ordinal: usize,
    pub(super) name: String,
    pub(super) copy_engines: u32,
    pub(super) pci: String,
    pub(super) memory: u64,
}

#[derive(Serialize)]
pub(super) struct NodeInfo {
    pub(super) id: usize,
    pub(super) cpus: Vec<usize>,
    pub(super) mem_total: u64,
    pub(super) mem_free: u64,
    pub(super) distances: Vec<u32>,
}

/// Per operation, the checked strategies this CPU runs (besides `auto`).
#[derive(Serialize)]
pub(super) struct Checked {
    pub(super) copy: Vec<&'static str>,
    pub(super) clear: Vec<&'static str>,
}

fn kind(k: CacheKind) -> &'static str {
    match k {
        CacheKind::Data => "data",
        CacheKind::Instruction => "instruction",
        CacheKind::Unified => "unified",
    }
}

pub(super) fn gather() -> Info {
    let i = bulkmem::cpu::info();
    let t = &i.topology;
    // In the order the fields were always read: the profile (and the
    // rules' thresholds) first, then the overrides, the strategies and
    // the choices.
    let profile = profile_info(Machine::this());
    let overrides = overrides();
    let strategies = availability(&i.features);
    let choices = choices();
    Info {
        bulkmem: env!("CARGO_PKG_VERSION"),
        machine: results::Machine::this(),
        family: i.family,
        model: i.model,
        caches: caches(t),
        llc_domains: t.llc_domains.clone(),
        allowed_cpus: bulkmem::placement::allowed_cpus().unwrap_or_else(|| t.online_cpus.clone()),
        numa_nodes: numa_nodes(),
        huge_page_sizes: t.huge_page_sizes.clone(),
        strategies,
        checked: checked(),
        profile,
        overrides,
        offload: offload(),
        auto: choices,
    }
}

fn profile_info(m: &Machine) -> ProfileInfo {
    let status = auto::profile_status();
    ProfileInfo {
        auto: results::auto_kind(),
        status: status.to_string(),
        path: status.path().map(|p| p.display().to_string()),
        age_s: match status {
            auto::ProfileStatus::Tuned { age, .. } => Some(age.as_secs()),
            _ => None,
        },
        quick: auto::profile().map(|p| p.quick),
        llc_share: m.llc_share(),
        stream_from: m.stream_from(),
        streams_from: streams_from(),
    }
}

fn overrides() -> OverrideInfo {
    let o = auto::Overrides::from_env();
    OverrideInfo {
        copy: o.copy.map(Strategy::name),
        clear: o.clear.map(Strategy::name),
        nt_threshold: o.nt_threshold,
        warnings: o.warnings.clone(),
    }
}

fn availability(features: &bulkmem::cpu::Features) -> Vec<Availability> {
    let mut strategies = Vec::new();
    for op in [Op::Copy, Op::Clear] {
        for &s in Strategy::for_op(op) {
            let needs = s.missing_feature(features);
            strategies.push(Availability {
                op: op.name(),
                strategy: s.name(),
                available: needs.is_none(),
                needs,
            });
        }
    }
    strategies
}

/// `auto`'s choice per operation and hint for every single-call size
/// `info` shows, and for a batch.
fn choices() -> Vec<AutoChoice> {
    let mut choices = Vec::new();
    for op in [Op::Copy, Op::Clear] {
        for &hint in Hint::ALL {
            let mut reqs: Vec<Request> = SIZES
                .iter()
                .map(|&n| Request::single(op, n, hint))
                .collect();
            // What one call cannot know: 128 scattered 2 MiB folios.
            reqs.push(Request {
                op,
                total: 128 * BATCH_EXTENT,
                runs: 128,
                hint,
            });
            for r in reqs {
                let c = auto::Policy::here().decide(&r);
                choices.push(AutoChoice {
                    op: op.name(),
                    hint: hint.name(),
                    total: r.total,
                    runs: r.runs,
                    chose: c.strategy.name(),
                    reason: c.reason,
                });
            }
        }
    }
    choices
}

fn caches(t: &Topology) -> Vec<Cache> {
    t.caches
        .iter()
        .map(|c| Cache {
            level: c.level,
            kind: kind(c.kind),
            size: c.size,
            shared_cpus: c.shared_cpus.clone(),
        })
        .collect()
}

/// Read now, not from the cached topology: free memory moves.
fn numa_nodes() -> Vec<NodeInfo> {
    bulkmem::topology::Nodes::detect()
        .nodes
        .into_iter()
        .map(|n| NodeInfo {
            id: n.id,
            cpus: n.cpus,
            mem_total: n.mem_total,
            mem_free: n.mem_free,
            distances: n.distances,
        })
        .collect()
}

fn checked() -> Checked {
    let runnable = |list: &[bulkmem::Strategy]| {
        list.iter()
            .filter(|s| s.available())
            .map(|s| s.name())
            .collect()
    };
    Checked {
        copy: runnable(bulkmem::fault::checked_strategies(Op::Copy)),
        clear: runnable(bulkmem::fault::checked_strategies(Op::Clear)),
    }
}

fn offload() -> OffloadInfo {
    match bulkmem::offload::gpus() {
        Ok(g) if !g.is_empty() => OffloadInfo {
            gpus: g
                .into_iter()
                .map(|g| GpuRow {
                    ordinal: g.ordinal,
                    name: g.name,
                    copy_engines: g.copy_engines,
                    pci: g.pci,
                    memory: g.memory,
                })
                .collect(),
            none: None,
        },
        Ok(_) => OffloadInfo {
            gpus: Vec::new(),
            none: Some("the CUDA driver sees no GPU".into()),
        },
        Err(why) => OffloadInfo {
            gpus: Vec::new(),
            none: Some(why),
        },
    }
}
