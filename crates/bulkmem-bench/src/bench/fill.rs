//! `bulkmem bench fill`: the kernel's non-temporal template-fill patches' template initialisation. Each element
//! is a prepared template whose first 8 bytes are patched with its index
//! (the seed's per-pfn update). Rows:
//!
//! * `memcpy-per-element`: copy the template into each element (no patch);
//! * `memcpy-patch`: the same, then patch it in place: the baseline;
//! * `fill-temporal` / `fill-nt` / `fill-auto`: `fill_patched` with hint
//!   reuse / stream / auto;
//! * `engine`: the engine's `fill_patched` on `--threads` workers.
//!
//! Regions up to 1 MiB are measured hot (refilled until a run has written
//! 64 MiB); larger ones cold (evicted before each run). Every row is checked
//! once against the expected contents before it is timed.
//!
//! This file measures; the table and plot are `table.rs`, the flags and
//! handler `args.rs`.

use std::time::Instant;

use bulkmem::mapping::Mapping;
use bulkmem::{Control, Engine, Hint};

use crate::arena;
use crate::harness::{gbps, interleave, Rounds};
use crate::results::{FillCell, Row};

mod args;
mod table;

pub use args::{cmd, FillArgs};

pub const STRATEGIES: &[&str] = &[
    "memcpy-per-element",
    "memcpy-patch",
    "fill-temporal",
    "fill-nt",
    "fill-auto",
    "engine",
];

/// What the speed-ups are over: a plain per-element copy and patch.
const BASELINE: &str = "memcpy-patch";

const HOT_MAX: usize = 1 << 20;
const HOT_BYTES: usize = 64 << 20;

#[derive(Clone, Debug)]
pub struct Plan {
    pub elements: Vec<usize>,
    pub sizes: Vec<usize>,
    pub threads: usize,
    pub rounds: Rounds,
    pub thp: bool,
}

impl Plan {
    pub fn groups(&self) -> usize {
        self.elements.len() * self.sizes.len()
    }
}

#[inline(always)]
fn stamp(i: usize, e: &mut [u8]) {
    let b = (i as u64).to_le_bytes();
    let n = e.len().min(8);
    e[..n].copy_from_slice(&b[..n]);
}

fn template(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + 7) as u8 | 0x80).collect()
}

pub fn run(plan: &Plan, progress: &mut dyn FnMut(usize, usize, &str)) -> Result<Vec<Row>, String> {
    let engine = Engine::builder()
        .threads(plan.threads)
        .build()
        .map_err(|e| format!("cannot start a {}-thread engine: {e}", plan.threads))?;
    let biggest = plan.sizes.iter().copied().max().unwrap_or(0);
    let mut region = arena::prefaulted(biggest, plan.thp, 0)
        .map_err(|e| format!("cannot map {biggest} bytes: {e}"))?;
    let llc = bulkmem::cpu::info().llc_bytes();
    let evict = arena::eviction_buffer(llc, plan.thp)
        .map_err(|e| format!("cannot map the eviction buffer: {e}"))?;
    let mut rows = Vec::new();
    let mut n = 0;
    for &el in &plan.elements {
        for &size in &plan.sizes {
            progress(
                n,
                plan.groups(),
                &format!(
                    "{el}-byte elements, {}",
                    bulkmem_machine::units::format_bytes(size)
                ),
            );
            n += 1;
            if size % el != 0 {
                return Err(format!(
                    "--sizes {} is not a whole number of {el}-byte elements",
                    bulkmem_machine::units::format_bytes(size)
                ));
            }
            rows.extend(measure(
                plan,
                el,
                &mut region.as_mut_slice()[..size],
                &engine,
                &evict,
            )?);
        }
    }
    progress(n, plan.groups(), "done");
    Ok(rows)
}

