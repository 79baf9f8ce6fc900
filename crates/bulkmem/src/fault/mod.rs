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
pub(crate) mod log;
mod outcome;

pub use batch::{clear_batch_checked, copy_batch_checked};

use crate::auto::{self, Request};
use crate::descriptor;
use crate::error::Error;
use crate::handle::{CheckedClearKernel, CheckedCopyKernel};
// The exact runs of a checked twin live with the handles; the calls and
// batches here and the engine's workers (`log`) run them too. The calls
// run them straight from the direct table's routine, not through
// `auto::direct::copy_checked_if_direct`: its `Option<Result<(), Fault>>`,
// built with a byte store and copied out with wide loads, stalled store
// forwarding on every call (a 64 B checked copy at a quarter speed).
pub(crate) use crate::handle::exact::{clear_exact, clear_installed, copy_exact, copy_installed};
use crate::strategy::{Hint, Op, Strategy};

pub use crate::checked::mc::handler::is_installed;
pub use crate::handle::{Fault, Side};
/// The signals a faulting instruction raises (SIGSEGV, SIGBUS, SIGFPE,
/// SIGILL, SIGTRAP, SIGSYS). A thread that blocks one of them dies on the
/// fault instead of reaching a handler, so a checked call cannot survive
/// it. The library's own threads block every other signal and none of
/// these; a caller's worker threads that keep the program's signals away
/// should leave the same ones out.
pub use crate::threads::SYNCHRONOUS as SYNCHRONOUS_SIGNALS;
pub use outcome::{CheckedReport, Outcome};

use crate::checked::mc::handler;

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
/// (`auto` and `libc` run the checked twin of the kernel they stand for;
/// [`copy_checked_with`] refuses the rest). A `const fn`, so a list can be
/// named in a constant.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::CheckedKernel;

    /// The checked twin that runs for `strategy` on `req`: its own if it
    /// has one (and the CPU runs it), else for `Auto` the twin of the
    /// kernel `auto` runs for `req` (for `libc`, the twin of what glibc
    /// runs at that length).
    fn checked_kernel(strategy: Strategy, req: &Request) -> Result<CheckedKernel, Error> {
        Ok(match req.op {
            Op::Copy => CheckedKernel::Copy(auto::kernel(strategy, req)?),
            Op::Clear => CheckedKernel::Clear(auto::kernel(strategy, req)?),
        })
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
                    let pick = crate::auto::resolve(
                        crate::strategy::Options::hint(hint),
                        &Request::single(op, len, hint),
                    )
                    .unwrap();
                    let want = match pick {
                        Strategy::Libc => bulkmem_policy::auto::Machine::this().libc_twin(op, len),
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
