//! Asynchronous batches (`Engine::submit_*` and `Ticket`): outcomes equal
//! the synchronous path's whatever order tickets are waited in, a dropped
//! or cancelled ticket leaves an exact prefix and no worker writing after
//! it, tickets work from many threads, their eventfd sits in epoll, and a
//! forked child never hangs on its parent's ticket. Every test runs on a
//! CPU engine and on one with an emulated offload.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Condvar, Mutex};
use std::time::Duration;

use bulkmem::offload::{EmulatedOptions, Offload};
use bulkmem::{CancelToken, Control, Engine, Error, Extent, Report, Ticket};

const MIB: usize = 1 << 20;
/// Extents cut chunks (1 MiB) off their boundaries.
const EXT: usize = MIB + 4096;

#[derive(Clone, Copy, Debug)]
enum Kind {
    Cpu,
    Emulated,
}

const KINDS: [Kind; 2] = [Kind::Cpu, Kind::Emulated];

fn engine(kind: Kind, threads: usize) -> Engine {
    let b = Engine::builder()
        .threads(threads)
        .chunk(MIB)
        .inline_max(0)
        .pin(false);
    match kind {
        Kind::Cpu => b,
        Kind::Emulated => b.offload(Offload::emulated(EmulatedOptions::default().channels(2))),
    }
    .build()
    .expect("engine")
}

/// Registers `buf` with the engine's offload, if it has one. Callers
/// declare their buffers before the engine, so that they outlive it.
fn register(e: &Engine, buf: &[u8]) {
    if e.offload().is_some() {
        // SAFETY: the buffer outlives the engine (declared before it).
        unsafe { e.register(buf.as_ptr(), buf.len()) }.unwrap();
    }
}

/// Never zero, so that a zero byte in a destination is one never written.
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| ((i as u8).wrapping_mul(31).wrapping_add(seed)) | 1)
        .collect()
}

/// `dst` and `src` cut into consecutive extents of `len` bytes (the last
/// one shorter), so that the batch's stream order is address order.
fn extents(dst: &mut [u8], src: &[u8], len: usize) -> Vec<Extent> {
    dst.chunks_mut(len)
        .zip(src.chunks(len))
        .map(|(d, s)| Extent {
            dst: d.as_mut_ptr(),
            src: s.as_ptr(),
            len: d.len(),
        })
        .collect()
}

/// How many leading bytes of `dst` equal `src`; everything after them must
/// be untouched (zero).
fn written_prefix(dst: &[u8], src: &[u8]) -> usize {
    let k = dst.iter().zip(src).take_while(|(d, s)| d == s).count();
    assert!(
        dst[k..].iter().all(|&b| b == 0),
        "bytes written after the first unwritten one at {k}"
    );
    k
}

/// The report names exactly what `dst` holds: a prefix of `src`.
fn assert_exact(r: &Report, dst: &[u8], src: &[u8], ext: usize) {
    assert_eq!(written_prefix(dst, src), r.bytes_done, "{r:?}");
    assert_eq!(r.extents_done, r.bytes_done / ext, "{r:?}");
    let cut = r.bytes_done % ext;
    assert_eq!(
        r.partial,
        (cut > 0).then_some((r.extents_done, cut)),
        "{r:?}"
    );
}

/// Holds `e` busy with a synchronous batch, whose progress callback blocks
/// on a worker until the gate opens, while `body` runs; opens it after
/// `body` (also when `body` panics). A body asserts nothing while a ticket
/// of its own is alive and the gate closed: the ticket's drop, unwinding,
/// would wait for the gate, and the test would hang instead of failing.
fn gated<R>(e: &Engine, body: impl FnOnce(&dyn Fn()) -> R) -> R {
    let open = (Mutex::new(false), Condvar::new());
    let release = || {
        *open.0.lock().unwrap() = true;
        open.1.notify_all();
    };
    struct OnDrop<F: Fn()>(F);
    impl<F: Fn()> Drop for OnDrop<F> {
        fn drop(&mut self) {
            (self.0)()
        }
    }
    let (entered, held) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let src = vec![1u8; 4 * MIB];
            let mut dst = vec![0u8; 4 * MIB];
            let first = AtomicBool::new(true);
            let block = |_| {
                if first.swap(false, Ordering::SeqCst) {
                    entered.send(()).unwrap();
                    let mut o = open.0.lock().unwrap();
                    while !*o {
                        o = open.1.wait(o).unwrap();
                    }
                }
            };
            let ctl = Control {
                cancel: None,
                progress: Some(&block),
            };
            e.copy_batch_with_control(&mut [(&mut dst[..], &src[..])], ctl)
                .unwrap();
        });
        held.recv().unwrap();
        let _open = OnDrop(&release);
        body(&release)
    })
}

