//! Property tests: random (strategy, length, offsets) agree with the
//! reference (`copy_from_slice` / `fill(0)`), in guarded memory.

mod common;

use bulkmem::{Op, Strategy};
use common::require;
use common::*;
use proptest::prelude::*;

const SPAN: usize = 3 * 65536;

/// `auto` and every strategy of `op` the build host could run; one this
/// host cannot run fails (or, hidden by `BULKMEM_DISABLE`, skips visibly)
/// rather than quietly leaving the property untested for it.
fn strategy_for(op: Op) -> impl proptest::strategy::Strategy<Value = Strategy> {
    proptest::sample::select(require::runnable(Strategy::for_op(op)))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn copy_matches_reference(
        s in strategy_for(Op::Copy),
        len in prop_oneof![0usize..512, 0usize..65536, 0usize..SPAN - 128],
        d_off in 0usize..128,
        s_off in 0usize..128,
        seed in any::<usize>(),
        flush_end in any::<bool>(),
    ) {
        let mut dst = Guarded::new(SPAN);
        let mut src = Guarded::new(SPAN);
        let n = dst.usable();
        fill_pattern(src.bytes(), seed);
        fill_canary(dst.bytes(), 0, n);
        let (d_off, s_off) = if flush_end { (n - len - d_off.min(n - len), n - len) } else { (d_off, s_off) };
        let expected = src.slice(s_off, len).to_vec();
        bulkmem::copy_opts(dst.slice(d_off, len), src.slice(s_off, len), bulkmem::Options::strategy(s)).unwrap();
        prop_assert!(dst.slice(d_off, len) == &expected[..], "{} len {} dst+{} src+{}", s, len, d_off, s_off);
        prop_assert_eq!(first_non_canary(dst.bytes(), 0, d_off), None);
        prop_assert_eq!(first_non_canary(dst.bytes(), d_off + len, n), None);
    }

    #[test]
    fn clear_matches_reference(
        s in strategy_for(Op::Clear),
        len in prop_oneof![0usize..512, 0usize..65536, 0usize..SPAN - 128],
        d_off in 0usize..128,
        flush_end in any::<bool>(),
    ) {
        let mut dst = Guarded::new(SPAN);
        let n = dst.usable();
        fill_canary(dst.bytes(), 0, n);
        let d_off = if flush_end { n - len } else { d_off };
        bulkmem::clear_opts(dst.slice(d_off, len), bulkmem::Options::strategy(s)).unwrap();
        prop_assert!(dst.slice(d_off, len).iter().all(|&b| b == 0), "{} len {} dst+{}", s, len, d_off);
        prop_assert_eq!(first_non_canary(dst.bytes(), 0, d_off), None);
        prop_assert_eq!(first_non_canary(dst.bytes(), d_off + len, n), None);
    }
}
