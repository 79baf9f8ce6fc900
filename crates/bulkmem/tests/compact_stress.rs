//! Concurrent compaction at the level of the kernel's uffd-stress and of a
//! runtime's life: sessions repeated a thousand times on one heap, parts of
//! a heap compacted again and again, several spaces in one pause,
//! allocation during a session, huge pages with mutators running, pinned
//! from-space pages, mutators walking the heap in order. Each test runs
//! alone in a child process (`common::alone`).

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bulkmem::compact::{self, Compaction, Mode, Options, Space, Stats};
use bulkmem::mapping::Mapping;
use common::alone::alone;
use common::require;
use common::slide_heap::{heap, mutate, SlideHeap, OBJ, PER_PAGE};

const PAGE: usize = 4096;

/// Lines of /proc/self/maps: the process's mappings.
fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count()
}

/// Open descriptors (/proc/self/fd, less the one reading it).
fn descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count() - 1
}

/// One session on `m` (refilled as `h` lays it out) with `mutators`
/// threads; checks the heap and returns the stats.
fn cycle(m: &Mapping, h: &Arc<SlideHeap>, opts: Options, mutators: usize) -> Stats {
    h.fill(m.as_mut_ptr());
    // SAFETY: no thread touches the heap until prepare returns.
    let mut s = unsafe { Compaction::prepare(m.as_mut_ptr(), m.len(), h.clone(), opts) }.unwrap();
    let mut stats = None;
    let expect = mutate(h, m.as_mut_ptr() as usize, mutators, 500, || {
        s.start().unwrap();
        stats = Some(s.finish().unwrap());
    });
    h.verify(m.as_ptr(), &expect).unwrap();
    let stats = stats.unwrap();
    assert_eq!(stats.failed, 0, "{stats:?}");
    stats
}

#[test]
fn a_thousand_sessions_on_one_heap_leave_mappings_and_descriptors_as_they_were() {
    if !alone("a_thousand_sessions_on_one_heap_leave_mappings_and_descriptors_as_they_were") {
        return;
    }
    // One malloc arena: a thread of a later cycle must not be given an
    // arena (a mapping) of its own because another was busy, which would
    // count as a mapping the sessions left.
    // SAFETY: mallopt only sets the allocator's parameter.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    let pages = 1024;
    let h = Arc::new(SlideHeap::new(pages, 8, 3));
    let m = heap(pages, &h);
    let opts = Options::default().batch(64);
    cycle(&m, &h, opts, 1);
    let (maps, fds) = (mappings(), descriptors());
    let mut pauses = Vec::new();
    for i in 1..1000 {
        let s = cycle(&m, &h, opts, usize::from(i % 10 == 0));
        pauses.push(s.pause);
    }
    assert_eq!(
        (mappings(), descriptors()),
        (maps, fds),
        "mappings and descriptors after 1000 sessions against after the first"
    );
    pauses.sort_unstable();
    eprintln!(
        "1000 sessions on a {} KiB heap: pause p50 {:?}, p99 {:?}, max {:?}; {maps} mappings",
        pages * 4,
        pauses[pauses.len() / 2],
        pauses[pauses.len() * 99 / 100],
        pauses[pauses.len() - 1]
    );
}

#[test]
fn a_part_of_a_heap_compacted_again_and_again_splits_it_no_further() {
    if !alone("a_part_of_a_heap_compacted_again_and_again_splits_it_no_further") {
        return;
    }
    // A young generation (pages 512..1024) compacted each cycle, the whole
    // heap every fourth: the mappings must settle, not grow. (One malloc
    // arena, as above.)
    // SAFETY: mallopt only sets the allocator's parameter.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    let (pages, young) = (2048, 512..1024);
    let whole = Arc::new(SlideHeap::new(pages, 4, 3));
    let part = Arc::new(SlideHeap::new(young.len(), 4, 3));
    let m = heap(pages, &whole);
    let young_at = m.as_mut_ptr().wrapping_add(young.start * PAGE);
    let mut counts = Vec::new();
    for i in 0..40 {
        if i % 4 == 3 {
            cycle(&m, &whole, Options::default(), 1);
        } else {
            part.fill(young_at);
            // SAFETY: no thread touches the heap until prepare returns.
            let mut s = unsafe {
                Compaction::prepare(
                    young_at,
                    young.len() * PAGE,
                    part.clone(),
                    Options::default(),
                )
            }
            .unwrap();
            let mut stats = None;
            let expect = mutate(&part, young_at as usize, 1, 500, || {
                s.start().unwrap();
                stats = Some(s.finish().unwrap());
            });
            part.verify(young_at, &expect).unwrap();
        }
        counts.push(mappings());
    }
    // The same step of the pattern leaves the same mappings, every time.
    for (i, c) in counts.iter().enumerate().skip(8) {
        assert_eq!(*c, counts[i - 4], "cycle {i}: mappings {counts:?}");
    }
    eprintln!("mappings per cycle: {:?}", &counts[..8]);
}

