//! The profile as a whole: written and read back, looked up, refused
//! when damaged; `hand` and `identity` serve the loader's tests too.

use super::lookup::key;
use super::*;
use crate::auto::{Machine, Overrides, Policy, Request};
use crate::machine::cpu::{Features, Vendor};
use crate::strategy::{Hint, Op, Strategy};

pub fn identity() -> Identity {
    Identity {
        vendor: "AMD".into(),
        family: 0x19,
        model: 0x1,
        stepping: 1,
        features: "erms fsrm avx2 clzero rep_good".into(),
        l1d: 32 << 10,
        l2: 512 << 10,
        llc: 32 << 20,
        llc_cpus: 2,
        cpus: 2,
    }
}

fn c(op: Op, shape: Shape, size: usize, choice: Strategy, gbps: &[(Strategy, f64)]) -> Cell {
    let mut sorted = gbps.to_vec();
    sorted.sort_by(|a, b| b.1.total_cmp(&a.1));
    Cell {
        op,
        shape,
        size,
        winner: sorted[0].0,
        runner_up: sorted.get(1).map(|x| x.0),
        margin: sorted[0].1 / sorted.get(1).map_or(sorted[0].1, |x| x.1),
        choice,
        gbps: gbps.to_vec(),
    }
}

/// A hand-written profile: copies use avx2 up to 16K, rep-movsb to 16M,
/// avx2-nt above; 4K batches stream from 16M; no clear cells.
pub fn hand() -> Profile {
    use Shape::*;
    use Strategy::*;
    let m = 1 << 20;
    let mut cells = vec![
        c(
            Op::Copy,
            Single,
            64,
            Avx2,
            &[(PerPage, 5.0), (Avx2, 20.0), (RepMovsb, 8.0)],
        ),
        c(
            Op::Copy,
            Single,
            4096,
            Avx2,
            &[(PerPage, 38.0), (Avx2, 71.0), (Avx2Nt, 13.0)],
        ),
        c(
            Op::Copy,
            Single,
            64 << 10,
            RepMovsb,
            &[(PerPage, 30.0), (RepMovsb, 40.0), (Avx2, 35.0)],
        ),
        c(
            Op::Copy,
            Single,
            16 * m,
            RepMovsb,
            &[(PerPage, 20.0), (RepMovsb, 22.0), (Avx2Nt, 15.0)],
        ),
        c(
            Op::Copy,
            Single,
            256 * m,
            Avx2Nt,
            &[(PerPage, 9.0), (RepMovsb, 14.0), (Avx2Nt, 16.0)],
        ),
        c(
            Op::Copy,
            SmallExtents,
            m,
            Avx2,
            &[(PerPage, 6.0), (Avx2, 7.0), (Avx2Nt, 6.5)],
        ),
        c(
            Op::Copy,
            SmallExtents,
            16 * m,
            Avx2Nt,
            &[(PerPage, 6.0), (Avx2, 6.6), (Avx2Nt, 8.7)],
        ),
    ];
    // Parse sorts; keep the hand-written order scrambled to prove it.
    cells.swap(0, 6);
    let mut p = Profile {
        format: FORMAT,
        bulkmem: "0.1.0".into(),
        created: 1_795_000_000,
        quick: false,
        cpu: identity(),
        cells,
        nt_copy_shape: None,
    };
    p.cells.sort_by_key(key);
    p
}

fn copy(len: usize, hint: Hint) -> Request {
    Request::single(Op::Copy, len, hint)
}

#[test]
fn round_trip() {
    let p = hand();
    let text = p.to_toml();
    let q = Profile::parse(&text).unwrap();
    // Rates are written with two decimals; these have fewer.
    assert_eq!(q.cells.len(), p.cells.len());
    for (a, b) in p.cells.iter().zip(&q.cells) {
        assert_eq!(
            (a.op, a.shape, a.size, a.winner, a.choice),
            (b.op, b.shape, b.size, b.winner, b.choice)
        );
        assert_eq!(a.gbps, b.gbps);
        assert!((a.margin - b.margin).abs() < 1e-3);
    }
    assert_eq!(q.cpu, p.cpu);
    assert_eq!(Profile::parse(&q.to_toml()).unwrap(), q);
    assert!(text.contains(&format!("key = \"{}\"", identity().key())));
    assert_eq!(q.nt_copy_shape, None);
    assert!(!text.contains("nt_copy_shape"));
}

