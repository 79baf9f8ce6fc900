//! How `auto` picks a primitive for a copy or clear: from what was measured
//! on this machine when there is a profile, else from built-in rules, and
//! always under the user's environment overrides.
//!
//! In order, for each request (an operation, the batch total, how many
//! contiguous runs it arrives in, and the caller's [`Hint`]):
//!
//! 1. **Overrides** ([`Overrides`]): `BULKMEM_STRATEGY` forces a strategy;
//!    `BULKMEM_NT_THRESHOLD` sets the batch total from which hint `Auto`
//!    streams. Unknown names and values are reported once on stderr and in
//!    `bulkmem info`, then ignored.
//! 2. **A profile** ([`Profile`]) written by `bulkmem tune` for this exact CPU
//!    (vendor, family/model/stepping, features, caches, CPUs, bulkmem
//!    version): the winner measured here for the request's shape (single
//!    call, batch of small or of large extents) and size.
//!    `BULKMEM_PROFILE=FILE` names another file, `BULKMEM_PROFILE=off`
//!    ignores profiles. A missing, corrupt, foreign or outdated profile is
//!    never fatal: [`profile_status`] says why the rules are used.
//! 3. **Built-in rules** ([`rules`]): a few measured rules keyed on CPU
//!    features and cache sizes.
//!
//! Everything is resolved once per process, lazily and thread-safely: a
//! single call then costs a short scan of precompiled length bands
//! ([`bands`]), a batch one [`Policy::decide`].

mod bands;
mod cover;
mod env;
mod load;
mod profile;
#[cfg(test)]
mod property_tests;
pub mod rules;
mod toml;

use std::sync::OnceLock;

use crate::cpu::{self, Features, Vendor};
use crate::error::{Error, StrategyError};
#[cfg(target_arch = "x86_64")]
use crate::handle::CheckedKernel;
use crate::handle::Kernel;
use crate::strategy::{Hint, Op, Options, Strategy};

pub use bands::Bands;
use bands::Compiled;

pub use env::Overrides;
pub use load::{
    default_profile_path, load_profile, load_system_profile, profile, profile_loads,
    profile_setting, profile_status, system_profile_path, ProfileSetting, ProfileStatus, MAX_BYTES,
    SYSTEM_PROFILE_DIR,
};
pub use profile::{Cell, Identity, Profile, Shape, FORMAT, MAX_CELLS, SMALL_EXTENT_MAX};
pub use rules::{decide, ERMS_MIN_RUN, NT_MIN_RUN, STREAM_CAP, STREAM_FACTOR};

/// The facts about a CPU that the rules consult. [`Machine::this`] describes
/// the running machine; tests build others to check the rules elsewhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// Who made the CPU (some rules differ between AMD and Intel).
    pub vendor: Vendor,
    /// The features the kernels may use (after `BULKMEM_DISABLE`).
    pub features: Features,
    /// Bytes of L1 data cache per core.
    pub l1d_bytes: usize,
    /// Bytes of L2 per core.
    pub l2_bytes: usize,
    /// Bytes of one LLC domain.
    pub llc_bytes: usize,
    /// CPUs sharing one LLC domain (at least 1).
    pub llc_cpus: usize,
    /// Whether x86 string instructions exist at all.
    pub x86: bool,
}

impl Machine {
    /// The running machine (after `BULKMEM_DISABLE`), built once: `auto`
    /// consults it on every call, including 64-byte copies.
    pub fn this() -> &'static Machine {
        static THIS: OnceLock<Machine> = OnceLock::new();
        THIS.get_or_init(|| {
            let i = cpu::facts();
            Machine {
                vendor: i.vendor,
                features: i.features,
                l1d_bytes: i.caches.l1d.unwrap_or(32 << 10),
                l2_bytes: i.caches.l2.unwrap_or(512 << 10),
                llc_bytes: i.llc_bytes(),
                llc_cpus: i.llc_cpus(),
                x86: cfg!(target_arch = "x86_64"),
            }
        })
    }

    /// One thread's share of its LLC: what a copy can count on keeping
    /// when every CPU sharing the cache is busy (glibc sizes its
    /// non-temporal threshold from the same share).
    pub fn llc_share(&self) -> usize {
        self.llc_bytes / self.llc_cpus.max(1)
    }

    /// The total from which the built-in rules stream with hint `Auto`:
    /// [`STREAM_FACTOR`] shares, at most [`STREAM_CAP`].
    pub fn stream_from(&self) -> usize {
        STREAM_FACTOR
            .saturating_mul(self.llc_share())
            .min(STREAM_CAP)
    }
}

