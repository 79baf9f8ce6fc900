//! Copies that survive a bad page (the kernel's batched folio-copy patches' `folio_mc_copy`): a fault
//! while reading the source or writing the destination ends the copy and
//! is reported as a [`Fault`] instead of killing the process.
//!
//! SIGBUS comes from a hardware-poisoned page (`BUS_MCEERR_AR`), a file
//! mapping truncated under the reader or a MAP_SHARED destination past the
//! end of its file (`BUS_ADRERR`), a userfaultfd-poisoned page
//! (`UFFDIO_POISON`: `BUS_ADRERR` on Linux 6.18, whatever the poisoned
//! page's origin), or a failed DAX read. SIGSEGV from an unmapped page
//! (`SEGV_MAPERR`) or one the access is not allowed on (`PROT_NONE`, a
//! read-only destination: `SEGV_ACCERR`).
//!
//! ```no_run
//! # let (mut dst, src) = (vec![0u8; 4096], vec![0u8; 4096]);
//! match bulkmem::fault::copy_checked(&mut dst, &src) {
//!     Ok(()) => {}
//!     Err(f) => eprintln!("{f}; bytes 0..{} are copied", f.offset),
//! }
//! ```
//!
//! # How
//! As the kernel does it, not with `longjmp` across Rust frames: every
//! kernel `auto` can choose has a checked twin in assembly (`crate::checked::mc`)
//! with the same instructions and loop shape, every instruction of it
//! that touches the caller's memory is listed in an exception table, and
//! a signal handler that finds the faulting instruction pointer in a table
//! rewrites the interrupted context to resume at the routine's fixup,
//! which returns the number of bytes left. The fast routines report
//! progress to the step (a vector group, or for the interleaved
//! non-temporal copies the step of the first of their four page streams);
//! a byte-wise routine then finishes up to the fault, so the reported
//! offset is exact and the side (source or destination) is known from
//! which instruction faulted. Until a page is bad a checked call costs
//! what the unchecked one does: the same kernel shape, and one length-band
//! lookup for the twin as for the kernel.
//!
//! # The handler
//! Installed once, lazily, on the first checked call (or by [`install`]),
//! for SIGBUS and SIGSEGV, with `SA_SIGINFO | SA_ONSTACK`. Every signal
//! that is not a fault inside a checked routine goes to the disposition
//! the signal had before: the previous handler (called under its own
//! mask), or the default action (the process dies, as it would have
//! without bulkmem). Rust's runtime installs its own SIGSEGV and SIGBUS
//! handlers at start-up for stack-overflow reports; they are chained like
//! any other.
//!
//! * An application that installs its own handler *after* bulkmem's takes
//!   checked faults away from it: those faults then reach the
//!   application's handler, which usually aborts. Call [`reinstall`] after
//!   installing yours: bulkmem goes back in front and chains to yours.
//!   [`is_installed`] tells whether both signals are still bulkmem's.
//! * `SA_ONSTACK`: the handler runs on the thread's alternate signal stack
//!   when it has one (`sigaltstack`), else on the faulting thread's stack.
//!   It needs under a hundred bytes of stack either way.
//! * A thread that blocks SIGBUS or SIGSEGV cannot survive a fault: the
//!   kernel unblocks it and applies the default action. Checked copies
//!   must run with both unblocked (the default).
//!
//! # What is guaranteed after a fault
//! Bytes `0..offset` of the destination hold the copy (or zeros); the byte
//! at `offset` is the first one not copied. Bytes after it are either
//! untouched or already hold their copy: the interleaved non-temporal
//! copies write up to three pages past the page that faulted, and engine
//! batches may complete pieces of an extent longer than a chunk (see
//! [`Outcome`]); nothing else is ever written there.

mod batch;
mod calls;
pub(crate) mod log;
mod outcome;

pub use batch::{clear_batch_checked, copy_batch_checked};
pub use calls::{clear_checked_if_direct, copy_checked_if_direct};