#[test]
fn the_measured_shape_of_non_temporal_copies_round_trips_and_a_strange_one_is_refused() {
    for shape in crate::kernels::NtCopyShape::ALL {
        let p = Profile {
            nt_copy_shape: Some(shape),
            ..hand()
        };
        let text = p.to_toml();
        assert!(text.contains(&format!("nt_copy_shape = \"{}\"", shape.name())));
        assert_eq!(Profile::parse(&text).unwrap().nt_copy_shape, Some(shape));
    }
    let text = hand()
        .to_toml()
        .replace("cells = ", "nt_copy_shape = \"eight-pages\"\ncells = ");
    let e = Profile::parse(&text).unwrap_err();
    assert!(e.contains("nt_copy_shape") && !e.contains("eight"), "{e}");
}

#[test]
fn lookup_follows_the_nearest_cell_on_a_log_scale() {
    let p = hand();
    let pick = |len, hint| p.decide(&copy(len, hint)).unwrap().strategy;
    assert_eq!(pick(0, Hint::Auto), Strategy::Avx2);
    assert_eq!(pick(4096, Hint::Auto), Strategy::Avx2);
    // The 4K/64K boundary is their geometric mean, 16K.
    assert_eq!(pick(16383, Hint::Auto), Strategy::Avx2);
    assert_eq!(pick(16384, Hint::Auto), Strategy::RepMovsb);
    // Streaming starts only at the cell measured to stream (256M), not
    // at the 16M/256M geometric mean.
    assert_eq!(pick(64 << 20, Hint::Auto), Strategy::RepMovsb);
    assert_eq!(pick((256 << 20) - 1, Hint::Auto), Strategy::RepMovsb);
    assert_eq!(pick(256 << 20, Hint::Auto), Strategy::Avx2Nt);
    assert_eq!(pick(usize::MAX, Hint::Auto), Strategy::Avx2Nt);
    // Hints pick within the cell.
    assert_eq!(pick(1 << 30, Hint::Reuse), Strategy::RepMovsb);
    assert_eq!(pick(4096, Hint::Stream), Strategy::Avx2Nt);
    assert_eq!(
        pick(512, Hint::Stream),
        Strategy::Avx2,
        "short runs never stream"
    );
    assert_eq!(pick(64, Hint::Stream), Strategy::Avx2);
}

#[test]
fn batches_use_their_shape_and_fall_back_when_unmeasured() {
    let p = hand();
    let b = |extent: usize, count: usize| Request {
        op: Op::Copy,
        total: extent * count,
        runs: count,
        hint: Hint::Auto,
    };
    let pick = |r: Request| p.decide(&r).map(|c| c.strategy);
    assert_eq!(pick(b(4096, 256)), Some(Strategy::Avx2)); // 1 MiB
    assert_eq!(pick(b(4096, 65536)), Some(Strategy::Avx2Nt)); // 256 MiB
    assert_eq!(pick(b(16 << 10, 4096)), Some(Strategy::Avx2Nt));
    assert_eq!(pick(b(2 << 20, 128)), None, "no 2M-extent cells");
    assert_eq!(
        p.decide(&Request::single(Op::Clear, 4096, Hint::Auto)),
        None
    );
}

#[test]
fn the_policy_falls_back_to_the_rules_where_the_profile_is_silent() {
    let m = Machine {
        vendor: Vendor::Amd,
        family: 0x19,
        features: Features {
            erms: true,
            fsrm: true,
            avx2: true,
            clzero: true,
            ..Features::default()
        },
        l1d_bytes: 32 << 10,
        l2_bytes: 512 << 10,
        llc_bytes: 32 << 20,
        llc_cpus: 2,
        x86: true,
    };
    let p = hand();
    let pol = Policy {
        machine: &m,
        profile: Some(&p),
        overrides: &Overrides::NONE,
    };
    let clear = Request::single(Op::Clear, 1 << 30, Hint::Auto);
    assert_eq!(pol.decide(&clear), crate::auto::decide(&m, &clear));
    assert!(pol
        .decide(&copy(4096, Hint::Auto))
        .reason
        .starts_with("tuned"));
    // Overrides come first.
    let forced = Overrides {
        copy: Some(Strategy::Libc),
        ..Overrides::default()
    };
    let pol = Policy {
        overrides: &forced,
        ..pol
    };
    assert_eq!(pol.decide(&copy(4096, Hint::Auto)).strategy, Strategy::Libc);
    assert_eq!(pol.decide(&clear), crate::auto::decide(&m, &clear));
    let nt = Overrides {
        nt_threshold: Some(1 << 20),
        ..Overrides::default()
    };
    let pol = Policy {
        overrides: &nt,
        ..pol
    };
    assert_eq!(
        pol.decide(&copy(2 << 20, Hint::Auto)).strategy,
        Strategy::Avx2Nt
    );
    assert_eq!(
        pol.decide(&copy(512 << 10, Hint::Auto)).strategy,
        Strategy::RepMovsb
    );
    assert_eq!(
        pol.decide(&copy(1 << 30, Hint::Reuse)).strategy,
        Strategy::RepMovsb
    );
}

