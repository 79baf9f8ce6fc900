//! `bulkmem info`: what bulkmem sees on this machine and what `auto` would
//! do with it.

use std::fmt::Write as _;

use serde::Serialize;

use bulkmem::topology::{format_cpu_list, CacheKind};
use bulkmem::{auto, Hint, Machine, Op, Request, Strategy};

use crate::report;
use crate::size::fmt_size;

/// Sizes `info` shows `auto`'s choice for, as single calls.
const SIZES: &[usize] = &[64, 4096, 64 << 10, 2 << 20, 32 << 20, 256 << 20, 1 << 30];

#[derive(Serialize)]
struct Cache {
    level: u8,
    kind: &'static str,
    size: usize,
    shared_cpus: Vec<usize>,
}

#[derive(Serialize)]
struct Availability {
    op: &'static str,
    strategy: &'static str,
    available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    needs: Option<&'static str>,
}

#[derive(Serialize)]
struct AutoChoice {
    op: &'static str,
    hint: &'static str,
    /// Bytes in all.
    total: usize,
    /// Contiguous runs the total arrives in (1 = a single call).
    runs: usize,
    chose: &'static str,
    reason: &'static str,
}

#[derive(Serialize)]
struct Info {
    bulkmem: &'static str,
    machine: report::Machine,
    family: u32,
    model: u32,
    caches: Vec<Cache>,
    llc_domains: Vec<Vec<usize>>,
    /// CPUs this process may run on (sched_getaffinity: taskset, numactl,
    /// cpusets); the engine's workers are placed among them.
    allowed_cpus: Vec<usize>,
    /// Every node: its CPUs, memory, free memory and SLIT distances.
    numa_nodes: Vec<NodeInfo>,
    huge_page_sizes: Vec<usize>,
    strategies: Vec<Availability>,
    /// Strategies with a checked (fault-surviving) form runnable here.
    checked: Checked,
    /// What `auto` follows: a tuned profile or the built-in rules, and why.
    profile: ProfileInfo,
    /// `BULKMEM_STRATEGY` / `BULKMEM_NT_THRESHOLD` in force, and the
    /// settings that were ignored (one line each).
    overrides: OverrideInfo,
    /// Copy engines the engine can offload to (`bench batch --offload gpu`),
    /// or why there are none.
    offload: OffloadInfo,
    auto: Vec<AutoChoice>,
}

#[derive(Serialize)]
struct ProfileInfo {
    /// `tuned` or `built-in`.
    auto: &'static str,
    status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<String>,
    /// Seconds since the profile was measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    age_s: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quick: Option<bool>,
    /// One thread's share of the LLC.
    llc_share: usize,
    /// The rules' stream threshold: twice the share, at most 64 MiB.
    /// Where each kind of call actually streams is `streams_from`.
    stream_from: usize,
    /// Where untuned `auto` (hint auto) starts streaming, derived from
    /// the same rules the choices below come from.
    streams_from: StreamsFrom,
}

/// The smallest size from which the built-in rules choose non-temporal
/// stores (hint auto), per kind of call; `null`: never (up to 1 TiB).
#[derive(Serialize)]
struct StreamsFrom {
    /// A single copy of this many bytes.
    copy_single: Option<usize>,
    clear_single: Option<usize>,
    /// A batch of scattered 2 MiB extents this large in all (Intel
    /// servers stream a batch's copies well before a single call's).
    copy_batch_2m: Option<usize>,
    clear_batch_2m: Option<usize>,
}

/// Extent of the batches `info` describes (its table's last column too).
const BATCH_EXTENT: usize = 2 << 20;

/// The smallest `n` units for which the built-in rules stream
/// `request(n * unit)`, in bytes, or `None` up to 1 TiB. The rules stream
/// from a threshold on (larger never streams less), so a bisection finds it.
fn first_streaming(unit: usize, request: impl Fn(usize) -> Request) -> Option<usize> {
    let streams = |n: usize| {
        auto::decide(Machine::this(), &request(n * unit))
            .strategy
            .is_non_temporal()
    };
    let (mut lo, mut hi) = (0usize, (1usize << 40) / unit);
    if !streams(hi) {
        return None;
    }
    // Invariant: streams(hi), and lo == 0 or !streams(lo).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if streams(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi * unit)
}

