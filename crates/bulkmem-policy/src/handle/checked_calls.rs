//! The calls of the checked twins: a handle's `copy` and `clear`, run
//! exactly (`exact`).

use super::exact::{clear_exact, copy_exact};
use super::fault::Fault;
use super::{CheckedClearKernel, CheckedCopyKernel, CheckedKernel};

impl CheckedCopyKernel {
    /// Copies `src` into `dst`, stopping at the first byte that cannot be
    /// read or written: as `bulkmem::fault::copy_checked` with this
    /// routine.
    ///
    /// # Panics
    /// If the lengths differ.
    #[inline]
    pub fn copy(&self, dst: &mut [u8], src: &[u8]) -> Result<(), Fault> {
        assert_eq!(
            dst.len(),
            src.len(),
            "bulkmem::CheckedCopyKernel::copy: lengths differ"
        );
        // SAFETY: two valid, disjoint slices of one length.
        unsafe { self.copy_raw(dst.as_mut_ptr(), src.as_ptr(), dst.len()) }
    }

    /// [`CheckedCopyKernel::copy`] on raw pointers, for memory no slice
    /// may describe: pages that may be unmapped, protected, poisoned or
    /// past the end of their file. Streaming stores are fenced before it
    /// returns. Nothing on its path holds a value to drop or catches an
    /// unwind, so an unwind that starts in the routine (an exception
    /// thrown by a signal handler, a thread's cancellation) passes through
    /// without running code of bulkmem's.
    ///
    /// # Safety
    /// `[src, src + len)` and `[dst, dst + len)` do not overlap, and every
    /// byte of them is readable (writable) or faults with SIGBUS or
    /// SIGSEGV; bulkmem's handler must be in front for those signals (it
    /// is installed here if it is not; see `bulkmem::fault::install` and
    /// `bulkmem::fault::chain_to`).
    #[inline]
    pub unsafe fn copy_raw(&self, dst: *mut u8, src: *const u8, len: usize) -> Result<(), Fault> {
        // SAFETY: forwarded contract; the handle runs on this CPU.
        unsafe { copy_exact(*self, dst, src, len) }
    }
}

impl CheckedClearKernel {
    /// Zeroes `dst`, stopping at the first byte that cannot be written.
    #[inline]
    pub fn clear(&self, dst: &mut [u8]) -> Result<(), Fault> {
        // SAFETY: a valid writable slice.
        unsafe { self.clear_raw(dst.as_mut_ptr(), dst.len()) }
    }

    /// [`CheckedClearKernel::clear`] on a raw pointer.
    ///
    /// # Safety
    /// As [`CheckedCopyKernel::copy_raw`] for `[dst, dst + len)`.
    #[inline]
    pub unsafe fn clear_raw(&self, dst: *mut u8, len: usize) -> Result<(), Fault> {
        // SAFETY: forwarded contract; the handle runs on this CPU.
        unsafe { clear_exact(*self, dst, len) }
    }
}

/// The calls the operation-erased twin had before the typed ones.
impl CheckedKernel {
    /// [`CheckedCopyKernel::copy`].
    ///
    /// # Panics
    /// If the lengths differ, or if this is a clear routine.
    #[deprecated(
        note = "match on `CheckedKernel::Copy`, or make a `CheckedCopyKernel`: a clear cannot copy"
    )]
    #[inline]
    pub fn copy(&self, dst: &mut [u8], src: &[u8]) -> Result<(), Fault> {
        self.copy_kernel().copy(dst, src)
    }

    /// [`CheckedClearKernel::clear`].
    ///
    /// # Panics
    /// If this is a copy routine.
    #[deprecated(
        note = "match on `CheckedKernel::Clear`, or make a `CheckedClearKernel`: a copy cannot clear"
    )]
    #[inline]
    pub fn clear(&self, dst: &mut [u8]) -> Result<(), Fault> {
        self.clear_kernel().clear(dst)
    }

    /// [`CheckedCopyKernel::copy_raw`].
    ///
    /// # Safety
    /// As [`CheckedCopyKernel::copy_raw`].
    ///
    /// # Panics
    /// If this is a clear routine.
    #[deprecated(
        note = "match on `CheckedKernel::Copy`, or make a `CheckedCopyKernel`: a clear cannot copy"
    )]
    #[inline]
    pub unsafe fn copy_raw(&self, dst: *mut u8, src: *const u8, len: usize) -> Result<(), Fault> {
        // SAFETY: forwarded contract.
        unsafe { self.copy_kernel().copy_raw(dst, src, len) }
    }

    /// [`CheckedClearKernel::clear_raw`].
    ///
    /// # Safety
    /// As [`CheckedClearKernel::clear_raw`].
    ///
    /// # Panics
    /// If this is a copy routine.
    #[deprecated(
        note = "match on `CheckedKernel::Clear`, or make a `CheckedClearKernel`: a copy cannot clear"
    )]
    #[inline]
    pub unsafe fn clear_raw(&self, dst: *mut u8, len: usize) -> Result<(), Fault> {
        // SAFETY: forwarded contract.
        unsafe { self.clear_kernel().clear_raw(dst, len) }
    }
}
