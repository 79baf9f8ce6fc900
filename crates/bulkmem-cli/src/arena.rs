//! Benchmark memory: anonymous mappings, pre-faulted before anything is
//! timed and optionally backed by transparent huge pages (as the kernel's
//! direct map is, so TLB misses do not dominate), and CPU pinning.

use std::io;
use std::ptr;

/// A pre-faulted anonymous mapping, unmapped on drop.
pub struct Arena {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is exclusively owned; access goes through &/&mut self.
unsafe impl Send for Arena {}
// SAFETY: shared access only hands out shared slices.
unsafe impl Sync for Arena {}

impl Arena {
    /// Maps `len` bytes, advises huge pages if `thp`, and touches every page
    /// with `fill` so no page fault lands inside a timed region.
    pub fn new(len: usize, thp: bool, fill: u8) -> io::Result<Arena> {
        let len = len.max(1);
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        if thp {
            // Advice only: without THP the arena still works, with 4K pages.
            // SAFETY: p..p+len is the mapping just created.
            unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
        }
        let mut a = Arena { ptr: p.cast(), len };
        a.bytes_mut().fill(fill);
        Ok(a)
    }

    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the whole mapping is readable and owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the whole mapping is writable and exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping created in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Pins the calling thread to `cpu`.
pub fn pin_to(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set, and
    // CPU_SET/sched_setaffinity only read and write that local set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is out of range"),
            ));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    c.max(0) as usize
}

/// Reads `buf` one cache line at a time so that, afterwards, the LLC holds
/// it instead of whatever was measured before (the seeds' eviction pass).
pub fn evict_through(buf: &Arena) {
    let mut acc = 0u64;
    for line in buf.bytes().chunks(64) {
        acc = acc.wrapping_add(line[0] as u64);
    }
    std::hint::black_box(acc);
}