use core::mem::MaybeUninit;

use crate::auto::{self, Request};
use crate::descriptor;
use crate::error::Error;
use crate::handle::{
    CheckedClearKernel, CheckedCopyKernel, CheckedKernel, ClearRoutine, CopyRoutine,
};
use crate::strategy::{Hint, Op, Strategy};

pub use crate::checked::mc::handler::is_installed;
pub use crate::error::{Fault, Side};
/// The signals a faulting instruction raises (SIGSEGV, SIGBUS, SIGFPE,
/// SIGILL, SIGTRAP, SIGSYS). A thread that blocks one of them dies on the
/// fault instead of reaching a handler, so a checked call cannot survive
/// it. The library's own threads block every other signal and none of
/// these; a caller's worker threads that keep the program's signals away
/// should leave the same ones out.
pub use crate::threads::SYNCHRONOUS as SYNCHRONOUS_SIGNALS;
pub use outcome::{CheckedReport, Outcome};

use crate::checked::mc::extable::RawFault;
use crate::checked::mc::{clear_mc, copy_mc, handler};

/// Installs bulkmem's SIGBUS handler now instead of on the first checked
/// call (useful before an application installs its own, so that its
/// handler is the one chained to). Idempotent and thread-safe.
pub fn install() {
    handler::ensure();
}

/// For a host that keeps SIGSEGV's and SIGBUS's dispositions itself (an
/// `LD_PRELOAD` interposer that must leave the kernel's actions as the
/// program set them): from now on bulkmem never installs a handler, and
/// the host's own handler calls [`resume`] first for every SIGSEGV and
/// SIGBUS. A checked call that faults while the host has no handler in
/// front dies of its fault, as an unchecked copy would. [`reinstall`] and
/// [`chain_to`] then do nothing (`chain_to` refuses), and [`is_installed`]
/// answers true. For good: there is no way back.
pub fn host() {
    handler::host();
}

/// For a host's SIGSEGV or SIGBUS handler (see [`host`]): whether the
/// signal is a fault in one of bulkmem's checked routines, in which case
/// the interrupted context `ctx` now resumes at the routine's fixup and
/// the handler must return at once, or a concurrent compaction session's
/// page that has now been produced ([`crate::compact`]), in which case
/// the handler returns at once and the access is retried. False for anything else (a sent
/// signal, a fault elsewhere), which is the host's to deal with.
/// Async-signal-safe: it reads static tables and writes `ctx` only.
///
/// # Safety
/// `info` and `ctx` are the kernel's arguments for a handler of `signal`
/// (installed with `SA_SIGINFO`, or on x86_64 any handler), or null.
pub unsafe fn resume(signal: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) -> bool {
    // SAFETY: forwarded contract.
    unsafe { handler::resume(signal, info, ctx) }
}

/// Puts bulkmem's handler back in front of whatever handler the
/// application installed since for SIGBUS or SIGSEGV, chaining to that one
/// from now on. Returns whether anything changed. Not meant to race with
/// other threads changing those signals (it serialises with bulkmem's own
/// installs only).
pub fn reinstall() -> bool {
    handler::reinstall()
}

/// Makes `action` the disposition bulkmem's handler passes `signal`
/// (SIGBUS or SIGSEGV) on to for every fault that is not its own, without
/// ever taking its handler out of the kernel's hands (installing it first
/// if it is not there). For a program, a runtime or an interposer that
/// owns the signal's handling and wants checked copies to keep working
/// meanwhile: what `sigaction` would have installed goes behind bulkmem's,
/// and no fault in a checked routine can reach it in between. The
/// action's `sa_mask` is applied around its handler, `SA_NODEFER` lets the
/// signal nest in it, `SA_RESETHAND` makes it the default after one
/// delivery, as the kernel would. Refused ([`Error::NotChainable`]) for any other
/// signal.
pub fn chain_to(signal: i32, action: &libc::sigaction) -> Result<(), Error> {
    if handler::chain_to(signal, action) {
        Ok(())
    } else {
        Err(Error::NotChainable { signal })
    }
}

