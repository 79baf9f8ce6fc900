//! Safe handles on one strategy's kernel, gated on the CPU as memchr's
//! `One::new` is, and typed by operation: a [`CopyKernel`] exists only if
//! this CPU can run the strategy's copy, a [`ClearKernel`] only if it can
//! run its clear, so their calls need no `unsafe`, no feature check and no
//! check of the operation. Asking a clear kernel to copy does not compile:
//!
//! ```compile_fail
//! # use bulkmem_machine::strategy::Strategy;
//! # use bulkmem_policy::handle::ClearKernel;
//! let k = ClearKernel::new(Strategy::PerPage).unwrap();
//! k.copy(&mut [0u8; 4], &[1u8; 4]); // no such method
//! ```
//!
//! ```compile_fail
//! # use bulkmem_machine::strategy::Strategy;
//! # use bulkmem_policy::handle::CheckedCopyKernel;
//! let k = CheckedCopyKernel::new(Strategy::PerPage).unwrap();
//! let _ = k.clear(&mut [0u8; 4]); // no such method
//! ```
//!
//! Unfenced forms of the non-temporal kernels (batches drain once, not per
//! extent) are reached only through an [`Unfenced`] borrowed from a
//! [`Fence`], whose drop issues the store fence: the drain they owe is the
//! fence's lifetime, not a comment.

use std::marker::PhantomData;

use crate::descriptor::{self, Descriptor};
use crate::error::StrategyError;
use crate::kernels::{self, ClearFn, CopyFn};
use crate::machine::cpu;
use crate::strategy::{Op, Strategy};

/// One concrete strategy's copy kernel, checked against this CPU (after
/// `BULKMEM_DISABLE`) when made. A `Copy` pair of function pointers:
/// holding one costs what holding the pointer would.
///
/// ```
/// # use bulkmem_machine::strategy::Strategy;
/// # use bulkmem_policy::handle::CopyKernel;
/// let k = CopyKernel::new(Strategy::PerPage).unwrap();
/// let (src, mut dst) = (vec![1u8; 8192], vec![0u8; 8192]);
/// k.copy(&mut dst, &src);
/// assert_eq!(dst, src);
/// assert!(CopyKernel::new(Strategy::Clzero).is_err()); // clears only
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CopyKernel {
    strategy: Strategy,
    fenced: CopyFn,
    /// Without the closing fence (the same function for temporal
    /// strategies); called only through [`Unfenced`].
    unfenced: CopyFn,
}

/// One concrete strategy's clear kernel, checked against this CPU when
/// made (see [`CopyKernel`]).
///
/// ```
/// # use bulkmem_machine::strategy::Strategy;
/// # use bulkmem_policy::handle::ClearKernel;
/// let k = ClearKernel::new(Strategy::PerPage).unwrap();
/// let mut dst = vec![1u8; 8192];
/// k.clear(&mut dst);
/// assert!(dst.iter().all(|&b| b == 0));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ClearKernel {
    strategy: Strategy,
    fenced: ClearFn,
    unfenced: ClearFn,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::CopyKernel {}
    impl Sealed for super::ClearKernel {}
}

/// What [`CopyKernel`] and [`ClearKernel`] share, for code generic over
/// the operation (the policy's [`Policy::kernel`](crate::auto::Policy::kernel)).
/// Sealed: these two are its only implementations.
pub trait OpKernel: Copy + std::fmt::Debug + Send + Sync + sealed::Sealed + 'static {
    /// The operation this kind of kernel performs.
    const OP: Op;
    /// The kernel of `strategy`, or why there is none here.
    fn new(strategy: Strategy) -> Result<Self, StrategyError>;
    /// The kernel every CPU runs (`per-page`).
    fn baseline() -> Self;
    /// The strategy the kernel belongs to.
    fn strategy(&self) -> Strategy;
}

