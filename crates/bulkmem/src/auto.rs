//! How `auto` picks a primitive: from the CPU's features, the size of the
//! whole batch against the caches, the length of its contiguous runs, and
//! the caller's hint (DESIGN.md principles 1-3).
//!
//! The rules, in order:
//!
//! 1. **Stream or not.** Non-temporal stores (no read-for-ownership, no cache
//!    pollution) win when the destination will not be read soon. That is the
//!    case when the caller says [`Hint::Stream`], or, with [`Hint::Auto`],
//!    when the batch total is at least [`STREAM_FACTOR`] x the LLC: by the time
//!    the batch ends its first lines have been evicted anyway. [`Hint::Reuse`]
//!    never streams. Runs shorter than [`NT_MIN_RUN`] on average never stream
//!    either: partial lines and the closing fence would cost more than the
//!    saved reads.
//! 2. **Streaming primitive.** Clear: `clzero` where present (AMD), else
//!    `avx2-nt`. Copy: `avx2-nt`. The 512-bit forms move the same lines
//!    through the same write-combining buffers and measured no faster, so
//!    they are used only when AVX2 is absent.
//! 3. **Small temporal runs: vector loops.** `rep movsb`/`stosb` pay a
//!    start-up cost even with FSRM (measured on Zen 5: 80 GB/s at 1 KiB where
//!    AVX-512 does 187). Copies whose source and destination fit in L1d
//!    together, and clears that fit in half the L2, use `avx512` (AMD, where
//!    512-bit stores cost no frequency) or `avx2`.
//! 4. **Larger temporal runs.** Copy: `rep movsb` with FSRM (seed 000's
//!    Zen 5), or with ERMS for runs of at least [`ERMS_MIN_RUN`]; otherwise
//!    `avx2`; otherwise the per-page loop itself. Never `rep movsb`/`rep movsq`
//!    over long runs without ERMS: that is the 0.6-0.9x regression seed 000
//!    measured on Zen 3. Clear: `rep stosb` with ERMS/FZRM/FSRS, otherwise
//!    `rep stosq` (the per-page primitive minus the per-page calls, which
//!    seed 004 found faster on Milan).
//!
//! A calibration profile measured by `bulkmem tune` will replace these
//! thresholds per machine (a later issue); the rules are the fallback.

use std::sync::OnceLock;

use crate::cpu::{self, Features, Vendor};
use crate::strategy::{Hint, Op, Strategy};

/// Stream when the batch total is at least this many LLCs (hint `Auto`).
pub const STREAM_FACTOR: usize = 2;
/// Mean contiguous run below which streaming is never chosen.
pub const NT_MIN_RUN: usize = 1024;
/// Shortest run for which `rep movsb` is chosen on ERMS CPUs without FSRM.
pub const ERMS_MIN_RUN: usize = 2048;

/// The facts about a CPU that the rules consult. [`Machine::this`] describes
/// the running machine; tests build others to check the rules elsewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    pub vendor: Vendor,
    pub features: Features,
    /// Bytes of L1 data cache per core.
    pub l1d_bytes: usize,
    /// Bytes of L2 per core.
    pub l2_bytes: usize,
    /// Bytes of LLC one thread can fill (one LLC domain).
    pub llc_bytes: usize,
    /// Whether x86 string instructions exist at all.
    pub x86: bool,
}

impl Machine {
    /// The running machine (after `BULKMEM_DISABLE`), built once: `auto`
    /// consults it on every call, including 64-byte copies.
    pub fn this() -> &'static Machine {
        static THIS: OnceLock<Machine> = OnceLock::new();
        THIS.get_or_init(|| {
            let i = cpu::info();
            Machine {
                vendor: i.vendor,
                features: i.features,
                l1d_bytes: i.topology.data_cache_bytes(1).unwrap_or(32 << 10),
                l2_bytes: i.topology.data_cache_bytes(2).unwrap_or(512 << 10),
                llc_bytes: i.llc_bytes(),
                x86: cfg!(target_arch = "x86_64"),
            }
        })
    }
}

/// What is about to be done: an operation over `total` bytes in `runs`
/// contiguous runs (after coalescing), with the caller's hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub op: Op,
    pub total: usize,
    pub runs: usize,
    pub hint: Hint,
}

impl Request {
    /// A single contiguous extent.
    pub fn single(op: Op, len: usize, hint: Hint) -> Request {
        Request {
            op,
            total: len,
            runs: 1,
            hint,
        }
    }

    fn mean_run(&self) -> usize {
        // Single calls skip the division: it alone costs more than the rest
        // of the decision, which every small copy pays.
        if self.runs <= 1 {
            self.total
        } else {
            self.total / self.runs
        }
    }
}

/// A decision and the rule that made it, for `bulkmem info` and reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    pub strategy: Strategy,
    pub reason: &'static str,
}