/// What is about to be done: an operation over `total` bytes in `runs`
/// contiguous runs (after coalescing), with the caller's hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Copy or clear.
    pub op: Op,
    /// Bytes in the whole batch (or the single call).
    pub total: usize,
    /// Contiguous runs the bytes arrive in, after adjacent extents are
    /// merged (1 for a single call; 0 for an empty batch).
    pub runs: usize,
    /// What the caller expects to do with the destination next.
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

    /// Mean bytes per contiguous run.
    pub fn mean_run(&self) -> usize {
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
    /// The strategy chosen (never `Auto`).
    pub strategy: Strategy,
    /// Why, in a few words: the rule, profile cell or environment variable
    /// that decided.
    pub reason: &'static str,
}

/// The strategy the built-in rules pick for `req` on `m` (no profile, no
/// overrides): [`rules::decide`] without the reason.
#[inline]
pub fn choose(m: &Machine, req: &Request) -> Strategy {
    decide(m, req).strategy
}

/// Everything `auto` consults, as values: a pure function of them decides.
#[derive(Clone, Copy, Debug)]
pub struct Policy<'a> {
    /// The CPU the built-in rules are applied to.
    pub machine: &'a Machine,
    /// Measured winners that take precedence over the rules where they
    /// cover the request; `None`: the rules alone.
    pub profile: Option<&'a Profile>,
    /// Environment overrides, which take precedence over both.
    pub overrides: &'a Overrides,
}

impl Policy<'static> {
    /// The running process's: this machine, its profile (if one loads), and
    /// the environment's overrides.
    pub fn here() -> Policy<'static> {
        Policy {
            machine: Machine::this(),
            profile: profile(),
            overrides: Overrides::from_env(),
        }
    }
}

impl Policy<'_> {
    /// What `auto` does with `req` under this policy.
    pub fn decide(&self, req: &Request) -> Choice {
        if let Some(strategy) = self.overrides.forced(req.op) {
            return Choice {
                strategy,
                reason: "BULKMEM_STRATEGY",
            };
        }
        if let (Some(t), Hint::Auto) = (self.overrides.nt_threshold, req.hint) {
            let hint = if req.total >= t {
                Hint::Stream
            } else {
                Hint::Reuse
            };
            let mut c = self.decide_unforced(&Request { hint, ..*req });
            c.reason = if c.strategy.is_non_temporal() {
                "BULKMEM_NT_THRESHOLD: total at or above it, non-temporal"
            } else {
                "BULKMEM_NT_THRESHOLD: cache-allocating (total below it, or runs too short)"
            };
            return c;
        }
        self.decide_unforced(req)
    }

    fn decide_unforced(&self, req: &Request) -> Choice {
        self.profile
            .and_then(|p| p.decide(req))
            .unwrap_or_else(|| decide(self.machine, req))
    }

    /// Every length at which a single call's decision may change.
    pub fn edges(&self, op: Op) -> Vec<usize> {
        let mut e = rules::edges(self.machine).to_vec();
        if let Some(p) = self.profile {
            e.extend(p.single_edges(op));
        }
        if let Some(t) = self.overrides.nt_threshold {
            e.push(t);
        }
        e.sort_unstable();
        e.dedup();
        e
    }

    /// What `auto` runs for `req` on this CPU: the decision as a kernel.
    /// A decision this CPU cannot run (never for the running process's
    /// policy, whose profile and overrides are checked when they load, but
    /// possible for a policy built on another machine's description) falls
    /// to the built-in rules for this CPU, then to `per-page`.
    pub fn kernel(&self, req: &Request) -> Kernel {
        Kernel::new(self.decide(req).strategy, req.op)
            .or_else(|_| Kernel::new(decide(Machine::this(), req).strategy, req.op))
            .unwrap_or_else(|_| Kernel::baseline(req.op))
    }

    /// The decisions for single calls of `op` with `hint`, as length bands.
    pub fn bands(&self, op: Op, hint: Hint) -> Bands {
        Bands::build(&self.edges(op), |len| {
            self.decide(&Request::single(op, len, hint)).strategy
        })
    }
}

/// What `auto` picks for `req` in this process (overrides, profile, rules).
#[inline]
pub fn here(req: &Request) -> Choice {
    Policy::here().decide(req)
}