/// The row of `strategy` if this CPU runs it (`Auto` has no kernels, so
/// every `new` refuses it as `Unsupported` before this).
fn available(d: &Descriptor) -> Result<(), StrategyError> {
    match d.missing(cpu::features()) {
        Some(needs) => Err(StrategyError::Unavailable {
            strategy: d.strategy,
            needs,
        }),
        None => Ok(()),
    }
}

impl CopyKernel {
    /// The copy kernel of `strategy`, or why there is none here:
    /// [`StrategyError::Unsupported`] if the strategy does not copy (and for
    /// `Auto`, which is a choice per call, not a kernel),
    /// [`StrategyError::Unavailable`] if the CPU lacks a feature it needs.
    ///
    /// With [`ClearKernel::new`], the only way from a [`Strategy`] to code:
    /// `auto`, the engine, fills and the batch calls all hold these
    /// handles, so a strategy this CPU cannot run never reaches an
    /// instruction.
    pub fn new(strategy: Strategy) -> Result<CopyKernel, StrategyError> {
        let d = descriptor::row(strategy);
        let k = d.copy.as_ref().ok_or(StrategyError::Unsupported {
            strategy,
            op: Op::Copy,
        })?;
        available(d)?;
        Ok(CopyKernel {
            strategy,
            fenced: k.fenced,
            unfenced: k.unfenced,
        })
    }

    /// The copy every CPU runs (`per-page`): what a choice falls back to
    /// when nothing better can be had.
    pub fn baseline() -> CopyKernel {
        CopyKernel::new(Strategy::PerPage).expect("per-page copies on every CPU")
    }

    /// The strategy this kernel belongs to.
    #[inline]
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Copies `src` into `dst`; non-temporal kernels fence before
    /// returning.
    ///
    /// # Panics
    /// If the lengths differ.
    #[inline]
    pub fn copy(&self, dst: &mut [u8], src: &[u8]) {
        assert_eq!(
            dst.len(),
            src.len(),
            "bulkmem::CopyKernel::copy: lengths differ"
        );
        // SAFETY: two valid slices of one length; `dst` is borrowed mutably,
        // so they do not overlap.
        unsafe { self.copy_raw(dst.as_mut_ptr(), src.as_ptr(), dst.len()) }
    }

    /// [`CopyKernel::copy`] on raw pointers, for memory no slice can
    /// describe (a mapping shared with another process, a device window).
    ///
    /// # Safety
    /// `src` readable and `dst` writable for `len` bytes, the two ranges
    /// not overlapping.
    #[inline]
    pub unsafe fn copy_raw(&self, dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract for the ranges; `new` checked the
        // CPU runs the kernel.
        unsafe { (self.fenced)(dst, src, len) }
    }

    /// The fenced function itself, for the plain call's one-load table
    /// (`auto::direct`).
    #[inline]
    pub(crate) fn fenced_fn(&self) -> CopyFn {
        self.fenced
    }
}

impl ClearKernel {
    /// The clear kernel of `strategy`, or why there is none here (see
    /// [`CopyKernel::new`]).
    pub fn new(strategy: Strategy) -> Result<ClearKernel, StrategyError> {
        let d = descriptor::row(strategy);
        let k = d.clear.as_ref().ok_or(StrategyError::Unsupported {
            strategy,
            op: Op::Clear,
        })?;
        available(d)?;
        Ok(ClearKernel {
            strategy,
            fenced: k.fenced,
            unfenced: k.unfenced,
        })
    }

    /// The clear every CPU runs (`per-page`).
    pub fn baseline() -> ClearKernel {
        ClearKernel::new(Strategy::PerPage).expect("per-page clears on every CPU")
    }

    /// The strategy this kernel belongs to.
    #[inline]
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Zeroes `dst`; non-temporal kernels fence before returning.
    #[inline]
    pub fn clear(&self, dst: &mut [u8]) {
        // SAFETY: a valid writable slice.
        unsafe { self.clear_raw(dst.as_mut_ptr(), dst.len()) }
    }

