use super::*;
use crate::auto::cpu_fixtures::*;
use crate::auto::Bands;

const MIB: usize = 1 << 20;

fn choose(m: &Machine, req: &Request) -> Strategy {
    decide(m, req).strategy
}

fn single(op: Op, len: usize, hint: Hint) -> Request {
    Request::single(op, len, hint)
}

fn batch(op: Op, extent: usize, count: usize, hint: Hint) -> Request {
    Request {
        op,
        total: extent * count,
        runs: count,
        hint,
    }
}

/// One cell of the default report measured on [`intel_emr`] (
/// GB/s, median of 7): every strategy whose figure the report gave.
struct Cell {
    op: Op,
    hot: bool,
    size: usize,
    gbps: &'static [(Strategy, f64)],
    /// Strategies the report gave no figure for in this cell that are
    /// accepted anyway, with the reason (kept explicit and short).
    unmeasured_ok: &'static [(Strategy, &'static str)],
}

use Strategy::*;
const SAME_LINES: &str = "the other width of the same non-temporal store stream; not in the report";

const EMR: &[Cell] = &[
    Cell {
        op: Op::Copy,
        hot: true,
        size: 4 << 10,
        gbps: &[(PerPage, 46.9), (Avx2, 98.3), (Avx512, 141.1)],
        unmeasured_ok: &[],
    },
    Cell {
        op: Op::Copy,
        hot: true,
        size: 2 << 20,
        gbps: &[(PerPage, 10.6), (RepMovsb, 10.3), (Avx2Nt, 14.4)],
        unmeasured_ok: &[(Avx512Nt, SAME_LINES)],
    },
    Cell {
        op: Op::Copy,
        hot: true,
        size: 256 << 20,
        gbps: &[(PerPage, 4.35), (RepMovsb, 5.18), (Avx512Nt, 8.48)],
        unmeasured_ok: &[],
    },
    Cell {
        op: Op::Copy,
        hot: false,
        size: 4 << 10,
        gbps: &[(PerPage, 4.37), (Avx2, 4.29), (Avx512Nt, 6.26)],
        unmeasured_ok: &[],
    },
    Cell {
        op: Op::Copy,
        hot: false,
        size: 2 << 20,
        gbps: &[(PerPage, 4.33), (RepMovsb, 5.09), (Avx512Nt, 7.42)],
        unmeasured_ok: &[],
    },
    // One 256 MiB extent either way: the hot cell's avx512-nt figure
    // (8.48) is the same copy.
    Cell {
        op: Op::Copy,
        hot: false,
        size: 256 << 20,
        gbps: &[
            (PerPage, 3.83),
            (RepMovsb, 5.02),
            (Libc, 8.13),
            (Avx512Nt, 8.48),
        ],
        unmeasured_ok: &[],
    },
    Cell {
        op: Op::Clear,
        hot: true,
        size: 4 << 10,
        gbps: &[(PerPage, 117.2), (Avx2, 96.7), (Avx512, 154.4)],
        unmeasured_ok: &[],
    },
    // One 256 MiB extent either way: the cold cell's avx512-nt (17.58).
    Cell {
        op: Op::Clear,
        hot: true,
        size: 256 << 20,
        gbps: &[
            (PerPage, 4.33),
            (RepStosb, 6.39),
            (Avx2Nt, 18.15),
            (Avx512Nt, 17.58),
        ],
        unmeasured_ok: &[],
    },
    Cell {
        op: Op::Clear,
        hot: false,
        size: 4 << 10,
        gbps: &[(PerPage, 4.45), (Avx2, 5.60), (Avx512Nt, 8.84)],
        unmeasured_ok: &[],
    },
    Cell {
        op: Op::Clear,
        hot: false,
        size: 2 << 20,
        gbps: &[(PerPage, 4.05), (RepStosb, 7.65), (Avx2Nt, 15.69)],
        unmeasured_ok: &[(Avx512Nt, SAME_LINES)],
    },
    Cell {
        op: Op::Clear,
        hot: false,
        size: 256 << 20,
        gbps: &[
            (PerPage, 4.96),
            (RepStosb, 8.16),
            (Avx512Nt, 17.58),
            (Avx2Nt, 18.15),
        ],
        unmeasured_ok: &[],
    },
];