#[test]
fn waits_in_any_order_each_get_their_batch_and_tickets_finish_in_order() {
    for kind in KINDS {
        let src = pattern(24 * EXT, 3);
        let small = pattern(EXT, 9);
        let mut dst = vec![0u8; src.len()];
        let mut dst2 = vec![0u8; small.len()];
        let e = engine(kind, 2);
        for b in [&src[..], &small[..], &dst[..], &dst2[..]] {
            register(&e, b);
        }
        let (x1, x2) = (
            extents(&mut dst, &src, EXT),
            extents(&mut dst2, &small, EXT),
        );
        // SAFETY: the four vectors outlive both tickets and are not touched
        // until the tickets are waited on.
        let (t1, t2) = unsafe { (e.submit_copy(&x1, None), e.submit_copy(&x2, None)) };
        let (t1, t2) = (t1.unwrap(), t2.unwrap());
        let r2 = t2.wait().unwrap();
        assert!(r2.is_complete(), "{kind:?} {r2:?}");
        // Served in submission order: the first finished before the second.
        assert!(t1.is_done(), "{kind:?}: ticket 2 done before ticket 1");
        let r1 = t1.wait().unwrap();
        assert!(r1.is_complete() && r1.extents_done == 24, "{kind:?} {r1:?}");
        // Waiting again returns the same outcome.
        assert_eq!(t1.wait().unwrap(), r1);
        assert_eq!(t1.progress().done, src.len());
        drop((t1, t2));
        assert!(dst == src && dst2 == small, "{kind:?}");
    }
}

#[test]
fn a_dropped_ticket_stops_its_batch_before_the_memory_can_go() {
    for kind in KINDS {
        let src = pattern(96 * EXT, 5);
        let mut dst = vec![0u8; src.len()];
        let (bsrc, mut bdst) = (pattern(MIB, 1), vec![0u8; MIB]);
        let e = engine(kind, 2);
        register(&e, &src);
        register(&e, &dst);
        let x = extents(&mut dst, &src, EXT);
        // SAFETY: the vectors outlive the ticket, dropped below.
        let t = unsafe { e.submit_copy(&x, None) }.unwrap();
        while t.progress().done == 0 && !t.is_done() {
            std::thread::yield_now();
        }
        drop(t);
        // Written up to a point, nothing after it (all of it if the batch
        // won the race).
        let k = written_prefix(&dst, &src);
        assert_eq!(k % 4096, 0, "{kind:?}: stopped inside a chunk at {k}");
        // A batch after it runs only once the engine is free: had the drop
        // returned with workers still on the ticket's batch, they would
        // have written more by now.
        let snapshot = dst.clone();
        e.copy_batch(&mut [(&mut bdst[..], &bsrc[..])]).unwrap();
        assert!(dst == snapshot, "{kind:?}: written after the ticket's drop");
        drop(dst);
    }
}

