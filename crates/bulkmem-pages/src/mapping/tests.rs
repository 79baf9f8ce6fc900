use super::*;

const HUGE: usize = 2 << 20;

/// The permissions ("rw-p") and VmFlags of the mapping holding `addr`.
fn vma_of(addr: usize) -> Option<(String, Vec<String>)> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut found: Option<(String, Vec<String>)> = None;
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let head = words.next().unwrap_or("");
        if let Some((a, b)) = head.split_once('-') {
            if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) {
                if found.is_some() {
                    break;
                }
                if (a..b).contains(&addr) {
                    found = Some((words.next().unwrap_or("").to_string(), Vec::new()));
                }
                continue;
            }
        }
        if let (Some(f), Some(flags)) = (found.as_mut(), line.strip_prefix("VmFlags:")) {
            f.1 = flags.split_whitespace().map(String::from).collect();
        }
    }
    found
}

fn resident(p: *const u8, len: usize) -> Vec<bool> {
    let page = page_size();
    let mut v = vec![0u8; len.div_ceil(page)];
    // SAFETY: mincore only writes `v`, one byte per page of the range.
    let rc = unsafe { libc::mincore(p as *mut libc::c_void, len, v.as_mut_ptr()) };
    assert_eq!(rc, 0, "{}", io::Error::last_os_error());
    v.iter().map(|b| b & 1 == 1).collect()
}

#[test]
fn length_is_as_asked_and_memory_is_zero_filled() {
    for len in [1, 4095, 4096, 5000, 3 << 20] {
        let mut m = Mapping::anonymous(len).unwrap();
        assert_eq!((m.len(), m.as_slice().len()), (len, len));
        assert!(!m.is_empty());
        assert!(m.as_slice().iter().all(|&b| b == 0), "{len}");
        m.as_mut_slice()[len - 1] = 7;
        assert_eq!(m.as_slice()[len - 1], 7);
    }
    let e = Mapping::anonymous(0).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let e = Mapping::anonymous(usize::MAX - 10).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn alignment_is_honoured_and_bad_alignments_refused() {
    for align in [0, 1, 4096, 64 << 10, HUGE] {
        let m = Mapping::options().align(align).map(HUGE + 4096).unwrap();
        assert_eq!(m.as_ptr() as usize % align.max(1), 0, "{align:#x}");
    }
    let e = Mapping::options().align(3 << 20).map(4096).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn guard_pages_are_inaccessible_on_both_sides() {
    let page = page_size();
    let mut m = Mapping::options().guard_pages(true).map(3 * page).unwrap();
    m.as_mut_slice().fill(1);
    let at = m.as_ptr() as usize;
    let perms = |a| vma_of(a).map(|v| v.0).unwrap_or_default();
    assert!(perms(at - page).starts_with("---"), "{}", perms(at - page));
    assert!(perms(at).starts_with("rw-"), "{}", perms(at));
    assert!(perms(at + 3 * page).starts_with("---"));
}

#[test]
fn huge_page_advice_is_accepted_and_recorded() {
    if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
        eprintln!("skipping: no transparent huge pages in this kernel");
        return;
    }
    for (huge, flag) in [(true, "hg"), (false, "nh")] {
        let m = Mapping::options()
            .align(HUGE)
            .huge_pages(huge)
            .map(HUGE)
            .unwrap();
        m.advise_huge_pages(huge).unwrap();
        let (_, flags) = vma_of(m.as_ptr() as usize).unwrap();
        assert!(flags.iter().any(|f| f == flag), "{huge}: {flags:?}");
    }
}

#[test]
fn populate_faults_every_page_in() {
    let len = 16 * page_size();
    let m = Mapping::anonymous(len).unwrap();
    assert!(resident(m.as_ptr(), len).iter().all(|&r| !r));
    let m = Mapping::options().populate(true).map(len).unwrap();
    assert!(resident(m.as_ptr(), len).iter().all(|&r| r));
    assert!(m.as_slice().iter().all(|&b| b == 0));
}

#[test]
fn a_reservation_is_filled_part_by_part() {
    let page = page_size();
    let mut m = Mapping::options()
        .inaccessible(true)
        .noreserve(true)
        .align(HUGE)
        .map(4 * page)
        .unwrap();
    let at = m.as_ptr() as usize;
    assert!(vma_of(at).unwrap().0.starts_with("---"));
    m.map_fresh(0, page, false).unwrap();
    m.map_fresh(page, 3 * page, true).unwrap();
    assert!(vma_of(at).unwrap().0.starts_with("rw-"));
    // SAFETY: the last page was just mapped read-write.
    unsafe { m.as_mut_ptr().add(3 * page).write(5) };
    let e = m.map_fresh(page, 4 * page, false).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert!(m.map_fresh(1, page, false).is_err());
    let slice = std::panic::catch_unwind(|| m.as_slice().len());
    assert!(slice.is_err(), "an inaccessible mapping gave a slice");
}

#[test]
fn drop_unmaps_and_into_raw_does_not() {
    // SAFETY: the child only makes system calls and exits; it never
    // returns into the test harness. A child, which has no other threads
    // to map something into the hole between the drop and the check.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let gone = |p: *const u8, len: usize| {
            let mut v = [0u8; 8];
            // SAFETY: mincore only writes `v` (len is at most 8 pages).
            let rc = unsafe { libc::mincore(p as *mut libc::c_void, len, v.as_mut_ptr()) };
            rc != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOMEM)
        };
        let page = page_size();
        let code = (|| {
            let m = Mapping::options().guard_pages(true).map(2 * page).ok()?;
            let p = m.as_ptr();
            // SAFETY: address arithmetic only, to the leading guard.
            let lead = unsafe { p.sub(page) };
            if gone(lead, 4 * page) {
                return None;
            }
            drop(m);
            if !gone(lead, page) || !gone(p, 2 * page) || !gone(p.wrapping_add(2 * page), page) {
                return None;
            }
            let m = Mapping::anonymous(page).ok()?;
            let p = m.into_raw();
            if gone(p, page) {
                return None;
            }
            // SAFETY: the page into_raw handed over.
            unsafe { libc::munmap(p.cast(), page) };
            Some(())
        })()
        .map_or(1, |()| 0);
        // SAFETY: leaves the child without running the harness's exit.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status:#x}"
    );
}