#[test]
fn several_spaces_compact_in_one_pause_and_a_refused_one_leaves_all_untouched() {
    if !alone("several_spaces_compact_in_one_pause_and_a_refused_one_leaves_all_untouched") {
        return;
    }
    let (pa, pb) = (1024, 512);
    let ha = Arc::new(SlideHeap::new(pa, 16, 3));
    let hb = Arc::new(SlideHeap::new(pb, 0, 5));
    let (ma, mb) = (heap(pa, &ha), heap(pb, &hb));
    // A third space the program protected: the whole prepare is refused.
    let shut = Mapping::options()
        .inaccessible(true)
        .map(16 * PAGE)
        .unwrap();
    let spaces = vec![
        Space::new(ma.as_mut_ptr(), ma.len(), ha.clone()),
        Space::new(mb.as_mut_ptr(), mb.len(), hb.clone()),
        Space::new(shut.as_mut_ptr(), shut.len(), hb.clone()),
    ];
    // SAFETY: no thread touches the heaps.
    let e = unsafe { Compaction::prepare_spaces(spaces, Options::default()) }
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("PROT_NONE"), "{e}");
    ha.verify_from(ma.as_ptr()).unwrap();
    hb.verify_from(mb.as_ptr()).unwrap();

    let spaces = vec![
        Space::new(ma.as_mut_ptr(), ma.len(), ha.clone()),
        Space::new(mb.as_mut_ptr(), mb.len(), hb.clone()),
    ];
    let opts = Options::default().workers(2);
    // SAFETY: as above.
    let mut s = unsafe { Compaction::prepare_spaces(spaces, opts) }.unwrap();
    let (mut sa, mut sb) = (None, None);
    let expect_b = mutate(&hb, mb.as_mut_ptr() as usize, 1, 3000, || {
        sa = Some(mutate(&ha, ma.as_mut_ptr() as usize, 1, 3000, || {
            s.start().unwrap();
            sb = Some(s.finish().unwrap());
        }));
    });
    ha.verify(ma.as_ptr(), &sa.unwrap()).unwrap();
    hb.verify(mb.as_ptr(), &expect_b).unwrap();
    let stats = sb.unwrap();
    assert_eq!(stats.pages, pa + pb);
    assert_eq!(stats.by_collector + stats.by_mutators, (pa + pb) as u64);
}

#[test]
fn allocation_buffers_made_present_take_no_fault_per_page() {
    if !alone("allocation_buffers_made_present_take_no_fault_per_page") {
        return;
    }
    // One object in 16 live: the to-space's upper 15/16 is free space a
    // mutator allocates into, 2 MiB buffers at a time, during the session.
    let pages = 16384;
    let h = Arc::new(SlideHeap::new(pages, 0, 16));
    let m = heap(pages, &h);
    let (at, len, opts) = (m.as_mut_ptr(), m.len(), Options::default());
    // SAFETY: no thread touches the heap until prepare returns.
    let mut s = unsafe { Compaction::prepare(at, len, h.clone(), opts) }.unwrap();
    let free = h.live.len().div_ceil(PER_PAGE);
    let buffers = (free.next_multiple_of(512)..pages).step_by(512);
    let allocated = buffers.len() * 512 * PAGE;
    let before = s.faults();
    for b in buffers.clone() {
        let at = m.as_mut_ptr().wrapping_add(b * PAGE);
        s.ensure(at, 512 * PAGE).unwrap();
        // SAFETY: a buffer of free to-space pages, present now.
        unsafe { std::ptr::write_bytes(at, 0x5A, 512 * PAGE) };
    }
    let faults = s.faults() - before;
    s.start().unwrap();
    let stats = s.finish().unwrap();
    eprintln!(
        "{} MiB allocated in {} buffers: {faults} faults; {stats:?}",
        allocated >> 20,
        buffers.len()
    );
    assert!(
        faults as usize <= allocated / (2 << 20),
        "{faults} faults for {allocated} bytes allocated"
    );
    let live_bytes = h.live.len() * OBJ;
    let expect = vec![0; h.live.len()];
    // The live objects are exact, the buffers hold what was written.
    for (k, _) in expect.iter().enumerate() {
        assert_eq!(h.id(m.as_ptr(), k), h.live[k] as u64 + 1);
    }
    let first = free.next_multiple_of(512) * PAGE;
    assert!(first >= live_bytes);
    assert!(m.as_slice()[first..].iter().all(|&b| b == 0x5A));
}