#[test]
fn cancel_mid_flight_reports_the_exact_prefix() {
    for kind in KINDS {
        let src = pattern(96 * EXT, 7);
        let mut dst = vec![0u8; src.len()];
        let e = engine(kind, 2);
        register(&e, &src);
        register(&e, &dst);
        // Whether a cancel lands mid-batch is a race the test thread can
        // lose when it is descheduled for the whole batch (a loaded 2-CPU
        // host); every try still checks the exact prefix, and tries go on
        // (at least five) until one landed mid-way, up to a bound that only an
        // engine which never stops mid-batch reaches.
        let mut stopped_mid_way = 0;
        for tries in 0..200 {
            if tries >= 5 && stopped_mid_way > 0 {
                break;
            }
            dst.fill(0);
            let x = extents(&mut dst, &src, EXT);
            // SAFETY: the vectors outlive the ticket, waited on here.
            let t = unsafe { e.submit_copy(&x, None) }.unwrap();
            while t.progress().done == 0 && !t.is_done() {
                std::thread::yield_now();
            }
            t.cancel();
            let r = t.wait().unwrap();
            drop(t);
            assert_exact(&r, &dst, &src, EXT);
            assert_eq!(r.cancelled, !r.is_complete(), "{kind:?} {r:?}");
            stopped_mid_way += usize::from(r.cancelled && r.bytes_done > 0);
        }
        assert!(stopped_mid_way > 0, "{kind:?}: no cancel landed mid-batch");
    }
}

#[test]
fn a_caller_token_cancels_and_an_unstarted_ticket_writes_nothing() {
    for kind in KINDS {
        let src = pattern(8 * EXT, 2);
        let mut dst = vec![0u8; src.len()];
        let e = engine(kind, 1);
        register(&e, &src);
        register(&e, &dst);
        let x = extents(&mut dst, &src, EXT);
        let token = CancelToken::new();
        let (t, pending) = gated(&e, |_| {
            // SAFETY: the vectors outlive the ticket, waited on here.
            let t = unsafe { e.submit_copy(&x, Some(&token)) }.unwrap();
            let pending = t.try_wait().is_none()
                && !t.is_done()
                && t.wait_timeout(Duration::from_millis(1)).is_none();
            token.cancel();
            (t, pending)
        });
        assert!(pending, "{kind:?}: done while the engine was held");
        let r = t.wait().unwrap();
        assert!(r.cancelled && r.bytes_done == 0, "{kind:?} {r:?}");
        drop(t);
        assert!(
            dst.iter().all(|&b| b == 0),
            "{kind:?}: a cancelled ticket wrote"
        );
    }
}

#[test]
fn a_ticket_is_waited_on_from_another_thread() {
    for kind in KINDS {
        let src = pattern(16 * EXT, 4);
        let mut dst = vec![0u8; src.len()];
        let e = engine(kind, 2);
        register(&e, &src);
        register(&e, &dst);
        let x = extents(&mut dst, &src, EXT);
        // SAFETY: the vectors outlive the ticket, dropped in the scope.
        let t = unsafe { e.submit_copy(&x, None) }.unwrap();
        // Two waiters at once, one on another thread, by reference...
        let by_ref = std::thread::scope(|s| {
            let other = s.spawn(|| t.wait());
            let here = t.wait();
            assert_eq!(here, other.join().unwrap());
            here
        });
        // ...and the ticket itself sent to a thread.
        let by_move = std::thread::scope(|s| s.spawn(move || t.wait()).join().unwrap());
        assert_eq!(by_ref.unwrap(), by_move.clone().unwrap());
        assert!(by_move.unwrap().is_complete() && dst == src, "{kind:?}");
    }
}

#[test]
fn eight_threads_submit_copies_clears_and_fills_to_one_engine() {
    const PER: usize = 3 * EXT;
    for kind in KINDS {
        let srcs: Vec<Vec<u8>> = (0..8).map(|i| pattern(PER, i as u8)).collect();
        let mut dsts: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; 3 * PER]).collect();
        let e = engine(kind, 2);
        for b in srcs.iter().chain(dsts.iter()) {
            register(&e, b);
        }
        std::thread::scope(|s| {
            for (src, dst) in srcs.iter().zip(dsts.iter_mut()) {
                let e = &e;
                s.spawn(move || {
                    for round in 0..4u8 {
                        let (c, rest) = dst.split_at_mut(PER);
                        let (z, f) = rest.split_at_mut(PER);
                        z.fill(0xEE);
                        let (xc, xz) = (extents(c, src, EXT), extents(z, src, 4096 + 64));
                        let template = [round, 1, 2, 3, 4, 5, 6, 7];
                        // SAFETY: the three parts of `dst` and `src` are
                        // not touched until the tickets are waited on.
                        let ts: Vec<Ticket<'_>> = unsafe {
                            vec![
                                e.submit_copy(&xc, None).unwrap(),
                                e.submit_clear(&xz, None).unwrap(),
                                e.submit_fill(f.as_mut_ptr(), f.len(), &template, None)
                                    .unwrap(),
                            ]
                        };
                        for t in ts.iter().rev() {
                            assert!(t.wait().unwrap().is_complete());
                        }
                        drop(ts);
                        assert!(*c == src[..] && z.iter().all(|&b| b == 0));
                        assert!(f.chunks(8).all(|w| w == template));
                    }
                });
            }
        });
    }
}

