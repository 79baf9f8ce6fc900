//! The batch engine: results equal a sequential reference for random
//! batches on any thread count, validation names the right extent before
//! anything is written, cancel stops with an exact completion report,
//! progress reaches the total, a panicking callback never hangs the caller,
//! and several callers can share one engine.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use bulkmem::{
    BatchError, CancelToken, Control, Engine, EngineError, Error, Extent, Hint, Progress, Strategy,
};
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
        let src = common::pattern_vec(space, shuffle as usize);
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
fn many_small_and_few_huge_extents_are_both_cut_into_chunks() {
    let e = engine(2, 64 << 10);
    // 2048 extents of 4 KiB.
    let src = common::pattern_vec(8 << 20, 1);
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
fn chunks_are_taken_by_distinct_workers_on_their_own_cpus() {
    // A fill's patch runs inside the chunk, outside every engine lock: the
    // worker that patches element 0 waits there until another thread has
    // patched an element, which only a second worker taking chunks from
    // the shared counter can do.
    let (ran_on, workers, cpus) = within(60, "a worker held inside its chunk", || {
        let e = engine(2, 4096);
        let seen = Mutex::new(Vec::<(std::thread::ThreadId, usize)>::new());
        let another = std::sync::Condvar::new();
        let distinct = |v: &[(std::thread::ThreadId, usize)]| {
            v.iter()
                .map(|p| p.0)
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        let patch = |i: usize, elem: &mut [u8]| {
            elem[0] = i as u8;
            let here = (
                std::thread::current().id(),
                bulkmem_machine::machine::placement::current_cpu(),
            );
            let mut v = seen.lock().unwrap();
            if !v.contains(&here) {
                v.push(here);
                another.notify_all();
            }
            if i == 0 {
                while distinct(&v) < 2 {
                    v = another.wait(v).unwrap();
                }
            }
        };
        let mut dst = vec![0u8; 64 * 4096];
        let r = e
            .fill_patched(&mut dst, &[7u8; 64], &patch, Control::default())
            .unwrap();
        assert!(r.is_complete());
        assert!(dst
            .chunks(64)
            .enumerate()
            .all(|(i, el)| el[0] == i as u8 && el[1..].iter().all(|&b| b == 7)));
        (seen.into_inner().unwrap(), r.workers, e.cpus().to_vec())
    });
    let me = std::thread::current().id();
    let threads: std::collections::HashSet<_> = ran_on.iter().map(|p| p.0).collect();
    assert_eq!(threads.len(), 2, "{ran_on:?}");
    assert!(!threads.contains(&me), "the caller ran a chunk: {ran_on:?}");
    assert_eq!(workers, 2);
    // Workers are pinned: each ran only where its placement put it, and
    // between them on every CPU the engine was given.
    let on: std::collections::HashSet<usize> = ran_on.iter().map(|p| p.1).collect();
    let given: std::collections::HashSet<usize> = cpus.iter().copied().collect();
    assert_eq!(on, given, "{ran_on:?} on {cpus:?}");
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
        EngineError::Batch(BatchError::LengthMismatch {
            index: 2,
            dst: 100,
            src: 99
        })
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
    let ext = |d: usize, s: usize, len: usize| Extent {
        // SAFETY: every call below passes d + len within `buf` (64 KiB).
        dst: unsafe { base.add(d) },
        // SAFETY: every call below passes s + len within `src` (64 KiB).
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
    assert_eq!(
        err,
        EngineError::Batch(BatchError::Overlap { index: 2, with: 1 })
    );
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
    let batch = [ext(40960, 0, 10), inside];
    // SAFETY: as above.
    let err = unsafe { e.copy_extents(&batch, Control::default()) }.unwrap_err();
    assert_eq!(
        err,
        EngineError::Batch(BatchError::Overlap { index: 1, with: 1 })
    );
    let null = Extent {
        dst: std::ptr::null_mut(),
        src: src.as_ptr(),
        len: 1,
    };
    // SAFETY: rejected before any access.
    let err = unsafe { e.clear_extents(&[ext(0, 0, 1), null], Control::default()) }.unwrap_err();
    assert!(
        matches!(
            err,
            EngineError::Batch(BatchError::BadExtent { index: 1, .. })
        ),
        "{err:?}"
    );
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
    let src = common::pattern_vec(total, 7);
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
        e.clear_batch_with_control(&mut ops, ctl).unwrap()
    } else {
        let mut ops: Vec<(&mut [u8], &[u8])> = dsts.into_iter().zip(srcs).collect();
        e.copy_batch_with_control(&mut ops, ctl).unwrap()
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
    let src = common::pattern_vec(total, 3);
    let mut dst = vec![0u8; total];
    let seen = Mutex::new(Vec::new());
    let cb = |p: Progress| seen.lock().unwrap().push(p);
    let r = e
        .copy_batch_with_control(
            &mut [(&mut dst[..], &src[..])],
            Control {
                cancel: None,
                progress: Some(&cb),
            },
        )
        .unwrap();
    let v = seen.into_inner().unwrap();
    // In the order delivered (a smaller `done` arriving after a larger one
    // is not delivered at all).
    assert!(!v.is_empty() && v.len() <= r.chunks);
    assert!(
        v.windows(2).all(|w| w[0].done < w[1].done),
        "done only grows: {v:?}"
    );
    assert_eq!(v.last().unwrap().done, total);
    assert!(v.iter().all(|p| p.total == total));
    assert_eq!(dst, src);
}

#[test]
fn a_panicking_callback_stops_the_batch_without_hanging() {
    let e = engine(2, 64 << 10);
    let total = 4 << 20;
    let src = common::pattern_vec(total, 5);
    let mut dst = vec![0u8; total];
    let calls = AtomicUsize::new(0);
    let cb = |_: Progress| {
        if calls.fetch_add(1, Ordering::SeqCst) == 3 {
            panic!("callback says no");
        }
    };
    let err = e
        .copy_batch_with_control(
            &mut [(&mut dst[..], &src[..])],
            Control {
                cancel: None,
                progress: Some(&cb),
            },
        )
        .unwrap_err();
    let EngineError::WorkerPanicked { message, report } = err else {
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
                    let src = common::pattern_vec(n, (t * 1000 + round + 1) as usize);
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
    assert!(
        matches!(
            e,
            Error::OutOfRange {
                what: "engine threads",
                value: 0,
                min: 1,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("engine threads: 0 is out of range (1 to"),
        "{e}"
    );
    let e = Engine::builder().cpus(&[100_000]).build().unwrap_err();
    assert!(
        matches!(&e, Error::NoUsableCpu { asked, .. } if asked == &[100_000]),
        "{e:?}"
    );
    assert!(e.to_string().contains("100000"), "{e}");
    let e = Engine::builder().chunk(0).build().unwrap_err();
    assert!(e.to_string().contains("chunk"), "{e}");
    let e = Engine::builder().offload_only(true).build().unwrap_err();
    assert_eq!(e, Error::NoOffload);
    let unavailable = Strategy::ALL.iter().copied().find(|s| !s.available());
    if let Some(s) = unavailable {
        let e = Engine::builder().strategy(s).build().unwrap_err();
        assert!(matches!(e, Error::Unavailable { .. }), "{e:?}");
    }
}

/// A sysfs CPU list ("0-3,8"), or None where the file cannot be read.
fn sys_list(path: &str) -> Option<Vec<usize>> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        out.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?);
    }
    Some(out)
}

/// The CPUs of the last-level cache `cpu` shares (the highest-level data
/// or unified cache sysfs lists for it).
fn llc_of(cpu: usize) -> Option<Vec<usize>> {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cache");
    let mut best: Option<(u32, Vec<usize>)> = None;
    for entry in std::fs::read_dir(&dir).ok()?.flatten() {
        let p = entry.path();
        let read = |f: &str| std::fs::read_to_string(p.join(f)).ok();
        if read("type").is_some_and(|t| t.trim() == "Instruction") {
            continue;
        }
        let Some(level) = read("level").and_then(|l| l.trim().parse().ok()) else {
            continue;
        };
        let Some(shared) = sys_list(p.join("shared_cpu_list").to_str()?) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| level > b.0) {
            best = Some((level, shared));
        }
    }
    best.map(|b| b.1)
}

#[test]
fn engine_defaults_follow_the_topology() {
    // The documented rule (docs/guide/engine.md), computed here from
    // sysfs and the affinity mask: one worker per physical core the
    // process may use, at most two per LLC domain, at least one.
    let online = sys_list("/sys/devices/system/cpu/online").unwrap_or_else(|| vec![0]);
    // SAFETY: a zeroed cpu_set_t is empty; sched_getaffinity fills it.
    let allowed: Vec<usize> = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        online
            .iter()
            .copied()
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    };
    let within_online =
        |v: Vec<usize>| -> Vec<usize> { v.into_iter().filter(|c| online.contains(c)).collect() };
    let core_of = |c: usize| {
        sys_list(&format!(
            "/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list"
        ))
        .map(within_online)
        .unwrap_or_else(|| vec![c])
    };
    let domain_of = |c: usize| {
        llc_of(c)
            .map(within_online)
            .unwrap_or_else(|| online.clone())
    };
    let cores: std::collections::HashSet<Vec<usize>> =
        allowed.iter().map(|&c| core_of(c)).collect();
    let domains: std::collections::HashSet<Vec<usize>> =
        allowed.iter().map(|&c| domain_of(c)).collect();
    let want = cores.len().min(2 * domains.len()).max(1);

    let e = Engine::new().unwrap();
    assert_eq!(
        e.threads(),
        want,
        "{} cores and {} LLC domains among CPUs {allowed:?}",
        cores.len(),
        domains.len()
    );
    // Spread: only CPUs the process may use, a core each, and as many
    // LLC domains as there are workers to go round.
    let cpus = e.cpus();
    assert!(
        cpus.iter().all(|c| allowed.contains(c)),
        "{cpus:?} outside {allowed:?}"
    );
    let used_cores: std::collections::HashSet<_> = cpus.iter().map(|&c| core_of(c)).collect();
    assert_eq!(
        used_cores.len(),
        cpus.len(),
        "two workers share a core: {cpus:?}"
    );
    let used_domains: std::collections::HashSet<_> = cpus.iter().map(|&c| domain_of(c)).collect();
    assert_eq!(
        used_domains.len(),
        cpus.len().min(domains.len()),
        "{cpus:?}"
    );
    assert_eq!(e.chunk(), 32 << 20, "seed 004's 32 MiB bound");
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
    let src = common::pattern_vec(1 << 20, 9);
    let mut dst = vec![0u8; 1 << 20];
    let r = e.copy_batch(&mut [(&mut dst[..], &src[..])]).unwrap();
    assert_eq!(r.strategy, Strategy::Portable);
    assert_eq!(dst, src);
    let mut ops = [&mut dst[..]];
    let e = Engine::builder()
        .strategy(Strategy::Avx2)
        .threads(1)
        .build();
    if Strategy::Avx2.available() {
        let r = e.expect("avx2 is available").clear_batch(&mut ops).unwrap();
        assert_eq!(r.strategy, Strategy::Avx2);
        assert!(r.is_complete());
        assert!(ops[0].iter().all(|&b| b == 0), "avx2 cleared every byte");
    } else {
        assert!(matches!(e, Err(Error::Unavailable { .. })), "{e:?}");
    }
    let e = Engine::builder()
        .strategy(Strategy::RepMovsb)
        .threads(1)
        .build()
        .unwrap();
    assert!(matches!(
        e.clear_batch(&mut ops).unwrap_err(),
        EngineError::Batch(BatchError::Unsupported { .. })
    ));
}

/// Runs `f` on a thread and fails (instead of hanging the suite) if it has
/// not returned within `secs`.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what}: no answer after {secs} s (hang)"))
}

