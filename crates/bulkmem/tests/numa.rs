//! NUMA on any machine (this host has one node): sysfs parsing from
//! fixture trees, errors for bad nodes and ranges, move_pages to the node
//! the pages are already on, and migrate_by_copy end to end (to node 0):
//! contents and addresses kept, protection restored, THP kept, an injected
//! failure leaves the original intact, and a write during the copy faults.
//! Moves between real nodes are in guest_numa.rs.

mod common;

use std::path::{Path, PathBuf};

use bulkmem::mapping::Mapping;
use bulkmem::numa::{self, CopyOptions, MigrateOptions, PageStatus};
use bulkmem::topology::Nodes;
use bulkmem::Error;
use common::poison::src_byte;
use common::region::Region;

use common::region::PAGE;

struct Tree(PathBuf);

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tree(name: &str, files: &[(&str, &str)]) -> Tree {
    let root =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("numa-{name}-{}", std::process::id()));
    for (path, content) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    Tree(root)
}

#[test]
fn nodes_distances_cpus_and_memory_from_sysfs() {
    let n = "sys/devices/system/node";
    let t = tree(
        "three",
        &[
            (&format!("{n}/has_memory"), "0-2\n"),
            (&format!("{n}/node0/cpulist"), "0-3\n"),
            (&format!("{n}/node0/distance"), "10 21 14\n"),
            (
                &format!("{n}/node0/meminfo"),
                "Node 0 MemTotal: 1048576 kB\nNode 0 MemFree: 524288 kB\n",
            ),
            (&format!("{n}/node1/cpulist"), "4-7\n"),
            (&format!("{n}/node1/distance"), "21 10 24\n"),
            (
                &format!("{n}/node1/meminfo"),
                "Node 1 MemTotal: 2097152 kB\nNode 1 MemFree: 2000000 kB\n",
            ),
            // A CXL-style memory-only node: no CPUs.
            (&format!("{n}/node2/cpulist"), "\n"),
            (&format!("{n}/node2/distance"), "14 24 10\n"),
            (
                &format!("{n}/node2/meminfo"),
                "Node 2 MemTotal: 4194304 kB\nNode 2 MemFree: 4194304 kB\n",
            ),
        ],
    );
    let nodes = Nodes::read(&t.0);
    assert_eq!(nodes.ids(), vec![0, 1, 2]);
    assert_eq!(nodes.get(1).unwrap().cpus, vec![4, 5, 6, 7]);
    assert!(nodes.get(2).unwrap().cpus.is_empty());
    assert_eq!(nodes.distance(0, 1), Some(21));
    assert_eq!(nodes.distance(2, 0), Some(14));
    assert_eq!(nodes.get(1).unwrap().mem_free, 2_000_000 << 10);
    // No NUMA directory at all: one node with every online CPU.
    let flat = tree("flat", &[("sys/devices/system/cpu/online", "0-1\n")]);
    let one = Nodes::read(&flat.0);
    assert_eq!(
        (one.ids(), one.nodes[0].cpus.clone()),
        (vec![0], vec![0, 1])
    );
}

fn this_node() -> usize {
    Nodes::detect().with_memory[0]
}

#[test]
fn move_pages_to_the_node_they_are_on_reports_already_there() {
    let r = Region::new(64 * PAGE, false);
    // Drop four pages: they are not present.
    // SAFETY: pages of our own region.
    unsafe { libc::madvise(r.ptr.add(8 * PAGE).cast(), 4 * PAGE, libc::MADV_DONTNEED) };
    let node = this_node();
    let rep = numa::migrate(
        r.ptr as usize,
        r.len,
        node,
        MigrateOptions::default().batch_pages(7),
    )
    .unwrap();
    assert_eq!(rep.status.len(), 64);
    assert_eq!(
        (rep.already, rep.not_present, rep.moved),
        (60, 4, 0),
        "{rep:?}"
    );
    assert_eq!(rep.status[9], PageStatus::NotPresent);
    assert!(rep.is_complete());
    let where_ = numa::node_of_pages(0, r.ptr as usize, r.len).unwrap();
    assert_eq!(where_[0], node as i32);
    assert_eq!(where_[8], -libc::ENOENT);
}

