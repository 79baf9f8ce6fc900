//! The checked twins of the kernels, typed by operation as the kernels
//! are: a [`CheckedCopyKernel`] copies, surviving a bad page, a
//! [`CheckedClearKernel`] clears. Their calls are `checked_calls`, run
//! exactly by `exact`; `bulkmem::fault` holds the plain checked calls.

use super::{available, Unfenced};
use crate::checked::mc::copy_mc_gang::{self, McGang};
use crate::checked::mc::{extable::RawFault, McClear, McCopy};
use crate::descriptor;
use crate::error::CheckedStrategyError;
use crate::strategy::{Op, Strategy};

/// The checked twin of one strategy's copy, checked against this CPU when
/// made: [`CopyKernel`](crate::handle::CopyKernel)'s counterpart for
/// copies that survive a bad page. `bulkmem::fault::copy_checked` runs
/// the twin of the kernel `auto` picks for the call.
///
/// ```
/// # #[cfg(target_arch = "x86_64")] {
/// # use bulkmem_machine::strategy::Strategy;
/// # use bulkmem_policy::handle::CheckedCopyKernel;
/// let k = CheckedCopyKernel::new(Strategy::PerPage).unwrap();
/// let (src, mut dst) = (vec![1u8; 8192], vec![0u8; 8192]);
/// k.copy(&mut dst, &src).unwrap();
/// assert_eq!(dst, src);
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct CheckedCopyKernel {
    strategy: Strategy,
    fenced: McCopy,
    unfenced: McCopy,
}

/// The checked twin of one strategy's clear (see [`CheckedCopyKernel`]).
#[derive(Clone, Copy, Debug)]
pub struct CheckedClearKernel {
    strategy: Strategy,
    fenced: McClear,
    unfenced: McClear,
}

impl CheckedCopyKernel {
    /// The checked copy of `strategy`: [`CheckedStrategyError::NotChecked`] if it
    /// has none (`libc`, `portable`, `auto`),
    /// [`CheckedStrategyError::Unavailable`] if the CPU
    /// lacks what it needs.
    pub fn new(strategy: Strategy) -> Result<CheckedCopyKernel, CheckedStrategyError> {
        let d = descriptor::row(strategy);
        let (fenced, unfenced) = d.copy.as_ref().and_then(|k| k.checked.own).ok_or(
            CheckedStrategyError::NotChecked {
                strategy,
                op: Op::Copy,
            },
        )?;
        available(d)?;
        if matches!(strategy, Strategy::RepMovsb | Strategy::RepMovsq) {
            crate::checked::mc::copy_mc::route_near_ahead();
        }
        if matches!(strategy, Strategy::Avx2Nt | Strategy::Avx512Nt) {
            crate::checked::mc::copy_mc_nt::follow_shape();
        }
        Ok(CheckedCopyKernel {
            strategy,
            fenced,
            unfenced,
        })
    }

    /// The checked per-page loop, which every x86-64 CPU runs: what a
    /// checked choice falls back to when nothing better can be had.
    pub fn baseline() -> CheckedCopyKernel {
        CheckedCopyKernel::new(Strategy::PerPage).expect("per-page has a checked copy")
    }

    /// The strategy whose checked routine this is.
    #[inline]
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The fenced routine itself, for the checked call's one-load table
    /// (`auto::direct`).
    #[inline]
    pub(crate) fn fenced_fn(&self) -> McCopy {
        self.fenced
    }
}

impl CheckedClearKernel {
    /// The checked clear of `strategy` (see [`CheckedCopyKernel::new`]).
    pub fn new(strategy: Strategy) -> Result<CheckedClearKernel, CheckedStrategyError> {
        let d = descriptor::row(strategy);
        let (fenced, unfenced) = d.clear.as_ref().and_then(|k| k.checked.own).ok_or(
            CheckedStrategyError::NotChecked {
                strategy,
                op: Op::Clear,
            },
        )?;
        available(d)?;
        Ok(CheckedClearKernel {
            strategy,
            fenced,
            unfenced,
        })
    }

    /// The checked per-page loop.
    pub fn baseline() -> CheckedClearKernel {
        CheckedClearKernel::new(Strategy::PerPage).expect("per-page has a checked clear")
    }

    /// The strategy whose checked routine this is.
    #[inline]
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The fenced routine itself (see [`CheckedCopyKernel::fenced_fn`]).
    #[inline]
    pub(crate) fn fenced_fn(&self) -> McClear {
        self.fenced
    }
}

/// A checked copy routine as the fault paths call it: fenced, or unfenced
/// under a [`Fence`](super::Fence). Returns the bytes left (0: done); on
/// a fault the routine has written `raw`.
pub trait CopyRoutine: Copy {
    /// # Safety
    /// `src` readable and `dst` writable for `len` bytes unless they fault,
    /// not overlapping; bulkmem's fault handler installed; `raw` writable.
    unsafe fn run(&self, dst: *mut u8, src: *const u8, len: usize, raw: *mut RawFault) -> usize;
}