/// Every cell's choice is within 10% of its best and not below
/// per-page.
fn cells_choose_the_winner_or_within_10_percent(m: &Machine, cells: &[Cell]) {
    for cell in cells {
        // The default report's hot cells are single calls; its cold cells
        // are 256 MiB batches of `size` extents.
        let req = if cell.hot {
            single(cell.op, cell.size, Hint::Auto)
        } else {
            batch(cell.op, cell.size, (256 << 20) / cell.size, Hint::Auto)
        };
        let got = choose(m, &req);
        // A single call below the stream threshold is judged with the
        // read that follows it (rule 2); these figures time the copy
        // alone, so there they rank the cache-allocating strategies
        // only: a streamed destination is read back from DRAM.
        let whole_use = cell.hot && cell.size < m.stream_from();
        let best = cell
            .gbps
            .iter()
            .filter(|c| !(whole_use && c.0.is_non_temporal()))
            .map(|c| c.1)
            .fold(0.0, f64::max);
        let ok = cell.gbps.iter().any(|&(s, g)| s == got && g >= 0.9 * best)
            || cell.unmeasured_ok.iter().any(|&(s, _)| s == got);
        let per_page = cell.gbps.iter().find(|c| c.0 == PerPage).unwrap().1;
        let got_gbps = cell.gbps.iter().find(|c| c.0 == got).map(|c| c.1);
        assert!(
            ok,
            "{} {} {}: chose {got} ({got_gbps:?} GB/s), best {best}",
            cell.op,
            if cell.hot { "hot" } else { "cold" },
            cell.size
        );
        // Where only the cache-allocating strategies rank, the choice
        // and per-page may be the same instruction over different
        // lengths (rep movsb over the extent or over each 4 KiB):
        // there a gap within a median's spread (3%) is a tie.
        let tie = if whole_use { 0.97 } else { 1.0 };
        if let Some(g) = got_gbps {
            assert!(g >= tie * per_page, "{got} below per-page in {}", cell.size);
        }
    }
}

#[test]
fn emerald_rapids_cells_choose_the_winner_or_within_10_percent() {
    cells_choose_the_winner_or_within_10_percent(&intel_emr(), EMR);
}

/// Builds a cell from the default report's nine strategies, in its
/// order: per-page, rep-movsq/stosq, rep-movsb/stosb, libc, avx2,
/// avx2-nt, avx512, avx512-nt, portable.
const fn row(op: Op, hot: bool, size: usize, gbps: &'static [(Strategy, f64)]) -> Cell {
    Cell {
        op,
        hot,
        size,
        gbps,
        unmeasured_ok: &[],
    }
}

macro_rules! nine {
    (copy, $($g:expr),*) => { nine!(@ RepMovsq, RepMovsb, $($g),*) };
    (clear, $($g:expr),*) => { nine!(@ RepStosq, RepStosb, $($g),*) };
    (@ $q:ident, $b:ident, $pp:expr, $gq:expr, $gb:expr, $l:expr, $a2:expr, $a2n:expr, $a5:expr, $a5n:expr, $p:expr) => {
        &[
            (PerPage, $pp),
            ($q, $gq),
            ($b, $gb),
            (Libc, $l),
            (Avx2, $a2),
            (Avx2Nt, $a2n),
            (Avx512, $a5),
            (Avx512Nt, $a5n),
            (Portable, $p),
        ]
    };
}

