//! Concurrent compaction (`bulkmem::compact`) on real mappings. Every test
//! runs in a fresh copy of this binary running only that test: sessions
//! take SIGBUS, fork, and install handlers, which must not meet another
//! test's threads.

mod common;
#[path = "../examples/concurrent_gc.rs"]
mod concurrent_gc;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bulkmem::compact::{self, Compaction, Mode, Options};
use bulkmem::mapping::Mapping;
use common::alone::alone;
use common::require;
use common::slide_heap::{heap, mutate, SlideHeap, OBJ, PER_PAGE};

const PAGE: usize = 4096;
#[test]
fn unchanged_pages_move_back_as_4k_pages_and_huge_pages() {
    if !alone("unchanged_pages_move_back_as_4k_pages_and_huge_pages") {
        return;
    }
    if !compact::support().unwrap().moves {
        require::skip("UFFDIO_MOVE: needs Linux 6.8");
        return;
    }
    // 1.5 huge pages of unchanged objects: the first moves as one PMD, the
    // rest splits the second.
    let pages = 2048;
    let h = Arc::new(SlideHeap::new(pages, 768, 2));
    let m = Mapping::options()
        .align(2 << 20)
        .huge_pages(true)
        .map(pages * PAGE)
        .unwrap();
    h.fill(m.as_mut_ptr());
    let opts = Options::default()
        .mode(Mode::Move)
        .huge_pages(true)
        .batch(512);
    // SAFETY: no other thread exists to touch the heap.
    let s = unsafe { Compaction::prepare(m.as_mut_ptr(), m.len(), h.clone(), opts) }.unwrap();
    let stats = s.finish().unwrap();
    h.verify(m.as_ptr(), &vec![0; h.live.len()]).unwrap();
    assert!(stats.moved >= 768, "{stats:?}");
    assert_eq!(stats.move_fallbacks, 0, "{stats:?}");
}

#[test]
fn a_system_call_on_an_unbuilt_page_fails_with_efault_until_ensured() {
    if !alone("a_system_call_on_an_unbuilt_page_fails_with_efault_until_ensured") {
        return;
    }
    let pages = 256;
    let h = Arc::new(SlideHeap::new(pages, 0, 2));
    let m = heap(pages, &h);
    // SAFETY: no other thread touches the heap.
    let s = unsafe { Compaction::prepare(m.as_mut_ptr(), m.len(), h.clone(), Options::default()) }
        .unwrap();
    let page = m.as_mut_ptr().wrapping_add(10 * PAGE);
    let mut fds = [0; 2];
    // SAFETY: a pipe of our own, with one object's worth of data.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        assert_eq!(
            libc::write(fds[1], [7u8; OBJ].as_ptr().cast(), OBJ),
            OBJ as isize
        );
    }
    // The kernel does not fault the page in for us: EFAULT, nothing read.
    // SAFETY: reading into our heap page.
    let n = unsafe { libc::read(fds[0], page.cast(), OBJ) };
    let e = std::io::Error::last_os_error().raw_os_error();
    assert_eq!((n, e), (-1, Some(libc::EFAULT)));
    assert_eq!(s.stats().faults, 0);
    s.ensure(page, OBJ).unwrap();
    // SAFETY: as above, now that the page is built.
    let n = unsafe { libc::read(fds[0], page.cast(), OBJ) };
    assert_eq!(n, OBJ as isize);
    assert!(s.ensure(m.as_ptr().wrapping_add(m.len()), 1).is_err());
    let stats = s.finish().unwrap();
    assert_eq!(stats.by_mutators, 1);
    // The read replaced the page's first object with sevens.
    // SAFETY: the heap is whole now.
    let id = unsafe { (page as *const u64).read() };
    assert_eq!(id, u64::from_le_bytes([7; 8]));
}

