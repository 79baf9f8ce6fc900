//! Safe handles on one strategy's kernel, gated on the CPU as memchr's
//! `One::new` is: a [`Kernel`] exists only if this CPU can run it, so its
//! calls need no `unsafe` and no feature check of their own.

use crate::cpu;
use crate::descriptor::{self, Descriptor};
use crate::error::{Error, StrategyError};
use crate::kernels::{ClearFn, CopyFn};
#[cfg(target_arch = "x86_64")]
use crate::mc::{McClear, McCopy};
use crate::strategy::{Op, Strategy};

/// One concrete strategy's copy or clear kernel, checked against this CPU
/// (after `BULKMEM_DISABLE`) when made.
///
/// ```
/// use bulkmem::{Kernel, Op, Strategy};
/// let k = Kernel::new(Strategy::PerPage, Op::Copy).unwrap();
/// let (src, mut dst) = (vec![1u8; 8192], vec![0u8; 8192]);
/// k.copy(&mut dst, &src);
/// assert_eq!(dst, src);
/// assert!(Kernel::new(Strategy::Clzero, Op::Copy).is_err()); // clears only
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Kernel {
    strategy: Strategy,
    call: Call,
}

/// The fenced kernel and the same without its closing store fence (one
/// function for temporal strategies).
#[derive(Clone, Copy, Debug)]
enum Call {
    Copy { fenced: CopyFn, unfenced: CopyFn },
    Clear { fenced: ClearFn, unfenced: ClearFn },
}

impl Call {
    /// The kernels of row `d` for `op`, if it implements it (unchecked:
    /// only `Kernel::new`, after the CPU check, and `baseline` use this).
    fn of(d: &Descriptor, op: Op) -> Option<Call> {
        match op {
            Op::Copy => d.copy.as_ref().map(|k| Call::Copy {
                fenced: k.fenced,
                unfenced: k.unfenced,
            }),
            Op::Clear => d.clear.as_ref().map(|k| Call::Clear {
                fenced: k.fenced,
                unfenced: k.unfenced,
            }),
        }
    }
}

impl Kernel {
    /// The kernel of `strategy` for `op`, or why there is none here:
    /// [`StrategyError::Unsupported`] if the strategy does not implement
    /// `op` (and for `Auto`, which is a choice per call, not a kernel),
    /// [`StrategyError::Unavailable`] if the CPU lacks a feature it needs.
    ///
    /// This is the only way from a [`Strategy`] to code: `auto`, the
    /// engine, fills and the batch calls all hold `Kernel`s, so a strategy
    /// this CPU cannot run never reaches an instruction.
    pub fn new(strategy: Strategy, op: Op) -> Result<Kernel, StrategyError> {
        let d = descriptor::row(strategy);
        let call = Call::of(d, op).ok_or(StrategyError::Unsupported { strategy, op })?;
        available(d)?;
        Ok(Kernel { strategy, call })
    }

    /// The kernel every CPU runs for `op` (`per-page`): what a choice
    /// falls back to when nothing better can be had.
    pub fn baseline(op: Op) -> Kernel {
        let d = descriptor::row(Strategy::PerPage);
        debug_assert!(d.needs.is_empty() && !d.x86_only);
        Kernel {
            strategy: Strategy::PerPage,
            call: Call::of(d, op).expect("per-page implements both operations"),
        }
    }

    /// The strategy this kernel belongs to.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The operation it performs.
    pub fn op(&self) -> Op {
        match self.call {
            Call::Copy { .. } => Op::Copy,
            Call::Clear { .. } => Op::Clear,
        }
    }

    /// Copies `src` into `dst`; non-temporal kernels fence before
    /// returning.
    ///
    /// # Panics
    /// If the lengths differ, or if this is a clear kernel.
    #[inline]
    pub fn copy(&self, dst: &mut [u8], src: &[u8]) {
        assert_eq!(
            dst.len(),
            src.len(),
            "bulkmem::Kernel::copy: lengths differ"
        );
        // SAFETY: two valid slices of one length; `dst` is borrowed mutably,
        // so they do not overlap.
        unsafe { self.copy_raw(dst.as_mut_ptr(), src.as_ptr(), dst.len()) }
    }