#[test]
fn submission_refuses_what_the_synchronous_path_refuses_before_queuing() {
    for kind in KINDS {
        let src = pattern(4 * EXT, 6);
        let mut dst = vec![0u8; src.len()];
        let e = engine(kind, 1);
        let mut x = extents(&mut dst, &src, EXT);
        x[2].src = x[1].dst.cast_const(); // reads what extent 1 writes
                                          // SAFETY: refused before anything is queued (asserted below).
        let got = unsafe { e.submit_copy(&x, None) }.map(|_| ()).unwrap_err();
        // SAFETY: the synchronous check of the same batch writes nothing.
        let want = unsafe { e.copy_extents(&x, Control::default()) }.unwrap_err();
        assert_eq!(got, Error::from(want));
        assert_eq!(got, Error::Overlap { index: 2, with: 1 });
        x[2].src = std::ptr::null();
        // SAFETY: as above.
        let null = unsafe { e.submit_copy(&x, None) }.map(|_| ()).unwrap_err();
        assert!(matches!(null, Error::BadExtent { index: 2, .. }), "{null}");
        // SAFETY: as above; 10 bytes are not a whole number of 4-byte
        // elements.
        let fill = unsafe { e.submit_fill(dst.as_mut_ptr(), 10, &[1, 2, 3, 4], None) };
        assert!(matches!(fill.map(|_| ()), Err(Error::BadFill { .. })));
        assert!(
            dst.iter().all(|&b| b == 0),
            "{kind:?}: a refused batch wrote"
        );
    }
}

#[test]
fn the_ticket_fd_is_readable_in_epoll_once_done_and_not_before() {
    for kind in KINDS {
        let src = pattern(8 * EXT, 8);
        let mut dst = vec![0u8; src.len()];
        let e = engine(kind, 1);
        register(&e, &src);
        register(&e, &dst);
        let x = extents(&mut dst, &src, EXT);
        // SAFETY: creates an epoll instance; checked below.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(ep >= 0);
        let ready = |timeout_ms: i32| {
            let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
            // SAFETY: `ev` has room for the 4 events asked for at most.
            let n = unsafe { libc::epoll_wait(ep, ev.as_mut_ptr(), 4, timeout_ms) };
            assert!(n >= 0);
            (n as usize, ev[0].u64)
        };
        let t = gated(&e, |release| {
            // SAFETY: the vectors outlive the ticket, waited on below.
            let t = unsafe { e.submit_copy(&x, None) }.unwrap();
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: 42,
            };
            // SAFETY: registers the ticket's live fd with a live epoll.
            let rc = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, t.as_raw_fd(), &mut ev) };
            // The engine is held: the batch cannot have run.
            let before = ready(0).0;
            release();
            assert_eq!(rc, 0);
            assert_eq!(before, 0, "{kind:?}: readable before completion");
            t
        });
        // Bounded so that a missing wake-up fails instead of hanging.
        assert_eq!(ready(60_000), (1, 42), "{kind:?}");
        assert!(t.is_done());
        assert!(t.try_wait().unwrap().unwrap().is_complete());
        drop(t);
        assert_eq!(dst, src);
        // SAFETY: closes the epoll made above, once.
        unsafe { libc::close(ep) };
    }
}

