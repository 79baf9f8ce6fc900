//! NUMA migration between real nodes, in the qemu guest (two nodes, one
//! CPU each: scripts/guest/test). Both paths move 100% of a 256 MiB range
//! to node 1 and back with identical contents; pages are checked with
//! move_pages status; THP is kept; partial failures are reported per page.

use std::time::Instant;

mod common;

use bulkmem::numa::{self, CopyOptions, MigrateOptions, PageStatus};
use common::region::{Region, PAGE};

const BIG: usize = 256 << 20;

/// Runs the test thread on `cpu` so first-touch lands on that CPU's node.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; we set one CPU.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

/// A region filled on node 0 (first touch from CPU 0).
fn on_node0(len: usize, huge: bool) -> Region {
    pin(0);
    Region::new(len, huge)
}

fn two_nodes() {
    let n = bulkmem::topology::Nodes::detect();
    assert_eq!(
        n.with_memory,
        vec![0, 1],
        "the guest should have two nodes: {n:?}"
    );
    assert_eq!(n.distance(0, 1), Some(20));
}

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn move_pages_moves_256m_to_node1_and_back() {
    two_nodes();
    let r = on_node0(BIG, false);
    let pages = BIG / PAGE;
    assert_eq!(
        r.pages_on(0),
        pages,
        "first touch from CPU 0 lands on node 0"
    );
    let t = Instant::now();
    let rep = numa::migrate(r.ptr as usize, r.len, 1, MigrateOptions::default()).unwrap();
    let there = t.elapsed().as_secs_f64();
    assert_eq!(
        (rep.moved, rep.already, rep.failed.len()),
        (pages, 0, 0),
        "{:?}",
        rep.failed.first()
    );
    assert!(rep.move_all, "root in the guest may use MPOL_MF_MOVE_ALL");
    assert_eq!(r.pages_on(1), pages);
    assert!(r.intact());
    let t = Instant::now();
    let rep = numa::migrate(r.ptr as usize, r.len, 0, MigrateOptions::default()).unwrap();
    let back = t.elapsed().as_secs_f64();
    assert_eq!(rep.moved, pages);
    assert_eq!(r.pages_on(0), pages);
    assert!(r.intact());
    eprintln!("move_pages 256 MiB 4K pages: 0->1 {there:.3} s, 1->0 {back:.3} s (TCG)");
}

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn copy_and_remap_moves_256m_to_node1_and_back() {
    two_nodes();
    let r = on_node0(BIG, false);
    let pages = BIG / PAGE;
    let ptr = r.ptr;
    for (to, from) in [(1usize, 0i32), (0, 1)] {
        assert_eq!(r.pages_on(from), pages);
        let t = Instant::now();
        let opts = CopyOptions::default().threads(2);
        // SAFETY: our own region, no other users.
        let rep = unsafe { numa::migrate_by_copy(r.ptr, r.len, to, opts) }.unwrap();
        eprintln!(
            "migrate_by_copy 256 MiB 4K pages {from}->{to}: {:.3} s, {} thread(s) on CPUs {:?}, {} (TCG)",
            t.elapsed().as_secs_f64(),
            rep.cpus.len(),
            rep.cpus,
            rep.strategy
        );
        assert_eq!(rep.to, to);
        assert_eq!(r.ptr, ptr);
        assert_eq!(r.pages_on(to as i32), pages, "every page on node {to}");
        assert!(r.intact());
    }
    r.bytes()[77] = 1; // writable again
}

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn thp_is_kept_by_both_paths() {
    two_nodes();
    let r = on_node0(64 << 20, true);
    let before = r.anon_huge_kb();
    assert!(
        before > 0,
        "no THP to begin with (khugepaged off and fault-time THP failed?)"
    );
    let rep = numa::migrate(r.ptr as usize, r.len, 1, MigrateOptions::default()).unwrap();
    assert!(rep.is_complete());
    assert_eq!(r.anon_huge_kb(), before, "move_pages migrates a THP whole");
    // SAFETY: our own region.
    let rep = unsafe { numa::migrate_by_copy(r.ptr, r.len, 0, CopyOptions::default()) }.unwrap();
    assert!(rep.hugepage);
    assert!(r.intact());
    assert_eq!(r.pages_on(0), r.len / PAGE);
    assert!(
        r.anon_huge_kb() > 0,
        "copy-remap with MADV_HUGEPAGE on an aligned range keeps THP"
    );
}

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn partial_failures_are_reported_per_page() {
    two_nodes();
    let r = on_node0(64 * PAGE, false);
    // Pages 10..14 were never there; pages 20..24 are not mapped at all.
    // SAFETY: our own region.
    unsafe {
        libc::madvise(r.ptr.add(10 * PAGE).cast(), 4 * PAGE, libc::MADV_DONTNEED);
        libc::munmap(r.ptr.add(20 * PAGE).cast(), 4 * PAGE);
    }
    let rep = numa::migrate(
        r.ptr as usize,
        r.len,
        1,
        MigrateOptions::default().batch_pages(16),
    )
    .unwrap();
    assert_eq!(rep.moved, 56, "{rep:?}");
    assert_eq!(rep.not_present, 4);
    assert_eq!(rep.status[11], PageStatus::NotPresent);
    assert_eq!(rep.status[21], PageStatus::Failed(libc::EFAULT));
    let bad: Vec<usize> = rep
        .failed
        .iter()
        .map(|&(a, _)| (a - r.ptr as usize) / PAGE)
        .collect();
    assert_eq!(bad, vec![20, 21, 22, 23]);
    assert!(!rep.is_complete());
    // migrate_by_copy refuses the holey range before touching it.
    // SAFETY: refused up front.
    let e = unsafe { numa::migrate_by_copy(r.ptr, r.len, 1, CopyOptions::default()) }.unwrap_err();
    assert!(e.to_string().contains("nothing is mapped"), "{e}");
}

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn timings_of_both_paths_for_4k_pages() {
    two_nodes();
    // Printed, not asserted: TCG timing says little about hardware, but the
    // ratio is what the issue asks to see. bench migrate has the table.
    let r = on_node0(64 << 20, false);
    for batch in [16usize, 64, 512, 4096, 16384] {
        let t = Instant::now();
        let rep = numa::migrate(
            r.ptr as usize,
            r.len,
            1,
            MigrateOptions::default().batch_pages(batch),
        )
        .unwrap();
        let a = t.elapsed().as_secs_f64();
        numa::migrate(r.ptr as usize, r.len, 0, MigrateOptions::default()).unwrap();
        eprintln!(
            "move_pages batch {batch:>5}: 64 MiB 0->1 in {a:.3} s ({} syscalls)",
            rep.syscalls
        );
    }
    for threads in [1usize, 2] {
        let t = Instant::now();
        // SAFETY: our own region.
        let rep = unsafe {
            numa::migrate_by_copy(r.ptr, r.len, 1, CopyOptions::default().threads(threads))
        }
        .unwrap();
        let a = t.elapsed().as_secs_f64();
        // SAFETY: as above.
        unsafe { numa::migrate_by_copy(r.ptr, r.len, 0, CopyOptions::default()) }.unwrap();
        // Node 1 may have fewer CPUs than asked for: say what ran.
        eprintln!(
            "migrate_by_copy {threads} threads asked, {} ran: 64 MiB 0->1 in {a:.3} s",
            rep.cpus.len()
        );
    }
    assert!(r.intact());
}

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn a_page_held_by_a_pipe_is_reported_busy_and_the_rest_move() {
    two_nodes();
    let r = on_node0(16 * PAGE, false);
    // vmsplice gives the pipe a reference to page 5: the kernel cannot
    // migrate a page with references it does not expect.
    let mut fds = [0i32; 2];
    // SAFETY: pipe and vmsplice on our own fds and page.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        let iov = libc::iovec {
            iov_base: r.ptr.add(5 * PAGE).cast(),
            iov_len: PAGE,
        };
        assert_eq!(libc::vmsplice(fds[1], &iov, 1, 0), PAGE as isize);
    }
    let opts = MigrateOptions::default().retries(3);
    let rep = numa::migrate(r.ptr as usize, r.len, 1, opts).unwrap();
    let failed: Vec<usize> = rep
        .failed
        .iter()
        .map(|&(a, _)| (a - r.ptr as usize) / PAGE)
        .collect();
    assert_eq!(failed, vec![5], "{rep:?}");
    assert!(
        matches!(rep.status[5], PageStatus::Failed(e) if e == libc::EAGAIN || e == libc::EBUSY),
        "{:?}",
        rep.status[5]
    );
    assert_eq!((rep.moved, rep.retries), (15, 3), "{rep:?}");
    let on = numa::node_of_pages(0, r.ptr as usize, r.len).unwrap();
    let expect: Vec<i32> = (0..16).map(|i| if i == 5 { 0 } else { 1 }).collect();
    assert_eq!(on, expect);
    // SAFETY: closing our own pipe.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
}
