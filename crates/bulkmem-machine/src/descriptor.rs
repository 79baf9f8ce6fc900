//! One row per strategy: its name, the operations it implements, the CPU
//! features it needs, whether its stores bypass the cache, and its kernels
//! (fenced, unfenced, and the checked routine or the checked strategies that
//! stand in for it). Everything else about a strategy is a lookup here.
//!
//! Adding a primitive is one `Strategy` variant, one row in `ROWS` (in
//! the enum's order: a compile-time check holds them together) and one
//! kernel file under `kernels/` (see docs/design.md, "Strategies").

use crate::kernels::{libc_mem, per_page, portable, ClearFn, CopyFn};
use crate::machine::cpu::{self, Feature, Features};
use crate::strategy::{Op, Strategy};

#[cfg(target_arch = "x86_64")]
use crate::checked::mc::{
    clear_mc, clear_mc_nt, clear_mc_vec, copy_mc, copy_mc_nt, copy_mc_or, copy_mc_vec,
};
#[cfg(target_arch = "x86_64")]
use crate::checked::mc::{McClear, McCopy};
#[cfg(target_arch = "x86_64")]
use crate::kernels::{avx2, avx512, clzero, movsb_or_avx2, rep};

// The x86-only kernels stand behind this macro: elsewhere the row keeps its
// shape with `$other`, and `x86_only` keeps
// the kernel from ever being handed out.
#[cfg(target_arch = "x86_64")]
macro_rules! x86 {
    ($e:expr, $other:expr) => {
        $e
    };
}
#[cfg(not(target_arch = "x86_64"))]
macro_rules! x86 {
    ($e:expr, $other:expr) => {
        $other
    };
}

#[cfg(not(target_arch = "x86_64"))]
pub type McCopy = ();
#[cfg(not(target_arch = "x86_64"))]
pub type McClear = ();

/// The fault-surviving form of one operation of a strategy.
pub struct Checked<F: 'static> {
    /// `(fenced, unfenced)` routines of its own, if it has them.
    pub own: Option<(F, F)>,
    /// For `Auto` picks without a checked form of their own (and
    /// unavailable ones): the checked strategies closest to it, best first.
    /// The last one runs on every x86_64 CPU.
    pub stand_ins: &'static [Strategy],
}

/// The kernels of one operation of a strategy.
pub struct Kernels<K: 'static, M: 'static> {
    pub fenced: K,
    /// Non-temporal kernels without their closing store fence, for batches
    /// that drain once (the same function for temporal ones).
    pub unfenced: K,
    pub checked: Checked<M>,
}

/// Everything about one strategy.
pub struct Descriptor {
    pub strategy: Strategy,
    /// The CLI's and the JSON's name; never changes.
    pub name: &'static str,
    /// CPU features, all of which must be present.
    pub needs: &'static [Feature],
    /// Only x86-64 runs it (string instructions, x86 vector kernels).
    pub x86_only: bool,
    /// Stores bypass the cache (so the kernel ends with a store fence).
    pub non_temporal: bool,
    pub copy: Option<Kernels<CopyFn, McCopy>>,
    pub clear: Option<Kernels<ClearFn, McClear>>,
}

const fn like<F>(stand_ins: &'static [Strategy]) -> Checked<F> {
    Checked {
        own: None,
        stand_ins,
    }
}

const fn own<F>(fenced: F, unfenced: F, stand_ins: &'static [Strategy]) -> Checked<F> {
    Checked {
        own: Some((fenced, unfenced)),
        stand_ins,
    }
}

const fn temporal<K: Copy, M>(k: K, checked: Checked<M>) -> Option<Kernels<K, M>> {
    Some(Kernels {
        fenced: k,
        unfenced: k,
        checked,
    })
}

const fn streaming<K, M>(fenced: K, unfenced: K, checked: Checked<M>) -> Option<Kernels<K, M>> {
    Some(Kernels {
        fenced,
        unfenced,
        checked,
    })
}

// What stands in for a strategy without a checked routine of its own
// (`libc`, `portable`; `auto` resolves `libc` by size, as glibc would run
// it) or whose routine this CPU lacks: the nearest checked routine, best
// first, ending in one every x86-64 CPU runs.
const COPY_BASE: &[Strategy] = &[Strategy::RepMovsq];
const CLEAR_BASE: &[Strategy] = &[Strategy::RepStosb];
const COPY_NT: &[Strategy] = &[Strategy::Avx2Nt, Strategy::RepMovsq];
const CLEAR_NT: &[Strategy] = &[Strategy::Avx2Nt, Strategy::RepStosb];
const COPY_VECTOR: &[Strategy] = &[Strategy::Avx2, Strategy::RepMovsq];
const CLEAR_VECTOR: &[Strategy] = &[Strategy::Avx2, Strategy::RepStosb];