/// This process's policy compiled once: per op and hint, the single-call
/// bands, their kernels, and (x86-64) the checked twins of those kernels.
struct Here {
    bands: [[Bands; 3]; 2],
    compiled: [[Compiled<Kernel>; 3]; 2],
    #[cfg(target_arch = "x86_64")]
    checked: [[Compiled<CheckedKernel>; 3]; 2],
}

#[inline]
fn compiled_here() -> &'static Here {
    static HERE: OnceLock<Here> = OnceLock::new();
    HERE.get_or_init(|| {
        let p = Policy::here();
        let bands = [Op::Copy, Op::Clear].map(|op| HINTS.map(|h| p.bands(op, h)));
        let compiled = [Op::Copy, Op::Clear].map(|op| {
            let row = &bands[(op == Op::Clear) as usize];
            [0, 1, 2].map(|h| {
                Compiled::new(row[h], |start, s| {
                    Kernel::new(s, op)
                        .unwrap_or_else(|_| p.kernel(&Request::single(op, start, HINTS[h])))
                })
            })
        });
        #[cfg(target_arch = "x86_64")]
        let checked = [Op::Copy, Op::Clear].map(|op| {
            let row = &compiled[(op == Op::Clear) as usize];
            [0, 1, 2].map(|h| {
                // The twin changes where the kernel does and, for `libc`,
                // where glibc changes its own loop.
                let mut edges = p.edges(op);
                edges.extend(libc_twin_edges(p.machine));
                edges.sort_unstable();
                edges.dedup();
                let twins = Bands::build(&edges, |len| {
                    twin(op, row[h].kernel(len).strategy(), len).strategy()
                });
                Compiled::new(twins, |start, s| twin(op, s, start))
            })
        });
        Here {
            bands,
            compiled,
            #[cfg(target_arch = "x86_64")]
            checked,
        }
    })
}

/// The hints in [`hint_ix`] order.
const HINTS: [Hint; 3] = [Hint::Auto, Hint::Reuse, Hint::Stream];

#[inline]
fn hint_ix(hint: Hint) -> usize {
    match hint {
        Hint::Auto => 0,
        Hint::Reuse => 1,
        Hint::Stream => 2,
    }
}

/// This process's single-call decisions for `op` and `hint`, as bands.
#[inline]
pub fn bands(op: Op, hint: Hint) -> &'static Bands {
    &compiled_here().bands[(op == Op::Clear) as usize][hint_ix(hint)]
}

/// The kernel `auto` runs for one call of `len` bytes: a band lookup.
#[inline]
pub(crate) fn single(op: Op, hint: Hint, len: usize) -> Kernel {
    compiled_here().compiled[(op == Op::Clear) as usize][hint_ix(hint)].kernel(len)
}

/// The checked twin of [`single`]'s kernel for one call of `len` bytes:
/// one band lookup, like the unchecked call's.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn checked_single(op: Op, hint: Hint, len: usize) -> CheckedKernel {
    compiled_here().checked[(op == Op::Clear) as usize][hint_ix(hint)].kernel(len)
}

/// The checked twin `auto` runs for one call of `len` bytes that
/// `threads` threads share (hint `Auto`): decided as a batch of one run
/// per thread, as the engine decides an extent its workers split.
#[cfg(target_arch = "x86_64")]
pub(crate) fn checked_shared(op: Op, len: usize, threads: usize) -> CheckedKernel {
    if threads <= 1 {
        return checked_single(op, Hint::Auto, len);
    }
    let req = Request {
        op,
        total: len,
        runs: threads,
        hint: Hint::Auto,
    };
    twin(op, Policy::here().kernel(&req).strategy(), req.mean_run())
}

/// The kernel `opts` means for `req`: `auto`'s decision, or the named
/// strategy once the CPU is checked ([`StrategyError::Unsupported`] /
/// [`StrategyError::Unavailable`] otherwise). Every copy and clear outside the
/// checked path gets its kernel here or from [`single`].
#[inline]
pub(crate) fn kernel(opts: Options, req: &Request) -> Result<Kernel, StrategyError> {
    if opts.strategy == Strategy::Auto {
        return Ok(if req.runs <= 1 {
            single(req.op, req.hint, req.total)
        } else {
            Policy::here().kernel(req)
        });
    }
    Kernel::new(opts.strategy, req.op)
}

