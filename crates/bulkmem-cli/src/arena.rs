//! Benchmark memory: anonymous mappings, pre-faulted before anything is
//! timed and optionally backed by transparent huge pages (as the kernel's
//! direct map is, so TLB misses do not dominate).

use std::io;

use bulkmem::mapping::Mapping;

/// Maps `len` bytes, advises huge pages if `thp`, and touches every page
/// with `fill` so no page fault lands inside a timed region.
pub fn prefaulted(len: usize, thp: bool, fill: u8) -> io::Result<Mapping> {
    let mut opts = Mapping::options();
    // Without `thp`, no advice: the system's THP default decides, as it
    // would for any allocation.
    if thp {
        opts = opts.huge_pages(true);
    }
    let mut m = opts.map(len.max(1))?;
    m.as_mut_slice().fill(fill);
    Ok(m)
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    c.max(0) as usize
}

/// Reads `buf` one cache line at a time so that, afterwards, the LLC holds
/// it instead of whatever was measured before (the seeds' eviction pass).
pub fn evict_through(buf: &Mapping) {
    let mut acc = 0u64;
    for line in buf.as_slice().chunks(64) {
        acc = acc.wrapping_add(line[0] as u64);
    }
    std::hint::black_box(acc);
}