/// The strategies that have a checked routine of their own for `op`
/// (the others run a stand-in: [`checked_kernel`]). A `const fn`, so a
/// list can be named in a constant.
pub const fn checked_strategies(op: Op) -> &'static [Strategy] {
    match op {
        Op::Copy => &descriptor::CHECKED_COPY,
        Op::Clear => &descriptor::CHECKED_CLEAR,
    }
}

/// Copies `src` into `dst`, stopping at the first byte that cannot be read
/// or written. Runs the checked twin of what `auto` picks for this length.
///
/// ```
/// let src = vec![5u8; 1 << 20];
/// let mut dst = vec![0u8; 1 << 20];
/// match bulkmem::fault::copy_checked(&mut dst, &src) {
///     Ok(()) => assert_eq!(dst, src),
///     // Only a fault (a poisoned page, a file mapping truncated under
///     // the reader, an unmapped page) ends up here; the copy stopped at
///     // `f.offset`.
///     Err(f) => eprintln!("{f}; bytes 0..{} are copied", f.offset),
/// }
/// ```
///
/// # Panics
/// If the lengths differ, like `copy_from_slice`.
#[inline]
pub fn copy_checked(dst: &mut [u8], src: &[u8]) -> Result<(), Fault> {
    assert_eq!(
        dst.len(),
        src.len(),
        "bulkmem::fault::copy_checked: lengths differ"
    );
    if let Some(r) = auto::direct::checked_copy(dst.len()) {
        // SAFETY: two valid, disjoint slices of one length; the routine
        // is a checked twin's (its table's contract).
        return unsafe { copy_exact(r, dst.as_mut_ptr(), src.as_ptr(), dst.len()) };
    }
    copy_checked_banded(dst, src)
}

// Out of line, as `copy`'s slow path (see `calls.rs`).
#[inline(never)]
fn copy_checked_banded(dst: &mut [u8], src: &[u8]) -> Result<(), Fault> {
    let req = Request::single(Op::Copy, dst.len(), Hint::Auto);
    auto::chosen::<CheckedCopyKernel>(&req).copy(dst, src)
}

/// Zeroes `dst`, stopping at the first byte that cannot be written.
#[inline]
pub fn clear_checked(dst: &mut [u8]) -> Result<(), Fault> {
    if let Some(r) = auto::direct::checked_clear(dst.len()) {
        // SAFETY: a valid writable slice; the routine is a checked
        // twin's.
        return unsafe { clear_exact(r, dst.as_mut_ptr(), dst.len()) };
    }
    clear_checked_banded(dst)
}

#[inline(never)]
fn clear_checked_banded(dst: &mut [u8]) -> Result<(), Fault> {
    let req = Request::single(Op::Clear, dst.len(), Hint::Auto);
    auto::chosen::<CheckedClearKernel>(&req).clear(dst)
}

/// As [`copy_checked`] with a named strategy (`Auto` or one of
/// [`checked_strategies`]); a fault is returned as [`Error::Fault`].
pub fn copy_checked_with(strategy: Strategy, dst: &mut [u8], src: &[u8]) -> Result<(), Error> {
    if dst.len() != src.len() {
        return Err(Error::LengthMismatch {
            index: None,
            dst: dst.len(),
            src: src.len(),
        });
    }
    let req = Request::single(Op::Copy, dst.len(), Hint::Auto);
    let k = auto::kernel::<CheckedCopyKernel>(strategy, &req)?;
    k.copy(dst, src).map_err(Error::Fault)
}

/// As [`clear_checked`] with a named strategy (`Auto` or one of
/// [`checked_strategies`]).
pub fn clear_checked_with(strategy: Strategy, dst: &mut [u8]) -> Result<(), Error> {
    let req = Request::single(Op::Clear, dst.len(), Hint::Auto);
    let k = auto::kernel::<CheckedClearKernel>(strategy, &req)?;
    k.clear(dst).map_err(Error::Fault)
}