/// As [`CopyRoutine`], for clears.
pub trait ClearRoutine: Copy {
    /// # Safety
    /// `dst` writable for `len` bytes unless it faults; the handler
    /// installed; `raw` writable.
    unsafe fn run(&self, dst: *mut u8, len: usize, raw: *mut RawFault) -> usize;
}

impl CopyRoutine for CheckedCopyKernel {
    #[inline]
    unsafe fn run(&self, dst: *mut u8, src: *const u8, len: usize, raw: *mut RawFault) -> usize {
        // SAFETY: the caller's contract; `new` checked the CPU runs it.
        unsafe { (self.fenced)(dst, src, len, raw) }
    }
}

impl Unfenced<'_, CheckedCopyKernel> {
    /// The checked twin of the kernel's four-extent form, where the
    /// unchecked kernel has one (`Unfenced<CopyKernel>::gang`).
    #[inline]
    pub fn gang(&self) -> Option<McGang> {
        match self.k.strategy {
            // `new` checked the CPU has each one's features.
            Strategy::Avx2Nt => Some(copy_mc_gang::bulkmem_mc_gang_avx2nt_unfenced),
            Strategy::Avx512Nt => Some(copy_mc_gang::bulkmem_mc_gang_avx512nt_unfenced),
            _ => None,
        }
    }
}

impl CopyRoutine for Unfenced<'_, CheckedCopyKernel> {
    #[inline]
    unsafe fn run(&self, dst: *mut u8, src: *const u8, len: usize, raw: *mut RawFault) -> usize {
        // SAFETY: the caller's contract; the borrowed fence drains later.
        unsafe { (self.k.unfenced)(dst, src, len, raw) }
    }
}

impl ClearRoutine for CheckedClearKernel {
    #[inline]
    unsafe fn run(&self, dst: *mut u8, len: usize, raw: *mut RawFault) -> usize {
        // SAFETY: the caller's contract; `new` checked the CPU runs it.
        unsafe { (self.fenced)(dst, len, raw) }
    }
}

impl ClearRoutine for Unfenced<'_, CheckedClearKernel> {
    #[inline]
    unsafe fn run(&self, dst: *mut u8, len: usize, raw: *mut RawFault) -> usize {
        // SAFETY: the caller's contract; the borrowed fence drains later.
        unsafe { (self.k.unfenced)(dst, len, raw) }
    }
}

/// The checked twin of one strategy's kernel of either operation, for code
/// that picks the operation at run time (the `LD_PRELOAD` shim's helpers).
/// Its variants are the typed twins users make directly, whose calls are
/// beside them and in `bulkmem::fault`.
///
/// ```
/// # #[cfg(target_arch = "x86_64")] {
/// # use bulkmem_machine::strategy::{Op, Strategy};
/// # use bulkmem_policy::handle::CheckedKernel;
/// let k = CheckedKernel::new(Strategy::PerPage, Op::Copy).unwrap();
/// let (src, mut dst) = (vec![1u8; 8192], vec![0u8; 8192]);
/// if let CheckedKernel::Copy(k) = k {
///     k.copy(&mut dst, &src).unwrap();
/// }
/// assert_eq!(dst, src);
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub enum CheckedKernel {
    /// A checked copy.
    Copy(CheckedCopyKernel),
    /// A checked clear.
    Clear(CheckedClearKernel),
}

impl CheckedKernel {
    /// The checked twin of `strategy` for `op` (see
    /// [`CheckedCopyKernel::new`]).
    pub fn new(strategy: Strategy, op: Op) -> Result<CheckedKernel, CheckedStrategyError> {
        match op {
            Op::Copy => CheckedCopyKernel::new(strategy).map(CheckedKernel::Copy),
            Op::Clear => CheckedClearKernel::new(strategy).map(CheckedKernel::Clear),
        }
    }

    /// The operation it performs.
    #[inline]
    pub fn op(&self) -> Op {
        match self {
            CheckedKernel::Copy(_) => Op::Copy,
            CheckedKernel::Clear(_) => Op::Clear,
        }
    }

    /// The strategy whose checked routine this is.
    #[inline]
    pub fn strategy(&self) -> Strategy {
        match self {
            CheckedKernel::Copy(k) => k.strategy(),
            CheckedKernel::Clear(k) => k.strategy(),
        }
    }

    /// The copy twin.
    ///
    /// # Panics
    /// If this is a clear.
    #[inline]
    pub(crate) fn copy_kernel(&self) -> CheckedCopyKernel {
        match self {
            CheckedKernel::Copy(k) => *k,
            CheckedKernel::Clear(k) => panic!("{} checked clear asked to copy", k.strategy),
        }
    }

    /// The clear twin.
    ///
    /// # Panics
    /// If this is a copy.
    #[inline]
    pub(crate) fn clear_kernel(&self) -> CheckedClearKernel {
        match self {
            CheckedKernel::Clear(k) => *k,
            CheckedKernel::Copy(k) => panic!("{} checked copy asked to clear", k.strategy),
        }
    }
}
