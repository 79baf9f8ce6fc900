//! How close each engine row of `bench batch` comes to this machine's
//! memory (`bench limits`): its median over the bound for its thread count
//! and access pattern, min(R, W) for a copy (W for a clear). Scattered
//! folios take the bound over pages of their size in a shuffled order,
//! adjacent ones the bound of one long run: 4 KiB pages read one after
//! another in a random order give less than a long run, and a share of the
//! long run's bound would blame the engine for it. Measured at the start
//! of the bench (a second or two per thread count) unless `--bound` gives
//! one.

use bulkmem::Op;

use crate::bench::limits;
use crate::harness::Rounds;
use crate::results::Row;

/// Bytes per thread of the quick measurement: past any LLC share.
const SIZE: usize = 256 << 20;

/// One thread count's bounds: over one long run, and per folio size over
/// pages of that size in a shuffled order.
#[derive(Clone, Debug)]
pub struct Bound {
    pub threads: usize,
    pub sequential: f64,
    pub scattered: Vec<(usize, f64)>,
}

/// The bounds of each thread count for `folios`; `given` for all of them.
pub fn bounds(
    op: Op,
    threads: &[usize],
    folios: &[usize],
    first: usize,
    given: Option<f64>,
) -> Result<Vec<Bound>, String> {
    if let Some(g) = given {
        return Ok(threads
            .iter()
            .map(|&t| Bound {
                threads: t,
                sequential: g,
                scattered: Vec::new(),
            })
            .collect());
    }
    let allowed = bulkmem::placement::allowed_cpus()
        .unwrap_or_else(|| bulkmem::cpu::info().topology.online_cpus.clone());
    let mut cpus = vec![first];
    cpus.extend(allowed.into_iter().filter(|&c| c != first));
    let rounds = Rounds { runs: 3, warmup: 1 };
    // Pages the limits can take: whole lines, at least a base page, and
    // several per buffer.
    let pages: Vec<usize> = folios
        .iter()
        .copied()
        .filter(|&f| f >= 4096 && f % 64 == 0 && f <= SIZE / 4)
        .collect();
    threads
        .iter()
        .map(|&t| {
            // More threads than CPUs: the bound of all of them.
            let l = limits::measure(t.min(cpus.len()), SIZE, rounds, &cpus, &pages)?;
            Ok(Bound {
                threads: t,
                sequential: l.bound(op),
                scattered: pages
                    .iter()
                    .filter_map(|&p| Some((p, l.scattered_bound(op, p)?)))
                    .collect(),
            })
        })
        .collect()
}

/// Sets each engine row's share of the bound for its thread count and
/// pattern (the long run's where its folio size was not measured).
pub fn attach(rows: &mut [Row], bounds: &[Bound]) {
    for r in rows.iter_mut().filter(|r| r.strategy.starts_with("engine")) {
        let Some(b) = bounds.iter().find(|b| b.threads == r.threads) else {
            continue;
        };
        let Some(cell) = r.batch.as_mut() else {
            continue;
        };
        let scattered = cell.layout == "scattered";
        let bound = b
            .scattered
            .iter()
            .find(|(p, _)| scattered && *p == r.size)
            .map_or(b.sequential, |&(_, g)| g);
        if bound > 0.0 {
            cell.bound_share = Some(r.gbps.median / bound);
            cell.bound = Some(bound);
        }
    }
}
