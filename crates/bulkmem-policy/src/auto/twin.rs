//! The checked twins `auto` runs: for each strategy it picks, the checked
//! routine with the same instructions and loop shape, or the nearest
//! stand-in, resolved once per type; for `libc`, the twin of what glibc
//! runs at that length.

#[cfg(target_arch = "x86_64")]
use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
use crate::error::CheckedStrategyError;
#[cfg(target_arch = "x86_64")]
use crate::handle::{CheckedClearKernel, CheckedCopyKernel};
use crate::strategy::{Op, Strategy};

use super::Machine;

/// Rows of the twin tables: every strategy up to the last that has kernels.
#[cfg(target_arch = "x86_64")]
const N: usize = Strategy::Portable as usize + 1;

/// A checked twin type, for [`twin`].
#[cfg(target_arch = "x86_64")]
pub trait Twin: Copy + 'static {
    const OP: Op;
    fn new(strategy: Strategy) -> Result<Self, CheckedStrategyError>;
    fn baseline() -> Self;
    fn strategy(&self) -> Strategy;
    /// Per strategy, the twin that runs for it (built once).
    fn table() -> &'static [Self; N];
}

#[cfg(target_arch = "x86_64")]
macro_rules! twin_type {
    ($t:ty, $op:expr) => {
        impl Twin for $t {
            const OP: Op = $op;
            fn new(strategy: Strategy) -> Result<Self, CheckedStrategyError> {
                <$t>::new(strategy)
            }
            fn baseline() -> Self {
                <$t>::baseline()
            }
            fn strategy(&self) -> Strategy {
                <$t>::strategy(self)
            }
            fn table() -> &'static [Self; N] {
                static TABLE: OnceLock<[$t; N]> = OnceLock::new();
                TABLE.get_or_init(|| {
                    let mut row = [<$t>::baseline(); N];
                    for &s in Strategy::for_op($op) {
                        row[s as usize] = find_stand_in::<$t>(s);
                    }
                    row
                })
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
twin_type!(CheckedCopyKernel, Op::Copy);
#[cfg(target_arch = "x86_64")]
twin_type!(CheckedClearKernel, Op::Clear);

/// The checked routine that runs for `pick` on calls of `len` bytes: its
/// own twin (the same instructions and loop shape); for `libc`, whose code
/// has no exception table, the twin of what glibc runs at that length
/// (`libc_twin`); for a strategy without a twin or one this CPU lacks,
/// the descriptor's nearest stand-in. Resolved once per (op, strategy):
/// walking the stand-in list on every call, and building an error for
/// each routine this CPU lacks, was two thirds of a checked 4 KiB copy
/// (56 ns against the bare kernel's 31 on Emerald Rapids).
#[cfg(target_arch = "x86_64")]
pub fn twin<T: Twin>(pick: Strategy, len: usize) -> T {
    let pick = match pick {
        Strategy::Libc => libc_twin(Machine::this(), T::OP, len),
        s => s,
    };
    T::table()[pick as usize]
}

#[cfg(target_arch = "x86_64")]
fn find_stand_in<T: Twin>(pick: Strategy) -> T {
    let stand_ins = crate::descriptor::row(pick).stand_ins(T::OP);
    std::iter::once(pick)
        .chain(stand_ins.iter().copied())
        .find_map(|s| T::new(s).ok())
        // Every stand-in list ends in a routine all x86-64 CPUs run (a
        // descriptor test checks it); this is for the type, not for use.
        .unwrap_or_else(T::baseline)
}

/// What glibc's `memcpy`/`memset` run for `len` bytes on `m`, as the
/// strategy whose checked twin stands in for `libc`: streaming stores from
/// glibc's non-temporal threshold (3/4 of one thread's LLC share, its
/// default `x86_non_temporal_threshold`; `memset` streams from there too
/// since glibc 2.40), `rep movsb`/`rep stosb` from its `rep_movsb_threshold`
/// (2 KiB) with ERMS, vector loops below.
pub(super) fn libc_twin(m: &Machine, op: Op, len: usize) -> Strategy {
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
pub(super) fn libc_twin_edges(m: &Machine) -> [usize; 2] {
    [
        (m.llc_share() / 4 * 3).max(LIBC_REP_MOVSB_MIN),
        LIBC_REP_MOVSB_MIN,
    ]
}

/// glibc's default `x86_rep_movsb_threshold` (and `rep_stosb`'s).
const LIBC_REP_MOVSB_MIN: usize = 2048;

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
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
                let (walked, twin) = match op {
                    Op::Copy => (
                        find_stand_in::<CheckedCopyKernel>(s).strategy(),
                        twin::<CheckedCopyKernel>(s, 4096).strategy(),
                    ),
                    Op::Clear => (
                        find_stand_in::<CheckedClearKernel>(s).strategy(),
                        twin::<CheckedClearKernel>(s, 4096).strategy(),
                    ),
                };
                assert_eq!(twin, walked, "{op} {s}");
                if crate::handle::CheckedKernel::new(s, op).is_ok() {
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
