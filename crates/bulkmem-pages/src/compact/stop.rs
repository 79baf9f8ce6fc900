//! Compaction without userfaultfd: every page built in the caller's
//! pause, straight into the fresh to-space (the path where `support` says
//! no, and the baseline a session is measured against).

use super::map::PAGE;
use super::release::FromSpace;
use super::stats::Counters;
use super::{registry, setup, vmas, Fill, Options, Producer, Stats};
use crate::error::Error;
use crate::uffd::check_aligned;

/// Builds page `p` straight into `out` (a to-space page that is ordinary
/// memory): the path without userfaultfd.
pub(crate) fn build_in_place(producer: &dyn Producer, p: usize, from: usize, out: &mut [u8; PAGE]) {
    match producer.produce(p, from as *const u8, out) {
        Fill::Built => {}
        Fill::Zero => out.fill(0),
        Fill::Same => {
            // SAFETY: from-space page p, which the producer says is this
            // page unchanged.
            let src = unsafe { &*((from + p * PAGE) as *const [u8; PAGE]) };
            out.copy_from_slice(src);
        }
    }
}

/// Compacts `heap..heap + len` entirely inside the caller's pause, with
/// no userfaultfd: the heap's pages move to a from-space, and every page
/// is built straight into the fresh to-space. The path where [`support`](super::support)
/// says no; the heap is checked as [`Compaction::prepare`](super::Compaction::prepare) checks it, and
/// the from-space is released as it empties, as in a session.
///
/// # Safety
/// As [`Compaction::prepare`](super::Compaction::prepare); no thread touches the heap until it returns.
pub unsafe fn stop_the_world(
    heap: *mut u8,
    len: usize,
    producer: &dyn Producer,
    opts: Options,
) -> Result<Stats, Error> {
    opts.check()?;
    let base = heap as usize;
    check_aligned("heap", base, len)?;
    let t0 = std::time::Instant::now();
    let slot = registry::reserve(base, len).map_err(|r| r.error(base, len))?;
    // SAFETY: the caller's pause.
    let r = unsafe { stop_the_world_in(base, len, producer, opts) };
    registry::cancel(slot);
    let released = r?;
    let n = len / PAGE;
    let mut stats = Counters::new().snapshot(n, t0.elapsed());
    stats.by_collector = n as u64;
    stats.released = released;
    Ok(stats)
}

/// [`stop_the_world`]'s work, once the heap has its slot; returns the
/// bytes released early.
///
/// # Safety
/// As [`stop_the_world`].
unsafe fn stop_the_world_in(
    base: usize,
    len: usize,
    producer: &dyn Producer,
    opts: Options,
) -> Result<u64, Error> {
    let bad = |why: String| Error::BadRange {
        addr: base,
        len,
        why,
    };
    let pieces = vmas::covering(base, len).map_err(|e| {
        bad(format!(
            "cannot read the process's mappings (/proc/self/maps): {e}"
        ))
    })?;
    if let Some(why) = vmas::unfit(&pieces, base, len) {
        return Err(bad(why));
    }
    // SAFETY: the caller's pause.
    let from = unsafe { setup::flip_plain(base, len, &pieces, opts.huge_pages) }?;
    let n = len / PAGE;
    let from_space = FromSpace::new(from, n).map_err(|e| Error::Syscall {
        call: "mmap",
        errno: e.raw_os_error().unwrap_or(libc::ENOMEM),
    });
    let released = std::sync::atomic::AtomicU64::new(0);
    for p in 0..n {
        // SAFETY: page p of the fresh, unregistered to-space.
        let out = unsafe { &mut *((base + p * PAGE) as *mut [u8; PAGE]) };
        build_in_place(producer, p, from, out);
        if let Ok(f) = &from_space {
            if p + 1 < n {
                f.release_below(producer.first_source(p + 1), &released);
            }
        }
    }
    // SAFETY: our whole from-space; nothing reads it now.
    unsafe { libc::munmap(from as *mut libc::c_void, len) };
    Ok(released.into_inner())
}