/// The checked twin that runs for `strategy` on `req`: its own if it has
/// one (and the CPU runs it), else for `Auto` the twin of the kernel `auto`
/// runs for `req` (for `libc`, the twin of what glibc runs at that length).
pub fn checked_kernel(strategy: Strategy, req: &Request) -> Result<CheckedKernel, Error> {
    Ok(match req.op {
        Op::Copy => CheckedKernel::Copy(auto::kernel(strategy, req)?),
        Op::Clear => CheckedKernel::Clear(auto::kernel(strategy, req)?),
    })
}

/// The checked twin `auto` runs for `req`: [`checked_kernel`]`(Strategy::Auto,
/// req)`, which cannot fail, as a value. For a single call a length-band
/// lookup, as [`copy_checked`] makes; for a call several threads share,
/// each writing its part, ask with `Request::batch(op, len, threads, hint)`,
/// as the engine decides an extent its workers split. Infallible and free of anything
/// to drop, for callers that must not unwind through code of their own
/// (an `LD_PRELOAD` shim).
#[inline]
pub fn auto_twin(req: &Request) -> CheckedKernel {
    match req.op {
        Op::Copy => CheckedKernel::Copy(auto::chosen(req)),
        Op::Clear => CheckedKernel::Clear(auto::chosen(req)),
    }
}

/// Runs `k` and, after a fault, the byte-wise routine from where `k`
/// stopped up to the faulting granule, so the offset is exact. A fault that
/// does not repeat (the file grew back, the page was replaced) is copied
/// through and the fast routine resumes after it.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes unless they fault
/// (SIGBUS or SIGSEGV), not overlapping; the CPU runs `k`.
#[inline]
pub(crate) unsafe fn copy_exact(
    k: impl CopyRoutine,
    dst: *mut u8,
    src: *const u8,
    len: usize,
) -> Result<(), Fault> {
    handler::ensure();
    // SAFETY: the handler is installed; forwarded contract.
    unsafe { copy_installed(k, dst, src, len) }
}

/// [`copy_exact`] once the handler is known to be installed: batches
/// install it once rather than ask per extent (a batch of 4 KiB extents
/// pays every instruction per extent 65536 times per 256 MiB).
///
/// # Safety
/// As [`copy_exact`], and [`handler::ensure`] has run in this process.
#[inline]
pub(crate) unsafe fn copy_installed(
    k: impl CopyRoutine,
    dst: *mut u8,
    src: *const u8,
    len: usize,
) -> Result<(), Fault> {
    // Written by the routine only when it faults: not initialised for the
    // common case.
    let mut raw = MaybeUninit::<RawFault>::uninit();
    // SAFETY: the caller's contract.
    let left = unsafe { k.run(dst, src, len, raw.as_mut_ptr()) };
    if left == 0 {
        return Ok(());
    }
    // SAFETY: every fixup writes all three fields before it returns a
    // non-zero count; forwarded contract for the rest.
    unsafe { copy_settle(k, dst, src, len, len - left, raw.assume_init()) }
}

/// [`copy_exact`] after its routine stopped at `at` with `raw`.
///
/// # Safety
/// As [`copy_exact`], and `at < len`.
#[cold]
#[inline(never)]
unsafe fn copy_settle(
    k: impl CopyRoutine,
    dst: *mut u8,
    src: *const u8,
    len: usize,
    mut at: usize,
    mut raw: RawFault,
) -> Result<(), Fault> {
    let ranges = [(src as usize, len), (dst as usize, len)];
    loop {
        debug_assert!(
            touches(&raw, &ranges),
            "bulkmem: a checked copy faulted outside its ranges: {raw:?}"
        );
        let limit = settle_limit(&raw, at, len, &ranges);
        let mut exact = RawFault::default();
        // SAFETY: [at, limit) is within both ranges (at < limit <= len).
        let rest = unsafe {
            copy_mc::bulkmem_mc_copy_bytes(dst.add(at), src.add(at), limit - at, &mut exact)
        };
        if rest != 0 {
            let side = if exact.side == 1 {
                Side::Source
            } else {
                Side::Destination
            };
            return Err(fault(&exact, side, limit - rest));
        }
        if limit == len {
            return Ok(());
        }
        raw = RawFault::default();
        // SAFETY: [limit, len) is within both ranges; the caller's contract.
        let left = unsafe { k.run(dst.add(limit), src.add(limit), len - limit, &mut raw) };
        if left == 0 {
            return Ok(());
        }
        at = len - left;
    }
}

