//! Batches: the result equals extent-by-extent reference copies whatever
//! the layout (adjacent extents that coalesce, scattered ones that do not),
//! the choice is made from the batch total, and bad input writes nothing.

use bulkmem::{
    BatchError, CopyError, EngineError, Error, Hint, Op, Options, Strategy, StrategyError,
};
use proptest::prelude::*;

/// Splits `buf` into extents of the given lengths, in order, skipping `gap`
/// bytes after each (gap 0: adjacent, so they coalesce).
fn split<'a>(mut buf: &'a mut [u8], lens: &[usize], gap: usize) -> Vec<&'a mut [u8]> {
    let mut out = Vec::new();
    for &l in lens {
        let (a, rest) = buf.split_at_mut(l);
        out.push(a);
        let skip = gap.min(rest.len());
        buf = &mut rest[skip..];
    }
    out
}

fn src_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn copy_batch_equals_reference(
        lens in proptest::collection::vec(0usize..20_000, 0..40),
        gap in prop_oneof![Just(0usize), 1usize..100],
        src_gap in prop_oneof![Just(0usize), 1usize..100],
        hint in proptest::sample::select(Hint::ALL.to_vec()),
        reverse in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let total: usize = lens.iter().sum();
        let space = total + lens.len() * 100 + 1;
        let src = src_bytes(space, seed);
        let mut dst = vec![0xEEu8; space];
        let mut expected = dst.clone();
        // Reference: the same extents, one copy_from_slice each.
        {
            let (mut d, mut s) = (0, 0);
            for &l in &lens {
                expected[d..d + l].copy_from_slice(&src[s..s + l]);
                d += l + gap; s += l + src_gap;
            }
        }
        let mut srcs: Vec<&[u8]> = Vec::new();
        {
            let mut rest = &src[..];
            for &l in &lens {
                let (a, r) = rest.split_at(l);
                srcs.push(a);
                rest = &r[src_gap.min(r.len())..];
            }
        }
        let dsts = split(&mut dst, &lens, gap);
        let mut ops: Vec<(&mut [u8], &[u8])> = dsts.into_iter().zip(srcs).collect();
        if reverse { ops.reverse(); }
        let r = bulkmem::copy_batch_opts(&mut ops, Options::hint(hint)).unwrap();
        prop_assert!(r.strategy.supports(Op::Copy) && r.strategy != Strategy::Auto);
        // The engine's report of a batch one thread ran whole.
        prop_assert_eq!((r.total, r.bytes_done, r.extents_done), (total, total, lens.len()));
        prop_assert!(r.partial.is_none() && !r.cancelled);
        prop_assert_eq!((r.chunks, r.workers), (usize::from(total > 0), usize::from(total > 0)));
        drop(ops);
        prop_assert!(dst == expected);
    }

    #[test]
    fn clear_batch_equals_reference(
        lens in proptest::collection::vec(0usize..20_000, 0..40),
        gap in prop_oneof![Just(0usize), 1usize..100],
        hint in proptest::sample::select(Hint::ALL.to_vec()),
    ) {
        let total: usize = lens.iter().sum();
        let space = total + lens.len() * 100 + 1;
        let mut dst = vec![0xEEu8; space];
        let mut expected = dst.clone();
        let mut d = 0;
        for &l in &lens {
            expected[d..d + l].fill(0);
            d += l + gap;
        }
        let mut ops = split(&mut dst, &lens, gap);
        let r = bulkmem::clear_batch_opts(&mut ops, Options::hint(hint)).unwrap();
        prop_assert_eq!((r.total, r.bytes_done, r.extents_done), (total, total, lens.len()));
        drop(ops);
        prop_assert!(dst == expected);
    }
}

#[test]
fn length_mismatch_names_the_first_bad_extent_and_writes_nothing() {
    let src = vec![1u8; 300];
    let mut dst = vec![0u8; 300];
    let (a, rest) = dst.split_at_mut(100);
    let (b, c) = rest.split_at_mut(100);
    let mut ops: Vec<(&mut [u8], &[u8])> = vec![(a, &src[..100]), (b, &src[..99]), (c, &src[..50])];
    let e = bulkmem::copy_batch(&mut ops).unwrap_err();
    assert_eq!(
        e,
        EngineError::Batch(BatchError::LengthMismatch {
            index: 1,
            dst: 100,
            src: 99
        })
    );
    assert!(e.to_string().contains("extent 1"), "{e}");
    drop(ops);
    assert!(
        dst.iter().all(|&x| x == 0),
        "nothing may be written on error"
    );
}

/// Size in bytes and sharing CPU count of cpu0's last-level cache, from
/// sysfs (the highest-level data or unified cache).
fn llc_from_sysfs() -> Option<(usize, usize)> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    let mut best: Option<(u32, usize, usize)> = None;
    for entry in dir.flatten() {
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        if read("type")?.trim() == "Instruction" {
            continue;
        }
        let level: u32 = read("level")?.trim().parse().ok()?;
        let size = read("size")?;
        let kib: usize = size.trim().strip_suffix('K')?.parse().ok()?;
        let sharing: usize = read("shared_cpu_list")?
            .trim()
            .split(',')
            .map(|p| match p.split_once('-') {
                Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
                None => 1,
            })
            .sum();
        if best.is_none_or(|b| level > b.0) {
            best = Some((level, kib << 10, sharing));
        }
    }
    best.map(|b| (b.1, b.2))
}