/// A checked routine of its own that is the same for fenced and unfenced
/// use (temporal stores).
#[cfg(target_arch = "x86_64")]
const fn own1<F: Copy>(f: F, stand_ins: &'static [Strategy]) -> Checked<F> {
    own(f, f, stand_ins)
}

/// In the order of the `Strategy` enum.
const ROWS: &[Descriptor] = &[
    Descriptor {
        strategy: Strategy::Auto,
        name: "auto",
        needs: &[],
        x86_only: false,
        non_temporal: false,
        copy: None,
        clear: None,
    },
    Descriptor {
        strategy: Strategy::PerPage,
        name: "per-page",
        needs: &[],
        x86_only: false,
        non_temporal: false,
        copy: temporal(
            per_page::copy,
            x86!(
                own1(copy_mc::bulkmem_mc_copy_per_page, COPY_BASE),
                like(&[])
            ),
        ),
        clear: temporal(
            per_page::clear,
            x86!(
                own1(clear_mc::bulkmem_mc_clear_per_page, CLEAR_BASE),
                like(&[])
            ),
        ),
    },
    Descriptor {
        strategy: Strategy::RepMovsq,
        name: "rep-movsq",
        needs: &[],
        x86_only: true,
        non_temporal: false,
        copy: temporal(
            x86!(rep::copy_movsq, portable::copy),
            x86!(own1(copy_mc::bulkmem_mc_copy_movsq, COPY_BASE), like(&[])),
        ),
        clear: None,
    },
    Descriptor {
        strategy: Strategy::RepMovsb,
        name: "rep-movsb",
        needs: &[],
        x86_only: true,
        non_temporal: false,
        copy: temporal(
            x86!(rep::copy_movsb, portable::copy),
            x86!(own1(copy_mc::bulkmem_mc_copy_movsb, COPY_BASE), like(&[])),
        ),
        clear: None,
    },
    Descriptor {
        strategy: Strategy::RepMovsbOrAvx2,
        name: "rep-movsb-or-avx2",
        needs: &[Feature::Avx2],
        x86_only: true,
        non_temporal: false,
        copy: temporal(
            x86!(movsb_or_avx2::copy, portable::copy),
            x86!(
                own1(copy_mc_or::bulkmem_mc_copy_movsb_or_avx2, COPY_VECTOR),
                like(&[])
            ),
        ),
        clear: None,
    },
    Descriptor {
        strategy: Strategy::RepStosq,
        name: "rep-stosq",
        needs: &[],
        x86_only: true,
        non_temporal: false,
        copy: None,
        clear: temporal(
            x86!(rep::clear_stosq, portable::clear),
            x86!(
                own1(clear_mc::bulkmem_mc_clear_stosq, CLEAR_BASE),
                like(&[])
            ),
        ),
    },
    Descriptor {
        strategy: Strategy::RepStosb,
        name: "rep-stosb",
        needs: &[],
        x86_only: true,
        non_temporal: false,
        copy: None,
        clear: temporal(
            x86!(rep::clear_stosb, portable::clear),
            x86!(
                own1(clear_mc::bulkmem_mc_clear_stosb, CLEAR_BASE),
                like(&[])
            ),
        ),
    },
    Descriptor {
        strategy: Strategy::Libc,
        name: "libc",
        needs: &[],
        x86_only: false,
        non_temporal: false,
        copy: temporal(libc_mem::copy, like(&[Strategy::RepMovsb])),
        clear: temporal(libc_mem::clear, like(CLEAR_BASE)),
    },
    Descriptor {
        strategy: Strategy::Avx2,
        name: "avx2",
        needs: &[Feature::Avx2],
        x86_only: true,
        non_temporal: false,
        copy: temporal(
            x86!(avx2::copy, portable::copy),
            x86!(
                own1(copy_mc_vec::bulkmem_mc_copy_avx2, COPY_BASE),
                like(&[])
            ),
        ),
        clear: temporal(
            x86!(avx2::clear, portable::clear),
            x86!(
                own1(clear_mc_vec::bulkmem_mc_clear_avx2, CLEAR_BASE),
                like(&[])
            ),
        ),
    },
    Descriptor {
        strategy: Strategy::Avx2Nt,
        name: "avx2-nt",
        needs: &[Feature::Avx2],
        x86_only: true,
        non_temporal: true,
        copy: streaming(
            x86!(avx2::copy_nt, portable::copy),
            x86!(avx2::copy_nt_unfenced, portable::copy),
            x86!(
                own(
                    copy_mc_nt::bulkmem_mc_copy_avx2nt,
                    copy_mc_nt::bulkmem_mc_copy_avx2nt_unfenced,
                    COPY_BASE
                ),
                like(&[])
            ),
        ),
        clear: streaming(
            x86!(avx2::clear_nt, portable::clear),
            x86!(avx2::clear_nt_unfenced, portable::clear),
            x86!(
                own(
                    clear_mc_nt::bulkmem_mc_clear_avx2nt,
                    clear_mc_nt::bulkmem_mc_clear_avx2nt_unfenced,
                    CLEAR_BASE
                ),
                like(&[])
            ),
        ),
    },
    Descriptor {
        strategy: Strategy::Avx512,
        name: "avx512",
        needs: &[Feature::Avx512f, Feature::Avx512bw],
        x86_only: true,
        non_temporal: false,
        copy: temporal(
            x86!(avx512::copy, portable::copy),
            x86!(
                own1(copy_mc_vec::bulkmem_mc_copy_avx512, COPY_VECTOR),
                like(&[])
            ),
        ),
        clear: temporal(
            x86!(avx512::clear, portable::clear),
            x86!(
                own1(clear_mc_vec::bulkmem_mc_clear_avx512, CLEAR_VECTOR),
                like(&[])
            ),
        ),
    },
    Descriptor {
        strategy: Strategy::Avx512Nt,
        name: "avx512-nt",
        needs: &[Feature::Avx512f, Feature::Avx512bw],
        x86_only: true,
        non_temporal: true,
        copy: streaming(
            x86!(avx512::copy_nt, portable::copy),
            x86!(avx512::copy_nt_unfenced, portable::copy),
            x86!(
                own(
                    copy_mc_nt::bulkmem_mc_copy_avx512nt,
                    copy_mc_nt::bulkmem_mc_copy_avx512nt_unfenced,
                    COPY_NT
                ),
                like(&[])
            ),
        ),
        clear: streaming(
            x86!(avx512::clear_nt, portable::clear),
            x86!(avx512::clear_nt_unfenced, portable::clear),
            x86!(
                own(
                    clear_mc_nt::bulkmem_mc_clear_avx512nt,
                    clear_mc_nt::bulkmem_mc_clear_avx512nt_unfenced,
                    CLEAR_NT
                ),
                like(&[])
            ),
        ),
    },
    Descriptor {
        strategy: Strategy::Clzero,
        name: "clzero",
        needs: &[Feature::Clzero],
        x86_only: true,
        non_temporal: true,
        copy: None,
        clear: streaming(
            x86!(clzero::clear, portable::clear),
            x86!(clzero::clear_unfenced, portable::clear),
            x86!(
                own(
                    clear_mc_nt::bulkmem_mc_clear_clzero,
                    clear_mc_nt::bulkmem_mc_clear_clzero_unfenced,
                    CLEAR_NT
                ),
                like(&[])
            ),
        ),
    },
    Descriptor {
        strategy: Strategy::Portable,
        name: "portable",
        needs: &[],
        x86_only: false,
        non_temporal: false,
        copy: temporal(portable::copy, like(COPY_VECTOR)),
        clear: temporal(portable::clear, like(CLEAR_VECTOR)),
    },
];