/// As [`copy_exact`] for zeroing.
///
/// # Safety
/// `dst` writable for `len` bytes unless it faults (SIGBUS or SIGSEGV);
/// the CPU runs `k`.
#[inline]
pub(crate) unsafe fn clear_exact(
    k: impl ClearRoutine,
    dst: *mut u8,
    len: usize,
) -> Result<(), Fault> {
    handler::ensure();
    // SAFETY: the handler is installed; forwarded contract.
    unsafe { clear_installed(k, dst, len) }
}

/// [`clear_exact`] once the handler is known to be installed.
///
/// # Safety
/// As [`clear_exact`], and [`handler::ensure`] has run in this process.
#[inline]
pub(crate) unsafe fn clear_installed(
    k: impl ClearRoutine,
    dst: *mut u8,
    len: usize,
) -> Result<(), Fault> {
    let mut raw = MaybeUninit::<RawFault>::uninit();
    // SAFETY: the caller's contract.
    let left = unsafe { k.run(dst, len, raw.as_mut_ptr()) };
    if left == 0 {
        return Ok(());
    }
    // SAFETY: as in `copy_installed`.
    unsafe { clear_settle(k, dst, len, len - left, raw.assume_init()) }
}

/// [`clear_exact`] after its routine stopped at `at` with `raw`.
///
/// # Safety
/// As [`clear_exact`], and `at < len`.
#[cold]
#[inline(never)]
unsafe fn clear_settle(
    k: impl ClearRoutine,
    dst: *mut u8,
    len: usize,
    mut at: usize,
    mut raw: RawFault,
) -> Result<(), Fault> {
    let ranges = [(dst as usize, len)];
    loop {
        debug_assert!(
            touches(&raw, &ranges),
            "bulkmem: a checked clear faulted outside its range: {raw:?}"
        );
        let limit = settle_limit(&raw, at, len, &ranges);
        let mut exact = RawFault::default();
        // SAFETY: [at, limit) is within the range.
        let rest = unsafe { clear_mc::bulkmem_mc_clear_bytes(dst.add(at), limit - at, &mut exact) };
        if rest != 0 {
            return Err(fault(&exact, Side::Destination, limit - rest));
        }
        if limit == len {
            return Ok(());
        }
        raw = RawFault::default();
        // SAFETY: [limit, len) is within the range; the caller's contract.
        let left = unsafe { k.run(dst.add(limit), len - limit, &mut raw) };
        if left == 0 {
            return Ok(());
        }
        at = len - left;
    }
}

/// How far the byte-wise pass must go from `at` to reach the fault the
/// fast routine reported: to the end of the faulting granule in whichever
/// range holds it (`si_addr` may be rounded down to the granule, before the
/// range's start). At least one byte, at most `len`.
fn settle_limit(raw: &RawFault, at: usize, len: usize, ranges: &[(usize, usize)]) -> usize {
    let lsb = u32::from(raw.addr_lsb()).min(30);
    let granule = 1usize << lsb;
    let first = raw.addr & !(granule - 1);
    let last = first.saturating_add(granule);
    let mut limit = None;
    for &(base, n) in ranges {
        if first < base + n && base < last {
            let end = (last - base).min(n);
            limit = Some(limit.map_or(end, |l: usize| l.max(end)));
        }
    }
    // An address in neither range (should not happen) or behind `at`:
    // settle one page at a time.
    let limit = match limit {
        Some(l) if l > at => l,
        _ => at + 4096,
    };
    limit.min(len)
}

