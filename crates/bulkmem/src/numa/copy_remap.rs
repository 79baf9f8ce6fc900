//! Migration by copy and remap (the kernel's multi-threaded migration patches' multi-threaded folio copy, from
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
//!
//! The new region gets each old mapping's VmFlags (mlock, MADV_DONTFORK,
//! MADV_WIPEONFORK, MADV_DONTDUMP, ...) before it replaces it: a fresh
//! mapping has none of them, and secrets that were locked, kept from
//! children and out of core dumps would silently lose all that. A flag the
//! new region cannot be given is refused by name before anything changes.

use std::io;

use crate::engine::{CancelToken, Control, Engine, Progress};
use crate::error::Error;
use crate::mapping::Mapping;
use crate::plan::Extent;
use crate::strategy::{Hint, Strategy};

use super::maps::{self, Vma};
use super::move_pages::check_range;
use super::sys::{self, mask_of};
use super::vm_flags::{advise_like, compare_flags, flag_meaning, lock_like};
use crate::machine::topology::{Node, Nodes};

const HUGE: usize = 2 << 20;
/// Free memory the target node must keep beyond the copy: binding a
/// region to a node that runs out invokes the OOM killer, not an error.
const HEADROOM: u64 = 32 << 20;

/// Options of [`migrate_by_copy`].
///
/// Start from [`CopyOptions::default`] and set what you need with the
/// methods of the same names: `CopyOptions::default().threads(4)`.
#[derive(Clone, Copy, Default)]
#[non_exhaustive]
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
    /// Stops the copy once cancelled (checked between chunks): the range
    /// is then left where it was, whole and writable, and the call returns
    /// [`Error::MigrationFailed`] with `intact`.
    pub cancel: Option<&'a CancelToken>,
}

impl<'a> CopyOptions<'a> {
    /// Copies with `n` threads (see [`threads`](CopyOptions::threads)).
    #[must_use]
    pub fn threads(mut self, n: usize) -> CopyOptions<'a> {
        self.threads = Some(n);
        self
    }

    /// Copies with `engine` as it is (see [`engine`](CopyOptions::engine)).
    #[must_use]
    pub fn engine(mut self, engine: &'a Engine) -> CopyOptions<'a> {
        self.engine = Some(engine);
        self
    }

    /// Backs the new pages with transparent huge pages or not, instead of
    /// following the source (see [`hugepage`](CopyOptions::hugepage)).
    #[must_use]
    pub fn hugepage(mut self, on: bool) -> CopyOptions<'a> {
        self.hugepage = Some(on);
        self
    }

    /// Calls `f` after each chunk of the copy, from the copying threads.
    #[must_use]
    pub fn progress(mut self, f: &'a (dyn Fn(Progress) + Sync)) -> CopyOptions<'a> {
        self.progress = Some(f);
        self
    }

    /// Stops the copy when `token` is cancelled (see
    /// [`cancel`](CopyOptions::cancel)).
    #[must_use]
    pub fn cancel(mut self, token: &'a CancelToken) -> CopyOptions<'a> {
        self.cancel = Some(token);
        self
    }
}

/// What [`migrate_by_copy`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyReport {
    /// The node the range now lives on.
    pub to: usize,
    /// Bytes copied: the whole range.
    pub bytes: usize,
    /// The CPUs that copied.
    pub cpus: Vec<usize>,
    /// The primitive they copied with.
    pub strategy: Strategy,
    /// Whether the new pages were asked for as transparent huge pages
    /// (MADV_HUGEPAGE); otherwise they are MADV_NOHUGEPAGE.
    pub hugepage: bool,
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
/// What each mapping (VMA) in the range keeps, as /proc/self/smaps's
/// VmFlags show it; all of it is in place on the new pages before they
/// replace the old ones:
/// * contents, addresses and protection (`rd wr ex`);
/// * `lo` (mlock) and `lf` (mlock2 MLOCK_ONFAULT): the new pages are
///   locked before the move, so while it runs the range is locked twice
///   over (RLIMIT_MEMLOCK must allow that without CAP_IPC_LOCK; otherwise
///   the call fails and the original is intact);
/// * `dc` (MADV_DONTFORK), `wf` (MADV_WIPEONFORK), `dd` (MADV_DONTDUMP) and
///   `mg` (MADV_MERGEABLE);
/// * `nr` (MAP_NORESERVE): the new region is MAP_NORESERVE exactly where
///   the old mapping was, and otherwise accounted (`ac`) like any private
///   writable mapping (a mapping that was never writable is accounted
///   from now on);
/// * THP advice: MADV_HUGEPAGE (`hg`) over the whole range when
///   [`CopyOptions::hugepage`] says so (by default when any part of the
///   source had it or had huge pages), otherwise MADV_NOHUGEPAGE (`nh`)
///   where the source had it.
///
/// The memory policy becomes MPOL_BIND to `to`; soft-dirty bits are set
/// (every page is new). Any other VmFlag the new region would lack, such
/// as a userfaultfd registration (`um`, `uw`, `ui`), is refused by name
/// ([`Error::BadRange`]) before anything changed.
///
/// Errors before anything changed: bad node or range, a range that is not
/// all private anonymous readable memory, a VmFlag the new region cannot
/// be given, too little free memory on `to`.
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
    let node = target_with_room(to, len)?;
    let vmas = movable_mappings(a, len)?;
    let huge = opts.hugepage.unwrap_or(vmas.iter().any(|v| v.huge));
    let fresh = prepare_region(len, huge, to, a, &vmas)?;
    let built;
    let engine = match opts.engine {
        Some(e) => e,
        None => {
            built = engine_on(&node, opts.threads)?;
            &built
        }
    };
    let strategy = copy_write_protected(engine, &fresh, addr, len, &vmas, &opts)?;
    // SAFETY: the caller's range, as the caller promised; `fresh` holds
    // its contents.
    unsafe { replace(fresh, addr, len, &vmas) }?;
    Ok(CopyReport {
        to,
        bytes: len,
        cpus: engine.cpus().to_vec(),
        strategy,
        hugepage: huge,
    })
}

