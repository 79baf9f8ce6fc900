//! Owned private anonymous memory mappings.
//!
//! Benchmarks, migrations and tests all need memory straight from `mmap`
//! rather than from the allocator: aligned to huge pages, with THP advice,
//! with guard pages, or to be handed to the kernel (userfaultfd, `mremap`).
//! [`Mapping`] is that memory, unmapped exactly once when dropped.
//!
//! ```
//! # extern crate bulkmem_pages as bulkmem; // users name bulkmem
//! use bulkmem::mapping::Mapping;
//!
//! let mut m = Mapping::options()
//!     .align(2 << 20)
//!     .huge_pages(true)
//!     .map(4 << 20)
//!     .unwrap();
//! assert_eq!(m.as_ptr() as usize % (2 << 20), 0);
//! m.as_mut_slice()[0] = 1;
//! ```

use std::io;
use std::mem::ManuallyDrop;
use std::ptr;

/// include/uapi/asm-generic/mman-common.h (Linux 5.14).
const MADV_POPULATE_WRITE: i32 = 23;

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    // Only a broken libc fails here; 4 KiB is what every target of this
    // crate uses.
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

/// An owned private anonymous mapping of [`len`](Mapping::len) bytes,
/// zero-filled when made and unmapped (with its guard pages) on drop.
///
/// The memory is handed out as slices ([`as_slice`](Mapping::as_slice)) or
/// as raw pointers for the kernel interfaces that take addresses.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
    /// Bytes of PROT_NONE guard on each side, owned and unmapped with the
    /// rest.
    guard: usize,
    /// False for a reservation made [`MapOptions::inaccessible`]: a slice
    /// of PROT_NONE memory would be a reference that cannot be read.
    accessible: bool,
}

// SAFETY: the mapping belongs to this value alone and is not tied to the
// thread that made it; munmap may run on any thread.
unsafe impl Send for Mapping {}
// SAFETY: through `&Mapping` only shared slices and raw pointers are handed
// out; writes through a raw pointer are the caller's to synchronise.
unsafe impl Sync for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("guard", &self.guard)
            .field("accessible", &self.accessible)
            .finish()
    }
}

/// How [`MapOptions::map`] makes a [`Mapping`]; start from
/// [`Mapping::options`].
#[derive(Clone, Copy, Debug, Default)]
pub struct MapOptions {
    align: usize,
    huge_pages: Option<bool>,
    guard_pages: bool,
    noreserve: bool,
    populate: bool,
    inaccessible: bool,
}

impl MapOptions {
    /// Start the mapping at a multiple of `align` (a power of two; at most
    /// the page size means no constraint). The mapping is over-allocated by
    /// `align` and trimmed, so nothing but the mapping itself stays mapped.
    /// 2 MiB alignment lets transparent huge pages back the whole range.
    pub fn align(mut self, align: usize) -> MapOptions {
        self.align = align;
        self
    }

    /// Advise transparent huge pages (`true`: MADV_HUGEPAGE) or advise
    /// against them (`false`: MADV_NOHUGEPAGE). Advice only: where the
    /// kernel has no THP the mapping is made anyway, with base pages.
    /// Without this call the system default applies.
    pub fn huge_pages(mut self, huge: bool) -> MapOptions {
        self.huge_pages = Some(huge);
        self
    }

    /// Put one inaccessible (PROT_NONE) page on each side, so that an
    /// access just outside the mapping faults instead of touching a
    /// neighbour. The trailing guard starts at the first page boundary at
    /// or after the end: a length that is a page multiple leaves no slack.
    pub fn guard_pages(mut self, guard: bool) -> MapOptions {
        self.guard_pages = guard;
        self
    }

    /// Map with MAP_NORESERVE: no swap space is reserved (the kernel may
    /// ignore it, as it does in overcommit mode 2).
    pub fn noreserve(mut self, noreserve: bool) -> MapOptions {
        self.noreserve = noreserve;
        self
    }

    /// Fault every page in before returning (MADV_POPULATE_WRITE, or a
    /// write to each page on kernels before Linux 5.14), so no page fault
    /// lands in a later timed region.
    pub fn populate(mut self, populate: bool) -> MapOptions {
        self.populate = populate;
        self
    }

