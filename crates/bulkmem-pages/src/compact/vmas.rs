//! What is mapped where a heap is: the kernel's mappings (VMAs) covering
//! a range, with their protections and kinds, so that `prepare` can refuse
//! a heap it cannot compact whole (a hole, memory the program protected)
//! and knows which pages the kernel could move.
//!
//! Asked with `PROCMAP_QUERY` (Linux 6.11), one `ioctl` per mapping on an
//! open `/proc/self/maps`, which costs microseconds inside the pause
//! whatever else the process has mapped; older kernels get the file read
//! and parsed.

use std::io::{self, Read};
use std::os::fd::AsRawFd;

/// One mapping, clipped to the range asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Vma {
    pub start: usize,
    pub end: usize,
    pub read: bool,
    pub write: bool,
    pub shared: bool,
    /// Backed by a file (a memfd, hugetlbfs or a real one), not anonymous.
    pub file: bool,
    /// The kernel's page size for it: above 4096 for hugetlb.
    pub page_size: usize,
}

impl Vma {
    /// Whether `UFFDIO_MOVE` can take pages out of it: private anonymous
    /// memory of base pages (the kernel refuses shared, file and hugetlb
    /// mappings with `EINVAL`).
    pub fn movable(&self) -> bool {
        !self.shared && !self.file && self.page_size == 4096
    }
}

/// `struct procmap_query` of `<linux/fs.h>`.
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

const VMA_READABLE: u64 = 0x01;
const VMA_WRITABLE: u64 = 0x02;
const VMA_SHARED: u64 = 0x08;
const COVERING_OR_NEXT_VMA: u64 = 0x10;
/// `_IOWR('f', 17, struct procmap_query)`.
const PROCMAP_QUERY: libc::c_ulong = (3 << 30)
    | ((core::mem::size_of::<ProcmapQuery>() as libc::c_ulong) << 16)
    | ((b'f' as libc::c_ulong) << 8)
    | 17;

/// The mappings that cover any part of `addr..addr + len`, in address
/// order, each clipped to the range. Gaps between them are holes.
pub(crate) fn covering(addr: usize, len: usize) -> io::Result<Vec<Vma>> {
    let mut f = std::fs::File::open("/proc/self/maps")?;
    match by_query(&f, addr, len) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTTY | libc::EINVAL)) => {
            let mut text = String::new();
            f.read_to_string(&mut text)?;
            Ok(parse(&text, addr, len))
        }
        other => other,
    }
}

fn by_query(f: &std::fs::File, addr: usize, len: usize) -> io::Result<Vec<Vma>> {
    let end = addr + len;
    let mut out = Vec::new();
    let mut at = addr;
    while at < end {
        let mut q = ProcmapQuery {
            size: core::mem::size_of::<ProcmapQuery>() as u64,
            query_flags: COVERING_OR_NEXT_VMA,
            query_addr: at as u64,
            ..ProcmapQuery::default()
        };
        // SAFETY: a valid descriptor of /proc/self/maps and a properly
        // sized struct; no name or build-id buffers are passed.
        if unsafe { libc::ioctl(f.as_raw_fd(), PROCMAP_QUERY, &mut q) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENOENT) {
                break; // nothing mapped at or after `at`
            }
            return Err(e);
        }
        let (start, stop) = (q.vma_start as usize, q.vma_end as usize);
        if start >= end {
            break;
        }
        out.push(Vma {
            start: start.max(addr),
            end: stop.min(end),
            read: q.vma_flags & VMA_READABLE != 0,
            write: q.vma_flags & VMA_WRITABLE != 0,
            shared: q.vma_flags & VMA_SHARED != 0,
            file: q.inode != 0 || q.dev_major != 0 || q.dev_minor != 0,
            page_size: q.vma_page_size as usize,
        });
        at = stop;
    }
    Ok(out)
}

/// The same from `/proc/self/maps`' text (kernels before 6.11). Huge page
/// sizes are not in it; hugetlb mappings show as files, which is what
/// matters here (they cannot be moved from).
fn parse(text: &str, addr: usize, len: usize) -> Vec<Vma> {
    let end = addr + len;
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (range, perms) = (f.next()?, f.next()?.as_bytes());
            let (_offset, dev, inode) = (f.next()?, f.next()?, f.next()?);
            let (s, e) = range.split_once('-')?;
            let (s, e) = (
                usize::from_str_radix(s, 16).ok()?,
                usize::from_str_radix(e, 16).ok()?,
            );
            (e > addr && s < end && perms.len() >= 4).then(|| Vma {
                start: s.max(addr),
                end: e.min(end),
                read: perms[0] == b'r',
                write: perms[1] == b'w',
                shared: perms[3] == b's',
                file: inode != "0" || dev != "00:00",
                page_size: 4096,
            })
        })
        .collect()
}

