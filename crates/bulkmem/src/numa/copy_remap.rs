//! Migration by copy and remap (seed 002's multi-threaded folio copy, from
//! user space): map a fresh region bound to the target node, copy into it
//! with the engine's threads on that node, and `mremap` it over the old
//! range, which keeps its addresses and gets new pages.
//!
//! Writers are kept out with `mprotect`: during the copy the range is
//! read-only, so a stray write faults (SIGSEGV) instead of landing in the
//! old pages and being lost when they are replaced. Userfaultfd
//! write-protection would let writers wait instead of fault, at the cost of
//! a fault-handling thread; the caller is expected to have quiesced
//! writers, so a loud failure is the better default.
//!
//! Until the `mremap`, nothing the caller can see has changed but the
//! temporary protection: any failure unmaps the new region, restores every
//! mapping's protection and says the original is intact.

use std::io;

use crate::engine::{CancelToken, Control, Engine, Extent, Progress};
use crate::error::Error;
use crate::strategy::{Hint, Strategy};

use super::maps::{self, Vma};
use super::move_pages::check_range;
use super::sys::{self, mask_of};
use super::Nodes;

const HUGE: usize = 2 << 20;
/// include/uapi/asm-generic/mman-common.h (Linux 5.14).
const MADV_POPULATE_WRITE: i32 = 23;
/// Free memory the target node must keep beyond the copy: binding a
/// region to a node that runs out invokes the OOM killer, not an error.
const HEADROOM: u64 = 32 << 20;

/// Options of [`migrate_by_copy`].
#[derive(Clone, Copy, Default)]
pub struct CopyOptions<'a> {
    /// Copy threads (default 2), at most one per CPU of the target node
    /// (of all online CPUs for a memory-only node): [`CopyReport::cpus`]
    /// lists the ones that ran. Ignored when `engine` is given.
    pub threads: Option<usize>,
    /// Copy with this engine as it is (its CPUs and threads).
    pub engine: Option<&'a Engine>,
    /// Back the new pages with transparent huge pages (MADV_HUGEPAGE,
    /// 2 MiB-aligned). Default: as the source (MADV_HUGEPAGE set or huge
    /// pages present). THPs survive the remap when the range is 2 MiB
    /// aligned.
    pub hugepage: Option<bool>,
    /// Called after each chunk of the copy, from the copying threads.
    pub progress: Option<&'a (dyn Fn(Progress) + Sync)>,
    /// Test hook: fail the copy once this many bytes are done.
    #[doc(hidden)]
    pub fail_after: Option<usize>,
}

/// What [`migrate_by_copy`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyReport {
    pub to: usize,
    pub bytes: usize,
    /// The CPUs that copied, and the primitive they used.
    pub cpus: Vec<usize>,
    pub strategy: Strategy,
    pub hugepage: bool,
}

/// A fresh mapping, unmapped on drop unless it was moved into place.
struct Fresh {
    ptr: *mut u8,
    len: usize,
}

impl Drop for Fresh {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: our own mapping, not yet handed to anyone.
            unsafe { libc::munmap(self.ptr.cast(), self.len) };
        }
    }
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

