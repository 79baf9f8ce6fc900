//! `bulkmem info`'s text form: the gathered facts a line each, then what
//! `auto` follows and a table of what it would choose.

use std::fmt::Write as _;

use bulkmem::cpu::CpuInfo;
use bulkmem::Hint;
use bulkmem_machine::machine::topology::format_cpu_list;
use bulkmem_policy::auto;

use super::facts::{gather, Info};
use super::streams::BATCH_EXTENT;
use super::SIZES;
use bulkmem_machine::units::format_bytes;

pub fn text() -> String {
    let info = gather();
    let i = bulkmem::cpu::info();
    let mut o = String::new();
    cpu_lines(&mut o, &info, i);
    topology_lines(&mut o, &info, i);
    numa_lines(&mut o, &info);
    offload_lines(&mut o, &info);
    strategy_lines(&mut o, &info);
    auto_lines(&mut o, &info);
    override_lines(&mut o, &info);
    choice_table(&mut o, &info);
    o
}

/// Memory in GiB with one decimal (node sizes are not powers of two).
fn gib(bytes: u64) -> String {
    format!("{:.1}G", bytes as f64 / (1u64 << 30) as f64)
}

/// The version, the CPU, its features and those hidden or absent.
fn cpu_lines(o: &mut String, info: &Info, i: &CpuInfo) {
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
}

/// Caches, LLC domains and the CPUs this process may use.
fn topology_lines(o: &mut String, info: &Info, i: &CpuInfo) {
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
                format_bytes(c.size),
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
}

/// NUMA nodes with their memory, and their distances where there are several.
fn numa_lines(o: &mut String, info: &Info) {
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
}

/// The GPUs the engine can offload to, or why there are none.
fn offload_lines(o: &mut String, info: &Info) {
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
}

/// Page sizes, then the strategies per operation and their checked forms.
fn strategy_lines(o: &mut String, info: &Info) {
    let huge: Vec<String> = info
        .huge_page_sizes
        .iter()
        .map(|&s| format_bytes(s))
        .collect();
    let _ = writeln!(
        o,
        "pages:       {} base; hugetlb {}; THP {}",
        format_bytes(info.machine.page_size),
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
}

/// What `auto` follows: the tuned profile's summary, or where the
/// built-in rules stream.
fn auto_lines(o: &mut String, info: &Info) {
    let p = &info.profile;
    let _ = writeln!(o, "\nauto:        {}", p.status);
    if let Some(profile) = auto::profile() {
        if profile.quick {
            let _ = writeln!(
                o,
                "             (measured with --quick: fewer sizes and runs)"
            );
        }
        for line in bulkmem_calibrate::summary(profile) {
            let _ = writeln!(o, "             {line}");
        }
    } else {
        let at = |n: Option<usize>| {
            n.map_or("never".to_string(), |n| format!("from {}", format_bytes(n)))
        };
        let f = &p.streams_from;
        let _ = writeln!(
            o,
            "             built-in rules; one thread's LLC share {}; hint auto streams (non-temporal):\n\
             \x20            single calls: copies {}, clears {};\n\
             \x20            batches of {} extents: copies {}, clears {} (bytes in all)",
            format_bytes(p.llc_share),
            at(f.copy_single),
            at(f.clear_single),
            format_bytes(BATCH_EXTENT),
            at(f.copy_batch_2m),
            at(f.clear_batch_2m)
        );
    }
    // After `auto::profile()`, which hands its measured shape to the kernels.
    let whose = match auto::profile().and_then(|p| p.nt_copy_shape) {
        Some(_) => "as the profile measured",
        None => "this CPU's built-in shape",
    };
    let _ = writeln!(
        o,
        "nt copies:   {} ({whose}; `bench copy --nt-shape` runs another)",
        bulkmem_machine::kernels::nt_copy_shape().name()
    );
}

/// The environment's overrides in force, and the settings it ignored.
fn override_lines(o: &mut String, info: &Info) {
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
            format_bytes(t)
        );
    }
    for w in &ov.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
}

/// A row per (operation, hint), a column per size and one for the batch.
fn choice_table(o: &mut String, info: &Info) {
    let _ = writeln!(
        o,
        "\nauto would choose (single calls; last column a batch of 128 x 2M extents, 256M in all):"
    );
    // Each column as wide as the longest name in it, and a space more.
    let rows: Vec<(String, Vec<&str>)> = ["copy", "clear"]
        .into_iter()
        .flat_map(|op| Hint::ALL.iter().map(move |&h| (op, h)))
        .map(|(op, h)| {
            let cells = info
                .auto
                .iter()
                .filter(|c| c.op == op && c.hint == h.name())
                .map(|c| c.chose)
                .collect();
            (format!("{op}, {h}"), cells)
        })
        .collect();
    let heads: Vec<String> = SIZES
        .iter()
        .map(|&s| format_bytes(s))
        .chain(["128x2M".to_string()])
        .collect();
    let widths: Vec<usize> = (0..heads.len())
        .map(|j| {
            let names = rows.iter().filter_map(|r| r.1.get(j).map(|n| n.len()));
            1 + names.chain([heads[j].len(), 9]).max().unwrap_or(9)
        })
        .collect();
    let _ = write!(o, "{:<14}", "op, hint");
    for (h, w) in heads.iter().zip(&widths) {
        let _ = write!(o, "{h:>w$}");
    }
    o.push('\n');
    for (name, cells) in &rows {
        let _ = write!(o, "{name:<14}");
        for (c, w) in cells.iter().zip(&widths) {
            let _ = write!(o, "{c:>w$}");
        }
        o.push('\n');
    }
}