/// The strategy `auto` uses for `req` on `m`.
#[inline]
pub fn choose(m: &Machine, req: &Request) -> Strategy {
    decide(m, req).strategy
}

/// As [`choose`], with the reason.
#[inline]
pub fn decide(m: &Machine, req: &Request) -> Choice {
    let f = &m.features;
    let streaming = match req.hint {
        Hint::Reuse => false,
        Hint::Stream => true,
        Hint::Auto => req.total >= STREAM_FACTOR.saturating_mul(m.llc_bytes),
    } && req.mean_run() >= NT_MIN_RUN;

    if streaming {
        let why = if req.hint == Hint::Stream {
            "hint stream: non-temporal stores"
        } else {
            "batch total >= 2x LLC: non-temporal stores"
        };
        let nt = match req.op {
            Op::Clear if f.clzero => Some(Strategy::Clzero),
            _ if f.avx2 => Some(Strategy::Avx2Nt),
            _ if f.avx512f && f.avx512bw => Some(Strategy::Avx512Nt),
            _ => None,
        };
        if let Some(strategy) = nt {
            return Choice {
                strategy,
                reason: why,
            };
        }
    }
    temporal(m, req)
}

#[inline]
fn temporal(m: &Machine, req: &Request) -> Choice {
    let f: &Features = &m.features;
    let c = |strategy, reason| Choice { strategy, reason };
    let run = req.mean_run();
    let vector = if f.avx512f && f.avx512bw && m.vendor == Vendor::Amd {
        Some(Strategy::Avx512)
    } else if f.avx2 {
        Some(Strategy::Avx2)
    } else {
        None
    };
    match (req.op, vector) {
        (Op::Copy, Some(v)) if run.saturating_mul(2) <= m.l1d_bytes => {
            return c(v, "source and destination fit in L1d: vector loop")
        }
        (Op::Clear, Some(v)) if run.saturating_mul(2) <= m.l2_bytes => {
            return c(v, "fits in half the L2: vector loop")
        }
        _ => {}
    }
    match req.op {
        Op::Copy if m.x86 && f.fsrm => c(Strategy::RepMovsb, "FSRM: rep movsb"),
        Op::Copy if m.x86 && f.erms && run >= ERMS_MIN_RUN => {
            c(Strategy::RepMovsb, "ERMS and long runs: rep movsb")
        }
        Op::Copy if f.avx2 => c(Strategy::Avx2, "no fast rep movsb: AVX2 loop"),
        Op::Copy => c(Strategy::PerPage, "no ERMS or AVX2: the per-page loop"),
        Op::Clear if m.x86 && (f.erms || f.fzrm || f.fsrs) => {
            c(Strategy::RepStosb, "ERMS: rep stosb")
        }
        Op::Clear if m.x86 => c(Strategy::RepStosq, "no ERMS: rep stosq over the extent"),
        Op::Clear => c(Strategy::PerPage, "portable: the per-page loop"),
    }
}

/// The rules for single calls of one op and hint, compiled into length
/// bands: the decision only changes at the few thresholds above, so a call
/// costs a short scan instead of the whole rule evaluation (which, for a
/// 64-byte copy, cost more than the copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bands {
    /// (first length of the band, strategy), ascending; `len` used.
    bands: [(usize, Strategy); 8],
    len: usize,
}

impl Bands {
    pub fn build(m: &Machine, op: Op, hint: Hint) -> Bands {
        // Every length at which some rule's comparison flips.
        let mut edges = [
            0,
            NT_MIN_RUN,
            ERMS_MIN_RUN,
            m.l1d_bytes / 2 + 1,
            m.l2_bytes / 2 + 1,
            STREAM_FACTOR.saturating_mul(m.llc_bytes),
        ];
        edges.sort_unstable();
        let mut b = Bands {
            bands: [(0, Strategy::Auto); 8],
            len: 0,
        };
        for e in edges {
            let s = choose(m, &Request::single(op, e, hint));
            if b.len == 0 || b.bands[b.len - 1].1 != s {
                b.bands[b.len] = (e, s);
                b.len += 1;
            }
        }
        b
    }

    /// The strategy for a single call of `len` bytes.
    #[inline]
    pub fn lookup(&self, len: usize) -> Strategy {
        let mut s = self.bands[0].1;
        for &(start, st) in &self.bands[1..self.len] {
            if len < start {
                break;
            }
            s = st;
        }
        s
    }
}