#[test]
fn a_panicking_patch_on_a_worker_is_an_error_not_a_hang() {
    let r = within(30, "fill_patched with a panicking patch", || {
        let e = Engine::builder()
            .threads(2)
            .inline_max(0)
            .chunk(4096)
            .build()
            .unwrap();
        let template = [7u8; 64];
        let mut dst = vec![0u8; 64 * 100_000];
        let r = e.fill_patched(
            &mut dst,
            &template,
            &|i: usize, elem: &mut [u8]| {
                if i == 70_000 {
                    panic!("patch failed at {i}");
                }
                elem[0] = (i % 251) as u8;
            },
            Control::default(),
        );
        (r, dst)
    });
    let (r, dst) = r;
    match r {
        Err(Error::WorkerPanicked { message, report }) => {
            assert!(message.contains("patch failed at 70000"), "{message}");
            // The reported prefix is complete and stops before the element.
            assert!(report.bytes_done <= 70_000 * 64, "{report:?}");
            for (i, elem) in dst[..report.bytes_done].chunks(64).enumerate() {
                assert_eq!(elem[0], (i % 251) as u8, "element {i}");
                assert!(elem[1..].iter().all(|&b| b == 7));
            }
        }
        other => panic!("expected WorkerPanicked, got {other:?}"),
    }
}

