//! A strategy whose CPU feature is missing is refused, naming the feature,
//! and `auto` never picks it: checked end to end in a child process of this
//! test binary with `BULKMEM_DISABLE` hiding AVX2 (the feature detection
//! runs once per process, so only a fresh process can go without it).

mod common;

use bulkmem::{cpu, ClearKernel, CopyKernel, Error, Hint, Op, Strategy};
use bulkmem_policy::auto::{self, Policy, Request};
use bulkmem_policy::handle::Kernel;
use common::require::rerun;

const AVX2: [Strategy; 2] = [Strategy::Avx2, Strategy::Avx2Nt];

/// With AVX2 hidden, and with AVX2 and AVX-512 hidden (where `auto` would
/// otherwise fall back from the AVX-512 kernels to the AVX2 ones).
#[test]
fn without_avx2_its_strategies_are_refused_by_name_and_auto_avoids_them() {
    for hide in ["avx2", "avx2,avx512f"] {
        let (ok, out) = rerun("child_without_avx2", &[("BULKMEM_DISABLE", hide)]);
        assert!(ok, "BULKMEM_DISABLE={hide}:\n{out}");
    }
}

/// Takes any of the library's error types: each narrower one converts into
/// [`Error`] and displays as it does.
fn assert_refused<E: Into<Error>>(r: Result<impl std::fmt::Debug, E>, s: Strategy, what: &str) {
    match r.map_err(Into::into) {
        Err(e @ Error::Unavailable { strategy, needs }) => {
            assert_eq!((strategy, needs), (s, "avx2"), "{what}: {e}");
            let msg = e.to_string();
            assert!(
                msg.contains("needs avx2") && msg.contains(s.name()),
                "{what}: {msg}"
            );
        }
        other => panic!("{what}: {s} was not refused as unavailable: {other:?}"),
    }
}

#[test]
#[ignore = "the child half of without_avx2_its_strategies_are_refused_by_name_and_auto_avoids_them"]
fn child_without_avx2() {
    assert!(
        !cpu::info().features.avx2,
        "runs in a child with BULKMEM_DISABLE=avx2 (or on a CPU without AVX2)"
    );
    let src = vec![0x5a_u8; 1 << 16];
    let mut dst = vec![0xa5_u8; 1 << 16];
    for s in AVX2 {
        assert!(!s.available());
        assert_refused(
            bulkmem::copy_opts(&mut dst, &src, bulkmem::Options::strategy(s)),
            s,
            "copy_opts",
        );
        assert_refused(
            bulkmem::clear_opts(&mut dst, bulkmem::Options::strategy(s)),
            s,
            "clear_opts",
        );
        assert_refused(
            bulkmem::fault::copy_checked_with(s, &mut dst, &src),
            s,
            "copy_checked_with",
        );
        assert_refused(Kernel::new(s, Op::Copy), s, "Kernel::new copy");
        assert_refused(Kernel::new(s, Op::Clear), s, "Kernel::new clear");
        assert_refused(
            bulkmem::Engine::builder().strategy(s).build(),
            s,
            "Engine::build",
        );
        assert!(dst.iter().all(|&b| b == 0xa5), "{s}: a refused call wrote");
    }
    // Every single-call band, and batches of every shape around them.
    let policy = Policy::here();
    for op in [Op::Copy, Op::Clear] {
        for hint in [Hint::Auto, Hint::Reuse, Hint::Stream] {
            for &(from, s) in auto::bands(op, hint).as_slice() {
                assert!(
                    !AVX2.contains(&s),
                    "{op} {hint:?} from {from}: auto decided {s}"
                );
            }
            let mut totals = policy.edges(op);
            totals.extend([0, 1, 64, 4096, 2 << 20, 256 << 20]);
            for total in totals {
                for runs in [1, 2, 64, 4096] {
                    let req = Request {
                        op,
                        total,
                        runs: runs.min(total.max(1)),
                        hint,
                    };
                    let k = match op {
                        Op::Copy => policy.kernel::<CopyKernel>(&req).strategy(),
                        Op::Clear => policy.kernel::<ClearKernel>(&req).strategy(),
                    };
                    assert!(!AVX2.contains(&k), "{req:?}: auto runs {k}");
                }
            }
        }
    }
    // And `auto` still copies and clears.
    bulkmem::copy_opts(&mut dst, &src, bulkmem::Options::strategy(Strategy::Auto)).unwrap();
    assert_eq!(dst, src);
    bulkmem::clear_opts(&mut dst, bulkmem::Options::strategy(Strategy::Auto)).unwrap();
    assert!(dst.iter().all(|&b| b == 0));
}