/// The running machine's bands, per op and hint, built once.
#[inline]
pub fn bands(op: Op, hint: Hint) -> &'static Bands {
    static ALL: OnceLock<[[Bands; 3]; 2]> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        let m = Machine::this();
        [Op::Copy, Op::Clear]
            .map(|op| [Hint::Auto, Hint::Reuse, Hint::Stream].map(|h| Bands::build(m, op, h)))
    });
    let h = match hint {
        Hint::Auto => 0,
        Hint::Reuse => 1,
        Hint::Stream => 2,
    };
    &all[(op == Op::Clear) as usize][h]
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    /// AMD EPYC 7713 as seed 000 describes it: AVX2, CLZERO, no ERMS/FSRM.
    fn zen3() -> Machine {
        Machine {
            vendor: Vendor::Amd,
            features: Features {
                avx2: true,
                clzero: true,
                rep_good: true,
                ..Features::default()
            },
            l1d_bytes: 32 << 10,
            l2_bytes: 512 << 10,
            llc_bytes: 32 * MIB,
            x86: true,
        }
    }

    /// AMD EPYC 9655: FSRM, ERMS, AVX-512, CLZERO.
    fn zen5() -> Machine {
        Machine {
            vendor: Vendor::Amd,
            features: Features {
                erms: true,
                fsrm: true,
                avx2: true,
                avx512f: true,
                avx512bw: true,
                clzero: true,
                rep_good: true,
                ..Features::default()
            },
            l1d_bytes: 48 << 10,
            l2_bytes: MIB,
            llc_bytes: 32 * MIB,
            x86: true,
        }
    }

    /// A Skylake-SP-like Intel: ERMS without FSRM, AVX-512, no CLZERO.
    fn intel_erms() -> Machine {
        Machine {
            vendor: Vendor::Intel,
            features: Features {
                erms: true,
                avx2: true,
                avx512f: true,
                avx512bw: true,
                ..Features::default()
            },
            l1d_bytes: 32 << 10,
            l2_bytes: MIB,
            llc_bytes: 38 * MIB,
            x86: true,
        }
    }

    fn old_x86() -> Machine {
        Machine {
            vendor: Vendor::Intel,
            features: Features::default(),
            l1d_bytes: 32 << 10,
            l2_bytes: 256 << 10,
            llc_bytes: 8 * MIB,
            x86: true,
        }
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

    #[test]
    fn zen3_never_picks_rep_movs_for_copies() {
        for len in [64, 4096, 2 * MIB, 256 * MIB] {
            for hint in [Hint::Auto, Hint::Reuse, Hint::Stream] {
                let s = choose(&zen3(), &single(Op::Copy, len, hint));
                assert!(
                    !matches!(s, Strategy::RepMovsb | Strategy::RepMovsq),
                    "{len} {hint}: {s}"
                );
            }
        }
        assert_eq!(
            choose(&zen3(), &single(Op::Copy, 2 * MIB, Hint::Auto)),
            Strategy::Avx2
        );
    }

    #[test]
    fn big_batches_stream_on_every_machine() {
        for m in [zen3(), zen5(), intel_erms()] {
            let r = batch(Op::Copy, 2 * MIB, 128, Hint::Auto);
            assert_eq!(choose(&m, &r), Strategy::Avx2Nt, "{m:?}");
            let r = batch(Op::Copy, 4096, 65536, Hint::Auto);
            assert_eq!(choose(&m, &r), Strategy::Avx2Nt, "{m:?}");
        }
        assert_eq!(
            choose(&zen3(), &batch(Op::Clear, 2 * MIB, 128, Hint::Auto)),
            Strategy::Clzero
        );
        assert_eq!(
            choose(&zen5(), &batch(Op::Clear, 4096, 65536, Hint::Auto)),
            Strategy::Clzero
        );
        assert_eq!(
            choose(&intel_erms(), &batch(Op::Clear, 2 * MIB, 128, Hint::Auto)),
            Strategy::Avx2Nt
        );
    }

    #[test]
    fn the_batch_total_decides_not_the_extent() {
        // One 2 MiB extent alone is cache-sized: temporal.
        let one = single(Op::Copy, 2 * MIB, Hint::Auto);
        assert!(!choose(&zen3(), &one).is_non_temporal());
        // 128 of them are a 256 MiB stream.
        assert!(choose(&zen3(), &batch(Op::Copy, 2 * MIB, 128, Hint::Auto)).is_non_temporal());
        // Just under the threshold stays temporal.
        let under = batch(Op::Copy, MIB, 2 * 32 - 1, Hint::Auto);
        assert!(!choose(&zen3(), &under).is_non_temporal());
    }

    #[test]
    fn hints_override_size() {
        let small = single(Op::Copy, 64 * 1024, Hint::Stream);
        assert_eq!(choose(&zen3(), &small), Strategy::Avx2Nt);
        let huge = single(Op::Copy, 1 << 30, Hint::Reuse);
        assert!(!choose(&zen3(), &huge).is_non_temporal());
        let clear = single(Op::Clear, 2 * MIB, Hint::Stream);
        assert_eq!(choose(&zen3(), &clear), Strategy::Clzero);
    }

    #[test]
    fn tiny_runs_never_stream() {
        let r = batch(Op::Copy, 64, 1 << 20, Hint::Stream);
        assert!(!choose(&zen5(), &r).is_non_temporal());
        let r = batch(Op::Clear, 512, 1 << 20, Hint::Auto);
        assert!(!choose(&zen3(), &r).is_non_temporal());
    }

    #[test]
    fn small_temporal_runs_use_vector_loops() {
        // rep movsb start-up dominates below L1d size even with FSRM.
        assert_eq!(
            choose(&zen5(), &single(Op::Copy, 64, Hint::Auto)),
            Strategy::Avx512
        );
        assert_eq!(
            choose(&zen5(), &single(Op::Copy, 16 << 10, Hint::Auto)),
            Strategy::Avx512
        );
        assert_eq!(
            choose(&zen3(), &single(Op::Copy, 4096, Hint::Auto)),
            Strategy::Avx2
        );
        // AVX-512 is left to AMD, where it costs no frequency.
        assert_eq!(
            choose(&intel_erms(), &single(Op::Copy, 4096, Hint::Auto)),
            Strategy::Avx2
        );
        assert_eq!(
            choose(&zen5(), &single(Op::Clear, 256 << 10, Hint::Auto)),
            Strategy::Avx512
        );
        assert_eq!(
            choose(&zen3(), &single(Op::Clear, 4096, Hint::Auto)),
            Strategy::Avx2
        );
        assert_eq!(
            choose(&old_x86(), &single(Op::Copy, 64, Hint::Auto)),
            Strategy::PerPage
        );
    }

    #[test]
    fn large_temporal_runs_follow_string_features() {
        assert_eq!(
            choose(&zen5(), &single(Op::Copy, 64 << 10, Hint::Auto)),
            Strategy::RepMovsb
        );
        assert_eq!(
            choose(&zen5(), &single(Op::Copy, 2 * MIB, Hint::Auto)),
            Strategy::RepMovsb
        );
        assert_eq!(
            choose(&intel_erms(), &single(Op::Copy, 64 << 10, Hint::Auto)),
            Strategy::RepMovsb
        );
        assert_eq!(
            choose(&zen3(), &single(Op::Copy, 64 << 10, Hint::Auto)),
            Strategy::Avx2
        );
        assert_eq!(
            choose(&old_x86(), &single(Op::Copy, 2 * MIB, Hint::Auto)),
            Strategy::PerPage
        );
        assert_eq!(
            choose(&zen5(), &single(Op::Clear, 2 * MIB, Hint::Auto)),
            Strategy::RepStosb
        );
        assert_eq!(
            choose(&zen3(), &single(Op::Clear, 2 * MIB, Hint::Auto)),
            Strategy::RepStosq
        );
        assert_eq!(
            choose(&old_x86(), &single(Op::Clear, 1 << 30, Hint::Auto)),
            Strategy::RepStosq
        );
    }

    #[test]
    fn no_x86_means_portable_loops() {
        let m = Machine {
            vendor: Vendor::Other,
            features: Features::default(),
            l1d_bytes: 32 << 10,
            l2_bytes: 256 << 10,
            llc_bytes: 4 * MIB,
            x86: false,
        };
        for op in [Op::Copy, Op::Clear] {
            for len in [0, 100, 1 << 30] {
                assert_eq!(
                    choose(&m, &single(op, len, Hint::Stream)),
                    Strategy::PerPage
                );
            }
        }
    }

    #[test]
    fn avx512_only_streams_when_avx2_is_missing() {
        let mut m = intel_erms();
        m.features.avx2 = false;
        assert_eq!(
            choose(&m, &single(Op::Copy, 1 << 30, Hint::Auto)),
            Strategy::Avx512Nt
        );
        assert_eq!(
            choose(&m, &single(Op::Clear, 1 << 30, Hint::Auto)),
            Strategy::Avx512Nt
        );
    }

    #[test]
    fn every_choice_is_a_strategy_of_the_op_the_machine_has() {
        for m in [zen3(), zen5(), intel_erms(), old_x86()] {
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
                            assert!(s.supports(op) && s != Strategy::Auto, "{s} for {r:?}");
                            assert_eq!(s.missing_feature(&m.features), None, "{s} on {m:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn bands_agree_with_the_rules_at_every_edge() {
        for m in [zen3(), zen5(), intel_erms(), old_x86()] {
            let mut lens: Vec<usize> = vec![0, 1, 63, 64, 65, 4096, usize::MAX];
            for e in [
                NT_MIN_RUN,
                ERMS_MIN_RUN,
                m.l1d_bytes / 2,
                m.l2_bytes / 2,
                2 * m.llc_bytes,
            ] {
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
                    let b = Bands::build(&m, op, hint);
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
}