#[test]
fn bad_nodes_and_ranges_are_refused_clearly() {
    let r = Region::new(4 * PAGE, false);
    let nodes = Nodes::detect();
    let missing = nodes.ids().iter().max().unwrap() + 1;
    let e = numa::migrate(r.ptr as usize, r.len, missing, MigrateOptions::default()).unwrap_err();
    assert!(matches!(e, Error::NoSuchNode { .. }), "{e}");
    assert!(
        e.to_string().contains(&format!("no NUMA node {missing}")),
        "{e}"
    );
    let e = numa::migrate(r.ptr as usize + 1, r.len, 0, MigrateOptions::default()).unwrap_err();
    assert!(e.to_string().contains("multiples of 4 KiB"), "{e}");
    // SAFETY: refused before anything is touched.
    let e = unsafe { numa::migrate_by_copy(r.ptr, 0, 0, CopyOptions::default()) }.unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    // A range running past the mapping into nothing.
    let hole = Region::new(8 * PAGE, false);
    // SAFETY: unmapping the second half of our own region.
    unsafe { libc::munmap(hole.ptr.add(4 * PAGE).cast(), 4 * PAGE) };
    // SAFETY: refused before anything is touched.
    let e = unsafe { numa::migrate_by_copy(hole.ptr, 8 * PAGE, 0, CopyOptions::default()) }
        .unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "nothing is mapped at {:#x}",
            hole.ptr as usize + 4 * PAGE
        )),
        "{e}"
    );
    // Shared memory is not ours to replace.
    // SAFETY: a fresh shared mapping.
    let shared = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4 * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    // SAFETY: refused before anything is touched.
    let e = unsafe { numa::migrate_by_copy(shared.cast(), 4 * PAGE, 0, CopyOptions::default()) }
        .unwrap_err();
    assert!(e.to_string().contains("shared"), "{e}");
    // SAFETY: our own mapping.
    unsafe { libc::munmap(shared, 4 * PAGE) };
}

#[test]
fn copy_and_remap_keeps_contents_addresses_protection_and_thp() {
    for huge in [false, true] {
        let r = Region::new(16 << 20, huge);
        let before = r.ptr;
        let thp_before = r.anon_huge_kb();
        // SAFETY: our own region, no other users.
        let rep = unsafe {
            numa::migrate_by_copy(r.ptr, r.len, this_node(), CopyOptions::default().threads(2))
        }
        .unwrap();
        assert_eq!(rep.hugepage, huge);
        assert!(r.intact(), "contents changed (huge {huge})");
        assert_eq!(r.ptr, before);
        // Writable again.
        r.bytes()[0] = src_byte(0);
        if huge && thp_before > 0 {
            assert!(r.anon_huge_kb() > 0, "THP lost: {} kB before", thp_before);
        }
        let where_ = numa::node_of_pages(0, r.ptr as usize, r.len).unwrap();
        assert!(where_.iter().all(|&n| n == this_node() as i32));
    }
}

#[test]
fn a_cancelled_copy_leaves_the_original_intact_and_writable() {
    let r = Region::new(8 << 20, false);
    // Cancelled once the first chunk is done: a copy that stops half-way.
    let token = bulkmem::CancelToken::new();
    let stop = |p: bulkmem::Progress| {
        if p.done > 0 {
            token.cancel();
        }
    };
    let opts = CopyOptions::default()
        .threads(2)
        .progress(&stop)
        .cancel(&token);
    // SAFETY: our own region, no other users.
    let e = unsafe { numa::migrate_by_copy(r.ptr, r.len, this_node(), opts) }.unwrap_err();
    match &e {
        Error::MigrationFailed { intact, stage, .. } => {
            assert!(*intact && stage.contains("cancelled"), "{e}")
        }
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("intact"), "{e}");
    assert!(r.intact());
    r.bytes()[123] = 7; // protection restored: this would fault
    assert_eq!(r.bytes()[123], 7);
}

