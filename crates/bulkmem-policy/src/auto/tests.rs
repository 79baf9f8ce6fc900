// The property tests of the choice point.
mod properties;

use super::cpu_fixtures::{intel_emr, zen5};
use super::profile::tests::hand;
use super::*;

const MIB: usize = 1 << 20;
static NONE: Overrides = Overrides::NONE;

fn on<'a>(m: &'a Machine, p: Option<&'a Profile>, o: &'a Overrides) -> Policy<'a> {
    Policy {
        machine: m,
        profile: p,
        overrides: o,
    }
}

#[test]
fn fills_follow_the_rules_primitive_for_streaming_copies() {
    let emr = intel_emr();
    let p = on(&emr, None, &NONE);
    let stream_copy = decide(&emr, &Request::single(Op::Copy, 256 * MIB, Hint::Stream));
    assert_eq!(stream_copy.strategy, Strategy::Avx512Nt);
    // Intel with AVX-512: avx512-nt, never avx2-nt, which it also has.
    assert!(emr.features.avx2);
    for (len, hint) in [(256 * MIB, Hint::Auto), (64 << 10, Hint::Stream)] {
        assert_eq!(
            p.fill_mode(len, hint),
            FillMode::Stream(Strategy::Avx512Nt),
            "{len} {hint:?}"
        );
    }
    // Streams where a clear of the same size would, and only there.
    let from = emr.stream_from();
    assert_eq!(p.fill_mode(from - 64, Hint::Auto), FillMode::Temporal);
    assert_eq!(p.fill_mode(256 * MIB, Hint::Reuse), FillMode::Temporal);
    assert_eq!(p.fill_mode(512, Hint::Stream), FillMode::Temporal);
    // AMD clears stream with clzero, which cannot copy: the fill takes
    // the streaming copy the rules pick there.
    let z5 = zen5();
    let p = on(&z5, None, &NONE);
    assert_eq!(
        decide(&z5, &Request::single(Op::Clear, 256 * MIB, Hint::Auto)).strategy,
        Strategy::Clzero
    );
    assert_eq!(
        p.fill_mode(256 * MIB, Hint::Auto),
        FillMode::Stream(Strategy::Avx2Nt)
    );
}

#[test]
fn fills_follow_bulkmem_strategy_and_the_nt_threshold() {
    let emr = intel_emr();
    let temporal = Overrides {
        copy: Some(Strategy::Avx2),
        clear: Some(Strategy::Avx2),
        ..Overrides::default()
    };
    let p = on(&emr, None, &temporal);
    assert_eq!(p.fill_mode(256 * MIB, Hint::Stream), FillMode::Temporal);
    let avx2_nt = Overrides {
        copy: Some(Strategy::Avx2Nt),
        clear: Some(Strategy::Avx2Nt),
        ..Overrides::default()
    };
    let p = on(&emr, None, &avx2_nt);
    for len in [4096, 256 * MIB] {
        assert_eq!(
            p.fill_mode(len, Hint::Auto),
            FillMode::Stream(Strategy::Avx2Nt),
            "{len}"
        );
    }
    let threshold = Overrides {
        nt_threshold: Some(MIB),
        ..Overrides::default()
    };
    let p = on(&emr, None, &threshold);
    assert_eq!(
        p.fill_mode(2 * MIB, Hint::Auto),
        FillMode::Stream(Strategy::Avx512Nt)
    );
    assert_eq!(p.fill_mode(MIB / 2, Hint::Auto), FillMode::Temporal);
}

#[test]
fn fills_follow_the_profile() {
    // The hand profile measured avx2-nt as its streaming copy; the
    // rules would pick avx512-nt on this machine.
    let emr = intel_emr();
    let prof = hand();
    let p = on(&emr, Some(&prof), &NONE);
    let copy = p.decide(&Request::single(Op::Copy, 256 * MIB, Hint::Stream));
    assert!(copy.reason.starts_with("tuned"), "{copy:?}");
    assert_eq!(
        p.fill_mode(256 * MIB, Hint::Auto),
        FillMode::Stream(Strategy::Avx2Nt)
    );
    assert_eq!(p.fill_mode(4096, Hint::Auto), FillMode::Temporal);
}