/// The checked routine `strategy` means for `req`: itself if it has one
/// (and the CPU runs it), else for `Auto` the checked twin of the kernel
/// `auto` runs for `req` (see [`twin`]).
#[cfg(target_arch = "x86_64")]
pub(crate) fn checked(strategy: Strategy, req: &Request) -> Result<CheckedKernel, Error> {
    if strategy != Strategy::Auto {
        return CheckedKernel::new(strategy, req.op);
    }
    if req.runs <= 1 {
        return Ok(checked_single(req.op, req.hint, req.total));
    }
    let pick = Policy::here().kernel(req).strategy();
    Ok(twin(req.op, pick, req.mean_run()))
}

/// The checked routine that runs for `pick` on calls of `len` bytes: its
/// own twin (the same instructions and loop shape); for `libc`, whose code
/// has no exception table, the twin of what glibc runs at that length
/// ([`libc_twin`]); for a strategy without a twin or one this CPU lacks,
/// the descriptor's nearest stand-in. Resolved once per (op, strategy):
/// walking the stand-in list on every call, and building an error for
/// each routine this CPU lacks, was two thirds of a checked 4 KiB copy
/// (56 ns against the bare kernel's 31 on Emerald Rapids).
#[cfg(target_arch = "x86_64")]
pub(crate) fn twin(op: Op, pick: Strategy, len: usize) -> CheckedKernel {
    const N: usize = Strategy::Portable as usize + 1;
    static TABLE: OnceLock<[[CheckedKernel; N]; 2]> = OnceLock::new();
    let pick = match pick {
        Strategy::Libc => libc_twin(Machine::this(), op, len),
        s => s,
    };
    let table = TABLE.get_or_init(|| {
        [Op::Copy, Op::Clear].map(|op| {
            let mut row = [CheckedKernel::baseline(op); N];
            for &s in Strategy::for_op(op) {
                row[s as usize] = find_stand_in(op, s);
            }
            row
        })
    });
    table[(op == Op::Clear) as usize][pick as usize]
}

#[cfg(target_arch = "x86_64")]
fn find_stand_in(op: Op, pick: Strategy) -> CheckedKernel {
    let stand_ins = crate::descriptor::row(pick).stand_ins(op);
    std::iter::once(pick)
        .chain(stand_ins.iter().copied())
        .find_map(|s| CheckedKernel::new(s, op).ok())
        // Every stand-in list ends in a routine all x86-64 CPUs run (a
        // descriptor test checks it); this is for the type, not for use.
        .unwrap_or_else(|| CheckedKernel::baseline(op))
}

/// What glibc's `memcpy`/`memset` run for `len` bytes on `m`, as the
/// strategy whose checked twin stands in for `libc`: streaming stores from
/// glibc's non-temporal threshold (3/4 of one thread's LLC share, its
/// default `x86_non_temporal_threshold`; `memset` streams from there too
/// since glibc 2.40), `rep movsb`/`rep stosb` from its `rep_movsb_threshold`
/// (2 KiB) with ERMS, vector loops below.
pub fn libc_twin(m: &Machine, op: Op, len: usize) -> Strategy {
    let f = &m.features;
    let [nt, erms] = libc_twin_edges(m);
    match op {
        Op::Copy if len >= nt && f.avx2 => Strategy::Avx2Nt,
        Op::Copy if len >= erms && f.erms => Strategy::RepMovsb,
        Op::Copy if f.avx2 => Strategy::Avx2,
        Op::Copy => Strategy::RepMovsq,
        Op::Clear if len >= nt && f.avx2 => Strategy::Avx2Nt,
        Op::Clear if len >= erms && f.erms => Strategy::RepStosb,
        Op::Clear if f.avx2 => Strategy::Avx2,
        Op::Clear => Strategy::RepStosb,
    }
}

/// The lengths at which [`libc_twin`] changes: glibc's non-temporal and
/// `rep movsb` thresholds.
fn libc_twin_edges(m: &Machine) -> [usize; 2] {
    [
        (m.llc_share() / 4 * 3).max(LIBC_REP_MOVSB_MIN),
        LIBC_REP_MOVSB_MIN,
    ]
}

/// glibc's default `x86_rep_movsb_threshold` (and `rep_stosb`'s).
const LIBC_REP_MOVSB_MIN: usize = 2048;

/// How a fill stores: temporal stores, or windows streamed with a
/// non-temporal copy kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FillMode {
    /// Ordinary stores through the cache (elements built in place).
    Temporal,
    /// Streams windows with this non-temporal copy strategy.
    Stream(Strategy),
}