#[test]
fn a_write_during_the_copy_faults_instead_of_being_lost() {
    // The write must kill the process that makes it, so it happens in a
    // fresh copy of this test binary running only this test (not a fork:
    // forking a multi-threaded test binary can deadlock the child on a lock
    // another test thread held).
    const CHILD: &str = "BULKMEM_TEST_WRITE_DURING_COPY";
    const NAME: &str = "a_write_during_the_copy_faults_instead_of_being_lost";
    if std::env::var_os(CHILD).is_some() {
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: no core file from the expected crash.
        unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) };
        let r = Region::new(8 << 20, false);
        let target = r.ptr as usize;
        let write = |_p: bulkmem::Progress| {
            // SAFETY: deliberately writing the range being migrated.
            unsafe { (target as *mut u8).write_volatile(1) };
        };
        let opts = CopyOptions::default().threads(1).progress(&write);
        // SAFETY: our own region.
        let r = unsafe { numa::migrate_by_copy(r.ptr, r.len, this_node(), opts) };
        panic!("the write during the copy did not fault: {r:?}");
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGSEGV),
        "the write should fault: {out:?}"
    );
}

/// The VmFlags of every mapping overlapping `[addr, addr + len)`, from
/// /proc/self/smaps, with each mapping's start and end.
fn vm_flags(addr: *mut u8, len: usize) -> Vec<(usize, usize, Vec<String>)> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let (lo, hi) = (addr as usize, addr as usize + len);
    let mut out = Vec::new();
    let mut cur: Option<(usize, usize)> = None;
    for l in smaps.lines() {
        let head = l.split_whitespace().next().unwrap_or("");
        if let Some((a, b)) = head.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                cur = (a < hi && b > lo).then_some((a, b));
                continue;
            }
        }
        if let (Some((a, b)), Some(v)) = (cur, l.strip_prefix("VmFlags:")) {
            out.push((a, b, v.split_whitespace().map(str::to_string).collect()));
        }
    }
    assert!(!out.is_empty(), "nothing mapped at {lo:#x}");
    out
}

/// Asserts every mapping over the range has each of `has` and none of `not`.
fn assert_flags(addr: *mut u8, len: usize, has: &[&str], not: &[&str], what: &str) {
    for (a, b, f) in vm_flags(addr, len) {
        for h in has {
            assert!(
                f.iter().any(|x| x == h),
                "{what}: {a:#x}-{b:#x} lost `{h}`: {f:?}"
            );
        }
        for n in not {
            assert!(
                !f.iter().any(|x| x == n),
                "{what}: {a:#x}-{b:#x} gained `{n}`: {f:?}"
            );
        }
    }
}

/// A private anonymous mapping of `len` bytes, MAP_NORESERVE if
/// `noreserve`, filled with `src_byte`.
fn anon(len: usize, noreserve: bool) -> Mapping {
    let mut m = Mapping::options().noreserve(noreserve).map(len).unwrap();
    m.as_mut_slice()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = src_byte(i));
    m
}

fn intact(p: *mut u8, len: usize) -> bool {
    // SAFETY: a mapping of `len` bytes the test owns.
    let s = unsafe { std::slice::from_raw_parts(p, len) };
    s.iter().enumerate().all(|(i, &b)| b == src_byte(i))
}

fn advise(p: *mut u8, len: usize, advice: i32) {
    // SAFETY: advice on the test's own mapping.
    let rc = unsafe { libc::madvise(p.cast(), len, advice) };
    assert_eq!(
        rc,
        0,
        "madvise {advice}: {}",
        std::io::Error::last_os_error()
    );
}

fn copy_to_this_node(p: *mut u8, len: usize) -> Result<numa::CopyReport, Error> {
    // SAFETY: the test's own mapping, no other users.
    unsafe { numa::migrate_by_copy(p, len, this_node(), CopyOptions::default().threads(2)) }
}