/// A failure that left the caller's memory as it was.
fn failed(stage: &str, errno: i32) -> Error {
    Error::MigrationFailed {
        stage: stage.to_string(),
        errno,
        intact: true,
    }
}

/// Node `to`, if it can take `len` more bytes and keep [`HEADROOM`].
fn target_with_room(to: usize, len: usize) -> Result<Node, Error> {
    let nodes = Nodes::detect();
    let node = super::target(&nodes, to)?.clone();
    if node.mem_total > 0 && node.mem_free < len as u64 + HEADROOM {
        return Err(Error::NotEnoughMemory {
            node: to,
            need: len as u64 + HEADROOM,
            free: node.mem_free,
        });
    }
    Ok(node)
}

/// The mappings covering `[a, a + len)`, if they are all private,
/// anonymous and readable: only such memory can be copied and replaced
/// without changing what anyone else sees.
fn movable_mappings(a: usize, len: usize) -> Result<Vec<Vma>, Error> {
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
    Ok(vmas)
}

/// The new region for the caller's range at `a` (mappings `vmas`): bound
/// to node `to`, with every flag the old mappings had, its pages allocated
/// and locked where the old ones were. Everything that can be refused is
/// refused here, while the caller's memory is untouched; on an error the
/// region is unmapped as it drops.
fn prepare_region(
    len: usize,
    huge: bool,
    to: usize,
    a: usize,
    vmas: &[Vma],
) -> Result<Mapping, Error> {
    let fresh =
        map_fresh(len, huge, a, vmas).map_err(|e| failed("mapping the new region", errno(&e)))?;
    let mask = mask_of(to).map_err(|e| failed("building the node mask", errno(&e)))?;
    // SAFETY: `fresh` is our own, untouched mapping.
    unsafe { sys::mbind(fresh.as_mut_ptr(), len, libc::MPOL_BIND, &mask, 0) }
        .map_err(|e| failed("binding the new region to the node (mbind)", errno(&e)))?;
    if huge {
        // Best effort: THP may be disabled ("never"); the copy still works.
        let _ = fresh.advise_huge_pages(true);
    }
    // The old mappings' flags, each on its part of the new region.
    advise_like(&fresh, a, vmas, huge).map_err(|(flag, e)| {
        failed(
            &format!(
                "giving the new region the old one's `{flag}` ({})",
                flag_meaning(flag)
            ),
            errno(&e),
        )
    })?;
    compare_flags(&fresh, a, len, vmas)?;
    // Allocate the new pages (on the node, by the binding) in one call
    // rather than one fault per page under the copy's streaming stores.
    // Best effort: MADV_POPULATE_WRITE needs Linux 5.14; without it the
    // copy faults the pages in.
    let _ = fresh.populate();
    lock_like(&fresh, a, vmas).map_err(|(flag, e)| {
        failed(
            &format!(
                "locking the new region like the old one (`{flag}`, {}; the range is locked twice over during the move: RLIMIT_MEMLOCK must allow that without CAP_IPC_LOCK)",
                flag_meaning(flag)
            ),
            errno(&e),
        )
    })?;
    Ok(fresh)
}