#[test]
fn fork_during_a_session_gives_the_child_a_whole_heap() {
    if !alone("fork_during_a_session_gives_the_child_a_whole_heap") {
        return;
    }
    let pages = 512;
    let h = Arc::new(SlideHeap::new(pages, 8, 3));
    let m = heap(pages, &h);
    let (base, len, opts) = (m.as_mut_ptr(), m.len(), Options::default());
    // SAFETY: no other thread touches the heap.
    let mut s = unsafe { Compaction::prepare(base, len, h.clone(), opts) }.unwrap();
    // The child's copy of the session then has collector threads that
    // are not in the child: its finish must leave them be.
    s.start().unwrap();
    // SAFETY: the child only reads the heap and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok = h.verify(m.as_ptr(), &vec![0; h.live.len()]).is_ok();
        // The from-space is MADV_DONTFORK: not in the child at all.
        let mut v = 0u8;
        // SAFETY: mincore writes one byte to `v`.
        let from = unsafe { libc::mincore(s.from_space() as *mut libc::c_void, PAGE, &mut v) };
        let code = if !ok {
            3
        } else if from == 0 {
            4
        } else {
            0
        };
        // The child's copy of the session finishes as a no-op (its
        // collector threads and registration are the parent's).
        let code = match s.finish() {
            Ok(_) => code,
            Err(_) => 5,
        };
        // SAFETY: leaves the child at once.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x}"
    );
    let stats = s.finish().unwrap();
    assert_eq!(
        stats.by_mutators + stats.by_collector,
        pages as u64,
        "{stats:?}"
    );
    h.verify(m.as_ptr(), &vec![0; h.live.len()]).unwrap();
}

static APP_SIGBUS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static FILE_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn app_handler(_: i32, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    APP_SIGBUS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: grows the test's file back, so the access can be retried.
    unsafe { libc::ftruncate(FILE_FD.load(Ordering::SeqCst), 2 * PAGE as libc::off_t) };
}

#[test]
fn the_programs_sigbus_handler_still_gets_faults_that_are_not_the_sessions() {
    if !alone("the_programs_sigbus_handler_still_gets_faults_that_are_not_the_sessions") {
        return;
    }
    // SAFETY: the program's own handler, installed before the session.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = app_handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        assert_eq!(libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()), 0);
    }
    let pages = 128;
    let h = Arc::new(SlideHeap::new(pages, 0, 2));
    let m = heap(pages, &h);
    // SAFETY: no other thread touches the heap.
    let s = unsafe { Compaction::prepare(m.as_mut_ptr(), m.len(), h.clone(), Options::default()) }
        .unwrap();
    // A shared file mapping past the end of its file: a real SIGBUS.
    // SAFETY: a fresh memfd and mapping of our own.
    let file = unsafe {
        let fd = libc::memfd_create(c"bus".as_ptr(), 0);
        assert!(fd >= 0);
        FILE_FD.store(fd, Ordering::SeqCst);
        let p = libc::mmap(
            std::ptr::null_mut(),
            2 * PAGE,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        p as *const u8
    };
    // SAFETY: page 1 is past the (empty) file's end until the handler grows it.
    let v = unsafe { file.add(PAGE).read_volatile() };
    assert_eq!((v, APP_SIGBUS.load(Ordering::SeqCst)), (0, 1));
    // The session's faults are served, not passed on.
    assert_eq!(
        h.id(m.as_ptr(), 5 * PER_PAGE),
        h.live[5 * PER_PAGE] as u64 + 1
    );
    assert_eq!((s.faults(), APP_SIGBUS.load(Ordering::SeqCst)), (1, 1));
    s.finish().unwrap();
}