fn measure(
    plan: &Plan,
    el: usize,
    dst: &mut [u8],
    engine: &Engine,
    evict: &Mapping,
) -> Result<Vec<Row>, String> {
    let t = template(el);
    let size = dst.len();
    let hot = size <= HOT_MAX;
    let reps = if hot { (HOT_BYTES / size).max(1) } else { 1 };
    // Returns the mode that ran, for the `chose` column.
    let one = |name: &str, dst: &mut [u8]| -> Result<String, String> {
        Ok(match name {
            "memcpy-per-element" => {
                for e in dst.chunks_exact_mut(el) {
                    e.copy_from_slice(&t);
                }
                "memcpy".into()
            }
            "memcpy-patch" => {
                for (i, e) in dst.chunks_exact_mut(el).enumerate() {
                    e.copy_from_slice(&t);
                    stamp(i, e);
                }
                "memcpy".into()
            }
            "fill-temporal" | "fill-nt" | "fill-auto" => {
                let hint = match name {
                    "fill-temporal" => Hint::Reuse,
                    "fill-nt" => Hint::Stream,
                    _ => Hint::Auto,
                };
                let m =
                    bulkmem::fill_patched_hint(dst, &t, hint, stamp).map_err(|e| e.to_string())?;
                m.strategy().name().into()
            }
            _ => {
                let r = engine
                    .fill_patched(dst, &t, &stamp, Control::default())
                    .map_err(|e| e.to_string())?;
                r.strategy.name().into()
            }
        })
    };
    let mut want = t.repeat(size / el);
    let mut chose = Vec::new();
    for &name in STRATEGIES {
        dst.fill(0);
        chose.push(one(name, dst)?);
        if name != "memcpy-per-element" {
            for (i, e) in want.chunks_exact_mut(el).enumerate() {
                stamp(i, e);
            }
        }
        if dst != &want[..] {
            return Err(format!(
                "verification failed: {name} filled {el}-byte elements wrongly"
            ));
        }
    }
    let stats = interleave(STRATEGIES.len(), plan.rounds, |k| {
        if !hot {
            arena::evict_through(evict);
        }
        let start = Instant::now();
        for _ in 0..reps {
            one(STRATEGIES[k], dst)?;
        }
        Ok(gbps(size * reps, start.elapsed()))
    })?;
    Ok(STRATEGIES
        .iter()
        .enumerate()
        .map(|(k, &name)| Row {
            op: "fill",
            strategy: name.to_string(),
            chose: chose[k].clone(),
            hint: None,
            size,
            total: size,
            regime: if hot { "hot" } else { "cold" },
            threads: if name == "engine" {
                engine.threads()
            } else {
                1
            },
            runs: plan.rounds.runs,
            gbps: stats[k].clone(),
            fill: Some(FillCell {
                element: el,
                patch: name != "memcpy-per-element",
            }),
            ..Default::default()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::table::table;
    use super::*;

    #[test]
    fn every_row_is_verified_and_measured() {
        let plan = Plan {
            elements: vec![64, 100],
            sizes: vec![64_000, 2 << 20],
            threads: 2,
            rounds: crate::harness::Rounds { runs: 1, warmup: 0 },
            thp: false,
        };
        let mut plan64 = plan.clone();
        plan64.elements = vec![64];
        plan64.sizes = vec![64 << 10, 2 << 20];
        let mut rows = run(&plan64, &mut |_, _, _| {}).unwrap();
        crate::results::add_speedups_over(&mut rows, BASELINE);
        assert_eq!(rows.len(), 2 * STRATEGIES.len());
        for r in &rows {
            assert!(r.gbps.median > 0.0, "{r:?}");
            assert!(r.speedup.is_some());
            assert_eq!(r.regime, if r.size <= HOT_MAX { "hot" } else { "cold" });
        }
        let t = bulkmem_report::table::text(&table(&rows));
        assert!(t.contains("fill-nt") && t.contains("64B/2M cold"), "{t}");
        // 2M is not a whole number of 100-byte elements: a clear error.
        let e = run(&plan, &mut |_, _, _| {}).unwrap_err();
        assert!(e.contains("100-byte"), "{e}");
    }
}
