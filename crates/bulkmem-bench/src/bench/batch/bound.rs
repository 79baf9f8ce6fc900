//! How close each engine row of `bench batch` comes to this machine's
//! memory (`bench limits`): its median over the bound for its thread count,
//! min(R, W) for a copy (W for a clear). Measured at the start of the bench
//! (about a second per thread count) unless `--bound` gives one.

use bulkmem::Op;

use crate::bench::limits;
use crate::harness::Rounds;
use crate::report::Row;

/// Bytes per thread of the quick measurement: past any LLC share.
const SIZE: usize = 256 << 20;

/// (threads, bound GB/s) for each thread count; `given` for all of them.
pub fn bounds(
    op: Op,
    threads: &[usize],
    first: usize,
    given: Option<f64>,
) -> Result<Vec<(usize, f64)>, String> {
    if let Some(g) = given {
        return Ok(threads.iter().map(|&t| (t, g)).collect());
    }
    let allowed = bulkmem::engine::allowed_cpus()
        .unwrap_or_else(|| bulkmem::cpu::info().topology.online_cpus.clone());
    let mut cpus = vec![first];
    cpus.extend(allowed.into_iter().filter(|&c| c != first));
    let rounds = Rounds { runs: 3, warmup: 1 };
    threads
        .iter()
        .map(|&t| {
            // More threads than CPUs: the bound of all of them.
            let l = limits::measure(t.min(cpus.len()), SIZE, rounds, &cpus)?;
            Ok((t, l.bound(op)))
        })
        .collect()
}

/// Sets each engine row's share of its thread count's bound.
pub fn attach(rows: &mut [Row], bounds: &[(usize, f64)]) {
    for r in rows.iter_mut().filter(|r| r.strategy.starts_with("engine")) {
        let bound = bounds.iter().find(|b| b.0 == r.threads).map(|b| b.1);
        if let (Some(b), Some(cell)) = (bound.filter(|&b| b > 0.0), r.batch.as_mut()) {
            cell.bound_share = Some(r.gbps.median / b);
        }
    }
}
