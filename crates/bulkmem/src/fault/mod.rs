//! Copies that survive a bad page (seed 000's `folio_mc_copy`): a SIGBUS
//! while reading the source or writing the destination ends the copy and
//! is reported as a [`Fault`] instead of killing the process.
//!
//! A SIGBUS comes from a hardware-poisoned page (`BUS_MCEERR_AR`), a file
//! mapping truncated under the reader or a MAP_SHARED destination past the
//! end of its file (`BUS_ADRERR`), a userfaultfd-poisoned page
//! (`UFFDIO_POISON`: `BUS_ADRERR` on Linux 6.18, whatever the poisoned
//! page's origin), or a failed DAX read.
//!
//! ```no_run
//! # let (mut dst, src) = (vec![0u8; 4096], vec![0u8; 4096]);
//! match bulkmem::copy_checked(&mut dst, &src) {
//!     Ok(()) => {}
//!     Err(f) => eprintln!("{f}; bytes 0..{} are copied", f.offset),
//! }
//! ```
//!
//! # How
//! As the kernel does it, not with `longjmp` across Rust frames: the
//! routines that touch the caller's memory are assembly (`copy_mc.rs`,
//! `clear_mc.rs`), every instruction that may fault is listed in an
//! exception table, and a SIGBUS handler that finds
//! the faulting instruction pointer in a table rewrites the interrupted
//! context to resume at the routine's fixup, which returns the number of
//! bytes left. The fast routines (`rep movsb`, `rep movsq`, AVX2, AVX-512,
//! AVX2 non-temporal) report progress to the iteration; a byte-wise routine then
//! finishes up to the fault, so the reported offset is exact and the side
//! (source or destination) is known from which instruction faulted.
//!
//! # The handler
//! Installed once, lazily, on the first checked call (or by [`install`]),
//! with `SA_SIGINFO | SA_ONSTACK`. Every SIGBUS that is not a fault inside a
//! checked routine goes to the disposition SIGBUS had before: the previous
//! handler (called under its own mask), or the default action (the process
//! dies, as it would have without bulkmem). Rust's runtime installs its own
//! SIGBUS handler at start-up for stack-overflow reports; it is chained like
//! any other.
//!
//! * An application that installs its own SIGBUS handler *after* bulkmem's
//!   takes checked faults away from it: those faults then reach the
//!   application's handler, which usually aborts. Call [`reinstall`] after
//!   installing yours: bulkmem goes back in front and chains to yours.
//!   [`is_installed`] tells whether SIGBUS is still bulkmem's.
//! * `SA_ONSTACK`: the handler runs on the thread's alternate signal stack
//!   when it has one (`sigaltstack`), else on the faulting thread's stack.
//!   It needs under a hundred bytes of stack either way.
//! * A thread that blocks SIGBUS cannot survive a fault: the kernel
//!   unblocks it and applies the default action. Checked copies must run
//!   with SIGBUS unblocked (the default).
//! * Only SIGBUS is caught: an unmapped address (SIGSEGV) is a bug in the
//!   caller and stays fatal.
//!
//! # What is guaranteed after a fault
//! Bytes `0..offset` of the destination hold the copy (or zeros); the byte at
//! `offset` is the first one not copied, and no byte after it has been
//! written. Engine batches are weaker for extents longer than a chunk (see
//! [`Outcome`]).

mod outcome;

use crate::auto::{self, Request};
use crate::descriptor;
use crate::error::Error;
use crate::extent::check_lengths;
use crate::strategy::{Hint, Op, Strategy};

pub use crate::error::{Fault, Side};
pub use crate::mc::handler::is_installed;
pub use outcome::{CheckedReport, Outcome};

use crate::mc::extable::RawFault;
use crate::mc::{clear_mc, copy_mc, handler, McClear, McCopy};

/// Installs bulkmem's SIGBUS handler now instead of on the first checked
/// call (useful before an application installs its own, so that its
/// handler is the one chained to). Idempotent and thread-safe.
pub fn install() {
    handler::ensure();
}

/// Puts bulkmem's SIGBUS handler back in front of whatever handler the
/// application installed since, chaining to that one from now on. Returns
/// whether anything changed. Not meant to race with other threads changing
/// SIGBUS (it serialises with bulkmem's own installs only).
pub fn reinstall() -> bool {
    handler::reinstall()
}

/// The strategies that have a checked copy routine of their own.
pub const CHECKED_COPY: &[Strategy] = &descriptor::CHECKED_COPY;
/// The strategies that have a checked clear routine of their own.
pub const CHECKED_CLEAR: &[Strategy] = &descriptor::CHECKED_CLEAR;