/// How many strategies there are. `Portable` stays the last variant, so a
/// variant added anywhere without its row fails the checks below.
pub const COUNT: usize = Strategy::Portable as usize + 1;

// One row per variant, in the enum's order: a lookup is one index.
const _: () = {
    assert!(ROWS.len() == COUNT, "one row per Strategy variant");
    let mut i = 0;
    while i < COUNT {
        assert!(ROWS[i].strategy as usize == i, "rows out of enum order");
        i += 1;
    }
};

/// The row of `s`.
#[inline]
pub fn row(s: Strategy) -> &'static Descriptor {
    &ROWS[s as usize]
}

impl Descriptor {
    /// The first feature in `needs` that `f` lacks.
    pub fn missing(&self, f: &Features) -> Option<&'static str> {
        if self.x86_only && !cfg!(target_arch = "x86_64") {
            return Some("x86_64");
        }
        self.needs.iter().find(|n| !f.has(**n)).map(|n| n.name())
    }

    pub fn implements(&self, op: Op) -> bool {
        match op {
            Op::Copy => self.copy.is_some(),
            Op::Clear => self.clear.is_some(),
        }
    }

    /// Whether it has a checked routine of its own for `op`.
    #[cfg(test)]
    pub fn checked(&self, op: Op) -> bool {
        match op {
            Op::Copy => self.copy.as_ref().is_some_and(|k| k.checked.own.is_some()),
            Op::Clear => self.clear.as_ref().is_some_and(|k| k.checked.own.is_some()),
        }
    }

    /// The checked strategies that stand in for this one, best first.
    pub fn stand_ins(&self, op: Op) -> &'static [Strategy] {
        match op {
            Op::Copy => self
                .copy
                .as_ref()
                .map_or(COPY_BASE, |k| k.checked.stand_ins),
            Op::Clear => self
                .clear
                .as_ref()
                .map_or(CLEAR_BASE, |k| k.checked.stand_ins),
        }
    }
}

