//! The batch engine: results equal a sequential reference for random
//! batches on any thread count, validation names the right extent before
//! anything is written, cancel stops with an exact completion report,
//! progress reaches the total, a panicking callback never hangs the caller,
//! and several callers can share one engine.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use bulkmem::{CancelToken, Control, Engine, Error, Extent, Hint, Placement, Progress, Strategy};
use proptest::prelude::*;

/// An engine that splits even small batches into many 4 KiB-aligned chunks
/// and never runs inline, so the multi-threaded path is what is tested.
fn engine(threads: usize, chunk: usize) -> Engine {
    Engine::builder()
        .threads(threads)
        .chunk(chunk)
        .inline_max(0)
        .build()
        .expect("engine")
}

fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Splits `buf` into extents of `lens`, skipping `gap` bytes after each.
fn carve<'a>(mut buf: &'a mut [u8], lens: &[usize], gap: usize) -> Vec<&'a mut [u8]> {
    let mut out = Vec::new();
    for &l in lens {
        let (a, rest) = buf.split_at_mut(l);
        out.push(a);
        let skip = gap.min(rest.len());
        buf = &mut rest[skip..];
    }
    out
}

fn carve_src<'a>(mut buf: &'a [u8], lens: &[usize], gap: usize) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    for &l in lens {
        let (a, rest) = buf.split_at(l);
        out.push(a);
        buf = &rest[gap.min(rest.len())..];
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    #[test]
    fn random_batches_equal_the_sequential_reference(
        lens in proptest::collection::vec(prop_oneof![0usize..5000, 0usize..200_000], 0..60),
        gap in prop_oneof![Just(0usize), 1usize..5000],
        threads in 1usize..4,
        chunk_pages in 1usize..40,
        shuffle in any::<u64>(),
        clear in any::<bool>(),
        hint in proptest::sample::select(Hint::ALL.to_vec()),
    ) {
        let e = Engine::builder().threads(threads).chunk(chunk_pages * 4096).inline_max(0).hint(hint).build().unwrap();
        let space = lens.iter().sum::<usize>() + lens.len() * gap + 1;
        let src = pattern(space, shuffle);
        let mut dst = vec![0xEEu8; space];
        let mut expected = dst.clone();
        let (mut off, mut soff) = (0, 0);
        for &l in &lens {
            if clear { expected[off..off + l].fill(0) } else { expected[off..off + l].copy_from_slice(&src[soff..soff + l]) }
            off += l + gap;
            soff += l + gap;
        }
        let mut dsts = carve(&mut dst, &lens, gap);
        let srcs = carve_src(&src, &lens, gap);
        // Scatter the order too: coalescing must not depend on it.
        let n = dsts.len();
        let mut order: Vec<usize> = (0..n).collect();
        if n > 1 {
            for i in (1..n).rev() {
                order.swap(i, (shuffle as usize).wrapping_mul(i + 7) % (i + 1));
            }
        }
        let mut slots: Vec<Option<&mut [u8]>> = dsts.drain(..).map(Some).collect();
        let report = if clear {
            let mut ops: Vec<&mut [u8]> = order.iter().map(|&i| slots[i].take().unwrap()).collect();
            e.clear_batch(&mut ops).unwrap()
        } else {
            let mut ops: Vec<(&mut [u8], &[u8])> = order.iter().map(|&i| (slots[i].take().unwrap(), srcs[i])).collect();
            e.copy_batch(&mut ops).unwrap()
        };
        prop_assert!(report.is_complete());
        prop_assert_eq!(report.extents_done, lens.len());
        prop_assert_eq!(report.partial, None);
        prop_assert!(report.workers <= threads);
        prop_assert!(dst == expected);
    }
}