impl FillMode {
    /// The strategy name reports use: the NT kernel, or `Temporal`'s
    /// stand-in `Libc` (element copies go through `copy_from_slice`).
    pub fn strategy(self) -> Strategy {
        match self {
            FillMode::Temporal => Strategy::Libc,
            FillMode::Stream(s) => s,
        }
    }
}

/// The mode `auto` picks for filling `len` bytes with `hint` on `m`:
/// stream when told to or when the region is at least
/// [`Machine::stream_from`] (as `auto` does for copies), and only
/// where a non-temporal kernel exists.
pub fn fill_mode(m: &Machine, len: usize, hint: Hint) -> FillMode {
    let stream = match hint {
        Hint::Reuse => false,
        Hint::Stream => len >= NT_MIN_RUN,
        Hint::Auto => len >= m.stream_from(),
    };
    let f = &m.features;
    match () {
        _ if !stream => FillMode::Temporal,
        _ if f.avx2 => FillMode::Stream(Strategy::Avx2Nt),
        _ if f.avx512f && f.avx512bw => FillMode::Stream(Strategy::Avx512Nt),
        _ => FillMode::Temporal,
    }
}

/// [`fill_mode`] in this process, with the streaming kernel checked:
/// `Temporal` (and no kernel) where it cannot run.
pub(crate) fn fill(len: usize, hint: Hint) -> (FillMode, Option<Kernel>) {
    match fill_mode(Machine::this(), len, hint) {
        FillMode::Stream(s) => match Kernel::new(s, Op::Copy) {
            Ok(k) => (FillMode::Stream(s), Some(k)),
            Err(_) => (FillMode::Temporal, None),
        },
        FillMode::Temporal => (FillMode::Temporal, None),
    }
}

/// The temporal vector copy fills assemble elements with: never `rep
/// movs`, whose start-up interleaved with a window's non-temporal stores
/// ran at 17 GB/s against 39 for a vector loop (4 KiB templates, Zen 5).
pub(crate) fn element_copy() -> Kernel {
    Kernel::new(Strategy::Avx2, Op::Copy)
        .or_else(|_| Kernel::new(Strategy::Portable, Op::Copy))
        .unwrap_or_else(|_| Kernel::baseline(Op::Copy))
}

/// Whether `auto` in this process follows a tuned profile (for labels:
/// `auto (tuned)` / `auto (built-in)`).
pub fn is_tuned() -> bool {
    profile().is_some()
}

#[cfg(all(test, target_arch = "x86_64"))]
mod twin_tests {
    use super::*;

    /// The table resolved once gives what walking the stand-in list gives,
    /// for every strategy of either operation but `libc`, which resolves
    /// by length.
    #[test]
    fn the_twin_table_matches_the_walk() {
        for op in [Op::Copy, Op::Clear] {
            for &s in Strategy::for_op(op) {
                if s == Strategy::Libc {
                    continue;
                }
                let walked = find_stand_in(op, s).strategy();
                assert_eq!(twin(op, s, 4096).strategy(), walked, "{op} {s}");
                if CheckedKernel::new(s, op).is_ok() {
                    assert_eq!(walked, s, "{op} {s} has a twin of its own");
                }
            }
        }
    }

    /// `libc` stands in by length, as glibc changes its loop.
    #[test]
    fn libc_twins_follow_glibcs_thresholds() {
        let mut m = Machine::this().clone();
        m.llc_bytes = 32 << 20;
        m.llc_cpus = 8;
        m.features.avx2 = true;
        m.features.erms = true;
        let nt = (4 << 20) / 4 * 3;
        for (len, copy, clear) in [
            (64, Strategy::Avx2, Strategy::Avx2),
            (2047, Strategy::Avx2, Strategy::Avx2),
            (2048, Strategy::RepMovsb, Strategy::RepStosb),
            (nt - 1, Strategy::RepMovsb, Strategy::RepStosb),
            (nt, Strategy::Avx2Nt, Strategy::Avx2Nt),
        ] {
            assert_eq!(libc_twin(&m, Op::Copy, len), copy, "{len}");
            assert_eq!(libc_twin(&m, Op::Clear, len), clear, "{len}");
        }
        m.features.erms = false;
        assert_eq!(libc_twin(&m, Op::Copy, 4096), Strategy::Avx2);
        m.features.avx2 = false;
        assert_eq!(libc_twin(&m, Op::Copy, 1 << 30), Strategy::RepMovsq);
    }
}