#[test]
fn a_forked_child_does_not_hang_on_a_parent_ticket() {
    // The fork happens in a fresh copy of this binary running only this
    // test, so that no other test's threads exist when it forks.
    const CHILD: &str = "BULKMEM_ASYNC_FORK_TEST";
    const NAME: &str = "a_forked_child_does_not_hang_on_a_parent_ticket";
    if std::env::var_os(CHILD).is_none() {
        let o = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let out =
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success() && out.contains("1 passed"), "{out}");
        assert_eq!(out.matches("child exited 0").count(), 2, "{out}");
        return;
    }
    for kind in KINDS {
        let src = pattern(8 * EXT, 10);
        let mut dst = vec![0u8; src.len()];
        let e = engine(kind, 2);
        register(&e, &src);
        register(&e, &dst);
        let x = extents(&mut dst, &src, EXT);
        let (t, pid, waited, status) = gated(&e, |_| {
            // SAFETY: the vectors outlive the ticket, waited on below.
            let t = unsafe { e.submit_copy(&x, None) }.unwrap();
            // Whatever the other threads (workers, offload channels, the
            // submission thread, the gate's, all blocked) hold is never
            // needed in the child.
            // SAFETY: the child touches only the ticket, whose waits look
            // at the pid before any lock, and then `_exit`s.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: alarm only arms a timer: a hang dies of SIGALRM.
                unsafe { libc::alarm(20) };
                let waited = t.wait_timeout(Duration::from_secs(30));
                let parent = std::os::unix::process::parent_id();
                let ok = matches!(waited, Some(Err(Error::ForkedChild { owner, .. })) if owner == parent)
                    && matches!(t.try_wait(), Some(Err(Error::ForkedChild { .. })))
                    && !t.is_done();
                // Must not wait for the parent's thread.
                drop(t);
                // SAFETY: ends the child without unwinding into the scope,
                // whose threads exist only in the parent.
                unsafe { libc::_exit(if ok { 0 } else { 3 }) };
            }
            let mut status = 0;
            let waited = if pid > 0 {
                // SAFETY: waits for the child just forked.
                unsafe { libc::waitpid(pid, &mut status, 0) }
            } else {
                -1
            };
            (t, pid, waited, status)
        });
        assert!(
            pid > 0 && waited == pid,
            "{kind:?}: fork {pid}, waitpid {waited}"
        );
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{kind:?}: the child hung or failed: status {status:#x}"
        );
        println!("{kind:?}: child exited 0");
        // The parent's ticket runs as if nothing happened.
        assert!(t.wait().unwrap().is_complete());
        drop(t);
        assert_eq!(dst, src, "{kind:?}");
    }
}

#[test]
fn waiting_inside_a_callback_of_the_same_engine_is_refused() {
    let src = pattern(4 * EXT, 12);
    let mut dst = vec![0u8; src.len()];
    let (bsrc, mut bdst) = (pattern(4 * MIB, 1), vec![0u8; 4 * MIB]);
    let (csrc, mut cdst) = (pattern(MIB, 2), vec![0u8; MIB]);
    let e = engine(Kind::Cpu, 1);
    let x = extents(&mut dst, &src, EXT);
    let first = AtomicBool::new(true);
    let seen = Mutex::new(None);
    let cb = |_| {
        if first.swap(false, Ordering::SeqCst) {
            // SAFETY: the vectors outlive the ticket; it is dropped (and
            // cancelled) right here, before it can start.
            let t = unsafe { e.submit_copy(&x, None) }.unwrap();
            // This batch holds the engine: the ticket cannot run until it
            // ends, so waiting here would never end.
            *seen.lock().unwrap() = Some((t.wait(), t.try_wait().is_none()));
            drop(t); // cancels; does not wait (it would never end either)
        }
    };
    let ctl = Control {
        cancel: None,
        progress: Some(&cb),
    };
    e.copy_batch_with_control(&mut [(&mut bdst[..], &bsrc[..])], ctl)
        .unwrap();
    assert_eq!(
        seen.lock().unwrap().take(),
        Some((Err(Error::Reentrant), true))
    );
    // A ticket after it is served after it (FIFO): once it is done, the
    // dropped one was skipped, having written nothing.
    let y = extents(&mut cdst, &csrc, EXT);
    // SAFETY: the vectors outlive the ticket, waited on here.
    let t = unsafe { e.submit_copy(&y, None) }.unwrap();
    assert!(t.wait().unwrap().is_complete());
    drop(t);
    assert!(dst.iter().all(|&b| b == 0), "the dropped ticket wrote");
    assert_eq!(cdst, csrc);
}