    /// Reserve the addresses only: PROT_NONE, nothing committed. Parts are
    /// made usable with [`Mapping::map_fresh`]; such a mapping never hands
    /// out slices, only pointers.
    pub fn inaccessible(mut self, inaccessible: bool) -> MapOptions {
        self.inaccessible = inaccessible;
        self
    }

    /// Maps `len` bytes (rounded up to whole pages underneath).
    ///
    /// Errors: `InvalidInput` for a zero length, an alignment that is not a
    /// power of two, a size that overflows, or populating an inaccessible
    /// mapping; otherwise the OS error of the failing call, unwrapped, so
    /// that `raw_os_error` gives its errno.
    pub fn map(self, len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Err(invalid("cannot map 0 bytes".into()));
        }
        if self.align != 0 && !self.align.is_power_of_two() {
            return Err(invalid(format!(
                "mapping alignment {:#x} is not a power of two",
                self.align
            )));
        }
        if self.populate && self.inaccessible {
            return Err(invalid(
                "an inaccessible mapping cannot be populated".into(),
            ));
        }
        let page = page_size();
        let align = self.align.max(page);
        let guard = if self.guard_pages { page } else { 0 };
        // mmap returns page-aligned addresses, so reaching `align` skips at
        // most `align - page` bytes.
        let span = len.checked_next_multiple_of(page);
        let total = span.and_then(|s| s.checked_add(2 * guard + (align - page)));
        let (Some(span), Some(total)) = (span, total) else {
            return Err(invalid(format!("cannot map {len} bytes: too large")));
        };
        let prot = if self.inaccessible {
            libc::PROT_NONE
        } else {
            libc::PROT_READ | libc::PROT_WRITE
        };
        let noreserve = if self.noreserve {
            libc::MAP_NORESERVE
        } else {
            0
        };
        // SAFETY: a new mapping at an address the kernel picks; nothing
        // that exists is affected.
        let raw = unsafe {
            libc::mmap(
                ptr::null_mut(),
                total,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | noreserve,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = raw as usize;
        let start = (base + guard).next_multiple_of(align);
        let head = start - guard - base;
        let tail = base + total - (start + span + guard);
        // Trimming can fail (ENOMEM past vm.max_map_count). What is still
        // ours is then given back, and only that: a part already trimmed
        // may belong to another thread's mapping by now.
        let mut owned = (base, total);
        for (at, n) in [(base, head), (start + span + guard, tail)] {
            // SAFETY: [at, at + n) lies in the mapping just made, outside
            // the part kept, and nothing refers to it.
            if n > 0 && unsafe { libc::munmap(at as *mut libc::c_void, n) } != 0 {
                let e = io::Error::last_os_error();
                // SAFETY: `owned` is what remains of the mapping just made.
                unsafe { libc::munmap(owned.0 as *mut libc::c_void, owned.1) };
                return Err(e);
            }
            if at == base {
                owned = (base + head, total - head);
            }
        }
        // From here on, dropping `m` unmaps the mapping and its guards.
        let m = Mapping {
            ptr: start as *mut u8,
            len,
            guard,
            accessible: !self.inaccessible,
        };
        if guard > 0 && !self.inaccessible {
            for at in [start - guard, start + span] {
                // SAFETY: a guard page of `m`, which nothing refers to.
                let rc = unsafe { libc::mprotect(at as *mut libc::c_void, guard, libc::PROT_NONE) };
                if rc != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        if let Some(huge) = self.huge_pages {
            // Advice only, as documented: EINVAL without THP support.
            let _ = m.advise_huge_pages(huge);
        }
        if self.populate {
            match m.populate() {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    // Before Linux 5.14: a write faults each page in, and
                    // writing the zero it holds changes nothing.
                    for p in (0..span).step_by(page) {
                        // SAFETY: page p of `m`, accessible and fresh, and
                        // `m` is not shared yet.
                        unsafe { m.ptr.add(p).write_volatile(0) };
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(m)
    }
}

impl Mapping {
    /// Options for a mapping: alignment, THP advice, guard pages, ...
    pub fn options() -> MapOptions {
        MapOptions::default()
    }

    /// A plain read-write mapping of `len` bytes, as the kernel places it
    /// and with the system's THP default.
    pub fn anonymous(len: usize) -> io::Result<Mapping> {
        Mapping::options().map(len)
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// The first byte, writable. Takes `&self` because the kernel
    /// interfaces these addresses go to (userfaultfd, mremap, mbind) do not
    /// borrow; writing through it is the caller's to synchronise with any
    /// slice of the mapping.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The length asked for (the mapping underneath is whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a mapping is never empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole mapping.
    ///
    /// # Panics
    /// On a mapping made [`MapOptions::inaccessible`].
    pub fn as_slice(&self) -> &[u8] {
        assert!(self.accessible, "an inaccessible mapping has no slices");
        // SAFETY: `len` bytes mapped readable for as long as `self` lives;
        // mutation needs `&mut self` (or unsafe raw-pointer writes whose
        // callers keep them apart from this borrow).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The whole mapping, writable.
    ///
    /// # Panics
    /// On a mapping made [`MapOptions::inaccessible`].
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        assert!(self.accessible, "an inaccessible mapping has no slices");
        // SAFETY: `len` bytes mapped read-write, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Advises transparent huge pages for the whole mapping (`true`:
    /// MADV_HUGEPAGE) or against them (`false`: MADV_NOHUGEPAGE). Advice
    /// is per mapping (VMA): parts replaced by [`map_fresh`] afterwards
    /// lose it.
    ///
    /// [`map_fresh`]: Mapping::map_fresh
    pub fn advise_huge_pages(&self, huge: bool) -> io::Result<()> {
        let advice = if huge {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: advice on our own mapping; it changes how pages are
        // allocated, never their contents.
        if unsafe { libc::madvise(self.ptr.cast(), self.len, advice) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Allocates every page now, under the mapping's memory policy, in one
    /// call (MADV_POPULATE_WRITE), instead of one fault per page later.
    /// Contents are kept. Fails with EINVAL before Linux 5.14.
    pub fn populate(&self) -> io::Result<()> {
        // SAFETY: our own mapping; populating allocates pages without
        // changing what they hold.
        if unsafe { libc::madvise(self.ptr.cast(), self.len, MADV_POPULATE_WRITE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Replaces `[offset, offset + len)` with fresh zero-filled read-write
    /// pages (MAP_FIXED), MAP_NORESERVE if `noreserve`: how parts of an
    /// [`inaccessible`](MapOptions::inaccessible) reservation get mapped,
    /// each with its own flags. What the range held, and any advice on it,
    /// is gone. `offset` must be page-aligned and the range inside the
    /// mapping.
    pub fn map_fresh(&mut self, offset: usize, len: usize, noreserve: bool) -> io::Result<()> {
        let page = page_size();
        let span = self.len.next_multiple_of(page);
        let inside = offset.checked_add(len).is_some_and(|end| end <= span);
        if len == 0 || !offset.is_multiple_of(page) || !inside {
            return Err(invalid(format!(
                "{len} bytes at offset {offset:#x} are not a page-aligned part of a {}-byte mapping",
                self.len
            )));
        }
        let noreserve = if noreserve { libc::MAP_NORESERVE } else { 0 };
        // SAFETY: MAP_FIXED over pages of our own mapping only (checked
        // above); `&mut self` means no slice of them is alive.
        let p = unsafe {
            libc::mmap(
                self.ptr.add(offset).cast(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | noreserve,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Gives up ownership: the `len` bytes at the returned address (and the
    /// guard pages, if any) stay mapped and are no longer unmapped on drop.
    /// For memory the kernel has taken over, as after `mremap` moved it
    /// elsewhere.
    pub fn into_raw(self) -> *mut u8 {
        ManuallyDrop::new(self).ptr
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // munmap takes every page the range touches: with guards this
        // reaches into the trailing guard whatever `len` is, without them it
        // covers the last partial page.
        // SAFETY: exactly the mapping (and guards) made in `map`, which no
        // borrow outlives.
        unsafe { libc::munmap(self.ptr.sub(self.guard).cast(), self.len + 2 * self.guard) };
    }
}

#[cfg(test)]
mod tests;