/// Copies `src` into `dst`, stopping at the first byte that cannot be read
/// or written. Uses the checked form of what `auto` would pick.
///
/// ```
/// let src = vec![5u8; 1 << 20];
/// let mut dst = vec![0u8; 1 << 20];
/// match bulkmem::copy_checked(&mut dst, &src) {
///     Ok(()) => assert_eq!(dst, src),
///     // Only a SIGBUS (a poisoned page, a file mapping truncated under
///     // the reader) ends up here; the copy stopped at `f.offset`.
///     Err(f) => eprintln!("{f}; bytes 0..{} are copied", f.offset),
/// }
/// ```
///
/// # Panics
/// If the lengths differ, like `copy_from_slice`.
pub fn copy_checked(dst: &mut [u8], src: &[u8]) -> Result<(), Fault> {
    match copy_checked_with(Strategy::Auto, dst, src) {
        Ok(()) => Ok(()),
        Err(Error::Fault(f)) => Err(f),
        Err(e) => panic!("bulkmem::copy_checked: {e}"),
    }
}

/// Zeroes `dst`, stopping at the first byte that cannot be written.
pub fn clear_checked(dst: &mut [u8]) -> Result<(), Fault> {
    match clear_checked_with(Strategy::Auto, dst) {
        Ok(()) => Ok(()),
        Err(Error::Fault(f)) => Err(f),
        Err(e) => panic!("bulkmem::clear_checked: {e}"),
    }
}

/// As [`copy_checked`] with a named strategy (`Auto` or one of
/// [`CHECKED_COPY`]); a fault is returned as [`Error::Fault`].
pub fn copy_checked_with(strategy: Strategy, dst: &mut [u8], src: &[u8]) -> Result<(), Error> {
    if dst.len() != src.len() {
        return Err(Error::LengthMismatch {
            index: None,
            dst: dst.len(),
            src: src.len(),
        });
    }
    let req = Request::single(Op::Copy, dst.len(), Hint::Auto);
    let k = auto::checked(strategy, &req)?.copy_fn(true);
    // SAFETY: the slices are valid and disjoint (one is borrowed mutably);
    // the routine came from a CheckedKernel, checked against this CPU.
    unsafe { copy_exact(k, dst.as_mut_ptr(), src.as_ptr(), dst.len()) }.map_err(Error::Fault)
}

/// As [`clear_checked`] with a named strategy (`Auto` or one of
/// [`CHECKED_CLEAR`]).
pub fn clear_checked_with(strategy: Strategy, dst: &mut [u8]) -> Result<(), Error> {
    let req = Request::single(Op::Clear, dst.len(), Hint::Auto);
    let k = auto::checked(strategy, &req)?.clear_fn(true);
    // SAFETY: `dst` is a valid writable slice; the routine came from a
    // CheckedKernel, checked against this CPU.
    unsafe { clear_exact(k, dst.as_mut_ptr(), dst.len()) }.map_err(Error::Fault)
}

/// Copies every `(dst, src)` pair on the calling thread, surviving SIGBUS:
/// a fault ends its extent only. One checked routine is chosen for the
/// batch as a whole (as `copy_batch` chooses) and streaming stores are
/// fenced once at the end rather than per extent. Returns each extent's
/// [`Outcome`] (`Done` or `Faulted`), in order;
/// lengths are checked first and nothing is written on a mismatch.
pub fn copy_batch_checked(
    strategy: Strategy,
    ops: &mut [(&mut [u8], &[u8])],
) -> Result<Vec<Outcome>, Error> {
    check_lengths(ops)?;
    let req = Request {
        op: Op::Copy,
        total: ops.iter().map(|(d, _)| d.len()).sum(),
        runs: ops.len(),
        hint: Hint::Auto,
    };
    let k = auto::checked(strategy, &req)?.copy_fn(false);
    let out = ops
        .iter_mut()
        .map(|(d, s)| {
            // SAFETY: each pair is a valid, disjoint (one borrowed mutably)
            // pair of equal lengths; the routine came from a CheckedKernel.
            match unsafe { copy_exact(k, d.as_mut_ptr(), s.as_ptr(), d.len()) } {
                Ok(()) => Outcome::Done,
                Err(f) => Outcome::Faulted(f),
            }
        })
        .collect();
    // The unfenced routines fence only when they fault: once for the rest.
    crate::kernels::drain();
    Ok(out)
}