#[test]
fn without_userfaultfd_the_session_says_why_and_stop_the_world_still_compacts() {
    if !alone("without_userfaultfd_the_session_says_why_and_stop_the_world_still_compacts") {
        return;
    }
    deny_userfaultfd();
    let e = compact::support().unwrap_err().to_string();
    assert!(e.contains("userfaultfd"), "{e}");
    let pages = 256;
    let h = Arc::new(SlideHeap::new(pages, 4, 3));
    let m = heap(pages, &h);
    // SAFETY: no other thread touches the heap.
    let e = unsafe { Compaction::prepare(m.as_mut_ptr(), m.len(), h.clone(), Options::default()) };
    assert!(e.is_err());
    h.verify_from(m.as_ptr()).unwrap();
    let (base, len) = (m.as_mut_ptr(), m.len());
    // SAFETY: as above.
    let stats = unsafe { compact::stop_the_world(base, len, &*h, Options::default()) }.unwrap();
    assert_eq!(stats.by_collector, pages as u64);
    h.verify(m.as_ptr(), &vec![0; h.live.len()]).unwrap();
}

/// A seccomp filter that fails userfaultfd(2) with EPERM, as a container
/// runtime's does.
fn deny_userfaultfd() {
    const RET_ALLOW: u32 = 0x7fff_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    let filter = [
        libc::sock_filter {
            code: 0x20,
            jt: 0,
            jf: 0,
            k: 0,
        }, // ld nr
        libc::sock_filter {
            code: 0x15,
            jt: 0,
            jf: 1,
            k: libc::SYS_userfaultfd as u32,
        },
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: RET_ERRNO | libc::EPERM as u32,
        },
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: RET_ALLOW,
        },
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: a valid filter program; NO_NEW_PRIVS lets an unprivileged
    // process install it.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog),
            0
        );
    }
}

#[test]
fn the_concurrent_gc_example_keeps_its_graph_whole_over_twenty_collections() {
    if !alone("the_concurrent_gc_example_keeps_its_graph_whole_over_twenty_collections") {
        return;
    }
    // It checks every chain and every count itself, and panics if not:
    // twenty collections, the mutators allocating throughout.
    let said = concurrent_gc::collect(16, 2, 20);
    assert!(said.contains("counted exactly"), "{said}");
    assert!(said.lines().count() == 21, "{said}");
}

/// The out-of-memory path: the heap's memory cgroup at its limit while the
/// collector and two mutators build pages. The kernel refuses their copies
/// with `ENOMEM` (the cgroup's OOM killer is off, see `common::memcg`); a
/// page fault would wait for room, and so must they, rather than leave a
/// page FAILED and a mutator its SIGBUS. The test process, outside the
/// cgroup, makes the room once it has seen the limit refuse charges for a
/// while, by lifting the limit.
///
/// The collector is `finish` on this thread, not a thread of its own
/// (`start`): nothing can then have built the heap before the cap is in
/// place, and no thread is created at the limit (a clone's kernel stack
/// is charged to the cgroup too). The cap leaves 512 KiB of room, for
/// what the threads' own needs may still fault in (stack, page tables),
/// which the kernel would wait for without bulkmem ever seeing `ENOMEM`;
/// the collector must build 2 MiB before it releases any from-space.
#[test]
fn a_heap_whose_memory_cgroup_runs_dry_waits_for_room_and_loses_nothing() {
    const NAME: &str = "a_heap_whose_memory_cgroup_runs_dry_waits_for_room_and_loses_nothing";
    if std::env::var("BULKMEM_COMPACT_CHILD").is_err() {
        let cg = match common::memcg::MemCg::create() {
            Ok(c) => c,
            Err(e) => {
                require::skip(&format!("out of memory in a cgroup: {e}"));
                return;
            }
        };
        let failures = cg.failures();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // Until the limit has refused 100 charges (or for 5 s, so
                // that a machine that never refuses fails the child's
                // asserts rather than hangs), then 50 ms more.
                let t0 = std::time::Instant::now();
                while failures.count() < 100 && t0.elapsed().as_secs() < 5 {
                    if done.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
                cg.unlimit();
            });
            alone(NAME);
            done.store(true, Ordering::Relaxed);
        });
        eprintln!("{} charges refused at the limit", failures.count());
        return;
    }
    if !alone(NAME) {
        return;
    }
    let cg = common::memcg::MemCg::join_parents();
    // Mostly live: nearly every to-space page is a copy that needs memory.
    let pages = 8192;
    let h = Arc::new(SlideHeap::mostly_live(pages, 8));
    let m = heap(pages, &h);
    let opts = Options::default().batch(64);
    // SAFETY: no thread touches the heap until prepare returns.
    let s = unsafe { Compaction::prepare(m.as_mut_ptr(), m.len(), h.clone(), opts) }.unwrap();
    let mut stats = None;
    let expect = mutate(&h, m.as_mut_ptr() as usize, 2, 20_000, || {
        // The limit once the session's own scratch pages are in use (a
        // fault on one would wait in the kernel, not in bulkmem): just
        // above what the cgroup holds, so the collector's copies are
        // refused.
        let t0 = std::time::Instant::now();
        while s.faults() < 20 && t0.elapsed().as_secs() < 1 {
            std::hint::spin_loop();
        }
        cg.limit_above_usage(512 << 10);
        stats = Some(s.finish().unwrap());
    });
    h.verify(m.as_ptr(), &expect).unwrap();
    let stats = stats.unwrap();
    eprintln!(
        "{} mapping ioctls waited for memory; {} pages by mutators",
        stats.memory_waits, stats.by_mutators
    );
    assert!(
        stats.memory_waits > 0,
        "no mapping ioctl met ENOMEM: {stats:?}"
    );
    assert_eq!(stats.failed, 0, "{stats:?}");
}

