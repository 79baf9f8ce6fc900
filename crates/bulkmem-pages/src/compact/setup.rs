//! The pause's work: the heap's pages go to a from-space and an empty
//! to-space takes their place at the heap's own addresses, registered with
//! a userfaultfd in SIGBUS mode. A heap of several mappings (parts advised
//! or locked differently) moves a mapping at a time, at the same offsets,
//! which works on every kernel.
//!
//! ART registers the heap and then moves its pages out with
//! `mremap(MREMAP_DONTUNMAP)`, which keeps the registration on the emptied
//! range; the kernel then moves page-table entries one by one (2.3 ms per
//! GiB of 4 KiB pages measured on Linux 6.18, growing with the heap). Here
//! the heap's mapping itself moves (`mremap` without `DONTUNMAP`, to an
//! address congruent modulo 1 GiB so whole page-table pages move with it)
//! and a fresh mapping is put in its place and registered: tens of
//! microseconds whatever the heap's size. The window in which the heap's
//! addresses are unmapped is inside the pause, when nothing may touch it
//! (docs/design.md, "Concurrent compaction").

use std::io;

use crate::error::Error;
use crate::uffd::ioctl::{
    UffdioRange, UffdioRegister, UFFDIO_REGISTER, UFFDIO_REGISTER_MODE_MISSING, UFFDIO_UNREGISTER,
};

use super::vmas::Vma;

const GIB: usize = 1 << 30;
const HUGE: usize = 2 << 20;

fn bad(addr: usize, len: usize, why: String) -> Error {
    Error::BadRange { addr, len, why }
}