    /// Zeroes `dst`; non-temporal kernels fence before returning.
    ///
    /// # Panics
    /// If this is a copy kernel.
    #[inline]
    pub fn clear(&self, dst: &mut [u8]) {
        // SAFETY: a valid writable slice.
        unsafe { self.clear_raw(dst.as_mut_ptr(), dst.len()) }
    }

    /// [`Kernel::copy`] on raw pointers, for memory no slice can describe
    /// (a mapping shared with another process, a device window).
    ///
    /// # Safety
    /// `src` readable and `dst` writable for `len` bytes, the two ranges
    /// not overlapping.
    ///
    /// # Panics
    /// If this is a clear kernel.
    #[inline]
    pub unsafe fn copy_raw(&self, dst: *mut u8, src: *const u8, len: usize) {
        let k = self.copy_fn(true);
        // SAFETY: the caller's contract for the ranges; `new` checked the
        // CPU runs the kernel.
        unsafe { k(dst, src, len) }
    }

    /// [`Kernel::clear`] on a raw pointer.
    ///
    /// # Safety
    /// `dst` writable for `len` bytes.
    ///
    /// # Panics
    /// If this is a copy kernel.
    #[inline]
    pub unsafe fn clear_raw(&self, dst: *mut u8, len: usize) {
        let k = self.clear_fn(true);
        // SAFETY: the caller's contract for the range; `new` checked the CPU
        // runs the kernel.
        unsafe { k(dst, len) }
    }

    /// The copy function, fenced or not (then the caller drains with
    /// `kernels::drain` before anyone can see the data). Only a `Kernel`
    /// hands out a kernel's address, so only CPU-checked code is called.
    ///
    /// # Panics
    /// If this is a clear kernel.
    #[inline]
    pub(crate) fn copy_fn(&self, fenced: bool) -> CopyFn {
        match self.call {
            Call::Copy {
                fenced: f,
                unfenced: u,
            } => pick(fenced, f, u),
            Call::Clear { .. } => panic!(
                "bulkmem::Kernel: {} clear kernel asked to copy",
                self.strategy
            ),
        }
    }

    /// As [`Kernel::copy_fn`], for clears.
    ///
    /// # Panics
    /// If this is a copy kernel.
    #[inline]
    pub(crate) fn clear_fn(&self, fenced: bool) -> ClearFn {
        match self.call {
            Call::Clear {
                fenced: f,
                unfenced: u,
            } => pick(fenced, f, u),
            Call::Copy { .. } => panic!(
                "bulkmem::Kernel: {} copy kernel asked to clear",
                self.strategy
            ),
        }
    }
}

/// The fenced routine, or the one without the closing fence.
#[inline]
fn pick<F>(fenced: bool, f: F, u: F) -> F {
    if fenced {
        f
    } else {
        u
    }
}

fn available(d: &Descriptor) -> Result<(), StrategyError> {
    match d.missing(cpu::features()) {
        Some(needs) => Err(StrategyError::Unavailable {
            strategy: d.strategy,
            needs,
        }),
        None => Ok(()),
    }
}

/// The checked twin of one strategy's kernel, checked against this CPU
/// when made: [`Kernel`]'s counterpart for copies that survive a bad page
/// (see [`crate::fault`]). [`crate::fault::checked_kernel`] gives the twin
/// `auto` runs for a request.
///
/// ```
/// # #[cfg(target_arch = "x86_64")] {
/// use bulkmem::{CheckedKernel, Op, Strategy};
/// let k = CheckedKernel::new(Strategy::PerPage, Op::Copy).unwrap();
/// let (src, mut dst) = (vec![1u8; 8192], vec![0u8; 8192]);
/// k.copy(&mut dst, &src).unwrap();
/// assert_eq!(dst, src);
/// # }
/// ```
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
pub struct CheckedKernel {
    strategy: Strategy,
    call: CheckedCall,
}

#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
enum CheckedCall {
    Copy { fenced: McCopy, unfenced: McCopy },
    Clear { fenced: McClear, unfenced: McClear },
}