#[test]
fn policy_bands_agree_with_the_policy() {
    let m = crate::auto::cpu_fixtures::zen5();
    let p = hand();
    let nt = Overrides {
        nt_threshold: Some(3 << 20),
        ..Overrides::default()
    };
    for o in [&Overrides::NONE, &nt] {
        for profile in [None, Some(&p)] {
            let pol = Policy {
                machine: &m,
                profile,
                overrides: o,
            };
            for op in [Op::Copy, Op::Clear] {
                for &hint in Hint::ALL {
                    let b = pol.bands(op, hint);
                    if profile.is_some() && o.nt_threshold.is_none() && op == Op::Copy {
                        assert!(b.is_table(), "{:?}", b.as_slice());
                    }
                    let mut lens: Vec<usize> = vec![0, 1, 2, 3, 64, usize::MAX, usize::MAX / 2 + 1];
                    lens.extend((0..64).flat_map(|b| [(1usize << b) - 1, 1 << b, (1 << b) + 1]));
                    for e in pol.edges(op) {
                        lens.extend([e.saturating_sub(1), e, e + 1]);
                    }
                    for len in lens {
                        let r = Request::single(op, len, hint);
                        assert_eq!(b.lookup(len), pol.decide(&r).strategy, "{op} {hint} {len}");
                    }
                }
            }
        }
    }
}

#[test]
fn damaged_profiles_are_refused_with_a_reason() {
    let good = hand().to_toml();
    let cut = &good[..good.len() * 2 / 3];
    let e = Profile::parse(cut).unwrap_err();
    assert!(
        e.contains("truncated") || e.contains("unterminated") || e.contains("missing"),
        "{e}"
    );
    // Cut between cells: the count catches it.
    let between = &good[..good.rfind("[[cell]]").unwrap()];
    assert!(Profile::parse(between).unwrap_err().contains("truncated"));
    assert!(Profile::parse("format = 99\ncells = 0")
        .unwrap_err()
        .contains("format 99"));
    assert!(Profile::parse("\u{0}\u{1}garbage")
        .unwrap_err()
        .contains("line 1"));
    assert!(Profile::parse("").unwrap_err().contains("missing 'format'"));
    let bad = good.replacen("winner = \"avx2\"", "winner = \"clzero\"", 1);
    assert!(Profile::parse(&bad)
        .unwrap_err()
        .contains("not a copy strategy"));
    let bad = good.replacen("size = 4096", "size = \"big\"", 1);
    assert!(Profile::parse(&bad).unwrap_err().contains("integer"));
    let bad = good.replacen("avx2=71.00", "avx2=fast", 1);
    assert!(Profile::parse(&bad).unwrap_err().contains("rate"), "{bad}");
}

#[test]
fn identity_keys_and_differences() {
    let a = identity();
    let mut b = identity();
    assert_eq!(a.key(), b.key());
    assert_eq!(a.difference(&b), None);
    assert!(a.key().starts_with("amd-19-1-1-"), "{}", a.key());
    b.features = "erms avx2".into();
    assert_ne!(a.key(), b.key());
    assert!(a.difference(&b).unwrap().starts_with("features"));
    let mut c = identity();
    c.cpus = 16;
    assert!(a.difference(&c).unwrap().contains("online CPUs"));
    assert!(Identity::this()
        .key()
        .chars()
        .all(|ch| ch.is_ascii_alphanumeric() || ch == '-'));
}