fn streams_from() -> StreamsFrom {
    let single = |op| first_streaming(1, |n| Request::single(op, n, Hint::Auto));
    let batch = |op| {
        first_streaming(BATCH_EXTENT, |n| Request {
            op,
            total: n,
            runs: n / BATCH_EXTENT,
            hint: Hint::Auto,
        })
    };
    StreamsFrom {
        copy_single: single(Op::Copy),
        clear_single: single(Op::Clear),
        copy_batch_2m: batch(Op::Copy),
        clear_batch_2m: batch(Op::Clear),
    }
}

#[derive(Serialize)]
struct OverrideInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    copy: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    clear: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nt_threshold: Option<usize>,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct OffloadInfo {
    gpus: Vec<GpuRow>,
    /// Why there is no GPU offload here (absent when there is).
    #[serde(skip_serializing_if = "Option::is_none")]
    none: Option<String>,
}

#[derive(Serialize)]
struct GpuRow {
    ordinal: usize,
    name: String,
    copy_engines: u32,
    pci: String,
    memory: u64,
}

#[derive(Serialize)]
struct NodeInfo {
    id: usize,
    cpus: Vec<usize>,
    mem_total: u64,
    mem_free: u64,
    distances: Vec<u32>,
}

/// Per operation, the checked strategies this CPU runs (besides `auto`).
#[derive(Serialize)]
struct Checked {
    copy: Vec<&'static str>,
    clear: Vec<&'static str>,
}

fn kind(k: CacheKind) -> &'static str {
    match k {
        CacheKind::Data => "data",
        CacheKind::Instruction => "instruction",
        CacheKind::Unified => "unified",
    }
}

fn gather() -> Info {
    let i = bulkmem::cpu::info();
    let t = &i.topology;
    let m = Machine::this();
    let status = auto::profile_status();
    let profile = ProfileInfo {
        auto: report::auto_kind(),
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
    };
    let o = auto::Overrides::from_env();
    let overrides = OverrideInfo {
        copy: o.copy.map(Strategy::name),
        clear: o.clear.map(Strategy::name),
        nt_threshold: o.nt_threshold,
        warnings: o.warnings.clone(),
    };
    let mut strategies = Vec::new();
    for op in [Op::Copy, Op::Clear] {
        for &s in Strategy::for_op(op) {
            let needs = s.missing_feature(&i.features);
            strategies.push(Availability {
                op: op.name(),
                strategy: s.name(),
                available: needs.is_none(),
                needs,
            });
        }
    }
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
    Info {
        bulkmem: env!("CARGO_PKG_VERSION"),
        machine: report::Machine::this(),
        family: i.family,
        model: i.model,
        caches: t
            .caches
            .iter()
            .map(|c| Cache {
                level: c.level,
                kind: kind(c.kind),
                size: c.size,
                shared_cpus: c.shared_cpus.clone(),
            })
            .collect(),
        llc_domains: t.llc_domains.clone(),
        allowed_cpus: bulkmem::engine::allowed_cpus().unwrap_or_else(|| t.online_cpus.clone()),
        // Read now, not from the cached topology: free memory moves.
        numa_nodes: bulkmem::numa::Nodes::detect()
            .nodes
            .into_iter()
            .map(|n| NodeInfo {
                id: n.id,
                cpus: n.cpus,
                mem_total: n.mem_total,
                mem_free: n.mem_free,
                distances: n.distances,
            })
            .collect(),
        huge_page_sizes: t.huge_page_sizes.clone(),
        strategies,
        checked: {
            let runnable = |list: &[bulkmem::Strategy]| {
                list.iter()
                    .filter(|s| s.available())
                    .map(|s| s.name())
                    .collect()
            };
            Checked {
                copy: runnable(bulkmem::fault::CHECKED_COPY),
                clear: runnable(bulkmem::fault::CHECKED_CLEAR),
            }
        },
        profile,
        overrides,
        offload: match bulkmem::offload::gpus() {
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
        },
        auto: choices,
    }
}

/// Memory in GiB with one decimal (node sizes are not powers of two).
fn gib(bytes: u64) -> String {
    format!("{:.1}G", bytes as f64 / (1u64 << 30) as f64)
}