#[test]
fn copy_and_remap_keeps_mlock_dontfork_wipeonfork_dontdump_and_noreserve() {
    // Secrets: locked, not inherited, wiped in children, not dumped.
    let len = 1 << 20;
    let p_map = anon(len, false);
    let p = p_map.as_mut_ptr();
    // SAFETY: locking the test's own mapping.
    assert_eq!(unsafe { libc::mlock(p.cast(), len) }, 0, "mlock");
    advise(p, len, libc::MADV_DONTFORK);
    advise(p, len, libc::MADV_WIPEONFORK);
    advise(p, len, libc::MADV_DONTDUMP);
    let kept = ["lo", "dc", "wf", "dd"];
    assert_flags(p, len, &kept, &["nr"], "before");
    copy_to_this_node(p, len).unwrap();
    assert!(intact(p, len), "contents changed");
    // Not MAP_NORESERVE before, so still accounted (`ac`), not `nr`.
    assert_flags(p, len, &kept, &["nr"], "after migrate_by_copy");
    assert_flags(p, len, &["ac"], &[], "after migrate_by_copy");
    // SAFETY: writable again; the test's own mapping.
    unsafe { p.write(src_byte(0)) };

    // Two mappings with different flags: each keeps its own.
    let q_map = anon(len, false);
    let q = q_map.as_mut_ptr();
    let half = len / 2;
    // SAFETY: locking half of the test's own mapping.
    assert_eq!(unsafe { libc::mlock(q.cast(), half) }, 0, "mlock");
    // SAFETY: the second half of the same mapping.
    let q2 = unsafe { q.add(half) };
    advise(q2, half, libc::MADV_DONTDUMP);
    copy_to_this_node(q, len).unwrap();
    assert!(intact(q, len));
    assert_flags(q, half, &["lo"], &["dd", "nr"], "first half");
    assert_flags(q2, half, &["dd"], &["lo", "nr"], "second half");

    // MAP_NORESERVE stays where it was.
    let r_map = anon(len, true);
    let r = r_map.as_mut_ptr();
    let had_nr = vm_flags(r, len)[0].2.iter().any(|f| f == "nr");
    copy_to_this_node(r, len).unwrap();
    assert!(intact(r, len));
    if had_nr {
        assert_flags(r, len, &["nr"], &["ac"], "MAP_NORESERVE");
    }
}

#[test]
fn a_flag_the_new_mapping_cannot_have_is_refused_by_name() {
    // Registered with userfaultfd (`um`): a new mapping would not be, and
    // the handler would silently stop seeing faults. Refused, untouched.
    const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
    const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
    let len = 64 * PAGE;
    let p_map = anon(len, false);
    let p = p_map.as_mut_ptr();
    // SAFETY: a new userfaultfd descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) } as i32;
    if fd < 0 {
        common::require::skip(&format!(
            "no userfaultfd ({})",
            std::io::Error::last_os_error()
        ));
        return;
    }
    let mut api = [0xaa_u64, 0, 0];
    // SAFETY: UFFDIO_API with its 24-byte struct.
    assert_eq!(unsafe { libc::ioctl(fd, UFFDIO_API, api.as_mut_ptr()) }, 0);
    // range.start, range.len, mode (MISSING), ioctls (out).
    let mut reg = [p as u64, len as u64, 1, 0];
    // SAFETY: UFFDIO_REGISTER of the test's own mapping.
    let rc = unsafe { libc::ioctl(fd, UFFDIO_REGISTER, reg.as_mut_ptr()) };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    assert_flags(p, len, &["um"], &[], "registered");
    let e = copy_to_this_node(p, len).unwrap_err();
    assert!(matches!(e, Error::BadRange { .. }), "{e}");
    assert!(
        e.to_string().contains("`um`") && e.to_string().contains("userfaultfd"),
        "{e}"
    );
    assert!(intact(p, len));
    assert_flags(p, len, &["um"], &[], "after the refusal");
    // SAFETY: the test's own mapping: still writable.
    unsafe { p.write(1) };
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
}