/// An address range of `len` bytes, unmapped, congruent with `heap`
/// modulo `align`.
fn reserve_congruent(heap: usize, len: usize, align: usize) -> io::Result<usize> {
    let span = len
        .checked_add(align)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
    // SAFETY: a fresh inaccessible reservation, unmapped around the part
    // we keep, which the caller then replaces with mremap.
    unsafe {
        let r = libc::mmap(
            core::ptr::null_mut(),
            span,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if r == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let r = r as usize;
        let at = r + (heap.wrapping_sub(r) % align);
        if at > r {
            libc::munmap(r as *mut libc::c_void, at - r);
        }
        let tail = r + span - (at + len);
        if tail > 0 {
            libc::munmap((at + len) as *mut libc::c_void, tail);
        }
        Ok(at)
    }
}

/// Address space for the from-space: congruent with the heap modulo
/// 1 GiB where the process has the room (whole page-table pages move),
/// else modulo 2 MiB, else anywhere (the pause then grows with the heap).
fn reserve_from(heap: usize, len: usize) -> Result<usize, Error> {
    let mut last = None;
    for align in [GIB, HUGE, crate::compact::PAGE] {
        match reserve_congruent(heap, len, align) {
            Ok(at) => return Ok(at),
            Err(e) => last = Some(e),
        }
    }
    let e = last.expect("tried at least once");
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes `limit` only.
    let as_limit = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY;
    let rlimit = if as_limit {
        format!("; RLIMIT_AS is {} bytes", limit.rlim_cur)
    } else {
        String::new()
    };
    Err(bad(
        heap,
        len,
        format!(
            "cannot reserve {len} bytes of address space for the from-space ({e}{rlimit}): a \
             session needs the heap's size again, and 1 GiB more for a pause that does not \
             grow with the heap"
        ),
    ))
}

/// Moves the heap's pages (its mappings `pieces`, which cover it) to a new
/// from-space, maps the to-space at `heap` and registers it with `fd`;
/// returns the from-space's address and the ioctls allowed on the
/// to-space.
///
/// The to-space is mapped inaccessible and registered before it is made
/// readable and writable: nothing can put a page in it that the session
/// did not build. (Mapped readable and writable at once, `mlockall`'s
/// `MCL_FUTURE` would populate it on the spot, and a thread touching it
/// before the registration would get a zero page, both read later as if
/// built.) `huge`: the huge-page advice for the to-space, if any.
///
/// # Safety
/// Nothing touches `heap..heap + len` during the call; the caller holds no
/// reference into it.
pub(crate) unsafe fn flip(
    heap: usize,
    len: usize,
    pieces: &[Vma],
    fd: i32,
    huge: Option<bool>,
) -> Result<(usize, u64), Error> {
    // SAFETY: forwarded contract.
    let from = unsafe { move_aside(heap, len, pieces) }?;
    // SAFETY: the heap's addresses are free now; a fresh private mapping
    // takes them, inaccessible until registered.
    let to = unsafe { map_to_space(heap, len, libc::PROT_NONE, huge) };
    if let Err(e) = to {
        // SAFETY: puts the heap back where it was.
        unsafe { unflip(heap, from, len, pieces) };
        return Err(bad(heap, len, format!("cannot map the to-space: {e}")));
    }
    let ioctls = match register(fd, heap, len) {
        Ok(i) => i,
        Err(e) => {
            // SAFETY: puts the heap back where it was.
            unsafe { unflip(heap, from, len, pieces) };
            return Err(e);
        }
    };
    // SAFETY: our registered to-space; it holds no page, and a missing
    // page now raises the session's SIGBUS (populating it for a locked
    // mapping fails quietly, as it should).
    if unsafe {
        libc::mprotect(
            heap as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
        )
    } != 0
    {
        let e = io::Error::last_os_error();
        unregister(fd, heap, len);
        // SAFETY: puts the heap back where it was.
        unsafe { unflip(heap, from, len, pieces) };
        return Err(bad(
            heap,
            len,
            format!("cannot make the to-space readable and writable: {e}"),
        ));
    }
    // SAFETY: advice on our from-space, which stays out of a child's
    // address space, so its pages stay exclusively ours and can be moved
    // (a page shared after fork cannot).
    unsafe { libc::madvise(from as *mut libc::c_void, len, libc::MADV_DONTFORK) };
    Ok((from, ioctls))
}

/// [`flip`] without a userfaultfd (stop-the-world compaction): the
/// to-space is ordinary memory the caller builds every page of at once.
///
/// # Safety
/// As [`flip`].
pub(crate) unsafe fn flip_plain(
    heap: usize,
    len: usize,
    pieces: &[Vma],
    huge: Option<bool>,
) -> Result<usize, Error> {
    // SAFETY: forwarded contract.
    let from = unsafe { move_aside(heap, len, pieces) }?;
    // SAFETY: the heap's addresses are free now.
    if let Err(e) = unsafe { map_to_space(heap, len, libc::PROT_READ | libc::PROT_WRITE, huge) } {
        // SAFETY: puts the heap back where it was.
        unsafe { unflip(heap, from, len, pieces) };
        return Err(bad(heap, len, format!("cannot map the to-space: {e}")));
    }
    Ok(from)
}

/// Maps a fresh private to-space at `heap` with `prot` and the huge-page
/// advice `huge`.
///
/// # Safety
/// `heap..heap + len` is ours to replace.
unsafe fn map_to_space(heap: usize, len: usize, prot: i32, huge: Option<bool>) -> io::Result<()> {
    // SAFETY: the caller's range.
    let to = unsafe {
        libc::mmap(
            heap as *mut libc::c_void,
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if to == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    if let Some(huge) = huge {
        let advice = if huge {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: advice on our fresh mapping.
        unsafe { libc::madvise(heap as *mut libc::c_void, len, advice) };
    }
    Ok(())
}

/// Moves the heap's mappings (`pieces`, covering it) into a new from-space
/// at the same offsets; returns its address. On failure the heap is as it
/// was.
///
/// # Safety
/// As [`flip`].
unsafe fn move_aside(heap: usize, len: usize, pieces: &[Vma]) -> Result<usize, Error> {
    let from = reserve_from(heap, len)?;
    for (i, v) in pieces.iter().enumerate() {
        // SAFETY: one of the caller's mappings moves into our reservation.
        let moved = unsafe {
            libc::mremap(
                v.start as *mut libc::c_void,
                v.end - v.start,
                v.end - v.start,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                (from + (v.start - heap)) as *mut libc::c_void,
            )
        };
        if moved == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: the pieces moved so far go back; the rest of the
            // reservation is ours.
            unsafe {
                put_back(heap, from, &pieces[..i]);
                libc::munmap(from as *mut libc::c_void, len);
            }
            return Err(bad(
                heap,
                len,
                format!(
                    "cannot move the heap's pages at {:#x}..{:#x} aside (mremap: {e})",
                    v.start, v.end
                ),
            ));
        }
    }
    Ok(from)
}

/// Moves `pieces` from the from-space back to their places.
///
/// # Safety
/// As [`flip`]; the pieces are at their from-space offsets.
unsafe fn put_back(heap: usize, from: usize, pieces: &[Vma]) {
    for v in pieces {
        // SAFETY: our from-space piece goes back over whatever is there.
        unsafe {
            libc::mremap(
                (from + (v.start - heap)) as *mut libc::c_void,
                v.end - v.start,
                v.end - v.start,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                v.start as *mut libc::c_void,
            )
        };
    }
}

/// Undoes [`flip`]: the from-space goes back to the heap's addresses.
///
/// # Safety
/// As [`flip`]; the to-space holds nothing anyone needs.
pub(crate) unsafe fn unflip(heap: usize, from: usize, len: usize, pieces: &[Vma]) {
    // SAFETY: our from-space, moved back over the to-space.
    unsafe {
        libc::madvise(from as *mut libc::c_void, len, libc::MADV_DOFORK);
        put_back(heap, from, pieces);
    }
}

/// Registers the to-space in missing-page mode; returns the ioctls the
/// kernel allows on it.
pub(crate) fn register(fd: i32, heap: usize, len: usize) -> Result<u64, Error> {
    let mut r = UffdioRegister {
        range: UffdioRange {
            start: heap as u64,
            len: len as u64,
        },
        mode: UFFDIO_REGISTER_MODE_MISSING,
        ioctls: 0,
    };
    // SAFETY: a valid uffd and struct.
    if unsafe { libc::ioctl(fd, UFFDIO_REGISTER, &mut r) } != 0 {
        return Err(bad(
            heap,
            len,
            format!(
                "cannot register the to-space with userfaultfd: {}",
                io::Error::last_os_error()
            ),
        ));
    }
    Ok(r.ioctls)
}

/// Unregisters the to-space: from now on a missing page is an ordinary
/// anonymous one.
pub(crate) fn unregister(fd: i32, heap: usize, len: usize) {
    let mut r = UffdioRange {
        start: heap as u64,
        len: len as u64,
    };
    // SAFETY: a valid uffd and struct.
    unsafe { libc::ioctl(fd, UFFDIO_UNREGISTER, &mut r) };
}
