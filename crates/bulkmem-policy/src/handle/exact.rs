//! A checked twin run exactly: after a fault, the byte-wise routine from
//! where the twin stopped up to the faulting granule, so the reported
//! offset is the first byte not done. Every checked call (single, batch,
//! the engine's workers, the C interface's) ends here.

use core::mem::MaybeUninit;

use super::checked::{ClearRoutine, CopyRoutine};
use super::fault::{Fault, Side};
use crate::checked::mc::extable::RawFault;
use crate::checked::mc::{clear_mc, copy_mc, handler};

/// Runs `k` and, after a fault, the byte-wise routine from where `k`
/// stopped up to the faulting granule, so the offset is exact. A fault that
/// does not repeat (the file grew back, the page was replaced) is copied
/// through and the fast routine resumes after it.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes unless they fault
/// (SIGBUS or SIGSEGV), not overlapping; the CPU runs `k`.
#[inline]
pub unsafe fn copy_exact(
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
pub unsafe fn copy_installed(
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
pub unsafe fn clear_exact(k: impl ClearRoutine, dst: *mut u8, len: usize) -> Result<(), Fault> {
    handler::ensure();
    // SAFETY: the handler is installed; forwarded contract.
    unsafe { clear_installed(k, dst, len) }
}

/// [`clear_exact`] once the handler is known to be installed.
///
/// # Safety
/// As [`clear_exact`], and [`handler::ensure`] has run in this process.
#[inline]
pub unsafe fn clear_installed(k: impl ClearRoutine, dst: *mut u8, len: usize) -> Result<(), Fault> {
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
}