/// `BULKMEM_PROFILE=off bulkmem` on the 2-vCPU VM, GB/s, median of 7.
/// With the stream threshold at 2x the claimed share (260 MiB) the
/// clears at 256 MiB and the cold clear batches stayed temporal at
/// 0.34-0.59x the best.
#[rustfmt::skip]
const EMR_2VCPU: &[Cell] = &[
    row(Op::Copy, true, 4 << 10, nine!(copy, 51.7, 52.2, 96.5, 88.7, 85.4, 10.3, 127.0, 11.2, 26.1)),
    row(Op::Copy, true, 2 << 20, nine!(copy, 12.6, 13.3, 13.9, 13.1, 13.2, 17.6, 12.8, 17.3, 11.6)),
    row(Op::Copy, true, 256 << 20, nine!(copy, 5.11, 6.01, 5.92, 10.3, 5.63, 9.20, 5.74, 10.2, 5.78)),
    row(Op::Copy, false, 4 << 10, nine!(copy, 4.66, 4.61, 4.96, 5.15, 5.15, 6.83, 5.19, 7.15, 5.07)),
    row(Op::Copy, false, 2 << 20, nine!(copy, 5.28, 6.22, 6.14, 6.57, 5.86, 9.32, 5.81, 10.4, 5.94)),
    row(Op::Copy, false, 256 << 20, nine!(copy, 5.39, 6.20, 6.03, 10.3, 5.95, 9.36, 5.75, 10.4, 5.85)),
    row(Op::Clear, true, 4 << 10, nine!(clear, 127.0, 127.0, 155.0, 148.0, 118.0, 12.3, 158.0, 12.2, 42.9)),
    row(Op::Clear, true, 2 << 20, nine!(clear, 33.5, 39.5, 39.5, 39.8, 20.4, 24.8, 31.0, 24.8, 30.5)),
    row(Op::Clear, true, 256 << 20, nine!(clear, 6.20, 8.23, 8.54, 9.44, 7.62, 22.8, 6.96, 23.0, 8.33)),
    row(Op::Clear, false, 4 << 10, nine!(clear, 6.35, 6.05, 7.29, 5.62, 5.83, 11.4, 6.40, 11.0, 7.51)),
    row(Op::Clear, false, 2 << 20, nine!(clear, 5.87, 8.56, 8.51, 8.49, 6.09, 21.8, 6.99, 22.0, 7.48)),
    row(Op::Clear, false, 256 << 20, nine!(clear, 6.34, 8.53, 8.57, 8.27, 6.22, 22.3, 7.44, 22.1, 8.02)),
];

#[test]
fn a_vm_claiming_a_whole_l3_for_two_cpus_still_streams_from_64_mib() {
    let m = intel_emr_2vcpu();
    assert_eq!(m.llc_share(), 130 * MIB);
    assert_eq!(m.stream_from(), STREAM_CAP);
    cells_choose_the_winner_or_within_10_percent(&m, EMR_2VCPU);
    // The cap binds only such claims: real machines' two shares are
    // below it.
    for real in [zen3(), zen5(), intel_erms(), intel_emr()] {
        assert!(real.stream_from() < STREAM_CAP, "{:?}", real.llc_share());
    }
}

#[test]
fn the_per_thread_share_sets_the_stream_threshold() {
    let m = intel_emr();
    assert_eq!(m.llc_share(), 300 * MIB / 16);
    // 256 MiB is < 2x the whole 300 MiB L3 but many times one share.
    assert!(streams(&m, &single(Op::Clear, 256 * MIB, Hint::Auto)));
    // Single calls: Intel's batches past L2 stream earlier (rule 2).
    let share = m.llc_share();
    let z = single(Op::Clear, 2 * share - 4096, Hint::Auto);
    assert!(!streams(&m, &z), "just under 2 shares stays temporal");
    let z = single(Op::Clear, 2 * share, Hint::Auto);
    assert!(streams(&m, &z));
}

#[test]
fn intel_streams_batches_past_l2_but_amd_does_not() {
    let c = batch(Op::Copy, 4096, 512, Hint::Auto);
    assert!(choose(&intel_emr(), &c).is_non_temporal());
    assert!(!choose(&zen5(), &c).is_non_temporal());
    // Skylake-SP has AVX-512 without FSRM: the L2 rule still applies
    // (mesh L3), the 512-bit temporal loops do not.
    assert!(choose(&intel_erms(), &c).is_non_temporal());
    let half = batch(Op::Copy, 4096, 128, Hint::Auto);
    assert!(!choose(&intel_emr(), &half).is_non_temporal());
    // Reuse keeps it in the cache.
    let r = batch(Op::Copy, 4096, 512, Hint::Reuse);
    assert!(!choose(&intel_emr(), &r).is_non_temporal());
    // A clear touches its destinations only: past L2 by them alone.
    let clear = batch(Op::Clear, 4096, 768, Hint::Auto);
    assert!(choose(&intel_emr(), &clear).is_non_temporal());
    assert!(clear.total < zen5().stream_from());
    assert!(!choose(&zen5(), &clear).is_non_temporal());
    let in_l2 = batch(Op::Clear, 4096, 512, Hint::Auto);
    assert!(!choose(&intel_emr(), &in_l2).is_non_temporal());
}