#[test]
fn many_small_and_few_huge_extents_both_spread_over_workers() {
    let e = engine(2, 64 << 10);
    // 2048 extents of 4 KiB.
    let src = pattern(8 << 20, 1);
    let mut dst = vec![0u8; 8 << 20];
    let mut ops: Vec<(&mut [u8], &[u8])> =
        dst.chunks_mut(4096).zip(src.chunks(4096)).rev().collect();
    let r = e.copy_batch(&mut ops).unwrap();
    drop(ops);
    assert!(r.chunks >= 100, "{r:?}");
    assert_eq!(dst, src);
    // One 8 MiB extent is cut into chunks too.
    dst.fill(0);
    let r = e.copy_batch(&mut [(&mut dst[..], &src[..])]).unwrap();
    assert_eq!(r.chunks, 128, "{r:?}");
    assert_eq!(dst, src);
}

#[test]
fn length_mismatch_names_the_extent_and_writes_nothing() {
    let e = engine(2, 4096);
    let src = vec![1u8; 100];
    let mut dst = vec![0u8; 300];
    let (a, rest) = dst.split_at_mut(100);
    let (b, c) = rest.split_at_mut(100);
    let mut ops: Vec<(&mut [u8], &[u8])> = vec![(a, &src), (b, &src), (c, &src[..99])];
    assert_eq!(
        e.copy_batch(&mut ops).unwrap_err(),
        Error::LengthMismatch {
            index: Some(2),
            dst: 100,
            src: 99
        }
    );
    drop(ops);
    assert!(dst.iter().all(|&x| x == 0));
}

#[test]
fn raw_extents_are_validated_before_anything_is_written() {
    let e = engine(2, 4096);
    let mut buf = vec![0u8; 64 << 10];
    let src = vec![9u8; 64 << 10];
    let base = buf.as_mut_ptr();
    // SAFETY (all pointer arithmetic here): offsets stay inside `buf`/`src`.
    let ext = |d: usize, s: usize, len: usize| Extent {
        dst: unsafe { base.add(d) },
        // SAFETY: s + len stays inside `src`.
        src: unsafe { src.as_ptr().add(s) },
        len,
    };
    let ops = [
        ext(0, 0, 4096),
        ext(8192, 0, 4096),
        ext(12288 - 1, 4096, 10),
    ];
    // SAFETY: every extent lies in live buffers owned by this test.
    let err = unsafe { e.copy_extents(&ops, Control::default()) }.unwrap_err();
    assert_eq!(err, Error::Overlap { index: 2, with: 1 });
    assert!(
        err.to_string().contains("extent 2 overlaps extent 1"),
        "{err}"
    );
    assert!(buf.iter().all(|&x| x == 0), "nothing may be written");
    // A destination overlapping a source.
    let inside = Extent {
        // SAFETY: offset 100 is inside `buf`.
        dst: unsafe { base.add(100) },
        src: base.cast_const(),
        len: 200,
    };
    // SAFETY: as above.
    let err =
        unsafe { e.copy_extents(&[ext(40960, 0, 10), inside], Control::default()) }.unwrap_err();
    assert_eq!(err, Error::Overlap { index: 1, with: 1 });
    let null = Extent {
        dst: std::ptr::null_mut(),
        src: src.as_ptr(),
        len: 1,
    };
    // SAFETY: rejected before any access.
    let err = unsafe { e.clear_extents(&[ext(0, 0, 1), null], Control::default()) }.unwrap_err();
    assert!(matches!(err, Error::BadExtent { index: 1, .. }), "{err:?}");
    // And a valid raw batch runs.
    let ops = [ext(0, 0, 4096), ext(8192, 4096, 8192)];
    // SAFETY: as above.
    let r = unsafe { e.copy_extents(&ops, Control::default()) }.unwrap();
    assert!(r.is_complete());
    assert!(buf[..4096].iter().all(|&x| x == 9) && buf[4096..8192].iter().all(|&x| x == 0));
    assert!(buf[8192..16384].iter().all(|&x| x == 9));
}

