//! `bulkmem bench peers`: the outside review's peer harness as one
//! command. bulkmem's `auto` and every kernel against the C library's
//! `memcpy`/`memset` and any other library named with `--against`
//! (AOCL-LibMem, a newer glibc, folly's), copies and clears, in the cells
//! that harness measured: 4 KiB and 2 MiB hot, a cold 256 MiB single call,
//! a cold batch of 128 x 2 MiB; many interleaved rounds, every row
//! byte-checked before it is timed. The last table puts each cell's
//! `auto` and best bulkmem kernel over the best peer.

use clap::Args;

use bulkmem::Op;

use super::mem::plan::{Plan, Regime};
use super::mem::{self};
use crate::cli::{
    check_memory, check_outputs, measuring_cpus, pick_strategies, publish, usage, with_progress,
    Failure, Output,
};
use crate::harness::Rounds;
use crate::out;
use crate::results::{self, Row};
use bulkmem_machine::units::format_bytes;

#[derive(Args)]
pub struct PeersArgs {
    /// Another library's routines as peers: its `memcpy` for the copies
    /// and its `memset` for the clears ([LABEL=]LIB). Naming a symbol
    /// (LIB:SYMBOL) makes it a peer of the copies only; `--against-clear`
    /// names the clears' own. Repeat, or separate with commas.
    #[arg(long, value_name = "[LABEL=]LIB[:SYMBOL]", value_delimiter = ',')]
    against: Vec<String>,
    /// Peers of the clears only, as `--against` (default symbol memset).
    #[arg(long, value_name = "[LABEL=]LIB[:SYMBOL]", value_delimiter = ',')]
    against_clear: Vec<String>,
    /// Interleaved timed rounds per cell (the review's harness ran 31).
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u32).range(3..=1000))]
    runs: u32,
    #[command(flatten)]
    out: Output,
}

/// The harness's sizes: a page, a huge page, and a copy far past any LLC
/// (which, cold, is one call; the cold 2 MiB cell is a batch of 128).
const SIZES: [usize; 3] = [4 << 10, 2 << 20, 256 << 20];

/// Bytes a cold run moves: 256 MiB, so that the cold 2 MiB cell is the
/// harness's 128 x 2 MiB batch and the 256 MiB cell a single call.
const COLD_TOTAL: usize = 256 << 20;

pub fn cmd(a: PeersArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), None)?;
    let cpus = measuring_cpus(None)?;
    let mut all = Vec::new();
    let mut tables = Vec::new();
    let mut verdicts = Vec::new();
    for op in [Op::Copy, Op::Clear] {
        let specs = peer_specs(op, &a.against, &a.against_clear);
        let foreign = super::against::load(op, &specs).map_err(usage)?;
        let peers: Vec<String> = std::iter::once("libc".to_string())
            .chain(foreign.iter().map(|f| f.0.clone()))
            .collect();
        let (strategies, skipped) = pick_strategies(op, "all")?;
        let regimes = vec![Regime::Hot, Regime::Cold];
        check_memory(&mem::needs(&SIZES, &regimes, 1, COLD_TOTAL))?;
        let plan = Plan {
            sizes: SIZES.to_vec(),
            regimes,
            strategies,
            rounds: Rounds {
                runs: a.runs as usize,
                warmup: 1,
            },
            total: COLD_TOTAL,
            foreign,
            ..Plan::new(op, cpus.clone())
        };
        let mut rows = with_progress(quiet, mem::groups(&plan), |p| mem::run(&plan, p))?;
        results::add_speedups_over(&mut rows, "libc");
        tables.extend(results::tables_over(&rows, &skipped, "libc"));
        verdicts.extend(verdict(op, &rows, &peers));
        all.extend(rows);
    }
    publish(&a.out, &tables, &all, None)?;
    out::print(&render(&verdicts))
}

/// The peer libraries of `op`'s plan: `--against` specs (for clears only
/// those naming no symbol: a named symbol is a copy routine) and, for
/// clears, `--against-clear`.
pub fn peer_specs(op: Op, against: &[String], against_clear: &[String]) -> Vec<String> {
    let names_symbol = |s: &String| {
        let rest = s.split_once('=').map_or(s.as_str(), |(_, r)| r);
        let file = &rest[rest.rfind('/').map_or(0, |i| i + 1)..];
        file.contains(':')
    };
    match op {
        Op::Copy => against.to_vec(),
        Op::Clear => against
            .iter()
            .filter(|s| !names_symbol(s))
            .chain(against_clear)
            .cloned()
            .collect(),
    }
}

/// One cell's standing: `auto`, the best bulkmem row and the best peer.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub op: &'static str,
    pub regime: &'static str,
    pub size: usize,
    pub auto: f64,
    pub best: (String, f64),
    pub peer: (String, f64),
}