#[test]
fn amd_string_copies_keep_single_calls_in_the_cache_from_zen_4_on() {
    // Zen 5 (FSRM, AVX-512): no size streams a single copy with hint
    // auto; batches, clears and hint stream still do.
    let m = zen5();
    for len in [m.stream_from(), 256 * MIB, 1 << 30] {
        assert_eq!(choose(&m, &single(Op::Copy, len, Hint::Auto)), RepMovsb);
        assert!(choose(&m, &single(Op::Clear, len, Hint::Auto)).is_non_temporal());
        assert!(choose(&m, &single(Op::Copy, len, Hint::Stream)).is_non_temporal());
    }
    assert!(choose(&m, &batch(Op::Copy, 4096, 65536, Hint::Auto)).is_non_temporal());
    // Zen 3 (no FSRM, no AVX-512), and Zen 3 with FSRM, still stream.
    let mut z3 = zen3();
    for _ in 0..2 {
        let at = single(Op::Copy, z3.stream_from(), Hint::Auto);
        assert!(choose(&z3, &at).is_non_temporal(), "{z3:?}");
        z3.features.fsrm = true;
        z3.features.erms = true;
    }
}

#[test]
fn single_calls_stream_only_past_the_stream_threshold_even_on_intel() {
    // redis GETs of 8 MB values on a 2-vCPU Emerald Rapids VM ran
    // 0.72-0.80x while single copies streamed from 2 MiB: the reply
    // was read back from DRAM.
    for m in [intel_emr(), intel_emr_2vcpu(), intel_erms()] {
        let below = [MIB, 2 * MIB, 8 * MIB, m.stream_from() - 1];
        for len in below.into_iter().filter(|&l| l < m.stream_from()) {
            let s = choose(&m, &single(Op::Copy, len, Hint::Auto));
            assert!(!s.is_non_temporal(), "{len}: {s} on {m:?}");
        }
        let at = single(Op::Copy, m.stream_from(), Hint::Auto);
        assert!(choose(&m, &at).is_non_temporal(), "{m:?}");
        // A caller that says the destination is not read soon still
        // gets the streaming copy at 2 MiB.
        let s = single(Op::Copy, 2 * MIB, Hint::Stream);
        assert!(choose(&m, &s).is_non_temporal());
    }
}

#[test]
fn zen3_never_picks_rep_movs_for_copies() {
    for len in [64, 4096, 2 * MIB, 256 * MIB] {
        for hint in [Hint::Auto, Hint::Reuse, Hint::Stream] {
            let s = choose(&zen3(), &single(Op::Copy, len, hint));
            assert!(!matches!(s, RepMovsb | RepMovsq), "{len} {hint}: {s}");
        }
    }
    assert_eq!(
        choose(&zen3(), &single(Op::Copy, 2 * MIB, Hint::Auto)),
        Avx2
    );
}

#[test]
fn big_batches_stream_on_every_machine() {
    for m in [zen3(), zen5()] {
        for (extent, count) in [(2 * MIB, 128), (4096, 65536)] {
            let r = batch(Op::Copy, extent, count, Hint::Auto);
            assert_eq!(choose(&m, &r), Avx2Nt, "{m:?}");
        }
    }
    for m in [intel_erms(), intel_emr()] {
        let r = batch(Op::Copy, 4096, 65536, Hint::Auto);
        assert_eq!(choose(&m, &r), Avx512Nt, "{m:?}");
        let r = batch(Op::Clear, 2 * MIB, 128, Hint::Auto);
        assert_eq!(choose(&m, &r), Avx512Nt, "{m:?}");
    }
    assert_eq!(
        choose(&zen3(), &batch(Op::Clear, 2 * MIB, 128, Hint::Auto)),
        Clzero
    );
    assert_eq!(
        choose(&zen5(), &batch(Op::Clear, 4096, 65536, Hint::Auto)),
        Clzero
    );
}

#[test]
fn the_batch_total_decides_not_the_extent() {
    let m = zen3();
    let share = m.llc_share();
    // One extent of a share is cache-sized: temporal.
    assert!(!choose(&m, &single(Op::Copy, share, Hint::Auto)).is_non_temporal());
    // 128 of them are a stream.
    assert!(choose(&m, &batch(Op::Copy, share, 128, Hint::Auto)).is_non_temporal());
    // Just under the threshold stays temporal.
    let under = batch(Op::Copy, 4096, 2 * share / 4096 - 1, Hint::Auto);
    assert!(!choose(&m, &under).is_non_temporal());
}