#[test]
fn huge_pages_with_mutators_running_in_every_mode() {
    if !alone("huge_pages_with_mutators_running_in_every_mode") {
        return;
    }
    let moves = compact::support().unwrap().moves;
    let pages = 4096;
    let h = Arc::new(SlideHeap::new(pages, 1024, 2));
    let m = Mapping::options()
        .align(2 << 20)
        .huge_pages(true)
        .map(pages * PAGE)
        .unwrap();
    for mode in [Mode::Copy, Mode::Auto, Mode::Move] {
        if mode == Mode::Move && !moves {
            continue;
        }
        let opts = Options::default().mode(mode).huge_pages(true).workers(2);
        let s = cycle(&m, &h, opts, 2);
        eprintln!(
            "{mode:?}: moved {} copied {} fallbacks {}",
            s.moved, s.copied, s.move_fallbacks
        );
    }
}

/// Pins `len` bytes at `at` as an io_uring fixed buffer (FOLL_LONGTERM,
/// as a runtime's I/O buffers are); the ring's descriptor, or None where
/// io_uring is not allowed.
fn pin_with_io_uring(at: *mut u8, len: usize) -> Option<i32> {
    let mut params = [0u8; 120]; // struct io_uring_params, zeroed
                                 // SAFETY: io_uring_setup(1, params) writes the params only.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, params.as_mut_ptr()) };
    if fd < 0 {
        return None;
    }
    let iov = libc::iovec {
        iov_base: at.cast(),
        iov_len: len,
    };
    // SAFETY: IORING_REGISTER_BUFFERS (0) with one valid iovec of ours.
    let rc = unsafe { libc::syscall(libc::SYS_io_uring_register, fd, 0, &iov, 1) };
    (rc == 0).then_some(fd as i32)
}

#[test]
fn pinned_from_space_pages_are_copied_not_moved() {
    if !alone("pinned_from_space_pages_are_copied_not_moved") {
        return;
    }
    if !compact::support().unwrap().moves {
        require::skip("UFFDIO_MOVE: needs Linux 6.8");
        return;
    }
    // The dense first 64 pages come back unchanged (moves); a fixed
    // buffer pins them, and the kernel refuses to move a pinned page.
    let pages = 1024;
    let h = Arc::new(SlideHeap::new(pages, 64, 3));
    let m = heap(pages, &h);
    for mode in [Mode::Move, Mode::Auto] {
        h.fill(m.as_mut_ptr());
        let Some(ring) = pin_with_io_uring(m.as_mut_ptr(), 64 * PAGE) else {
            require::skip("io_uring fixed buffers: not allowed here");
            return;
        };
        let opts = Options::default().mode(mode);
        let (at, len) = (m.as_mut_ptr(), m.len());
        // SAFETY: no thread touches the heap until prepare returns.
        let mut s = unsafe { Compaction::prepare(at, len, h.clone(), opts) }.unwrap();
        let mut stats = None;
        let expect = mutate(&h, m.as_mut_ptr() as usize, 1, 2000, || {
            s.start().unwrap();
            stats = Some(s.finish().unwrap());
        });
        h.verify(m.as_ptr(), &expect).unwrap();
        let stats = stats.unwrap();
        assert!(stats.move_fallbacks >= 64, "{mode:?}: {stats:?}");
        assert_eq!(stats.failed, 0);
        // SAFETY: our ring; its pins on the old pages go with it.
        unsafe { libc::close(ring) };
    }
}

