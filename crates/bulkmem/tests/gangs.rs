//! Batches whose extents are copied four at a time (`kernels::gang`, the
//! engine's loop in `engine/gangs.rs`): every layout the loop can meet
//! (whole gangs, a short last group, lengths that break a gang, extents
//! off a cache line, chunk edges of a two-thread engine) copies exactly
//! what one extent at a time copies, between guard pages and canaries,
//! and a checked batch that faults inside a gang reports each extent as
//! one extent at a time reports it. The calling thread's batches always
//! gang; an engine built with `gangs(false)` copies one extent at a time.

mod common;

use bulkmem::Extent;

use bulkmem::fault::Outcome;
use bulkmem::{Engine, Strategy};
use common::{canary, fill_canary, pattern, Guarded, PAGE};

/// The strategies that have a four-extent form, where this CPU runs them.
fn gang_strategies() -> Vec<Strategy> {
    [Strategy::Avx2Nt, Strategy::Avx512Nt]
        .into_iter()
        .filter(|s| s.available())
        .collect()
}

/// A one-thread engine running `s`, with gangs or one extent at a time.
fn engine(s: Strategy, gangs: bool) -> Engine {
    Engine::builder()
        .threads(1)
        .strategy(s)
        .gangs(gangs)
        .build()
        .unwrap()
}

/// Extent `j` of a layout: `lens[j]` bytes in slot `perm[j]` of `slot`
/// bytes, at the slot's start plus `skew` for even slots and ending at the
/// slot's end less `skew` for odd ones, so that with `skew` 0 the first
/// extent touches the leading guard page and the last the trailing one.
fn place(slot: usize, perm: &[usize], lens: &[usize], skew: usize) -> Vec<(usize, usize)> {
    lens.iter()
        .zip(perm)
        .map(|(&len, &s)| {
            let at = if s % 2 == 0 {
                s * slot + skew
            } else {
                (s + 1) * slot - len - skew
            };
            (at, len)
        })
        .collect()
}

/// A shuffled order of `n` slots (fixed, so failures repeat).
fn perm(n: usize, seed: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut x = seed as u64 | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// How a test copies a batch of extents: an engine's batch, or the
/// calling thread's `copy_batch` with a strategy.
enum Via<'a> {
    Engine(&'a Engine),
    Serial(Strategy),
}

/// The extents as the slice pairs `copy_batch` takes.
///
/// # Safety
/// Every extent's destination and source are live mappings for `'a`, the
/// destinations disjoint from each other and from every source.
unsafe fn as_slices<'a>(extents: &[Extent]) -> Vec<(&'a mut [u8], &'a [u8])> {
    extents
        .iter()
        // SAFETY: the caller's contract.
        .map(|e| unsafe {
            (
                std::slice::from_raw_parts_mut(e.dst, e.len),
                std::slice::from_raw_parts(e.src, e.len),
            )
        })
        .collect()
}

/// Copies the extents `lens` through `via` from a guarded source to a
/// guarded destination (each extent in its own shuffled slot, an odd
/// number of slots so the last extent may end at the guard) and checks
/// every destination byte: each extent's source, the canary elsewhere.
fn copy_and_check(via: &Via, lens: &[usize], skew: usize, what: &str) {
    let n = lens.len() | 1;
    let slot = lens.iter().max().unwrap().next_multiple_of(PAGE) + PAGE;
    let mut src = Guarded::new(n * slot);
    let mut dst = Guarded::new(n * slot);
    for (i, b) in src.bytes().iter_mut().enumerate() {
        *b = pattern(i, 7);
    }
    let usable = dst.usable();
    fill_canary(dst.bytes(), 0, usable);
    let d = place(slot, &perm(n, 0xd57)[..lens.len()], lens, skew);
    let s = place(slot, &perm(n, 0x5c3)[..lens.len()], lens, skew);
    let extents: Vec<Extent> = d
        .iter()
        .zip(&s)
        .map(|(&(da, len), &(sa, _))| Extent {
            dst: dst.start().wrapping_add(da),
            src: src.start().wrapping_add(sa),
            len,
        })
        .collect();
    match via {
        Via::Engine(engine) => {
            // SAFETY: every extent lies in its guarded region's usable
            // bytes, the destinations are disjoint (one slot each) and
            // the source is another mapping.
            let r = unsafe { engine.copy_extents(&extents, Default::default()) }.expect(what);
            assert!(r.is_complete(), "{what}: {r:?}");
        }
        Via::Serial(s) => {
            // SAFETY: as above: the extents are disjoint pieces of two
            // live mappings.
            let mut ops = unsafe { as_slices(&extents) };
            bulkmem::copy_batch_opts(&mut ops, bulkmem::Options::strategy(*s)).expect(what);
        }
    }
    let out = dst.bytes();
    let mut covered = vec![false; usable];
    for (&(da, len), &(sa, _)) in d.iter().zip(&s) {
        for k in 0..len {
            assert_eq!(
                out[da + k],
                pattern(sa + k, 7),
                "{what}: extent at {da}, byte {k}"
            );
            covered[da + k] = true;
        }
    }
    if let Some(i) = (0..usable).find(|&i| !covered[i] && out[i] != canary(i)) {
        panic!("{what}: byte {i} outside every extent was written");
    }
}

