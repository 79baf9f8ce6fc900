//! The pause's work: the heap's pages go to a from-space and an empty
//! to-space takes their place at the heap's own addresses, registered with
//! a userfaultfd in SIGBUS mode.
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

const GIB: usize = 1 << 30;

fn bad(addr: usize, len: usize, why: String) -> Error {
    Error::BadRange { addr, len, why }
}

/// An address range of `len` bytes, unmapped, congruent with `heap`
/// modulo 1 GiB.
fn reserve_congruent(heap: usize, len: usize) -> io::Result<usize> {
    let span = len + GIB;
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
        let at = r + (heap.wrapping_sub(r) % GIB);
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

/// Moves the heap's pages to a new from-space and maps an empty to-space
/// at `heap`; returns the from-space's address.
///
/// # Safety
/// Nothing touches `heap..heap + len` during the call; the caller holds no
/// reference into it.
pub(crate) unsafe fn flip(heap: usize, len: usize, huge: bool) -> Result<usize, Error> {
    let from = reserve_congruent(heap, len).map_err(|e| {
        bad(
            heap,
            len,
            format!("cannot reserve a from-space of that size: {e}"),
        )
    })?;
    // SAFETY: the caller's heap moves to our reservation.
    let moved = unsafe {
        libc::mremap(
            heap as *mut libc::c_void,
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            from as *mut libc::c_void,
        )
    };
    if moved == libc::MAP_FAILED {
        let e = io::Error::last_os_error();
        // SAFETY: our own reservation.
        unsafe { libc::munmap(from as *mut libc::c_void, len) };
        return Err(bad(
            heap,
            len,
            format!("cannot move the heap's pages aside (mremap: {e}); it must be one mapping"),
        ));
    }
    // SAFETY: the heap's addresses are free now; a fresh private mapping
    // takes them.
    let to = unsafe {
        libc::mmap(
            heap as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if to == libc::MAP_FAILED {
        let e = io::Error::last_os_error();
        // SAFETY: puts the heap back where it was.
        unsafe { unflip(heap, from, len) };
        return Err(bad(heap, len, format!("cannot map the to-space: {e}")));
    }
    let advice = if huge {
        libc::MADV_HUGEPAGE
    } else {
        libc::MADV_NOHUGEPAGE
    };
    // SAFETY: advice on our mappings. The from-space stays out of a
    // child's address space, so its pages stay exclusively ours and can
    // be moved (a page shared after fork cannot).
    unsafe {
        libc::madvise(heap as *mut libc::c_void, len, advice);
        libc::madvise(from as *mut libc::c_void, len, libc::MADV_DONTFORK);
    }
    Ok(from)
}

/// Undoes [`flip`]: the from-space goes back to the heap's addresses.
///
/// # Safety
/// As [`flip`]; the to-space holds nothing anyone needs.
pub(crate) unsafe fn unflip(heap: usize, from: usize, len: usize) {
    // SAFETY: moves our from-space over the to-space, replacing it.
    unsafe {
        libc::madvise(from as *mut libc::c_void, len, libc::MADV_DOFORK);
        libc::mremap(
            from as *mut libc::c_void,
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            heap as *mut libc::c_void,
        );
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
