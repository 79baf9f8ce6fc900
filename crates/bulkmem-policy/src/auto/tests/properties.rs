//! The choice point's promise, property-tested: for any profile (random
//! names, operations, shapes, sizes and rates, including every strategy
//! this CPU lacks and names that are no strategy), either the profile is
//! refused on load, or every decision it drives, through every safe entry
//! point's path (single-call bands, batch decisions, the checked stand-in),
//! is a kernel this CPU runs for that operation. And even a policy built
//! on a profile that was never validated only ever hands out such kernels.

use proptest::prelude::{any, prop, prop_assert, prop_oneof, proptest, Just, ProptestConfig};
use proptest::strategy::Strategy as Gen;

use crate::auto::bands::Compiled;
use crate::auto::*;
use crate::handle::Kernel;

const NAMES: &[&str] = &[
    "auto",
    "per-page",
    "rep-movsq",
    "rep-movsb",
    "rep-stosq",
    "rep-stosb",
    "libc",
    "avx2",
    "avx2-nt",
    "avx512",
    "avx512-nt",
    "clzero",
    "portable",
    "memcpy",
];

#[derive(Clone, Debug)]
struct RawCell {
    op: &'static str,
    shape: &'static str,
    size: u64,
    winner: &'static str,
    choice: &'static str,
    gbps: Vec<(&'static str, f64)>,
}

/// Names for a cell of `op`: mostly the op's own strategies (so some
/// profiles parse and exercise the policy), sometimes anything at all.
fn name_for(op: &'static str) -> impl Gen<Value = &'static str> {
    let own: Vec<&'static str> = match op {
        "copy" => Strategy::COPY.iter().map(|s| s.name()).collect(),
        "clear" => Strategy::CLEAR.iter().map(|s| s.name()).collect(),
        _ => NAMES.to_vec(),
    };
    prop_oneof![9 => prop::sample::select(own), 1 => prop::sample::select(NAMES)]
}

fn raw_cell() -> impl Gen<Value = RawCell> {
    prop_oneof![10 => Just("copy"), 10 => Just("clear"), 1 => Just("move")].prop_flat_map(|op| {
        (
            Just(op),
            prop::sample::select(&["single", "batch-4K", "batch-2M"][..]),
            prop_oneof![0u64..(1 << 12), 0u64..(1 << 40)],
            name_for(op),
            name_for(op),
            prop::collection::vec((name_for(op), 0.0f64..100.0), 0..6),
        )
            .prop_map(|(op, shape, size, winner, choice, gbps)| RawCell {
                op,
                shape,
                size,
                winner,
                choice,
                gbps,
            })
    })
}

/// A profile file for this CPU holding `cells`.
fn text(cells: &[RawCell]) -> String {
    let header = Profile {
        format: FORMAT,
        bulkmem: env!("CARGO_PKG_VERSION").into(),
        created: 1,
        quick: true,
        cpu: Identity::this(),
        cells: Vec::new(),
        nt_copy_shape: None,
    }
    .to_toml()
    .replacen("cells = 0", &format!("cells = {}", cells.len()), 1);
    let mut s = header;
    for c in cells {
        let gbps: Vec<String> = c.gbps.iter().map(|(n, g)| format!("{n}={g:.2}")).collect();
        s.push_str(&format!(
            "\n[[cell]]\nop = \"{}\"\nshape = \"{}\"\nsize = {}\nwinner = \"{}\"\nmargin = 1.0\nchoice = \"{}\"\ngbps = \"{}\"\n",
            c.op,
            c.shape,
            c.size,
            c.winner,
            c.choice,
            gbps.join(" ")
        ));
    }
    s
}

/// `k` is a kernel this CPU runs for `op`, and it does the work.
fn runs_here(k: Kernel, op: Op) {
    assert_eq!(k.op(), op, "{} handed out for {op}", k.strategy());
    assert!(k.strategy().supports(op) && k.strategy().available());
    let src: Vec<u8> = (0..300u32).map(|i| i as u8 ^ 0xa5).collect();
    let mut dst = vec![0x5au8; 300];
    match k {
        Kernel::Copy(c) => {
            c.copy(&mut dst[3..290], &src[5..292]);
            assert_eq!(dst[3..290], src[5..292], "{}", k.strategy());
        }
        Kernel::Clear(c) => {
            c.clear(&mut dst[3..290]);
            assert!(dst[3..290].iter().all(|&b| b == 0), "{}", k.strategy());
        }
    }
    assert_eq!(
        (dst[2], dst[290]),
        (0x5a, 0x5a),
        "{} wrote outside",
        k.strategy()
    );
}

/// [`Policy::kernel`] for the request's operation.
fn policy_kernel(pol: &Policy<'_>, req: &Request) -> Kernel {
    match req.op {
        Op::Copy => Kernel::Copy(pol.kernel(req)),
        Op::Clear => Kernel::Clear(pol.kernel(req)),
    }
}

fn lengths() -> impl Gen<Value = Vec<usize>> {
    prop::collection::vec(
        prop_oneof![
            0usize..9000,
            any::<usize>(),
            (0u32..64).prop_map(|b| 1usize << b)
        ],
        1..24,
    )
}

/// Every kernel the policy's paths hand out for `p` on this machine.
fn check_policy(p: &Profile, lens: &[usize], trust: bool) {
    let pol = Policy {
        machine: Machine::this(),
        profile: Some(p),
        overrides: &Overrides::NONE,
    };
    for op in [Op::Copy, Op::Clear] {
        for &hint in Hint::ALL {
            let bands = pol.bands(op, hint);
            let compiled = Compiled::new(bands, |len, s| {
                Kernel::new(s, op).unwrap_or_else(|_| {
                    // A validated profile never needs the fallback.
                    assert!(!trust, "{op} {hint} band at {len} needed a fallback");
                    policy_kernel(&pol, &Request::single(op, len, hint))
                })
            });
            for &len in lens {
                runs_here(compiled.kernel(len), op);
                for runs in [2, 3, len.max(2)] {
                    let req = Request {
                        op,
                        total: len,
                        runs,
                        hint,
                    };
                    runs_here(policy_kernel(&pol, &req), op);
                    if trust {
                        let s = pol.decide(&req).strategy;
                        assert!(Kernel::new(s, op).is_ok(), "{s} for {req:?}");
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn a_profile_is_refused_or_drives_only_kernels_this_cpu_runs(
        cells in prop::collection::vec(raw_cell(), 0..8),
        lens in lengths(),
    ) {
        let features = &cpu::info().features;
        let parsed = Profile::parse(&text(&cells));
        let accepted = parsed
            .as_ref()
            .map_err(String::clone)
            .and_then(|p| p.check_runs_on(features).map(|()| p));
        match accepted {
            Ok(p) => {
                // Independently of the validator: every name it kept is a
                // kernel here for its cell's operation.
                for c in &p.cells {
                    for s in [c.winner, c.choice].into_iter().chain(c.gbps.iter().map(|g| g.0)) {
                        prop_assert!(Kernel::new(s, c.op).is_ok(), "{s} kept in {c:?}");
                    }
                }
                check_policy(p, &lens, true);
            }
            Err(why) => {
                prop_assert!(!why.is_empty());
                // A profile that parsed but names what this CPU lacks says
                // which cell; and were it used anyway, the kernels would
                // still be ones this CPU runs.
                if let Ok(p) = &parsed {
                    prop_assert!(why.starts_with("cell "), "{why}");
                    check_policy(p, &lens, false);
                }
            }
        }
    }
}

#[test]
fn every_strategy_in_a_cell_is_either_refused_or_runnable() {
    // Deterministic companion: each name alone in a copy and a clear cell.
    for &name in NAMES {
        for op in ["copy", "clear"] {
            let cell = RawCell {
                op,
                shape: "single",
                size: 4096,
                winner: "per-page",
                choice: "per-page",
                gbps: vec![("per-page", 1.0), (name, 2.0)],
            };
            let t = text(&[cell]);
            match Profile::parse(&t) {
                Err(why) => assert!(
                    why.contains("unknown strategy name") || why.contains("is not a"),
                    "{name} {op}: {why}"
                ),
                Ok(p) => {
                    let s: Strategy = name.parse().unwrap();
                    let op: Op = op.parse().unwrap();
                    assert_eq!(
                        p.check_runs_on(&cpu::info().features).is_ok(),
                        s.available(),
                        "{name} {op}"
                    );
                    check_policy(&p, &[0, 64, 4096, 1 << 20], s.available());
                }
            }
        }
    }
}

/// A byte-level edit of a profile's text: the damage a disk, an editor or
/// a hostile writer does.
#[derive(Clone, Debug)]
enum Edit {
    /// Replace the byte at (position modulo the length).
    Set(usize, u8),
    /// Cut everything from there.
    Truncate(usize),
    /// Insert a string there.
    Insert(usize, String),
    /// Remove a run of bytes there.
    Delete(usize, usize),
}

fn edit() -> impl Gen<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Set(at, b)),
        any::<usize>().prop_map(Edit::Truncate),
        (
            any::<usize>(),
            prop_oneof![
                Just("\n[[cell]]\n".to_string()),
                Just("=".to_string()),
                Just("\"".to_string()),
                Just("size = 18446744073709551615\n".to_string()),
                Just("gbps = \"avx2=nan per-page=-1\"\n".to_string()),
                Just("\u{202e}secret-file-contents".to_string()),
                "[ -~]{0,12}",
            ]
        )
            .prop_map(|(at, s)| Edit::Insert(at, s)),
        (any::<usize>(), 1usize..64).prop_map(|(at, n)| Edit::Delete(at, n)),
    ]
}

fn apply(text: &str, edits: &[Edit]) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    for e in edits {
        let at = |p: usize| if b.is_empty() { 0 } else { p % (b.len() + 1) };
        match e {
            Edit::Set(p, v) if !b.is_empty() => {
                let i = p % b.len();
                b[i] = *v;
            }
            Edit::Set(..) => {}
            Edit::Truncate(p) => b.truncate(at(*p)),
            Edit::Insert(p, s) => {
                let i = at(*p);
                b.splice(i..i, s.bytes());
            }
            Edit::Delete(p, n) => {
                let i = at(*p);
                let j = (i + n).min(b.len());
                b.drain(i..j);
            }
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// The parser reads a file every preloaded process may open: on any
    /// bytes, and on any damage to a good profile, it returns (never
    /// panics), and its message never quotes the file's text.
    #[test]
    fn the_parser_survives_any_damage_and_never_quotes_the_file(
        cells in prop::collection::vec(raw_cell(), 0..6),
        edits in prop::collection::vec(edit(), 1..8),
        noise in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let good = text(&cells);
        for bytes in [apply(&good, &edits), noise] {
            let Ok(t) = std::str::from_utf8(&bytes) else {
                continue;
            };
            match Profile::parse(t) {
                Ok(p) => {
                    // What it accepts, it writes back in a form it reads.
                    prop_assert!(Profile::parse(&p.to_toml()).is_ok());
                }
                Err(e) => {
                    prop_assert!(!e.contains("secret-file-contents"), "{e}");
                    prop_assert!(!e.contains('\u{202e}'), "{e}");
                }
            }
        }
    }
}