// The lists the public API exposes as slices, computed from the rows at
// compile time.
const fn has(s: Strategy, op: Op, checked: bool) -> bool {
    let d = &ROWS[s as usize];
    let (implements, own) = match op {
        Op::Copy => match &d.copy {
            Some(k) => (true, k.checked.own.is_some()),
            None => (false, false),
        },
        Op::Clear => match &d.clear {
            Some(k) => (true, k.checked.own.is_some()),
            None => (false, false),
        },
    };
    if checked {
        own
    } else {
        implements
    }
}

/// Which rows a list holds: all, or those with an `op` kernel (`checked`:
/// a checked routine of their own).
#[derive(Clone, Copy)]
enum List {
    All,
    With { op: Op, checked: bool },
}

const fn holds(list: List, s: Strategy) -> bool {
    match list {
        List::All => true,
        List::With { op, checked } => has(s, op, checked),
    }
}

const fn count(list: List) -> usize {
    let mut i = 0;
    let mut n = 0;
    while i < COUNT {
        if holds(list, ROWS[i].strategy) {
            n += 1;
        }
        i += 1;
    }
    n
}

const fn strategies<const N: usize>(list: List) -> [Strategy; N] {
    let mut out = [Strategy::Auto; N];
    let (mut i, mut n) = (0, 0);
    while i < COUNT {
        let s = ROWS[i].strategy;
        if holds(list, s) {
            out[n] = s;
            n += 1;
        }
        i += 1;
    }
    assert!(n == N);
    out
}

const COPIES: List = List::With {
    op: Op::Copy,
    checked: false,
};
const CLEARS: List = List::With {
    op: Op::Clear,
    checked: false,
};
const CHECKED_COPIES: List = List::With {
    op: Op::Copy,
    checked: true,
};
const CHECKED_CLEARS: List = List::With {
    op: Op::Clear,
    checked: true,
};

pub const ALL: [Strategy; COUNT] = strategies(List::All);
pub const COPY: [Strategy; count(COPIES)] = strategies(COPIES);
pub const CLEAR: [Strategy; count(CLEARS)] = strategies(CLEARS);
pub const CHECKED_COPY: [Strategy; count(CHECKED_COPIES)] = strategies(CHECKED_COPIES);
pub const CHECKED_CLEAR: [Strategy; count(CHECKED_CLEARS)] = strategies(CHECKED_CLEARS);

/// The lookups behind every strategy's facts (here, beside the rows).
impl Strategy {
    /// Every strategy, `Auto` first.
    pub const ALL: &'static [Strategy] = &ALL;

    /// The copy strategies, in the order tables list them (without `Auto`).
    pub const COPY: &'static [Strategy] = &COPY;

    /// The clear strategies, in the order tables list them (without `Auto`).
    /// `avx2`/`avx512` (temporal) extend the starting design's list: below a few KiB
    /// they clear 3x faster than `rep stosb` even with FSRM.
    pub const CLEAR: &'static [Strategy] = &CLEAR;

    /// The concrete strategies for `op` (without `Auto`).
    pub fn for_op(op: Op) -> &'static [Strategy] {
        match op {
            Op::Copy => Self::COPY,
            Op::Clear => Self::CLEAR,
        }
    }

    /// The name the CLI, the JSON, the profile and the environment use.
    pub fn name(self) -> &'static str {
        row(self).name
    }

    /// Whether this strategy implements `op` (`Auto` implements both).
    pub fn supports(self, op: Op) -> bool {
        self == Strategy::Auto || row(self).implements(op)
    }

    /// Whether the stores bypass the cache (and so end with a store fence).
    pub fn is_non_temporal(self) -> bool {
        row(self).non_temporal
    }

    /// The CPU feature this strategy needs that `features` lacks, if any.
    pub fn missing_feature(self, features: &Features) -> Option<&'static str> {
        row(self).missing(features)
    }

    /// Whether this CPU (after `BULKMEM_DISABLE`) can run the strategy.
    pub fn available(self) -> bool {
        self.missing_feature(cpu::features()).is_none()
    }
}

#[cfg(test)]
mod tests;