#[test]
fn progress_is_monotonic_with_many_small_chunks() {
    let e = engine(2, 4096);
    let total = 2 << 20;
    let src = common::pattern_vec(total, 9);
    let mut dst = vec![0u8; total];
    for round in 0..50 {
        let seen = Mutex::new(Vec::new());
        let cb = |p: Progress| seen.lock().unwrap().push(p.done);
        e.copy_batch_with_control(
            &mut [(&mut dst[..], &src[..])],
            Control {
                cancel: None,
                progress: Some(&cb),
            },
        )
        .unwrap();
        let v = seen.into_inner().unwrap();
        assert!(
            v.windows(2).all(|w| w[0] < w[1]),
            "round {round}: done went back: {v:?}"
        );
        assert_eq!(v.last(), Some(&total), "round {round}");
    }
}

#[test]
fn a_callback_submitting_to_its_own_engine_is_refused() {
    let (inner, outer) = within(30, "a progress callback submitting to its engine", || {
        let e = engine(2, 64 << 10);
        let total = 1 << 20;
        let src = common::pattern_vec(total, 4);
        let mut dst = vec![0u8; total];
        let inner = Mutex::new(Vec::new());
        let cb = |_: Progress| {
            let mut a = vec![0u8; 4096];
            let b = vec![1u8; 4096];
            let r = e
                .copy_batch(&mut [(&mut a[..], &b[..])])
                .map(|r| r.bytes_done);
            inner.lock().unwrap().push(r);
        };
        let outer = e
            .copy_batch_with_control(
                &mut [(&mut dst[..], &src[..])],
                Control {
                    cancel: None,
                    progress: Some(&cb),
                },
            )
            .map(|r| r.bytes_done);
        assert_eq!(dst, src);
        (inner.into_inner().unwrap(), outer)
    });
    assert_eq!(outer, Ok(1 << 20));
    assert!(!inner.is_empty());
    assert!(
        inner.iter().all(|r| *r == Err(EngineError::Reentrant)),
        "{inner:?}"
    );
    // Another engine may be used from the callback.
    let e = engine(2, 64 << 10);
    let other = engine(1, 64 << 10);
    let mut dst = vec![0u8; 1 << 20];
    let src = common::pattern_vec(1 << 20, 5);
    let ok = AtomicUsize::new(0);
    let cb = |_: Progress| {
        let mut a = vec![0u8; 4096];
        let b = vec![1u8; 4096];
        if other.copy_batch(&mut [(&mut a[..], &b[..])]).is_ok() && a == b {
            ok.fetch_add(1, Ordering::Relaxed);
        }
    };
    e.copy_batch_with_control(
        &mut [(&mut dst[..], &src[..])],
        Control {
            cancel: None,
            progress: Some(&cb),
        },
    )
    .unwrap();
    assert!(ok.load(Ordering::Relaxed) > 0);
}