#[test]
fn mutators_walking_the_heap_in_order_race_the_collector() {
    if !alone("mutators_walking_the_heap_in_order_race_the_collector") {
        return;
    }
    let pages = 2048;
    let h = Arc::new(SlideHeap::new(pages, 32, 3));
    let m = heap(pages, &h);
    for batch in [1, 64, 512] {
        h.fill(m.as_mut_ptr());
        // SAFETY: no thread touches the heap until prepare returns.
        let mut s = unsafe {
            Compaction::prepare(
                m.as_mut_ptr(),
                m.len(),
                h.clone(),
                Options::default().batch(batch),
            )
        }
        .unwrap();
        let n = h.live.len();
        let base = m.as_mut_ptr() as usize;
        std::thread::scope(|sc| {
            // One walks up from the bottom (behind the collector, then
            // level with it), one down from the top (ahead of it).
            let hu = &h;
            let up = sc.spawn(move || {
                (0..n).all(|k| {
                    hu.counter(base as *mut u8, k)
                        .fetch_add(1, Ordering::Relaxed);
                    hu.id(base as *const u8, k) == hu.live[k] as u64 + 1
                })
            });
            let down = sc.spawn(move || {
                (0..n).rev().all(|k| {
                    hu.counter(base as *mut u8, k)
                        .fetch_add(1, Ordering::Relaxed);
                    hu.id(base as *const u8, k) == hu.live[k] as u64 + 1
                })
            });
            s.start().unwrap();
            assert!(up.join().unwrap() && down.join().unwrap(), "batch {batch}");
        });
        s.finish().unwrap();
        h.verify(m.as_ptr(), &vec![2; n]).unwrap();
    }
}

/// `VmHWM` or `VmRSS` of this process, bytes.
fn status_bytes(field: &str) -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = s.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<usize>()
        .unwrap()
        * 1024
}

/// A producer whose pages cost the collector's threads 20 µs each (a
/// busy clock, not a sleep): mutators then fault far ahead of it, as they
/// do when they outnumber the CPUs.
struct SlowCollector(Arc<SlideHeap>);

thread_local! {
    static MUTATOR: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl compact::Producer for SlowCollector {
    fn produce(&self, page: usize, from: *const u8, out: &mut [u8; PAGE]) -> compact::Fill {
        if !MUTATOR.with(|m| m.get()) {
            let t0 = std::time::Instant::now();
            while t0.elapsed() < std::time::Duration::from_micros(20) {
                std::hint::spin_loop();
            }
        }
        self.0.produce(page, from, out)
    }
    fn first_source(&self, page: usize) -> usize {
        self.0.first_source(page)
    }
    fn last_source(&self, page: usize) -> usize {
        self.0.last_source(page)
    }
}

#[test]
fn random_mutators_far_ahead_of_the_collector_hold_little_memory_twice() {
    if !alone("random_mutators_far_ahead_of_the_collector_hold_little_memory_twice") {
        return;
    }
    // 256 MiB, 90% live: a page mutators build alone holds about a page
    // twice (the from-space at its two ends is its neighbours' too).
    let pages = 65536;
    let h = Arc::new(SlideHeap::mostly_live(pages, 10));
    let m = heap(pages, &h);
    for mode in [Mode::Auto, Mode::Copy, Mode::Move] {
        h.fill(m.as_mut_ptr());
        let producer = Arc::new(SlowCollector(h.clone()));
        let before = status_bytes("VmRSS:");
        // Resets VmHWM to the current RSS (proc(5), clear_refs "5").
        std::fs::write("/proc/self/clear_refs", "5").unwrap();
        let (base, len, opts) = (m.as_mut_ptr(), m.len(), Options::default().mode(mode));
        // SAFETY: no thread touches the heap until prepare returns.
        let mut s = unsafe { Compaction::prepare(base, len, producer, opts) }.unwrap();
        let (base, n) = (m.as_ptr() as usize, h.live.len());
        let stats = std::thread::scope(|sc| {
            let readers: Vec<_> = (0..2u64)
                .map(|t| {
                    let h = &h;
                    sc.spawn(move || {
                        MUTATOR.with(|m| m.set(true));
                        // Reads only, so that nothing but the heap grows.
                        let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
                        (0..200_000).all(|_| {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let k = (x % n as u64) as usize;
                            h.id(base as *const u8, k) == h.live[k] as u64 + 1
                        })
                    })
                })
                .collect();
            s.start().unwrap();
            for r in readers {
                assert!(r.join().unwrap(), "{mode:?}: an object read wrong");
            }
            s.finish().unwrap()
        });
        let extra = status_bytes("VmHWM:").saturating_sub(before);
        h.verify(m.as_ptr(), &vec![0; n]).unwrap();
        assert_eq!(stats.failed, 0, "{mode:?}: {stats:?}");
        assert!(
            stats.by_mutators > 10_000,
            "{mode:?}: the mutators stayed behind the collector: {stats:?}"
        );
        assert!(
            extra < 16 << 20,
            "{mode:?}: {} MiB above the heap at the peak, {} pages built by mutators",
            extra >> 20,
            stats.by_mutators
        );
    }
}
