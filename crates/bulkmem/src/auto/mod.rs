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

mod env;
mod load;
mod profile;
pub mod rules;
mod toml;

use std::sync::OnceLock;

use crate::cpu::{self, Features, Vendor};
use crate::strategy::{Hint, Op, Strategy};

pub use env::{parse_bytes, Overrides};
pub use load::{
    default_profile_path, load_profile, profile, profile_loads, profile_status, ProfileStatus,
};
pub use profile::{Cell, Identity, Profile, Shape, FORMAT, SMALL_EXTENT_MAX};
pub use rules::{decide, ERMS_MIN_RUN, NT_MIN_RUN, STREAM_FACTOR};

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
            let i = cpu::info();
            Machine {
                vendor: i.vendor,
                features: i.features,
                l1d_bytes: i.topology.data_cache_bytes(1).unwrap_or(32 << 10),
                l2_bytes: i.topology.data_cache_bytes(2).unwrap_or(512 << 10),
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

/// Single-call decisions compiled into length bands: a decision only
/// changes at a few lengths, so a call costs a short scan instead of the
/// whole evaluation (which, for a 64-byte copy, costs more than the copy).
/// When every band starts at a power of two (a tuned profile's do), a call
/// costs one table load indexed by the length's bit count instead: with
/// the scan, tuned `auto` measured 0.91-0.95x of its own kernel at 4 KiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bands {
    /// (first length of the band, strategy), ascending; `len` used.
    bands: [(usize, Strategy); Bands::CAP],
    len: usize,
    /// The strategy for lengths of each bit count (0 for length 0, 1 for 1,
    /// 2 for 2..=3, ...), when every band starts at a power of two.
    by_bits: Option<[Strategy; 65]>,
}

impl Bands {
    /// Enough for every edge of the rules plus a tuned ladder (`bulkmem
    /// tune` measures about 22 single-call sizes).
    pub const CAP: usize = 48;

    /// Bands from `decide` evaluated at each of `edges` (sorted ascending;
    /// the first should be 0). Between two edges the decision must not
    /// change. Past [`Bands::CAP`] changes the last band absorbs the rest.
    pub fn build(edges: &[usize], decide: impl Fn(usize) -> Strategy) -> Bands {
        let mut b = Bands {
            bands: [(0, Strategy::Auto); Bands::CAP],
            len: 0,
            by_bits: None,
        };
        for &e in edges {
            let s = decide(e);
            if b.len == 0 || (b.bands[b.len - 1].1 != s && b.len < Bands::CAP) {
                b.bands[b.len] = (if b.len == 0 { 0 } else { e }, s);
                b.len += 1;
            }
        }
        if b.as_slice()[1..]
            .iter()
            .all(|&(start, _)| start.is_power_of_two())
        {
            let mut t = [Strategy::Auto; 65];
            for (bits, slot) in t.iter_mut().enumerate() {
                // The shortest length with this bit count; the band is the
                // same up to the next power of two.
                let shortest = if bits == 0 { 0 } else { 1usize << (bits - 1) };
                *slot = b.scan(shortest);
            }
            b.by_bits = Some(t);
        }
        b
    }

    /// The strategy for a single call of `len` bytes.
    #[inline]
    pub fn lookup(&self, len: usize) -> Strategy {
        match &self.by_bits {
            Some(t) => t[(usize::BITS - len.leading_zeros()) as usize],
            None => self.scan(len),
        }
    }

    #[inline]
    fn scan(&self, len: usize) -> Strategy {
        let mut s = self.bands[0].1;
        for &(start, st) in &self.bands[1..self.len] {
            if len < start {
                break;
            }
            s = st;
        }
        s
    }

    /// The bands as (first length, strategy).
    pub fn as_slice(&self) -> &[(usize, Strategy)] {
        &self.bands[..self.len]
    }

    /// Whether a lookup is one table load (every band starts at a power of
    /// two) rather than a scan.
    pub fn is_table(&self) -> bool {
        self.by_bits.is_some()
    }
}

/// This process's bands, per op and hint, built once.
#[inline]
pub fn bands(op: Op, hint: Hint) -> &'static Bands {
    static ALL: OnceLock<[[Bands; 3]; 2]> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        let p = Policy::here();
        [Op::Copy, Op::Clear]
            .map(|op| [Hint::Auto, Hint::Reuse, Hint::Stream].map(|h| p.bands(op, h)))
    });
    let h = match hint {
        Hint::Auto => 0,
        Hint::Reuse => 1,
        Hint::Stream => 2,
    };
    &all[(op == Op::Clear) as usize][h]
}

/// Whether `auto` in this process follows a tuned profile (for labels:
/// `auto (tuned)` / `auto (built-in)`).
pub fn is_tuned() -> bool {
    profile().is_some()
}