/// An engine whose threads run on `node`'s CPUs (on every online CPU for a
/// memory-only node), so the new pages are written from the node they
/// live on; streaming, since the old pages are never read again.
fn engine_on(node: &Node, threads: Option<usize>) -> Result<Engine, Error> {
    let cpus = if node.cpus.is_empty() {
        crate::machine::cpu::info().topology.online_cpus.clone()
    } else {
        node.cpus.clone()
    };
    let threads = threads.unwrap_or(2).clamp(1, cpus.len().max(1));
    Engine::builder()
        .cpus(&cpus)
        .threads(threads)
        .hint(Hint::Stream)
        .inline_max(0)
        .build()
        .map_err(|_| failed("starting the copy threads", libc::EAGAIN))
}

/// Copies the caller's range into `fresh` with the range read-only, so a
/// stray write faults instead of landing in pages about to be dropped.
/// Returns the strategy used; on any failure the old protection is back.
fn copy_write_protected(
    engine: &Engine,
    fresh: &Mapping,
    addr: *mut u8,
    len: usize,
    vmas: &[Vma],
    opts: &CopyOptions<'_>,
) -> Result<Strategy, Error> {
    // Keep writers out: read-only (and whatever else each mapping allowed).
    if let Err((v, e)) = protect(vmas, |v| v.prot & !libc::PROT_WRITE) {
        let _ = protect(vmas, |v| v.prot);
        return Err(failed(
            &format!("write-protecting {:#x}-{:#x}", v.start, v.end),
            errno(&e),
        ));
    }
    let ctl = Control {
        cancel: opts.cancel,
        progress: opts.progress,
    };
    let extent = [Extent {
        dst: fresh.as_mut_ptr(),
        src: addr,
        len,
    }];
    // SAFETY: the source is the caller's readable range (checked by
    // `movable_mappings`) and now read-only; the destination is our fresh
    // mapping; they are distinct mappings.
    let copied = unsafe { engine.copy_extents(&extent, ctl) };
    match copied {
        Ok(r) if r.is_complete() => Ok(r.strategy),
        Ok(_) => {
            let _ = protect(vmas, |v| v.prot);
            Err(failed("copying (cancelled)", libc::ECANCELED))
        }
        Err(e) => {
            let _ = protect(vmas, |v| v.prot);
            Err(failed(&format!("copying ({e})"), libc::EIO))
        }
    }
}

/// Moves `fresh` over the caller's range at `addr` and gives the range its
/// old protection back. Until the `mremap` succeeds nothing the caller sees
/// has changed but the protection, which a failure restores.
///
/// # Safety
/// `addr` and `len` are the caller's range that [`migrate_by_copy`] was
/// given, and `fresh` holds a complete copy of it.
unsafe fn replace(fresh: Mapping, addr: *mut u8, len: usize, vmas: &[Vma]) -> Result<(), Error> {
    // SAFETY: moves our fresh mapping over the caller's range, which the
    // kernel unmaps in the same call: no instant without a mapping there.
    let moved = unsafe {
        libc::mremap(
            fresh.as_mut_ptr().cast(),
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            addr.cast::<libc::c_void>(),
        )
    };
    if moved == libc::MAP_FAILED {
        let e = io::Error::last_os_error();
        let _ = protect(vmas, |v| v.prot);
        return Err(failed("replacing the old pages (mremap)", errno(&e)));
    }
    // The pages now live at `addr`, the caller's: nothing is left to unmap.
    let _ = fresh.into_raw();
    if let Err((v, e)) = protect(vmas, |v| v.prot) {
        return Err(Error::MigrationFailed {
            stage: format!(
                "restoring the protection of {:#x}-{:#x} after the move (the data moved and is intact, the range is read-only)",
                v.start, v.end
            ),
            errno: errno(&e),
            intact: true,
        });
    }
    Ok(())
}

/// A fresh private anonymous mapping of `len` bytes standing for the
/// caller's range at `addr` (whose mappings are `vmas`), 2 MiB-aligned when
/// `huge` (so its pages can be PMD-mapped and moved as such):
/// MAP_NORESERVE exactly where the old mapping was (`nr`).
fn map_fresh(len: usize, huge: bool, addr: usize, vmas: &[Vma]) -> io::Result<Mapping> {
    // Reserve the addresses first (inaccessible, so nothing is committed);
    // each old mapping's part is then mapped over it with its own flags.
    let mut fresh = Mapping::options()
        .inaccessible(true)
        .noreserve(true)
        .align(if huge { HUGE } else { 0 })
        .map(len)?;
    for v in vmas {
        fresh.map_fresh(v.start - addr, v.end - v.start, v.has("nr"))?;
    }
    Ok(fresh)
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
