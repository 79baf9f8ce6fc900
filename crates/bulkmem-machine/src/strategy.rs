//! Names of the primitives, the operations, and the hint a caller gives
//! about the destination's future. What each strategy is (operations,
//! features, kernels) is its row in `descriptor.rs`, which also holds
//! `Strategy`'s lookups.

use std::fmt;
use std::str::FromStr;

/// A bulk memory operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Copy a source into a destination of the same length.
    Copy,
    /// Zero a destination.
    Clear,
}

impl Op {
    /// The operation's name as the CLI and the JSON write it: "copy" or
    /// "clear".
    pub fn name(self) -> &'static str {
        match self {
            Op::Copy => "copy",
            Op::Clear => "clear",
        }
    }
}

impl FromStr for Op {
    type Err = ParseNameError;

    /// "copy" or "clear", as [`Op::name`] writes them (case and
    /// surrounding spaces ignored, as for strategy names).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        [Op::Copy, Op::Clear]
            .into_iter()
            .find(|op| op.name() == wanted)
            .ok_or_else(|| ParseNameError {
                what: "operation",
                given: s.to_string(),
                expected: vec!["copy", "clear"],
            })
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A copy or clear primitive. The names (see [`Strategy::name`]) are the
/// CLI's and the JSON's and do not change. Each variant's facts (name,
/// operations, features, kernels) are one row of the descriptor table;
/// `Portable` stays the last variant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Strategy {
    /// Choose from the CPU, the size, the batch total and the hint.
    #[default]
    Auto,
    /// The kernel's baseline: `rep movsq` / `rep stosq` once per 4 KiB page.
    PerPage,
    /// Copy only: `rep movsq` over the 8-byte words, `rep movsb` for the
    /// last 0-7 bytes.
    RepMovsq,
    /// Copy only: one `rep movsb` over the whole range (fast with
    /// ERMS/FSRM, slow without).
    RepMovsb,
    /// Copy only: `rep movsb` where destination and source share their
    /// offset in a 64-byte line, the AVX2 loop where they do not, chosen
    /// per call (past the L2 on AMD with FSRM, each wins its half).
    RepMovsbOrAvx2,
    /// Clear only: `rep stosq` over the 8-byte words, `rep stosb` for the
    /// last 0-7 bytes.
    RepStosq,
    /// Clear only: one `rep stosb` over the whole range.
    RepStosb,
    /// The C library's `memcpy` / `memset`.
    Libc,
    /// 256-bit loads and stores that go through the cache.
    Avx2,
    /// 256-bit loads, non-temporal 256-bit stores, then a store fence.
    Avx2Nt,
    /// 512-bit loads and stores through the cache, masked byte heads and
    /// tails (AVX-512F and BW).
    Avx512,
    /// 512-bit loads, non-temporal 512-bit stores, then a store fence.
    Avx512Nt,
    /// AMD `clzero` per cache line, then a store fence.
    Clzero,
    /// Plain Rust word loop; the fallback on every architecture.
    Portable,
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown strategy or hint name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseNameError {
    /// What was being parsed: "strategy", "hint", "operation" or
    /// "placement".
    pub what: &'static str,
    /// The text as given (before trimming and case folding).
    pub given: String,
    /// Every name that would have been accepted.
    pub expected: Vec<&'static str>,
}

impl fmt::Display for ParseNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} '{}' (expected one of: {})",
            self.what,
            self.given,
            self.expected.join(", ")
        )
    }
}

impl std::error::Error for ParseNameError {}

impl FromStr for Strategy {
    type Err = ParseNameError;

    /// The one reading of a strategy name, for the command line,
    /// `BULKMEM_STRATEGY`, profiles and the C entry points alike: a name
    /// as [`Strategy::name`] writes it, case-insensitive, with `_` for `-`
    /// and surrounding spaces allowed (`AVX2_NT` is `avx2-nt`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Compared in place, without a lowered copy: a profile's parse
        // names strategies about a thousand times, in every process that
        // uses it.
        let wanted = s.trim();
        let same = |name: &str| {
            name.len() == wanted.len()
                && name
                    .bytes()
                    .zip(wanted.bytes())
                    .all(|(n, w)| n == w.to_ascii_lowercase() || (n == b'-' && w == b'_'))
        };
        Strategy::ALL
            .iter()
            .copied()
            .find(|st| same(st.name()))
            .ok_or_else(|| ParseNameError {
                what: "strategy",
                given: s.to_string(),
                expected: Strategy::ALL.iter().map(|st| st.name()).collect(),
            })
    }
}

/// What the caller expects to do with the destination next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Hint {
    /// Let bulkmem decide from the size and the batch total.
    #[default]
    Auto,
    /// The destination will be read soon: keep it in the cache.
    Reuse,
    /// Write-once data: bypass the cache (non-temporal stores).
    Stream,
}