#[cfg(target_arch = "x86_64")]
impl CheckedKernel {
    /// The checked twin of `strategy` for `op`: [`Error::NotChecked`] if
    /// it has none (`libc`, `portable`, `auto`), [`Error::Unavailable`] if
    /// the CPU lacks what it needs.
    pub fn new(strategy: Strategy, op: Op) -> Result<CheckedKernel, Error> {
        let d = descriptor::row(strategy);
        let call = match op {
            Op::Copy => d
                .copy
                .as_ref()
                .and_then(|k| k.checked.own)
                .map(|(fenced, unfenced)| CheckedCall::Copy { fenced, unfenced }),
            Op::Clear => d
                .clear
                .as_ref()
                .and_then(|k| k.checked.own)
                .map(|(fenced, unfenced)| CheckedCall::Clear { fenced, unfenced }),
        };
        let call = call.ok_or(Error::NotChecked { strategy, op })?;
        available(d)?;
        if matches!(strategy, Strategy::RepMovsb | Strategy::RepMovsq) {
            crate::mc::copy_mc::route_near_ahead();
        }
        Ok(CheckedKernel { strategy, call })
    }

    /// The checked per-page loop, which every x86-64 CPU runs: what a
    /// checked choice falls back to when nothing better can be had.
    pub(crate) fn baseline(op: Op) -> CheckedKernel {
        CheckedKernel::new(Strategy::PerPage, op).expect("per-page has a checked twin")
    }

    /// The operation it performs.
    pub fn op(&self) -> Op {
        match self.call {
            CheckedCall::Copy { .. } => Op::Copy,
            CheckedCall::Clear { .. } => Op::Clear,
        }
    }

    /// The strategy whose checked routine this is.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The checked copy routine, fenced or without the closing fence of a
    /// non-temporal one (the caller drains).
    ///
    /// # Panics
    /// If this is a clear routine.
    #[inline]
    pub(crate) fn copy_fn(&self, fenced: bool) -> McCopy {
        match self.call {
            CheckedCall::Copy {
                fenced: f,
                unfenced: u,
            } => pick(fenced, f, u),
            CheckedCall::Clear { .. } => panic!("{} checked clear asked to copy", self.strategy),
        }
    }

    /// As [`CheckedKernel::copy_fn`], for clears.
    ///
    /// # Panics
    /// If this is a copy routine.
    #[inline]
    pub(crate) fn clear_fn(&self, fenced: bool) -> McClear {
        match self.call {
            CheckedCall::Clear {
                fenced: f,
                unfenced: u,
            } => pick(fenced, f, u),
            CheckedCall::Copy { .. } => panic!("{} checked copy asked to clear", self.strategy),
        }
    }
}

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
        }
        assert!(matches!(
            Kernel::new(Strategy::Clzero, Op::Copy),
            Err(StrategyError::Unsupported { .. })
        ));
    }

    #[test]
    fn every_handle_copies_and_clears_like_the_reference() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        for &s in Strategy::ALL {
            if let Ok(k) = Kernel::new(s, Op::Copy) {
                for len in [0, 1, 63, 64, 65, 4095, 4096, 4097, 5000] {
                    let mut dst = vec![0u8; len];
                    k.copy(&mut dst, &src[..len]);
                    assert_eq!(dst, src[..len], "{s} copy {len}");
                }
            }
            if let Ok(k) = Kernel::new(s, Op::Clear) {
                let mut dst = src.clone();
                k.clear(&mut dst[1..4999]);
                assert!(dst[1..4999].iter().all(|&b| b == 0), "{s} clear");
                assert_eq!((dst[0], dst[4999]), (src[0], src[4999]), "{s} clear bounds");
            }
        }
    }

    #[test]
    #[should_panic(expected = "clear kernel asked to copy")]
    fn a_clear_handle_refuses_to_copy() {
        let k = Kernel::new(Strategy::PerPage, Op::Clear).unwrap();
        k.copy(&mut [0u8; 4], &[1u8; 4]);
    }
}