#[test]
fn gangs_copy_what_one_extent_at_a_time_copies() {
    let strategies = gang_strategies();
    if strategies.is_empty() {
        eprintln!("skipped: this CPU has neither avx2-nt nor avx512-nt");
        return;
    }
    let mixed = [
        4096, 4096, 4096, 2048, 4096, 4096, 4096, 4096, 4096, 64, 64, 64, 64,
    ];
    for s in strategies {
        let (ganged, single) = (engine(s, true), engine(s, false));
        for (via, name) in [
            (Via::Engine(&ganged), "engine"),
            (Via::Engine(&single), "engine, one at a time"),
            (Via::Serial(s), "copy_batch"),
        ] {
            let what = |rest: String| format!("{s} {name} {rest}");
            for len in [64, 128, 960, 4032, 4096, 4160, 8192, 12288, 65536] {
                for count in [1, 3, 4, 5, 8, 9, 13] {
                    for skew in [0, 64, 32, 1] {
                        let w = what(format!("{count} x {len} skew {skew}"));
                        copy_and_check(&via, &vec![len; count], skew, &w);
                    }
                }
            }
            for skew in [0, 32] {
                copy_and_check(&via, &mixed, skew, &what(format!("mixed {skew}")));
            }
            // Lengths that are not whole lines never gang, but copy.
            for len in [63, 65, 100, 4095, 4097] {
                copy_and_check(&via, &[len; 8], 0, &what(format!("8 x {len}")));
            }
        }
    }
}

#[test]
fn chunk_edges_of_a_two_thread_engine_cut_gangs_cleanly() {
    let Some(&s) = gang_strategies().first() else {
        eprintln!("skipped: this CPU has neither avx2-nt nor avx512-nt");
        return;
    };
    // 200 extents of 12 KiB: 2.4 MiB in chunks of at least 256 KiB, whose
    // edges fall inside extents (spans shorter than their extent).
    for on in [true, false] {
        let engine = Engine::builder()
            .threads(2)
            .strategy(s)
            .inline_max(0)
            .gangs(on)
            .build()
            .unwrap();
        for len in [12288, 4096 + 64] {
            let what = format!("{s} 2 threads gangs {on} {len}");
            copy_and_check(&Via::Engine(&engine), &[len; 200], 0, &what);
        }
    }
}

