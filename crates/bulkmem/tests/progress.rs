//! Each promise `Control::progress` documents, pinned: calls never overlap,
//! `done` strictly increases, the last call carries the report's
//! `bytes_done` (the total when the batch completes), there is at most one
//! call per chunk, calls come from the workers (or the caller's thread for
//! an inline batch), and none comes after the batch call returns.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread::{self, ThreadId};

use bulkmem::{CancelToken, Control, Engine, Progress, Report};

/// An engine that never runs a batch inline and cuts it into many chunks,
/// so that several workers finish chunks at once and compete to report.
fn workers(threads: usize) -> Engine {
    Engine::builder()
        .threads(threads)
        .chunk(64 << 10)
        .inline_max(0)
        .build()
        .expect("engine")
}

/// What a callback saw: each call's `done` and thread, and whether two
/// calls ever overlapped.
#[derive(Default)]
struct Seen {
    calls: Mutex<Vec<(usize, ThreadId, Option<String>)>>,
    inside: AtomicBool,
    overlapped: AtomicBool,
}

impl Seen {
    fn record(&self, p: Progress) {
        if self.inside.swap(true, Ordering::SeqCst) {
            self.overlapped.store(true, Ordering::SeqCst);
        }
        let me = thread::current();
        self.calls
            .lock()
            .unwrap()
            .push((p.done, me.id(), me.name().map(str::to_owned)));
        // Some work while marked inside, so that an overlapping call
        // would be caught in the act rather than slip between two stores.
        let mut x = 0u64;
        for i in 0..2000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        self.inside.store(false, Ordering::SeqCst);
    }

    fn done(&self) -> Vec<usize> {
        self.calls.lock().unwrap().iter().map(|c| c.0).collect()
    }
}

fn copy(e: &Engine, dst: &mut [u8], src: &[u8], ctl: Control<'_>) -> Report {
    e.copy_batch_with_control(&mut [(dst, src)], ctl)
        .expect("batch")
}

#[test]
fn calls_are_serialised_strictly_increasing_and_end_at_the_total() {
    let e = workers(4);
    let total = 8 << 20;
    let src = common::pattern_vec(total, 11);
    let mut dst = vec![0u8; total];
    for round in 0..20 {
        let seen = Seen::default();
        let cb = |p: Progress| seen.record(p);
        let ctl = Control {
            cancel: None,
            progress: Some(&cb),
        };
        let report = copy(&e, &mut dst, &src, ctl);
        assert!(report.is_complete(), "round {round}: {report:?}");
        assert!(
            !seen.overlapped.load(Ordering::SeqCst),
            "round {round}: two calls overlapped"
        );
        let done = seen.done();
        assert!(
            done.windows(2).all(|w| w[0] < w[1]),
            "round {round}: not strictly increasing: {done:?}"
        );
        assert_eq!(done.last(), Some(&total), "round {round}");
        assert!(
            done.len() <= report.chunks,
            "round {round}: {} calls for {} chunks",
            done.len(),
            report.chunks
        );
        // Not inline: every call came from one of the engine's workers.
        let me = thread::current().id();
        for (d, id, name) in seen.calls.lock().unwrap().iter() {
            assert_ne!(*id, me, "round {round}: call at {d} on the caller");
            let name = name.as_deref().unwrap_or("");
            assert!(
                name.starts_with("bulkmem-"),
                "round {round}: call at {d} on thread {name:?}"
            );
        }
    }
    assert_eq!(dst, src);
}

#[test]
fn an_inline_batch_calls_back_on_the_calling_thread() {
    let e = Engine::builder().threads(2).build().expect("engine");
    let total = 1 << 20; // under the default inline_max
    let src = common::pattern_vec(total, 12);
    let mut dst = vec![0u8; total];
    let seen = Seen::default();
    let cb = |p: Progress| seen.record(p);
    let ctl = Control {
        cancel: None,
        progress: Some(&cb),
    };
    let report = copy(&e, &mut dst, &src, ctl);
    assert_eq!(report.workers, 1, "ran inline: {report:?}");
    let me = thread::current().id();
    let calls = seen.calls.into_inner().unwrap();
    assert!(!calls.is_empty());
    assert!(calls.iter().all(|c| c.1 == me), "{calls:?}");
    assert_eq!(calls.last().map(|c| c.0), Some(total));
}

#[test]
fn a_cancelled_batch_s_last_call_is_its_bytes_done() {
    let e = workers(3);
    let total = 8 << 20;
    let src = common::pattern_vec(total, 13);
    for round in 0..20 {
        let mut dst = vec![0u8; total];
        let token = CancelToken::new();
        let seen = Seen::default();
        let cb = |p: Progress| {
            seen.record(p);
            token.cancel(); // at the first call
        };
        let ctl = Control {
            cancel: Some(&token),
            progress: Some(&cb),
        };
        let report = copy(&e, &mut dst, &src, ctl);
        assert!(report.cancelled, "round {round}: {report:?}");
        let done = seen.done();
        assert!(done.windows(2).all(|w| w[0] < w[1]), "{done:?}");
        assert_eq!(
            done.last(),
            Some(&report.bytes_done),
            "round {round}: {report:?}"
        );
        assert!(report.bytes_done < total);
    }
}

#[test]
fn no_call_for_a_batch_that_writes_nothing() {
    let e = workers(2);
    let calls = AtomicUsize::new(0);
    let cb = |_: Progress| {
        calls.fetch_add(1, Ordering::SeqCst);
    };
    // Empty.
    let ctl = Control {
        cancel: None,
        progress: Some(&cb),
    };
    let report = e
        .clear_batch_with_control(&mut [], ctl)
        .expect("empty batch");
    assert!(report.is_complete() && !report.cancelled);
    // Cancelled before its first chunk: `Ok`, cancelled, nothing written.
    let token = CancelToken::new();
    token.cancel();
    let mut dst = vec![5u8; 4 << 20];
    let ctl = Control {
        cancel: Some(&token),
        progress: Some(&cb),
    };
    let report = e
        .clear_batch_with_control(&mut [&mut dst[..]], ctl)
        .expect("a cancelled batch is Ok");
    assert!(report.cancelled && report.bytes_done == 0, "{report:?}");
    assert!(dst.iter().all(|&b| b == 5));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[test]
fn no_call_after_the_batch_call_returns() {
    let e = workers(4);
    let total = 8 << 20;
    let src = common::pattern_vec(total, 14);
    let mut dst = vec![0u8; total];
    let calls = AtomicUsize::new(0);
    let cb = |_: Progress| {
        calls.fetch_add(1, Ordering::SeqCst);
    };
    let ctl = Control {
        cancel: None,
        progress: Some(&cb),
    };
    copy(&e, &mut dst, &src, ctl);
    let at_return = calls.load(Ordering::SeqCst);
    assert!(at_return > 0);
    // Dropping the engine joins its workers: a call still pending on one
    // of them would have run by now.
    drop(e);
    assert_eq!(calls.load(Ordering::SeqCst), at_return);
}