/// Whether the fault `raw` reported lies in one of `ranges` (its granule
/// overlaps one), as every fault of a correct routine does: one outside
/// them is a routine that overran its range (with guard pages around the
/// range, a test sees it here instead of the settle pass hiding it). A
/// general protection fault (`SI_KERNEL`: a non-canonical address) has no
/// address to check.
fn touches(raw: &RawFault, ranges: &[(usize, usize)]) -> bool {
    const SI_KERNEL: i32 = 0x80;
    let granule = 1usize << u32::from(raw.addr_lsb()).min(30);
    let first = raw.addr & !(granule - 1);
    let last = first.saturating_add(granule);
    raw.code() == SI_KERNEL
        || ranges
            .iter()
            .any(|&(base, n)| first < base.saturating_add(n) && base < last)
}

fn fault(raw: &RawFault, side: Side, offset: usize) -> Fault {
    Fault {
        side,
        offset,
        addr: raw.addr,
        signal: raw.signal(),
        code: raw.code(),
        addr_lsb: raw.addr_lsb(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(addr: usize, lsb: u8) -> RawFault {
        RawFault {
            addr,
            code_lsb: RawFault::pack(libc::SIGBUS, 4, lsb.into()),
            side: 0,
        }
    }

    #[test]
    fn settle_limit_reaches_the_end_of_the_granule() {
        // Source at 0x10100 (mid-page), page 0x11000 poisoned, granule 4K:
        // settle up to 0x12000, i.e. offset 0x1f00.
        let r = raw(0x11000, 12);
        assert_eq!(
            settle_limit(&r, 0x0e00, 0x4000, &[(0x10100, 0x4000)]),
            0x1f00
        );
        // si_addr rounded down before the range start still lands in it.
        let r = raw(0x10000, 12);
        assert_eq!(settle_limit(&r, 0, 0x4000, &[(0x10100, 0x4000)]), 0xf00);
        // Exact address (BUS_ADRERR, lsb 0): one byte past it.
        let r = raw(0x10180, 0);
        assert_eq!(settle_limit(&r, 0x40, 0x4000, &[(0x10100, 0x4000)]), 0x81);
        // Clamped to len, and never behind `at`.
        assert_eq!(
            settle_limit(&raw(0x13000, 12), 0, 0x100, &[(0x12f80, 0x100)]),
            0x100
        );
        assert_eq!(
            settle_limit(&raw(0x99000, 12), 0x200, 0x4000, &[(0x10000, 0x4000)]),
            0x1200
        );
    }

    #[test]
    fn auto_runs_the_twin_of_the_kernel_it_picks() {
        for len in [0usize, 64, 4096, 2 << 20, 256 << 20] {
            for hint in [Hint::Auto, Hint::Reuse, Hint::Stream] {
                for op in [Op::Copy, Op::Clear] {
                    let c = checked_kernel(Strategy::Auto, &Request::single(op, len, hint))
                        .unwrap()
                        .strategy();
                    let list = checked_strategies(op);
                    assert!(list.contains(&c), "{op} {len} {hint:?}: {c}");
                    let pick = crate::calls::resolve(
                        crate::strategy::Options::hint(hint),
                        &Request::single(op, len, hint),
                    )
                    .unwrap();
                    let want = match pick {
                        Strategy::Libc => auto::Machine::this().libc_twin(op, len),
                        Strategy::Portable => c,
                        s => s,
                    };
                    assert_eq!(c, want, "{op} {len} {hint:?}: picks {pick}");
                }
            }
        }
        assert!(matches!(
            checked_kernel(Strategy::Clzero, &Request::single(Op::Copy, 64, Hint::Auto)),
            Err(Error::NotChecked { .. })
        ));
    }
}