/// Cancels from the progress callback once `after` bytes are done, then
/// checks the report against the memory byte for byte.
fn cancel_case(threads: usize, clear: bool) {
    const CHUNK: usize = 64 << 10;
    let e = engine(threads, CHUNK);
    let lens: Vec<usize> = (0..300)
        .map(|i| 4096 * (1 + i % 7) + (i % 3) * 100)
        .collect();
    let total: usize = lens.iter().sum();
    let src = pattern(total, 7);
    let mut dst = vec![0xEEu8; total];
    let token = CancelToken::new();
    let at_cancel = AtomicUsize::new(usize::MAX);
    let after = total / 3;
    let cb = |p: Progress| {
        if p.done >= after && !token.is_cancelled() {
            at_cancel.store(p.done, Ordering::SeqCst);
            token.cancel();
        }
    };
    let ctl = Control {
        cancel: Some(&token),
        progress: Some(&cb),
    };
    let dsts = carve(&mut dst, &lens, 0);
    let srcs = carve_src(&src, &lens, 0);
    let report = if clear {
        let mut ops = dsts;
        e.clear_batch_with(&mut ops, ctl).unwrap()
    } else {
        let mut ops: Vec<(&mut [u8], &[u8])> = dsts.into_iter().zip(srcs).collect();
        e.copy_batch_with(&mut ops, ctl).unwrap()
    };
    assert!(report.cancelled, "{report:?}");
    assert!(!report.is_complete());
    // Stopped within the chunks in flight: at most two per worker after the
    // one that saw the threshold.
    let seen = at_cancel.load(Ordering::SeqCst);
    assert!(report.bytes_done >= seen, "{report:?} vs {seen}");
    assert!(
        report.bytes_done <= seen + 2 * threads * CHUNK,
        "{report:?} vs {seen}"
    );
    // The report is exact: done extents hold the data, the partial one its
    // first bytes, everything after is untouched.
    let want = |i: usize| if clear { 0 } else { src[i] };
    let mut at = 0;
    for (i, &l) in lens.iter().enumerate() {
        let done_here = if i < report.extents_done {
            l
        } else {
            match report.partial {
                Some((p, n)) if p == i => n,
                _ => 0,
            }
        };
        for (k, &got) in dst[at..at + l].iter().enumerate() {
            let expect = if k < done_here { want(at + k) } else { 0xEE };
            assert_eq!(got, expect, "extent {i} byte {k} ({report:?})");
        }
        at += l;
    }
    let counted: usize =
        lens[..report.extents_done].iter().sum::<usize>() + report.partial.map_or(0, |p| p.1);
    assert_eq!(counted, report.bytes_done);
}

#[test]
fn cancel_stops_within_a_chunk_and_reports_exactly() {
    for threads in [1, 2, 3] {
        cancel_case(threads, false);
        cancel_case(threads, true);
    }
}

#[test]
fn progress_reaches_the_total_and_only_grows() {
    let e = engine(2, 64 << 10);
    let total = 4 << 20;
    let src = pattern(total, 3);
    let mut dst = vec![0u8; total];
    let seen = Mutex::new(Vec::new());
    let cb = |p: Progress| seen.lock().unwrap().push(p);
    let r = e
        .copy_batch_with(
            &mut [(&mut dst[..], &src[..])],
            Control {
                cancel: None,
                progress: Some(&cb),
            },
        )
        .unwrap();
    let mut v = seen.into_inner().unwrap();
    assert_eq!(v.len(), r.chunks);
    v.sort_by_key(|p| p.done);
    assert!(
        v.windows(2).all(|w| w[0].done < w[1].done),
        "each report is distinct"
    );
    assert_eq!(v.last().unwrap().done, total);
    assert!(v.iter().all(|p| p.total == total));
    assert_eq!(dst, src);
}