/// Each (regime, size) cell of `rows`: `auto`, the fastest bulkmem
/// strategy (every row that is neither `auto` nor a peer), and the
/// fastest of `peers`, by median. Cells missing `auto` or every peer are
/// left out.
pub fn verdict(op: Op, rows: &[Row], peers: &[String]) -> Vec<Verdict> {
    let mut cells: Vec<(&'static str, usize)> = rows.iter().map(|r| (r.regime, r.size)).collect();
    cells.dedup();
    let fastest = |it: &mut dyn Iterator<Item = &Row>| {
        it.max_by(|a, b| a.gbps.median.total_cmp(&b.gbps.median))
            .map(|r| (r.strategy.clone(), r.gbps.median))
    };
    cells
        .into_iter()
        .filter_map(|(regime, size)| {
            let here = || {
                rows.iter()
                    .filter(move |r| r.regime == regime && r.size == size)
            };
            let auto = here().find(|r| r.strategy == "auto")?.gbps.median;
            let peer = fastest(&mut here().filter(|r| peers.contains(&r.strategy)))?;
            let best = fastest(
                &mut here().filter(|r| r.strategy != "auto" && !peers.contains(&r.strategy)),
            )?;
            Some(Verdict {
                op: op.name(),
                regime,
                size,
                auto,
                best,
                peer,
            })
        })
        .collect()
}

/// The verdict table: a line per cell.
pub fn render(v: &[Verdict]) -> String {
    let mut s = String::from(
        "\nbulkmem against its peers (medians; x = over the fastest peer of the cell):\n",
    );
    s += &format!(
        "{:<6} {:<6} {:>5}  {:>14}  {:>31}  {:>20}\n",
        "op", "regime", "size", "auto", "best bulkmem", "best peer"
    );
    for c in v {
        let x = |g: f64| g / c.peer.1.max(1e-9);
        s += &format!(
            "{:<6} {:<6} {:>5}  {:>7.2} {:>5.2}x  {:>17} {:>6.2} {:>5.2}x  {:>13} {:>6.2}\n",
            c.op,
            c.regime,
            format_bytes(c.size),
            c.auto,
            x(c.auto),
            c.best.0,
            c.best.1,
            x(c.best.1),
            c.peer.0,
            c.peer.1,
        );
    }
    s += "cold 2M is a batch of 128 x 2M extents (one call), cold 256M one call; GB/s = 10^9 bytes/s\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkmem_report::stats::Stats;

    fn row(strategy: &str, regime: &'static str, size: usize, gbps: f64) -> Row {
        Row {
            op: "copy",
            strategy: strategy.into(),
            chose: strategy.into(),
            size,
            regime,
            gbps: Stats::or_zero(&[gbps]),
            ..Row::default()
        }
    }

    #[test]
    fn each_cell_sets_auto_and_the_best_kernel_against_the_fastest_peer() {
        let rows = vec![
            row("auto", "hot", 4096, 80.0),
            row("avx2", "hot", 4096, 82.0),
            row("libc", "hot", 4096, 87.0),
            row("aocl", "hot", 4096, 88.0),
            row("auto", "cold", 256 << 20, 10.0),
            row("avx2-nt", "cold", 256 << 20, 10.5),
            row("libc", "cold", 256 << 20, 12.05),
            row("aocl", "cold", 256 << 20, 11.0),
        ];
        let peers = vec!["libc".to_string(), "aocl".to_string()];
        let v = verdict(Op::Copy, &rows, &peers);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].best, ("avx2".to_string(), 82.0));
        assert_eq!(v[0].peer, ("aocl".to_string(), 88.0));
        assert_eq!(v[1].auto, 10.0);
        assert_eq!(v[1].peer, ("libc".to_string(), 12.05));
        let text = render(&v);
        assert!(text.contains("0.83x"), "{text}"); // 10 / 12.05
                                                   // No peer measured: no verdict for the cell.
        assert!(verdict(Op::Copy, &rows[..2], &peers).is_empty());
    }

    #[test]
    fn a_library_named_with_a_symbol_is_a_peer_of_the_copies_only() {
        let against = vec![
            "aocl=/opt/aocl/libaocl-libmem.so".to_string(),
            "folly=/x/libfolly.so:__folly_memcpy".to_string(),
        ];
        let clear = vec!["/x/libfolly.so:__folly_memset".to_string()];
        assert_eq!(peer_specs(Op::Copy, &against, &clear), against);
        assert_eq!(
            peer_specs(Op::Clear, &against, &clear),
            vec![against[0].clone(), clear[0].clone()]
        );
    }
}