impl Hint {
    /// Every hint, in declaration order.
    pub const ALL: &'static [Hint] = &[Hint::Auto, Hint::Reuse, Hint::Stream];

    /// The hint's place in [`Hint::ALL`] (a table's index; exhaustive
    /// here, where the enum is defined).
    #[inline]
    pub const fn index(self) -> usize {
        match self {
            Hint::Auto => 0,
            Hint::Reuse => 1,
            Hint::Stream => 2,
        }
    }

    /// The hint's name as the CLI and the JSON write it (what
    /// [`FromStr`] accepts): "auto", "reuse" or "stream".
    pub fn name(self) -> &'static str {
        match self {
            Hint::Auto => "auto",
            Hint::Reuse => "reuse",
            Hint::Stream => "stream",
        }
    }
}

impl fmt::Display for Hint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Hint {
    type Err = ParseNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Hint::ALL
            .iter()
            .copied()
            .find(|h| h.name() == wanted)
            .ok_or_else(|| ParseNameError {
                what: "hint",
                given: s.to_string(),
                expected: Hint::ALL.iter().map(|h| h.name()).collect(),
            })
    }
}

/// How a batch (or a single call) should be executed.
///
/// Build it with [`Options::default`] (auto, no hint), [`Options::strategy`]
/// or [`Options::hint`]; it may gain fields, so it cannot be written as a
/// struct literal outside the crate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// `Auto` (the default) or a concrete strategy.
    pub strategy: Strategy,
    /// Only consulted by `Auto`.
    pub hint: Hint,
}

impl Options {
    /// Runs `strategy` as named: `Auto` chooses, a concrete one is checked
    /// (supported for the operation, available on this CPU) and then used
    /// for every byte. The hint is `Auto`, which a concrete strategy ignores.
    pub fn strategy(strategy: Strategy) -> Options {
        Options {
            strategy,
            hint: Hint::Auto,
        }
    }

    /// Lets `auto` choose (strategy `Auto`), told what happens to the
    /// destination next.
    pub fn hint(hint: Hint) -> Options {
        Options {
            strategy: Strategy::Auto,
            hint,
        }
    }
}

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

#[cfg(test)]
mod tests {
    #[test]
    fn ops_parse_from_their_names() {
        use super::Op;
        assert_eq!("copy".parse::<Op>(), Ok(Op::Copy));
        assert_eq!(" Clear ".parse::<Op>(), Ok(Op::Clear));
        let e = "move".parse::<Op>().unwrap_err();
        assert!(e.to_string().contains("unknown operation 'move'"), "{e}");
    }

    use super::*;
    use crate::machine::cpu::Features;

    #[test]
    fn names_round_trip() {
        for &s in Strategy::ALL {
            assert_eq!(s.name().parse::<Strategy>(), Ok(s));
            assert_eq!(s.to_string(), s.name());
        }
        for &h in Hint::ALL {
            assert_eq!(h.name().parse::<Hint>(), Ok(h));
        }
        assert_eq!("AVX2_NT".parse::<Strategy>(), Ok(Strategy::Avx2Nt));
    }

    #[test]
    fn unknown_names_list_the_choices() {
        let e = "avx3".parse::<Strategy>().unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("'avx3'") && msg.contains("avx2-nt") && msg.contains("clzero"),
            "{msg}"
        );
        assert!("fast"
            .parse::<Hint>()
            .unwrap_err()
            .to_string()
            .contains("stream"));
    }

    #[test]
    fn op_membership() {
        assert!(Strategy::RepMovsq.supports(Op::Copy));
        assert!(!Strategy::RepMovsq.supports(Op::Clear));
        assert!(Strategy::Clzero.supports(Op::Clear));
        assert!(!Strategy::Clzero.supports(Op::Copy));
        assert!(Strategy::Avx2.supports(Op::Clear));
        for op in [Op::Copy, Op::Clear] {
            assert!(Strategy::Auto.supports(op));
            for s in Strategy::for_op(op) {
                assert!(s.supports(op));
                assert_ne!(*s, Strategy::Auto);
            }
        }
    }

    #[test]
    fn missing_features_are_named() {
        let none = Features::default();
        assert_eq!(Strategy::Avx2Nt.missing_feature(&none), Some("avx2"));
        assert_eq!(Strategy::Clzero.missing_feature(&none), Some("clzero"));
        let f = Features {
            avx512f: true,
            ..Features::default()
        };
        assert_eq!(Strategy::Avx512.missing_feature(&f), Some("avx512bw"));
        assert_eq!(Strategy::Portable.missing_feature(&none), None);
        assert_eq!(Strategy::PerPage.missing_feature(&none), None);
    }
}