pub fn json() -> String {
    serde_json::to_string_pretty(&gather()).expect("info serialises")
}

pub fn text() -> String {
    let info = gather();
    let i = bulkmem::cpu::info();
    let mut o = String::new();
    let _ = writeln!(o, "bulkmem {}", info.bulkmem);
    let _ = writeln!(o, "cpu:         {i}");
    let _ = writeln!(o, "features:    {}", info.machine.features.join(" "));
    let absent: Vec<&str> = bulkmem::cpu::Features::ALL_NAMES
        .iter()
        .copied()
        .filter(|n| !info.machine.features.contains(n))
        .collect();
    if !absent.is_empty() {
        let _ = writeln!(o, "absent:      {}", absent.join(" "));
    }
    if !i.disabled.is_empty() {
        let _ = writeln!(o, "hidden by BULKMEM_DISABLE: {}", i.disabled.join(" "));
    }
    if !i.unknown_disabled.is_empty() {
        let _ = writeln!(
            o,
            "warning: BULKMEM_DISABLE names unknown features: {} (known: {})",
            i.unknown_disabled.join(" "),
            bulkmem::cpu::Features::ALL_NAMES.join(" ")
        );
    }
    let caches: Vec<String> = info
        .caches
        .iter()
        .map(|c| {
            let k = match c.kind {
                "data" => "d",
                "instruction" => "i",
                _ => "",
            };
            format!(
                "L{}{k} {} (CPUs {})",
                c.level,
                fmt_size(c.size),
                format_cpu_list(&c.shared_cpus)
            )
        })
        .collect();
    let assumed = if i.topology.llc_assumed {
        " (LLC size assumed: sysfs has none)"
    } else {
        ""
    };
    let _ = writeln!(o, "caches:      {}{assumed}", caches.join(", "));
    let domains: Vec<String> = info
        .llc_domains
        .iter()
        .map(|d| format!("[{}]", format_cpu_list(d)))
        .collect();
    let _ = writeln!(
        o,
        "cpus:        {} online; {} LLC domain(s): {}",
        info.machine.cpus,
        domains.len(),
        domains.join(" ")
    );
    if info.allowed_cpus != i.topology.online_cpus {
        let _ = writeln!(
            o,
            "affinity:    this process may use CPUs {} (of {} online): the engine's workers stay there",
            format_cpu_list(&info.allowed_cpus),
            info.machine.cpus
        );
    } else {
        let _ = writeln!(o, "affinity:    this process may use every online CPU");
    }
    let nodes: Vec<String> = info
        .numa_nodes
        .iter()
        .map(|n| {
            let mem = if n.mem_total > 0 {
                format!(" {} ({} free)", gib(n.mem_total), gib(n.mem_free))
            } else {
                String::new()
            };
            format!("node{} [{}]{mem}", n.id, format_cpu_list(&n.cpus))
        })
        .collect();
    let _ = writeln!(
        o,
        "numa:        {} node(s): {}",
        nodes.len(),
        nodes.join(" ")
    );
    if info.numa_nodes.len() > 1 {
        let rows: Vec<String> = info
            .numa_nodes
            .iter()
            .map(|n| {
                let d: Vec<String> = n.distances.iter().map(|d| d.to_string()).collect();
                format!("node{}: {}", n.id, d.join(" "))
            })
            .collect();
        let _ = writeln!(o, "distances:   {}", rows.join("; "));
    }
    match &info.offload.none {
        Some(why) => {
            let _ = writeln!(o, "offload:     none ({why})");
        }
        None => {
            for g in &info.offload.gpus {
                let _ = writeln!(
                    o,
                    "offload:     gpu {} {} ({} copy engines, PCI {}, {}): bench batch --offload gpu",
                    g.ordinal,
                    g.name,
                    g.copy_engines,
                    g.pci,
                    gib(g.memory)
                );
            }
        }
    }
    let huge: Vec<String> = info.huge_page_sizes.iter().map(|&s| fmt_size(s)).collect();
    let _ = writeln!(
        o,
        "pages:       {} base; hugetlb {}; THP {}",
        fmt_size(info.machine.page_size),
        if huge.is_empty() {
            "none".to_string()
        } else {
            huge.join(", ")
        },
        info.machine.thp.as_deref().unwrap_or("unknown")
    );
    for op in ["copy", "clear"] {
        let list: Vec<String> = info
            .strategies
            .iter()
            .filter(|a| a.op == op)
            .map(|a| match a.needs {
                None => a.strategy.to_string(),
                Some(n) => format!("({} needs {n})", a.strategy),
            })
            .collect();
        let _ = writeln!(o, "{op:<6} strategies: {}", list.join(" "));
    }
    for (op, list) in [("copy", &info.checked.copy), ("clear", &info.checked.clear)] {
        let _ = writeln!(
            o,
            "checked {op:<5} (survive SIGBUS, SIGSEGV): auto {}",
            list.join(" ")
        );
    }
    let p = &info.profile;
    let _ = writeln!(o, "\nauto:        {}", p.status);
    if let Some(profile) = auto::profile() {
        if profile.quick {
            let _ = writeln!(
                o,
                "             (measured with --quick: fewer sizes and runs)"
            );
        }
        for line in bulkmem::calibrate::summary(profile) {
            let _ = writeln!(o, "             {line}");
        }
    } else {
        let at =
            |n: Option<usize>| n.map_or("never".to_string(), |n| format!("from {}", fmt_size(n)));
        let f = &p.streams_from;
        let _ = writeln!(
            o,
            "             built-in rules; one thread's LLC share {}; hint auto streams (non-temporal):\n\
             \x20            single calls: copies {}, clears {};\n\
             \x20            batches of {} extents: copies {}, clears {} (bytes in all)",
            fmt_size(p.llc_share),
            at(f.copy_single),
            at(f.clear_single),
            fmt_size(BATCH_EXTENT),
            at(f.copy_batch_2m),
            at(f.clear_batch_2m)
        );
    }
    let ov = &info.overrides;
    let mut forced = Vec::new();
    if let Some(s) = ov.copy {
        forced.push(format!("copy {s}"));
    }
    if let Some(s) = ov.clear {
        forced.push(format!("clear {s}"));
    }
    if !forced.is_empty() {
        let _ = writeln!(o, "BULKMEM_STRATEGY: {}", forced.join(", "));
    }
    if let Some(t) = ov.nt_threshold {
        let _ = writeln!(
            o,
            "BULKMEM_NT_THRESHOLD: stream from {} (hint auto)",
            fmt_size(t)
        );
    }
    for w in &ov.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    let _ = writeln!(
        o,
        "\nauto would choose (single calls; last column a batch of 128 x 2M extents, 256M in all):"
    );
    let _ = write!(o, "{:<14}", "op, hint");
    for &s in SIZES {
        let _ = write!(o, "{:>11}", fmt_size(s));
    }
    let _ = writeln!(o, "{:>12}", "128x2M");
    for op in ["copy", "clear"] {
        for h in Hint::ALL {
            let _ = write!(o, "{:<14}", format!("{op}, {h}"));
            for c in info
                .auto
                .iter()
                .filter(|c| c.op == op && c.hint == h.name())
            {
                let w = if c.runs > 1 { 12 } else { 11 };
                let _ = write!(o, "{:>w$}", c.chose);
            }
            o.push('\n');
        }
    }
    o
}

#[derive(clap::Args)]
pub struct InfoArgs {
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

pub fn cmd(a: InfoArgs) -> Result<(), crate::cli::Failure> {
    if a.json {
        crate::out::print(&(json() + "\n"))
    } else {
        crate::out::print(&text())
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lists_every_strategy_and_a_batch_choice() {
        let v: serde_json::Value = serde_json::from_str(&json()).unwrap();
        let n = v["strategies"].as_array().unwrap().len();
        assert_eq!(n, Strategy::COPY.len() + Strategy::CLEAR.len());
        let batch = v["auto"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["runs"] == 128);
        assert!(batch);
        assert!(v["machine"]["llc_bytes"].as_u64().unwrap() > 0);
    }

    #[test]
    fn text_names_the_cpu_and_every_strategy() {
        let t = text();
        assert!(t.contains("cpu:") && t.contains("auto would choose"), "{t}");
        for s in Strategy::COPY.iter().chain(Strategy::CLEAR) {
            assert!(t.contains(s.name()), "{} missing", s.name());
        }
    }
}
