//! `BULKMEM_REQUIRE=avx512,uffd-poison,...`: a run that must not leave tests
//! out. Tests that need something the build host lacks are compiled ignored
//! (build.rs), and `cargo test` lists them as such; with this variable set,
//! a missing capability (or a name that is none) fails the run instead.

mod common;

use common::require::{check_required, rerun, Capability};

#[test]
fn every_required_capability_is_present() {
    let Some(list) = std::env::var_os("BULKMEM_REQUIRE") else {
        return; // nothing required
    };
    let list = list.to_str().expect("BULKMEM_REQUIRE is not UTF-8");
    if let Err(e) = check_required(list) {
        panic!("BULKMEM_REQUIRE={list}: {e}");
    }
}

#[test]
fn unknown_names_fail_and_the_known_are_listed() {
    let e = check_required("portable, no-such-thing ,").unwrap_err();
    assert!(e.contains("portable: not a capability"), "{e}");
    assert!(e.contains("no-such-thing: not a capability"), "{e}");
    for c in Capability::ALL {
        assert!(e.contains(c.name()), "{e}");
        assert_eq!(Capability::from_name(c.name()), Some(*c));
    }
    assert_eq!(check_required(""), Ok(()));
    assert_eq!(check_required(" , ,"), Ok(()));
}

/// Hiding a feature with `BULKMEM_DISABLE` makes requiring it fail, naming
/// it; requiring what the build host had (and nothing hides) passes.
#[test]
fn a_hidden_or_absent_capability_fails_the_requirement() {
    let (ok, out) = rerun(
        "every_required_capability_is_present",
        &[
            ("BULKMEM_DISABLE", "avx512f,avx2"),
            ("BULKMEM_REQUIRE", "avx2,avx512"),
        ],
    );
    assert!(!ok, "{out}");
    for want in ["avx2: ", "avx512: ", "avx512f"] {
        assert!(out.contains(want), "{want}: {out}");
    }
    let here: Vec<&str> = Capability::ALL
        .iter()
        .filter(|c| c.built_for() == Some(true))
        .map(|c| c.name())
        .collect();
    let (ok, out) = rerun(
        "every_required_capability_is_present",
        &[
            ("BULKMEM_DISABLE", ""),
            ("BULKMEM_REQUIRE", &here.join(",")),
        ],
    );
    assert!(ok, "BULKMEM_REQUIRE={}: {out}", here.join(","));
}

/// build.rs saw what the library sees at run time: a capability present
/// here but not there would leave its tests ignored for nothing; one there
/// but not here (unless `BULKMEM_DISABLE` hides it) fails those tests.
#[test]
fn the_build_host_probe_agrees_with_this_host() {
    for &c in Capability::ALL {
        let Some(built) = c.built_for() else {
            continue;
        };
        match c.check() {
            Ok(()) => assert!(built, "{}: present, but build.rs did not see it", c.name()),
            Err(why) => assert!(
                !built || why.contains("hidden by BULKMEM_DISABLE"),
                "{}: build.rs saw it, but here: {why}",
                c.name()
            ),
        }
    }
}