#[test]
fn a_panicking_callback_stops_the_batch_without_hanging() {
    let e = engine(2, 64 << 10);
    let total = 4 << 20;
    let src = pattern(total, 5);
    let mut dst = vec![0u8; total];
    let calls = AtomicUsize::new(0);
    let cb = |_: Progress| {
        if calls.fetch_add(1, Ordering::SeqCst) == 3 {
            panic!("callback says no");
        }
    };
    let err = e
        .copy_batch_with(
            &mut [(&mut dst[..], &src[..])],
            Control {
                cancel: None,
                progress: Some(&cb),
            },
        )
        .unwrap_err();
    let Error::WorkerPanicked { message, report } = err else {
        panic!("expected WorkerPanicked, got {err:?}")
    };
    assert!(message.contains("callback says no"));
    // The other worker may finish everything while the panic is reported
    // (printing a backtrace is slow); either way the report is exact.
    assert_eq!(dst[..report.bytes_done], src[..report.bytes_done]);
    assert!(dst[report.bytes_done..].iter().all(|&x| x == 0));
    // The engine is still usable.
    let r = e.copy_batch(&mut [(&mut dst[..], &src[..])]).unwrap();
    assert!(r.is_complete());
    assert_eq!(dst, src);
}

#[test]
fn several_callers_share_one_engine() {
    let e = engine(2, 16 << 10);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let e = &e;
            s.spawn(move || {
                for round in 0..40u64 {
                    let n = 4096 * (1 + (round as usize % 9)) * 7 + 13;
                    let src = pattern(n, t * 1000 + round + 1);
                    let mut dst = vec![0u8; n];
                    let mut ops: Vec<(&mut [u8], &[u8])> =
                        dst.chunks_mut(5000).zip(src.chunks(5000)).collect();
                    let r = e.copy_batch(&mut ops).unwrap();
                    assert!(r.is_complete());
                    drop(ops);
                    assert_eq!(dst, src, "caller {t} round {round}");
                }
            });
        }
    });
}

#[test]
fn builder_rejects_bad_settings_with_clear_errors() {
    let e = Engine::builder().threads(0).build().unwrap_err();
    assert!(e.to_string().contains("at least one thread"), "{e}");
    let e = Engine::builder().cpus(&[100_000]).build().unwrap_err();
    assert!(e.to_string().contains("100000"), "{e}");
    let e = Engine::builder().chunk(0).build().unwrap_err();
    assert!(e.to_string().contains("chunk"), "{e}");
    let unavailable = Strategy::ALL.iter().copied().find(|s| !s.available());
    if let Some(s) = unavailable {
        let e = Engine::builder().strategy(s).build().unwrap_err();
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
    }
}

#[test]
fn engine_defaults_follow_the_topology() {
    let e = Engine::new().unwrap();
    let t = &bulkmem::cpu::info().topology;
    assert_eq!(e.threads(), bulkmem::placement::default_threads(t, &[]));
    assert_eq!(
        e.cpus(),
        &bulkmem::placement::place(t, &[], e.threads(), Placement::Spread)[..]
    );
    assert_eq!(e.chunk(), bulkmem::engine::DEFAULT_CHUNK);
    // Small batches run inline on the caller and still complete.
    let mut d = [0u8; 100];
    let r = e.copy_batch(&mut [(&mut d[..], &[5u8; 100][..])]).unwrap();
    assert_eq!(r.workers, 1);
    assert_eq!(d, [5u8; 100]);
}

#[test]
fn a_named_strategy_is_used_for_every_chunk() {
    let e = Engine::builder()
        .threads(2)
        .chunk(64 << 10)
        .inline_max(0)
        .strategy(Strategy::Portable)
        .build()
        .unwrap();
    let src = pattern(1 << 20, 9);
    let mut dst = vec![0u8; 1 << 20];
    let r = e.copy_batch(&mut [(&mut dst[..], &src[..])]).unwrap();
    assert_eq!(r.strategy, Strategy::Portable);
    assert_eq!(dst, src);
    let mut ops = [&mut dst[..]];
    let e = Engine::builder()
        .strategy(Strategy::Avx2)
        .threads(1)
        .build();
    if let Ok(e) = e {
        assert!(e.clear_batch(&mut ops).is_ok(), "avx2 clears");
    }
    let e = Engine::builder()
        .strategy(Strategy::RepMovsb)
        .threads(1)
        .build()
        .unwrap();
    assert!(matches!(
        e.clear_batch(&mut ops).unwrap_err(),
        Error::Unsupported { .. }
    ));
}