#[test]
fn an_absurd_chunk_size_is_out_of_range() {
    for c in [0, usize::MAX, usize::MAX - 4095, isize::MAX as usize + 1] {
        match Engine::builder().chunk(c).build() {
            Err(
                e @ Error::OutOfRange {
                    what: "engine chunk bytes",
                    value,
                    min: 1,
                    max,
                },
            ) => {
                assert_eq!(value, c);
                assert!(max <= isize::MAX as usize && max % 4096 == 0, "{e}");
                assert!(e.to_string().contains(&c.to_string()), "{e}");
            }
            other => panic!("chunk {c}: {other:?}"),
        }
    }
}

#[test]
fn workers_stay_inside_the_affinity_the_process_was_given() {
    let online = bulkmem::cpu::info().topology.online_cpus.clone();
    let last = *online.last().unwrap();
    let cpus = std::thread::spawn(move || {
        // SAFETY: a zeroed cpu_set_t is empty; setting one bit of it and
        // applying it to this thread only.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(last, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
        }
        let e = Engine::new().expect("an engine inside a one-CPU affinity");
        assert_eq!(bulkmem::placement::allowed_cpus(), Some(vec![last]));
        let a = Engine::builder()
            .cpus(&online)
            .threads(online.len())
            .build()
            .unwrap();
        // Named CPUs wholly outside this thread's own pin (it pinned itself
        // to first-touch memory, say) are the caller's choice: used.
        let others: Vec<usize> = online.iter().copied().filter(|&c| c != last).collect();
        let b = (!others.is_empty()).then(|| {
            let b = Engine::builder().cpus(&others).threads(1).build().unwrap();
            b.cpus().to_vec()
        });
        (e.cpus().to_vec(), a.cpus().to_vec(), b, others)
    })
    .join()
    .unwrap();
    assert_eq!(cpus.0, vec![last]);
    assert!(cpus.1.iter().all(|&c| c == last), "{:?}", cpus.1);
    if let Some(b) = cpus.2 {
        assert!(
            !b.is_empty() && b.iter().all(|c| cpus.3.contains(c)),
            "{b:?}"
        );
    }
}