/// As [`copy_batch_checked`], zeroing.
pub fn clear_batch_checked(
    strategy: Strategy,
    ops: &mut [&mut [u8]],
) -> Result<Vec<Outcome>, Error> {
    let req = Request {
        op: Op::Clear,
        total: ops.iter().map(|d| d.len()).sum(),
        runs: ops.len(),
        hint: Hint::Auto,
    };
    let k = auto::checked(strategy, &req)?.clear_fn(false);
    let out = ops
        .iter_mut()
        .map(|d| {
            // SAFETY: a valid writable slice; the routine came from a
            // CheckedKernel.
            match unsafe { clear_exact(k, d.as_mut_ptr(), d.len()) } {
                Ok(()) => Outcome::Done,
                Err(f) => Outcome::Faulted(f),
            }
        })
        .collect();
    crate::kernels::drain();
    Ok(out)
}

/// The checked strategy that runs for `strategy` on `req`: itself if it
/// has a checked form (and the CPU can run it), else for `Auto` the
/// checked routine closest to what auto would pick (the policy's stand-in;
/// see `crate::auto`).
pub fn checked_form(strategy: Strategy, req: &Request) -> Result<Strategy, Error> {
    auto::checked(strategy, req).map(|k| k.strategy())
}

/// Runs `k` and, after a fault, the byte-wise routine from where `k`
/// stopped up to the faulting granule, so the offset is exact. A fault that
/// does not repeat (the file grew back, the page was replaced) is copied
/// through and the fast routine resumes after it.
///
/// # Safety
/// `src` readable and `dst` writable for `len` bytes unless they fault with
/// SIGBUS, not overlapping; the CPU runs `k`.
pub(crate) unsafe fn copy_exact(
    k: McCopy,
    dst: *mut u8,
    src: *const u8,
    len: usize,
) -> Result<(), Fault> {
    handler::ensure();
    let mut done = 0;
    while done < len {
        let mut raw = RawFault::default();
        // SAFETY: [done, len) is within both ranges; the caller's contract.
        let left = unsafe { k(dst.add(done), src.add(done), len - done, &mut raw) };
        if left == 0 {
            return Ok(());
        }
        let at = len - left;
        let limit = settle_limit(&raw, at, len, &[(src as usize, len), (dst as usize, len)]);
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
        done = limit;
    }
    Ok(())
}

/// As [`copy_exact`] for zeroing.
///
/// # Safety
/// `dst` writable for `len` bytes unless it faults with SIGBUS; the CPU
/// runs `k`.
pub(crate) unsafe fn clear_exact(k: McClear, dst: *mut u8, len: usize) -> Result<(), Fault> {
    handler::ensure();
    let mut done = 0;
    while done < len {
        let mut raw = RawFault::default();
        // SAFETY: [done, len) is within the range; the caller's contract.
        let left = unsafe { k(dst.add(done), len - done, &mut raw) };
        if left == 0 {
            return Ok(());
        }
        let at = len - left;
        let limit = settle_limit(&raw, at, len, &[(dst as usize, len)]);
        let mut exact = RawFault::default();
        // SAFETY: [at, limit) is within the range.
        let rest = unsafe { clear_mc::bulkmem_mc_clear_bytes(dst.add(at), limit - at, &mut exact) };
        if rest != 0 {
            return Err(fault(&exact, Side::Destination, limit - rest));
        }
        done = limit;
    }
    Ok(())
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

fn fault(raw: &RawFault, side: Side, offset: usize) -> Fault {
    Fault {
        side,
        offset,
        addr: raw.addr,
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
            code_lsb: 4 | (u64::from(lsb) << 32),
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
    fn auto_maps_to_a_checked_form_of_the_same_family() {
        for len in [0usize, 64, 4096, 2 << 20, 256 << 20] {
            for hint in [Hint::Auto, Hint::Reuse, Hint::Stream] {
                let req = |op| Request::single(op, len, hint);
                let c = checked_form(Strategy::Auto, &req(Op::Copy)).unwrap();
                assert!(CHECKED_COPY.contains(&c), "{c}");
                let z = checked_form(Strategy::Auto, &req(Op::Clear)).unwrap();
                assert!(CHECKED_CLEAR.contains(&z), "{z}");
                let pick = auto::here(&Request::single(Op::Copy, len, hint)).strategy;
                if pick.is_non_temporal() {
                    assert_eq!(c, Strategy::Avx2Nt, "{len} {hint:?}");
                }
            }
        }
        assert!(matches!(
            checked_form(Strategy::Clzero, &Request::single(Op::Copy, 64, Hint::Auto)),
            Err(Error::NotChecked { .. })
        ));
    }
}