/// Why the mappings in `vmas` cannot hold a heap at `addr..addr + len`
/// that compaction would keep whole: a hole, or memory that is not both
/// readable and writable (compaction maps the heap readable and writable,
/// and would silently lift the program's protection). None if they can.
pub(crate) fn unfit(vmas: &[Vma], addr: usize, len: usize) -> Option<String> {
    let mut at = addr;
    for v in vmas {
        if v.start > at {
            return Some(hole(at, v.start, addr, len));
        }
        if !(v.read && v.write) {
            let what = match (v.read, v.write) {
                (false, false) => "PROT_NONE (inaccessible)",
                (true, false) => "read-only",
                _ => "write-only",
            };
            return Some(format!(
                "{:#x}..{:#x}, part of the heap, is {what}: compaction maps the heap readable \
                 and writable, so it refuses memory the program protected",
                v.start, v.end
            ));
        }
        at = v.end;
    }
    (at < addr + len).then(|| hole(at, addr + len, addr, len))
}

fn hole(from: usize, to: usize, addr: usize, len: usize) -> String {
    if to == addr + len && from > addr {
        format!(
            "the heap runs past its mapping: nothing is mapped at {from:#x}..{to:#x} (a heap \
             must be mapped throughout)"
        )
    } else {
        format!(
            "nothing is mapped at {from:#x}..{to:#x}, inside the heap (a heap must be mapped \
             throughout)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    fn map(len: usize, prot: i32) -> usize {
        // SAFETY: a fresh anonymous mapping of our own.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p as usize
    }

    #[test]
    fn the_query_and_the_text_agree_on_holes_and_protections() {
        let a = map(10 * PAGE, libc::PROT_READ | libc::PROT_WRITE);
        // SAFETY: our own mapping: page 2 read-only, page 5 and the last
        // two unmapped.
        unsafe {
            libc::mprotect((a + 2 * PAGE) as *mut libc::c_void, PAGE, libc::PROT_READ);
            libc::munmap((a + 5 * PAGE) as *mut libc::c_void, PAGE);
            libc::munmap((a + 8 * PAGE) as *mut libc::c_void, 2 * PAGE);
        }
        let q = covering(a, 8 * PAGE).unwrap();
        let text = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert_eq!(q, parse(&text, a, 8 * PAGE));
        let spans: Vec<_> = q
            .iter()
            .map(|v| (v.start - a, v.end - a, v.write))
            .collect();
        assert_eq!(
            spans,
            [
                (0, 2 * PAGE, true),
                (2 * PAGE, 3 * PAGE, false),
                (3 * PAGE, 5 * PAGE, true),
                (6 * PAGE, 8 * PAGE, true)
            ]
        );
        assert!(q.iter().all(|v| v.movable()));
        let why = unfit(&q, a, 8 * PAGE).unwrap();
        assert!(why.contains("read-only"), "{why}");
        let why = unfit(&q[2..], a + 3 * PAGE, 5 * PAGE).unwrap();
        assert!(
            why.contains("nothing is mapped") && why.contains("inside"),
            "{why}"
        );
        assert_eq!(unfit(&q[..1], a, 2 * PAGE), None);
        let past = covering(a + 6 * PAGE, 4 * PAGE).unwrap();
        assert!(unfit(&past, a + 6 * PAGE, 4 * PAGE)
            .unwrap()
            .contains("runs past"));
        // SAFETY: our own mapping.
        unsafe { libc::munmap(a as *mut libc::c_void, 8 * PAGE) };
    }

    #[test]
    fn shared_and_file_mappings_are_not_movable() {
        // SAFETY: a fresh memfd mapped shared, of our own.
        let (q, len) = unsafe {
            let fd = libc::memfd_create(c"heap".as_ptr(), 0);
            assert!(fd >= 0);
            libc::ftruncate(fd, 4 * PAGE as libc::off_t);
            let p = libc::mmap(
                core::ptr::null_mut(),
                4 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            libc::close(fd);
            (p as usize, 4 * PAGE)
        };
        let v = covering(q, len).unwrap();
        assert_eq!(v.len(), 1);
        assert!(v[0].shared && v[0].file && !v[0].movable(), "{v:?}");
        assert_eq!(unfit(&v, q, len), None);
        // SAFETY: our own mapping.
        unsafe { libc::munmap(q as *mut libc::c_void, len) };
    }
}