#[test]
fn an_engine_works_in_a_forked_child_and_drops_cleanly() {
    // The fork happens in a fresh copy of this binary running only this
    // test, so that no other test's threads exist when it forks.
    const CHILD: &str = "BULKMEM_FORK_TEST";
    const NAME: &str = "an_engine_works_in_a_forked_child_and_drops_cleanly";
    if std::env::var_os(CHILD).is_none() {
        let o = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let out =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && out.contains("1 passed"), "{out}");
        assert!(
            out.contains("forked child: copied"),
            "the child side did not run: {out}"
        );
        return;
    }
    let e = engine(2, 1 << 20);
    let n = 64 << 20;
    let src = common::pattern_vec(n, 11);
    let mut dst = vec![0u8; n];
    e.copy_batch(&mut [(&mut dst[..], &src[..])]).unwrap();
    // SAFETY: fork in a process whose only other threads are the engine's
    // idle workers (blocked on a condition variable, holding no lock).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: alarm only arms a timer: a hang dies of SIGALRM.
        unsafe { libc::alarm(20) };
        dst.fill(0);
        let ok = e.copy_batch(&mut [(&mut dst[..], &src[..])]).is_ok() && dst == src;
        drop(e);
        // SAFETY: ends the child without running the parent's test harness.
        unsafe { libc::_exit(if ok { 0 } else { 3 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child hung or failed: status {status:#x}"
    );
    // The parent's engine still works.
    dst.fill(0);
    e.copy_batch(&mut [(&mut dst[..], &src[..])]).unwrap();
    assert_eq!(dst, src);
    println!("forked child: copied {n} bytes and exited 0");
}

#[test]
fn absurd_thread_and_channel_counts_are_errors_not_aborts() {
    let max = bulkmem::placement::max_threads();
    assert!(max >= 4096, "the documented floor");
    for n in [0, max + 1, 1 << 40, usize::MAX] {
        let e = Engine::builder().threads(n).build().unwrap_err();
        assert_eq!(
            e,
            Error::OutOfRange {
                what: "engine threads",
                value: n,
                min: 1,
                max
            }
        );
        assert!(e.to_string().contains(&n.to_string()), "{e}");
    }
    // Capped, so that looking does not allocate for every thread asked for.
    assert!(Engine::builder().threads(usize::MAX).planned_cpus().len() <= max);
    let o = bulkmem::offload::Offload::try_emulated(
        bulkmem::offload::EmulatedOptions::default().channels(1 << 40),
    )
    .unwrap_err();
    assert!(
        matches!(&o, Error::OutOfRange { what: "offload channels", value, max: m, .. }
            if *value == 1 << 40 && *m == max),
        "{o}"
    );
}

#[test]
fn migrate_refuses_ranges_beyond_user_space_instead_of_aborting() {
    use bulkmem::numa::{migrate, MigrateOptions};
    for (addr, len) in [(4096, usize::MAX - 8191), (4096, 1usize << 48)] {
        let e = migrate(addr, len, 0, MigrateOptions::default()).unwrap_err();
        assert!(
            matches!(e, Error::BadRange { .. })
                || matches!(e, Error::Syscall { errno, .. } if errno == libc::ENOMEM),
            "{e}"
        );
    }
}