    /// [`ClearKernel::clear`] on a raw pointer.
    ///
    /// # Safety
    /// `dst` writable for `len` bytes.
    #[inline]
    pub unsafe fn clear_raw(&self, dst: *mut u8, len: usize) {
        // SAFETY: the caller's contract for the range; `new` checked the CPU
        // runs the kernel.
        unsafe { (self.fenced)(dst, len) }
    }

    /// The fenced function itself (see [`CopyKernel::fenced_fn`]).
    #[inline]
    pub(crate) fn fenced_fn(&self) -> ClearFn {
        self.fenced
    }
}

impl OpKernel for CopyKernel {
    const OP: Op = Op::Copy;
    fn new(strategy: Strategy) -> Result<Self, StrategyError> {
        CopyKernel::new(strategy)
    }
    fn baseline() -> Self {
        CopyKernel::baseline()
    }
    fn strategy(&self) -> Strategy {
        self.strategy
    }
}

impl OpKernel for ClearKernel {
    const OP: Op = Op::Clear;
    fn new(strategy: Strategy) -> Result<Self, StrategyError> {
        ClearKernel::new(strategy)
    }
    fn baseline() -> Self {
        ClearKernel::baseline()
    }
    fn strategy(&self) -> Strategy {
        self.strategy
    }
}

/// The store fence owed by unfenced kernels: they are reached only through
/// an [`Unfenced`] that borrows one, and dropping it (at the end of its
/// scope, by [`Fence::drain`], or while unwinding) issues the fence. So a
/// non-temporal store is ordered before anything this thread does after
/// the fence's scope: reporting progress, returning, publishing a flag.
/// Bound to the thread that made it (the fence orders that thread's
/// stores): neither `Send` nor `Sync`.
#[must_use = "the fence drains when dropped: hold it across the unfenced stores"]
pub struct Fence {
    _thread: PhantomData<*const ()>,
}

impl Fence {
    /// A drain owed from now on.
    #[inline]
    pub fn new() -> Fence {
        Fence {
            _thread: PhantomData,
        }
    }

    /// Drains now (what dropping does, said where it matters).
    #[inline]
    pub fn drain(self) {}
}

impl Default for Fence {
    /// As [`Fence::new`]: a drain owed from now on.
    #[inline]
    fn default() -> Fence {
        Fence::new()
    }
}

impl Drop for Fence {
    #[inline]
    fn drop(&mut self) {
        kernels::drain();
    }
}

/// A kernel running without its closing fence, which the borrowed
/// [`Fence`] issues later. Its calls are the kernel's own, unfenced.
#[derive(Clone, Copy)]
pub struct Unfenced<'f, K> {
    k: K,
    _fence: PhantomData<&'f Fence>,
}

impl<'f, K> Unfenced<'f, K> {
    /// Kernel `k` without its closing fence, owed to `fence`: for the
    /// handles whose calls have unfenced forms ([`CopyKernel`],
    /// [`ClearKernel`] and their checked twins).
    #[inline]
    pub fn new(k: K, _: &'f Fence) -> Unfenced<'f, K> {
        Unfenced {
            k,
            _fence: PhantomData,
        }
    }
}

impl Unfenced<'_, CopyKernel> {
    /// [`CopyKernel::copy_raw`] without the closing fence.
    ///
    /// # Safety
    /// As [`CopyKernel::copy_raw`].
    #[inline]
    pub unsafe fn copy_raw(&self, dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract; the fence borrowed drains later.
        unsafe { (self.k.unfenced)(dst, src, len) }
    }
}

impl Unfenced<'_, CopyKernel> {
    /// The kernel's four-extent form, where it has one (the non-temporal
    /// vector copies): batches of scattered folios copy four at a time.
    /// None on other CPUs than x86-64, which have no such kernels.
    #[inline]
    pub fn gang(&self) -> Option<unsafe fn(&crate::gangs::Gang)> {
        match self.k.strategy {
            // `new` checked the CPU has each one's features.
            #[cfg(target_arch = "x86_64")]
            Strategy::Avx2Nt => Some(kernels::gang::copy_nt_avx2),
            #[cfg(target_arch = "x86_64")]
            Strategy::Avx512Nt => Some(kernels::gang::copy_nt_avx512),
            _ => None,
        }
    }
}