#[test]
fn hints_override_size() {
    assert_eq!(
        choose(&zen3(), &single(Op::Copy, 64 << 10, Hint::Stream)),
        Avx2Nt
    );
    let huge = single(Op::Copy, 1 << 30, Hint::Reuse);
    assert!(!choose(&zen3(), &huge).is_non_temporal());
    assert!(!choose(&intel_emr(), &huge).is_non_temporal());
    assert_eq!(
        choose(&zen3(), &single(Op::Clear, 2 * MIB, Hint::Stream)),
        Clzero
    );
}

#[test]
fn tiny_runs_never_stream() {
    let r = batch(Op::Copy, 64, 1 << 20, Hint::Stream);
    assert!(!choose(&zen5(), &r).is_non_temporal());
    let r = batch(Op::Clear, 512, 1 << 20, Hint::Auto);
    assert!(!choose(&zen3(), &r).is_non_temporal());
    let r = batch(Op::Copy, 512, 1 << 20, Hint::Auto);
    assert!(!choose(&intel_emr(), &r).is_non_temporal());
}

#[test]
fn small_temporal_runs_use_vector_loops() {
    // rep movsb start-up dominates below L1d size even with FSRM.
    assert_eq!(choose(&zen5(), &single(Op::Copy, 64, Hint::Auto)), Avx512);
    assert_eq!(
        choose(&zen5(), &single(Op::Copy, 16 << 10, Hint::Auto)),
        Avx512
    );
    assert_eq!(choose(&zen3(), &single(Op::Copy, 4096, Hint::Auto)), Avx2);
    // AVX-512 on Intel from Ice Lake on (FSRM), not on Skylake-SP.
    assert_eq!(
        choose(&intel_erms(), &single(Op::Copy, 4096, Hint::Auto)),
        Avx2
    );
    assert_eq!(
        choose(&intel_emr(), &single(Op::Copy, 4096, Hint::Auto)),
        Avx512
    );
    assert_eq!(
        choose(&intel_emr(), &single(Op::Clear, 4096, Hint::Auto)),
        Avx512
    );
    assert_eq!(
        choose(&zen5(), &single(Op::Clear, 256 << 10, Hint::Auto)),
        Avx512
    );
    assert_eq!(choose(&zen3(), &single(Op::Clear, 4096, Hint::Auto)), Avx2);
    assert_eq!(
        choose(&old_x86(), &single(Op::Copy, 64, Hint::Auto)),
        PerPage
    );
}

#[test]
fn large_temporal_runs_follow_string_features() {
    let c = |m: &Machine, op, len| choose(m, &single(op, len, Hint::Auto));
    assert_eq!(c(&zen5(), Op::Copy, 64 << 10), RepMovsb);
    // AMD single copies from the L2 to the stream threshold: AVX2, as
    // glibc; on Zen 4 (FSRM, AVX-512) rep movsb where the buffers share
    // their offset in a line (Zen 5, 1-4 MiB hot: 1.20-1.29x); from Zen 5
    // on rep movsb at any offset (1.06-1.23x with the source misaligned).
    assert_eq!(c(&zen4(), Op::Copy, 2 * MIB), RepMovsbOrAvx2);
    assert_eq!(c(&zen5(), Op::Copy, 2 * MIB), RepMovsb);
    assert_eq!(c(&zen3(), Op::Copy, 2 * MIB), Avx2);
    assert_eq!(c(&zen2(), Op::Copy, 2 * MIB), Avx2);
    assert_eq!(c(&zen5(), Op::Copy, MIB - 1), RepMovsb);
    assert_eq!(c(&zen5(), Op::Copy, zen5().stream_from()), RepMovsb);
    let b = batch(Op::Copy, MIB, 3, Hint::Auto);
    assert_eq!(choose(&zen5(), &b), RepMovsb);
    assert_eq!(c(&intel_emr(), Op::Copy, 4 * MIB), RepMovsb);
    assert_eq!(c(&intel_erms(), Op::Copy, 64 << 10), RepMovsb);
    assert_eq!(c(&zen3(), Op::Copy, 64 << 10), Avx2);
    assert_eq!(c(&old_x86(), Op::Copy, 2 * MIB), PerPage);
    assert_eq!(c(&zen5(), Op::Clear, 2 * MIB), RepStosb);
    assert_eq!(c(&intel_emr(), Op::Clear, 2 * MIB), RepStosb);
    // Without ERMS a vector loop clears faster than a string instruction
    // (Zen 2: AVX2 stores 1.26x rep stosq, hot 2 MiB); rep stosq only
    // where there is no AVX2 either.
    assert_eq!(c(&zen3(), Op::Clear, 2 * MIB), Avx2);
    assert_eq!(c(&zen2(), Op::Clear, 2 * MIB), Avx2);
    assert_eq!(c(&zen2(), Op::Clear, 4 << 10), Avx2);
    assert_eq!(c(&old_x86(), Op::Clear, 1 << 30), RepStosq);
}