#[test]
fn the_choice_comes_from_the_batch_total() {
    // The documented rule (docs/design.md, "Choosing a primitive"): with
    // hint auto a batch streams once its total is at least 2x one thread's
    // share of the LLC (LLC bytes / CPUs sharing it), whatever its extents'
    // sizes. 64 KiB extents: each alone stays in cache (below L2, so not
    // Intel's past-L2 rule either), their batch streams.
    let Some((llc, sharing)) = llc_from_sysfs() else {
        eprintln!("skipped: no cache description in sysfs");
        return;
    };
    let share = llc / sharing.max(1);
    let extent = 64 << 10;
    let count = (2 * share).div_ceil(extent) + 1;
    let src = vec![3u8; extent];
    let mut dst = vec![0u8; extent * count];
    // Scattered order: reversed, so nothing coalesces.
    let mut ops: Vec<(&mut [u8], &[u8])> = dst
        .chunks_mut(extent)
        .rev()
        .map(|d| (d, &src[..]))
        .collect();
    let whole = bulkmem::copy_batch(&mut ops).unwrap().strategy;
    drop(ops);
    assert!(dst.iter().all(|&x| x == 3));
    dst[..extent].fill(0);
    let single = bulkmem::copy_opts(&mut dst[..extent], &src, Options::default()).unwrap();
    assert!(dst[..extent].iter().all(|&x| x == 3));
    // A tuned profile or BULKMEM_* overrides may choose otherwise; a CPU
    // without AVX2 has no non-temporal copy.
    let untuned = bulkmem_policy::auto::profile().is_none()
        && !bulkmem_policy::auto::Overrides::from_env().any();
    if !(untuned && Strategy::Avx2Nt.available()) {
        eprintln!("skipped the choice check: tuned, overridden or no AVX2 ({whole}, {single})");
        return;
    }
    let nt = ["avx2-nt", "avx512-nt"];
    assert!(
        nt.contains(&whole.name()),
        "{count} x 64 KiB = 2x the {share}-byte LLC share streams: got {whole}"
    );
    assert!(
        !nt.contains(&single.name()),
        "one 64 KiB copy stays in cache: got {single}"
    );
    // Which streaming primitive: avx512-nt on Intel with AVX-512.
    let intel = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains("GenuineIntel"));
    if intel && Strategy::Avx512Nt.available() {
        assert_eq!(whole, Strategy::Avx512Nt);
    }
}

#[test]
fn unavailable_and_unsupported_strategies_are_refused() {
    let mut d = [0u8; 8];
    let e = bulkmem::copy_opts(
        &mut d,
        &[1; 8],
        bulkmem::Options::strategy(Strategy::Clzero),
    )
    .unwrap_err();
    assert!(matches!(e, CopyError::Unsupported { op: Op::Copy, .. }));
    assert!(e.to_string().contains("cannot copy"), "{e}");
    let e =
        bulkmem::clear_opts(&mut d, bulkmem::Options::strategy(Strategy::RepMovsb)).unwrap_err();
    assert!(matches!(
        e,
        StrategyError::Unsupported { op: Op::Clear, .. }
    ));
    // Refused as unavailable, naming the first missing feature, by every
    // operation the strategy has (tests/unavailable.rs hides AVX2 to be
    // sure of a case; here, whatever this CPU lacks).
    for &s in Strategy::ALL {
        let Some(needs) = s.missing_feature(&bulkmem::cpu::info().features) else {
            continue;
        };
        let want = StrategyError::Unavailable { strategy: s, needs };
        if s.supports(Op::Copy) {
            assert_eq!(
                bulkmem::copy_opts(&mut d, &[1; 8], bulkmem::Options::strategy(s)),
                Err(want.into())
            );
        }
        if s.supports(Op::Clear) {
            assert_eq!(
                bulkmem::clear_opts(&mut d, bulkmem::Options::strategy(s)),
                Err(want)
            );
        }
        assert!(want.to_string().contains(needs), "{want}");
        // The umbrella says the same in the same words.
        assert_eq!(Error::from(want).to_string(), want.to_string());
    }
    let e = bulkmem::copy_opts(&mut d, &[1; 7], bulkmem::Options::strategy(Strategy::Auto))
        .unwrap_err();
    assert_eq!(e, CopyError::LengthMismatch { dst: 8, src: 7 });
    assert_eq!(d, [0; 8]);
}

#[test]
#[should_panic(expected = "destination is 4 bytes but source is 5 bytes")]
fn copy_panics_on_length_mismatch() {
    bulkmem::copy(&mut [0u8; 4], &[0u8; 5]);
}