/// Moves the anonymous private memory `[addr, addr + len)` (page-aligned,
/// owned by the caller, with no writers during the call) to node `to` by
/// copying it into new pages there and remapping them at the same
/// addresses. The range ends up with its old protection, bound to `to`
/// (MPOL_BIND: pages it gains later come from `to` too).
///
/// Errors before anything changed: bad node or range, a range that is not
/// all private anonymous readable memory, too little free memory on `to`.
/// A failure after the copy started ([`Error::MigrationFailed`]) leaves the
/// original memory intact and says so.
///
/// # Safety
/// The range must belong to the caller and no thread may write it during
/// the call (a write faults with SIGSEGV); nothing may hold on to the old
/// pages themselves (DMA, `vmsplice`) since they are replaced. Untouched
/// pages in the range are read as zeros and become real pages.
pub unsafe fn migrate_by_copy(
    addr: *mut u8,
    len: usize,
    to: usize,
    opts: CopyOptions<'_>,
) -> Result<CopyReport, Error> {
    let a = addr as usize;
    check_range(a, len)?;
    let nodes = Nodes::detect();
    let node = nodes.target(to)?.clone();
    if node.mem_total > 0 && node.mem_free < len as u64 + HEADROOM {
        return Err(Error::NotEnoughMemory {
            node: to,
            need: len as u64 + HEADROOM,
            free: node.mem_free,
        });
    }
    let vmas = maps::covering(&maps::read_self(), a, len).map_err(|gap| Error::BadRange {
        addr: a,
        len,
        why: format!("nothing is mapped at {gap:#x}"),
    })?;
    if let Some(v) = vmas.iter().find(|v| !v.private || !v.anonymous()) {
        return Err(Error::BadRange {
            addr: a,
            len,
            why: format!(
                "{:#x}-{:#x} is {} (migrate_by_copy moves private anonymous memory; use migrate())",
                v.start,
                v.end,
                if v.private {
                    "a file mapping"
                } else {
                    "shared"
                }
            ),
        });
    }
    if let Some(v) = vmas.iter().find(|v| v.prot & libc::PROT_READ == 0) {
        return Err(Error::BadRange {
            addr: a,
            len,
            why: format!("{:#x}-{:#x} is not readable", v.start, v.end),
        });
    }
    let huge = opts.hugepage.unwrap_or(vmas.iter().any(|v| v.huge));

    let fail = |stage: &str, errno: i32| Error::MigrationFailed {
        stage: stage.to_string(),
        errno,
        intact: true,
    };
    let fresh = map_fresh(len, huge).map_err(|e| fail("mapping the new region", errno(&e)))?;
    let mask = mask_of(to).map_err(|e| fail("building the node mask", errno(&e)))?;
    // SAFETY: `fresh` is our own, untouched mapping.
    unsafe { sys::mbind(fresh.ptr, len, libc::MPOL_BIND, &mask, 0) }
        .map_err(|e| fail("binding the new region to the node (mbind)", errno(&e)))?;
    if huge {
        // Best effort: THP may be disabled ("never"); the copy still works.
        // SAFETY: advice on our own mapping.
        unsafe { libc::madvise(fresh.ptr.cast(), len, libc::MADV_HUGEPAGE) };
    }
    // Allocate the new pages (on the node, by the binding) in one call
    // rather than one fault per page under the copy's streaming stores.
    // Best effort: MADV_POPULATE_WRITE needs Linux 5.14; without it the
    // copy faults the pages in.
    // SAFETY: advice on our own mapping.
    unsafe { libc::madvise(fresh.ptr.cast(), len, MADV_POPULATE_WRITE) };

    let built;
    let engine = match opts.engine {
        Some(e) => e,
        None => {
            let cpus = if node.cpus.is_empty() {
                crate::cpu::info().topology.online_cpus.clone()
            } else {
                node.cpus.clone()
            };
            let threads = opts.threads.unwrap_or(2).clamp(1, cpus.len().max(1));
            built = Engine::builder()
                .cpus(&cpus)
                .threads(threads)
                .hint(Hint::Stream)
                .inline_max(0)
                .build()
                .map_err(|_| fail("starting the copy threads", libc::EAGAIN))?;
            &built
        }
    };

    // Keep writers out: read-only (and whatever else each mapping allowed).
    if let Err((v, e)) = protect(&vmas, |v| v.prot & !libc::PROT_WRITE) {
        let _ = protect(&vmas, |v| v.prot);
        return Err(fail(
            &format!("write-protecting {:#x}-{:#x}", v.start, v.end),
            errno(&e),
        ));
    }
    let cancel = CancelToken::new();
    let progress = |p: Progress| {
        if let Some(f) = opts.progress {
            f(p);
        }
        if opts.fail_after.is_some_and(|n| p.done >= n) {
            cancel.cancel();
        }
    };
    let ctl = Control {
        cancel: Some(&cancel),
        progress: Some(&progress),
    };
    let extent = [Extent {
        dst: fresh.ptr,
        src: addr,
        len,
    }];
    // SAFETY: the source is the caller's readable range (checked above)
    // and now read-only; the destination is our fresh mapping; they are
    // distinct mappings.
    let copied = unsafe { engine.copy_extents(&extent, ctl) };
    let report = match copied {
        Ok(r) if r.is_complete() => r,
        Ok(_) => {
            let _ = protect(&vmas, |v| v.prot);
            let why = if opts.fail_after.is_some() {
                "copying (injected failure)"
            } else {
                "copying (cancelled)"
            };
            return Err(fail(why, libc::ECANCELED));
        }
        Err(e) => {
            let _ = protect(&vmas, |v| v.prot);
            return Err(fail(&format!("copying ({e})"), libc::EIO));
        }
    };

    // SAFETY: moves our fresh mapping over the caller's range, which the
    // kernel unmaps in the same call: no instant without a mapping there.
    let moved = unsafe {
        libc::mremap(
            fresh.ptr.cast(),
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            addr.cast::<libc::c_void>(),
        )
    };
    if moved == libc::MAP_FAILED {
        let e = io::Error::last_os_error();
        let _ = protect(&vmas, |v| v.prot);
        return Err(fail("replacing the old pages (mremap)", errno(&e)));
    }
    std::mem::forget(fresh);
    if let Err((v, e)) = protect(&vmas, |v| v.prot) {
        return Err(Error::MigrationFailed {
            stage: format!(
                "restoring the protection of {:#x}-{:#x} after the move (the data moved and is intact, the range is read-only)",
                v.start, v.end
            ),
            errno: errno(&e),
            intact: true,
        });
    }
    Ok(CopyReport {
        to,
        bytes: len,
        cpus: engine.cpus().to_vec(),
        strategy: report.strategy,
        hugepage: huge,
    })
}

/// A fresh private anonymous mapping of `len` bytes, 2 MiB-aligned when
/// `huge` (so its pages can be PMD-mapped and moved as such).
fn map_fresh(len: usize, huge: bool) -> io::Result<Fresh> {
    let pad = if huge { HUGE } else { 0 };
    // SAFETY: a new anonymous mapping; nothing existing is affected.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len + pad,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let base = p as usize;
    let start = base.next_multiple_of(pad.max(1));
    // Trim the padding on both sides.
    // SAFETY: both pieces lie in the mapping just created and are unused.
    unsafe {
        if start > base {
            libc::munmap(p, start - base);
        }
        let tail = base + len + pad - (start + len);
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
    }
    Ok(Fresh {
        ptr: start as *mut u8,
        len,
    })
}

/// Sets each mapping's protection to `prot(vma)`; the first failure.
fn protect(vmas: &[Vma], prot: impl Fn(&Vma) -> i32) -> Result<(), (Vma, io::Error)> {
    for v in vmas {
        // SAFETY: the caller's own mappings, as listed by the kernel;
        // changing protection does not touch contents.
        let rc = unsafe { libc::mprotect(v.start as *mut libc::c_void, v.end - v.start, prot(v)) };
        if rc != 0 {
            return Err((v.clone(), io::Error::last_os_error()));
        }
    }
    Ok(())
}