#[test]
fn zen2_takes_no_string_instruction_where_a_vector_loop_is_faster() {
    let m = zen2();
    let single = |op, len| choose(&m, &single(op, len, Hint::Auto));
    for len in [4 << 10, 64 << 10, 256 << 10, MIB, 2 * MIB, 3 * MIB] {
        for op in [Op::Copy, Op::Clear] {
            let s = single(op, len);
            assert!(
                !matches!(s, RepMovsb | RepMovsq | RepStosb | RepStosq | PerPage),
                "{op:?} {len}: {s:?}"
            );
        }
    }
    // Past two per-thread LLC shares (4 MiB) clears stream with clzero.
    assert_eq!(single(Op::Clear, 64 * MIB), Clzero);
    let b = batch(Op::Clear, MIB, 2, Hint::Auto);
    assert_eq!(choose(&m, &b), Avx2);
}

#[test]
fn no_x86_means_portable_loops() {
    let m = Machine {
        vendor: Vendor::Other,
        family: 0,
        features: Features::default(),
        l1d_bytes: 32 << 10,
        l2_bytes: 256 << 10,
        llc_bytes: 4 * MIB,
        llc_cpus: 4,
        x86: false,
    };
    for op in [Op::Copy, Op::Clear] {
        for len in [0, 100, 1 << 30] {
            assert_eq!(choose(&m, &single(op, len, Hint::Stream)), PerPage);
        }
    }
}

#[test]
fn avx512_only_streams_on_amd_when_avx2_is_missing() {
    let mut m = zen5();
    m.features.avx2 = false;
    m.features.clzero = false;
    assert_eq!(
        choose(&m, &batch(Op::Copy, 2 * MIB, 512, Hint::Auto)),
        Avx512Nt
    );
    assert_eq!(
        choose(&m, &single(Op::Copy, 1 << 30, Hint::Stream)),
        Avx512Nt
    );
    assert_eq!(
        choose(&m, &single(Op::Clear, 1 << 30, Hint::Auto)),
        Avx512Nt
    );
}

#[test]
fn every_choice_is_a_strategy_of_the_op_the_machine_has() {
    for m in machines() {
        for op in [Op::Copy, Op::Clear] {
            for total in [0, 1, 4096, 2 * MIB, 1 << 30] {
                for runs in [1, 16, 4096] {
                    for &hint in Hint::ALL {
                        let r = Request {
                            op,
                            total,
                            runs,
                            hint,
                        };
                        let s = choose(&m, &r);
                        assert!(s.supports(op) && s != Auto, "{s} for {r:?}");
                        assert_eq!(s.missing_feature(&m.features), None, "{s} on {m:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn bands_agree_with_the_rules_at_every_edge() {
    for m in machines() {
        let mut lens: Vec<usize> = vec![0, 1, 63, 64, 65, 4096, usize::MAX];
        for e in edges(&m) {
            lens.extend([e.saturating_sub(1), e, e + 1, e + 2]);
        }
        let mut x = 1usize;
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lens.push(x >> (x % 40 + 20));
        }
        for op in [Op::Copy, Op::Clear] {
            for &hint in Hint::ALL {
                let b = Bands::build(&edges(&m), |len| {
                    choose(&m, &Request::single(op, len, hint))
                });
                for &len in &lens {
                    assert_eq!(
                        b.lookup(len),
                        choose(&m, &Request::single(op, len, hint)),
                        "{op} {hint} len {len} on {m:?}"
                    );
                }
            }
        }
    }
}