impl Unfenced<'_, ClearKernel> {
    /// [`ClearKernel::clear_raw`] without the closing fence.
    ///
    /// # Safety
    /// As [`ClearKernel::clear_raw`].
    #[inline]
    pub unsafe fn clear_raw(&self, dst: *mut u8, len: usize) {
        // SAFETY: the caller's contract; the fence borrowed drains later.
        unsafe { (self.k.unfenced)(dst, len) }
    }
}

/// One concrete strategy's kernel of either operation: for the workspace's
/// code that picks the operation at run time (the bench, tune). Its
/// variants are the typed handles users make directly ([`CopyKernel`],
/// [`ClearKernel`]); match on it to call one.
///
/// ```
/// # use bulkmem_machine::strategy::{Op, Strategy};
/// # use bulkmem_policy::handle::Kernel;
/// let Kernel::Copy(k) = Kernel::new(Strategy::PerPage, Op::Copy).unwrap() else {
///     unreachable!("a copy kernel was asked for")
/// };
/// let (src, mut dst) = (vec![1u8; 8192], vec![0u8; 8192]);
/// k.copy(&mut dst, &src);
/// assert_eq!(dst, src);
/// assert!(Kernel::new(Strategy::Clzero, Op::Copy).is_err()); // clears only
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Kernel {
    /// A copy kernel.
    Copy(CopyKernel),
    /// A clear kernel.
    Clear(ClearKernel),
}

impl Kernel {
    /// The kernel of `strategy` for `op` (see [`CopyKernel::new`]).
    pub fn new(strategy: Strategy, op: Op) -> Result<Kernel, StrategyError> {
        match op {
            Op::Copy => CopyKernel::new(strategy).map(Kernel::Copy),
            Op::Clear => ClearKernel::new(strategy).map(Kernel::Clear),
        }
    }

    /// The kernel every CPU runs for `op` (`per-page`).
    pub fn baseline(op: Op) -> Kernel {
        match op {
            Op::Copy => Kernel::Copy(CopyKernel::baseline()),
            Op::Clear => Kernel::Clear(ClearKernel::baseline()),
        }
    }

    /// The strategy this kernel belongs to.
    #[inline]
    pub fn strategy(&self) -> Strategy {
        match self {
            Kernel::Copy(k) => k.strategy(),
            Kernel::Clear(k) => k.strategy(),
        }
    }

    /// The operation it performs.
    #[inline]
    pub fn op(&self) -> Op {
        match self {
            Kernel::Copy(_) => Op::Copy,
            Kernel::Clear(_) => Op::Clear,
        }
    }