/// A heap swapped out before the pause, in move mode: its from-space pages
/// are swap entries (and, while written back, swap-cache pages), the case
/// `UFFDIO_MOVE` got wrong before the 2025 swap-cache fixes. On a kernel
/// with them the unchanged pages move, swapped or not; on one without,
/// with swap on, the session copies every page. Every byte is checked
/// either way. The swap is a file the test turns on for itself.
#[test]
fn a_swapped_out_heap_in_move_mode_comes_back_whole() {
    const NAME: &str = "a_swapped_out_heap_in_move_mode_comes_back_whole";
    let _swap = if std::env::var("BULKMEM_COMPACT_CHILD").is_err() {
        if compact::support().is_ok_and(|s| !s.moves) {
            require::skip("UFFDIO_MOVE: needs Linux 6.8");
            return;
        }
        match common::swap::Swap::on(64 << 20) {
            Ok(s) => Some(s),
            Err(e) => {
                require::skip(&format!("a swapped-out heap: {e}"));
                return;
            }
        }
    } else {
        None
    };
    if !alone(NAME) {
        return;
    }
    // Unchanged pages first (moved back whole), then one object in three.
    let pages = 4096;
    let h = Arc::new(SlideHeap::new(pages, 1024, 3));
    let m = heap(pages, &h);
    // SAFETY: advice on our own heap; its content stays (in swap).
    let rc = unsafe { libc::madvise(m.as_mut_ptr().cast(), m.len(), libc::MADV_PAGEOUT) };
    assert_eq!(rc, 0, "MADV_PAGEOUT: {}", std::io::Error::last_os_error());
    let out = common::swap::swapped(m.as_ptr(), pages);
    assert!(
        out >= pages / 2,
        "only {out} of {pages} heap pages went to swap"
    );
    let opts = Options::default().mode(Mode::Move);
    // SAFETY: no thread touches the heap until prepare returns.
    let mut s = unsafe { Compaction::prepare(m.as_mut_ptr(), m.len(), h.clone(), opts) }.unwrap();
    let mut stats = None;
    let expect = mutate(&h, m.as_mut_ptr() as usize, 2, 4000, || {
        s.start().unwrap();
        stats = Some(s.finish().unwrap());
    });
    h.verify(m.as_ptr(), &expect).unwrap();
    let stats = stats.unwrap();
    eprintln!("{out} pages swapped out; {stats:?}");
    assert_eq!(stats.failed, 0);
    // The 1024 unchanged pages move (with every page built in staging),
    // unless this kernel may not move from a swap-backed from-space: then
    // every page is copied.
    assert!(
        stats.moved >= 1024 || stats.moved == 0,
        "some pages moved and some not: {stats:?}"
    );
}