/// A checked batch of eight 4 KiB extents whose extent `bad` reads past
/// the end of its source mapping at `at` bytes in: (outcomes, every
/// destination byte).
fn checked_with_a_bad_source(
    via: &Via,
    bad: usize,
    at: usize,
    skew: usize,
) -> (Vec<Outcome>, Vec<u8>) {
    let n = 9;
    let slot = 2 * PAGE;
    let mut src = Guarded::new(n * slot);
    for (i, b) in src.bytes().iter_mut().enumerate() {
        *b = pattern(i, 3);
    }
    let mut dst = Guarded::new(n * slot);
    let usable = dst.usable();
    fill_canary(dst.bytes(), 0, usable);
    let lens = [PAGE; 8];
    let d = place(slot, &perm(n, 0x77)[..8], &lens, skew);
    let extents: Vec<Extent> = (0..8)
        .map(|j| Extent {
            dst: dst.start().wrapping_add(d[j].0),
            // Extent `bad` starts `at` bytes before the trailing guard page.
            src: if j == bad {
                src.start().wrapping_add(n * slot - at)
            } else {
                src.start().wrapping_add(j * slot)
            },
            len: PAGE,
        })
        .collect();
    let outcomes = match via {
        Via::Engine(e) => {
            // SAFETY: the destinations are disjoint slots of a mapping;
            // the sources are readable except past the usable region,
            // which the checked copy survives.
            let r = unsafe { e.copy_extents_checked(&extents, Default::default()) };
            r.unwrap().extents
        }
        Via::Serial(s) => {
            // SAFETY: as above; only the checked copy reads past the
            // usable region (as the fault tests' file mappings past EOF).
            let mut ops = unsafe { as_slices(&extents) };
            bulkmem::fault::copy_batch_checked(*s, &mut ops).unwrap()
        }
    };
    // Faults name the first byte of the trailing guard page; each call
    // maps its own regions, so the address is checked here and left out
    // of the comparison.
    let guard = src.start() as usize + n * slot;
    let outcomes = outcomes
        .into_iter()
        .map(|o| match o {
            Outcome::Faulted(mut f) => {
                assert_eq!(f.addr, guard, "{f}");
                f.addr = 0;
                Outcome::Faulted(f)
            }
            o => o,
        })
        .collect();
    (outcomes, dst.bytes().to_vec())
}

#[test]
fn a_fault_inside_a_gang_is_reported_as_one_extent_at_a_time_reports_it() {
    let strategies = gang_strategies();
    if strategies.is_empty() {
        eprintln!("skipped: this CPU has neither avx2-nt nor avx512-nt");
        return;
    }
    for s in strategies {
        let (ganged, single) = (engine(s, true), engine(s, false));
        for (via, name) in [(Via::Engine(&ganged), "engine"), (Via::Serial(s), "serial")] {
            for (bad, at, skew) in [
                (0, 64, 0),
                (2, 1000, 0),
                (3, 4032, 0),
                (5, 64, 32),
                (7, 2048, 0),
            ] {
                let what = format!("{s} {name} bad {bad} at {at} skew {skew}");
                let with = &checked_with_a_bad_source(&via, bad, at, skew);
                let without = &checked_with_a_bad_source(&Via::Engine(&single), bad, at, skew);
                assert_eq!(with.0, without.0, "{what}: outcomes");
                for (j, o) in with.0.iter().enumerate() {
                    match o {
                        Outcome::Faulted(f) if j == bad => {
                            // The copy stops where the source ends, or at
                            // the granule before it.
                            assert!(f.offset <= at && f.offset + 64 > at, "{what}: {f}");
                            assert_eq!(f.side, bulkmem::fault::Side::Source, "{what}");
                        }
                        Outcome::Done if j != bad => {}
                        o => panic!("{what}: extent {j}: {o:?}"),
                    }
                }
                // Each destination byte as one extent at a time leaves it,
                // except past the fault in the faulted extent, which neither
                // promises.
                let Outcome::Faulted(f) = with.0[bad] else {
                    unreachable!()
                };
                let d = place(2 * PAGE, &perm(9, 0x77)[..8], &[PAGE; 8], skew);
                let past = d[bad].0 + f.offset..d[bad].0 + PAGE;
                for i in (0..with.1.len()).filter(|i| !past.contains(i)) {
                    assert_eq!(with.1[i], without.1[i], "{what}: byte {i}");
                }
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(48))]

    /// Any batch of extents, mostly of a few whole-line lengths so that
    /// gangs form and break, copies as the reference.
    #[test]
    fn any_batch_copies_as_the_reference(
        picks in proptest::collection::vec(0usize..6, 1..24),
        skew in proptest::sample::select(vec![0usize, 1, 32, 64, 192]),
        serial in proptest::bool::ANY,
    ) {
        let Some(&s) = gang_strategies().last() else {
            return Ok(());
        };
        let lens: Vec<usize> = picks.iter().map(|&p| [4096, 4096, 1024, 8192, 4032, 100][p]).collect();
        let (ganged, single) = (engine(s, true), engine(s, false));
        let via = if serial { Via::Serial(s) } else { Via::Engine(&ganged) };
        copy_and_check(&via, &lens, skew, &format!("{s} {lens:?} {skew}"));
        copy_and_check(&Via::Engine(&single), &lens, skew, &format!("{s} one at a time {lens:?} {skew}"));
    }
}