    /// Copies `src` into `dst`.
    ///
    /// # Panics
    /// If the lengths differ, or if this is a clear kernel.
    #[deprecated(
        note = "match on `Kernel::Copy`, or make a `CopyKernel`: a clear kernel cannot copy"
    )]
    #[inline]
    pub fn copy(&self, dst: &mut [u8], src: &[u8]) {
        self.copy_kernel().copy(dst, src)
    }

    /// Zeroes `dst`.
    ///
    /// # Panics
    /// If this is a copy kernel.
    #[deprecated(
        note = "match on `Kernel::Clear`, or make a `ClearKernel`: a copy kernel cannot clear"
    )]
    #[inline]
    pub fn clear(&self, dst: &mut [u8]) {
        self.clear_kernel().clear(dst)
    }

    /// [`CopyKernel::copy_raw`].
    ///
    /// # Safety
    /// As [`CopyKernel::copy_raw`].
    ///
    /// # Panics
    /// If this is a clear kernel.
    #[deprecated(
        note = "match on `Kernel::Copy`, or make a `CopyKernel`: a clear kernel cannot copy"
    )]
    #[inline]
    pub unsafe fn copy_raw(&self, dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.copy_kernel().copy_raw(dst, src, len) }
    }

    /// [`ClearKernel::clear_raw`].
    ///
    /// # Safety
    /// As [`ClearKernel::clear_raw`].
    ///
    /// # Panics
    /// If this is a copy kernel.
    #[deprecated(
        note = "match on `Kernel::Clear`, or make a `ClearKernel`: a copy kernel cannot clear"
    )]
    #[inline]
    pub unsafe fn clear_raw(&self, dst: *mut u8, len: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.clear_kernel().clear_raw(dst, len) }
    }

    fn copy_kernel(&self) -> CopyKernel {
        match self {
            Kernel::Copy(k) => *k,
            Kernel::Clear(k) => {
                panic!("Kernel: {} clear kernel asked to copy", k.strategy)
            }
        }
    }

    fn clear_kernel(&self) -> ClearKernel {
        match self {
            Kernel::Clear(k) => *k,
            Kernel::Copy(k) => panic!("Kernel: {} copy kernel asked to clear", k.strategy),
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod checked;
#[cfg(target_arch = "x86_64")]
mod checked_calls;
#[cfg(target_arch = "x86_64")]
pub mod exact;
mod fault;
#[cfg(target_arch = "x86_64")]
pub use checked::{CheckedClearKernel, CheckedCopyKernel, CheckedKernel};
#[cfg(target_arch = "x86_64")]
pub use checked::{ClearRoutine, CopyRoutine};
pub use fault::{Fault, Side};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_exist_exactly_for_available_strategies_of_their_op() {
        let features = &cpu::info().features;
        for &s in Strategy::ALL {
            for op in [Op::Copy, Op::Clear] {
                let k = Kernel::new(s, op);
                let runs =
                    s != Strategy::Auto && s.supports(op) && s.missing_feature(features).is_none();
                assert_eq!(k.is_ok(), runs, "{s} {op}: {k:?}");
                if let Ok(k) = k {
                    assert_eq!((k.strategy(), k.op()), (s, op));
                }
            }
            assert_eq!(
                CopyKernel::new(s).is_ok(),
                Kernel::new(s, Op::Copy).is_ok(),
                "{s}"
            );
            assert_eq!(
                ClearKernel::new(s).is_ok(),
                Kernel::new(s, Op::Clear).is_ok(),
                "{s}"
            );
        }
        assert!(matches!(
            CopyKernel::new(Strategy::Clzero),
            Err(StrategyError::Unsupported { .. })
        ));
    }

    #[test]
    fn every_handle_copies_and_clears_like_the_reference() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        for &s in Strategy::ALL {
            if let Ok(k) = CopyKernel::new(s) {
                for len in [0, 1, 63, 64, 65, 4095, 4096, 4097, 5000] {
                    let mut dst = vec![0u8; len];
                    k.copy(&mut dst, &src[..len]);
                    assert_eq!(dst, src[..len], "{s} copy {len}");
                    // Unfenced, drained by the fence's drop.
                    let mut dst = vec![0u8; len];
                    let fence = Fence::new();
                    // SAFETY: two valid slices of one length, not overlapping.
                    unsafe {
                        Unfenced::new(k, &fence).copy_raw(dst.as_mut_ptr(), src.as_ptr(), len)
                    };
                    fence.drain();
                    assert_eq!(dst, src[..len], "{s} unfenced copy {len}");
                }
            }
            if let Ok(k) = ClearKernel::new(s) {
                let mut dst = src.clone();
                k.clear(&mut dst[1..4999]);
                assert!(dst[1..4999].iter().all(|&b| b == 0), "{s} clear");
                assert_eq!((dst[0], dst[4999]), (src[0], src[4999]), "{s} clear bounds");
                let mut dst = src.clone();
                let fence = Fence::new();
                // SAFETY: a valid writable range inside `dst`.
                unsafe { Unfenced::new(k, &fence).clear_raw(dst[1..].as_mut_ptr(), 4998) };
                drop(fence);
                assert!(dst[1..4999].iter().all(|&b| b == 0), "{s} unfenced clear");
                assert_eq!((dst[0], dst[4999]), (src[0], src[4999]), "{s} bounds");
            }
        }
    }
}
