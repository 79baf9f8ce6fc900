//! The plain single call's kernel in one load: for hint `Auto` (what
//! `copy`, `clear`, `copy_checked`, `clear_checked`, the C interface's
//! plain calls and the preload's ask), a static table of the fenced kernel
//! functions (and of their checked twins' routines) by the length's bit
//! count.
//!
//! The band path ([`super::Runs::single`]) reads this process's compiled
//! policy through its lazy lock, then the band index, then the kernel: a
//! chain of dependent loads and a frame that saves registers for the band
//! scan. At hot 64 B-4 KiB that was 2-4 ns a call, 0.55x of the named
//! kernel at 64 B and about 0.95x at 4 KiB on Zen 3 (`bulkmem bench copy
//! --strategies avx2,auto`). Here a call is the bit count, one load from a
//! static and the kernel's call, as glibc's resolved `memcpy` is.
//!
//! A slot is filled once, when the process's bands are compiled, and only
//! where every length of that bit count lies in one band; the others
//! (a band starting inside a power-of-two range, and every slot before
//! the bands exist) are empty, and the caller takes the band path, which
//! also compiles the bands on first use. Zero-initialised, so the tables
//! live in `.bss` and cost a process nothing until its first call.

use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

use super::bands::{bit_count, Compiled};
#[cfg(target_arch = "x86_64")]
use crate::checked::mc::{extable::RawFault, McClear, McCopy};
#[cfg(target_arch = "x86_64")]
use crate::handle::exact::{clear_exact, copy_exact};
#[cfg(target_arch = "x86_64")]
use crate::handle::{CheckedClearKernel, CheckedCopyKernel, ClearRoutine, CopyRoutine, Fault};
use crate::handle::{ClearKernel, CopyKernel};
use crate::kernels::{ClearFn, CopyFn};
use crate::strategy::Strategy;

/// One operation's slots: the fenced kernel by bit count (null: take the
/// band path) and its strategy, as an index into [`Strategy::ALL`].
pub(super) struct Table {
    kernels: [AtomicPtr<()>; 65],
    strategies: [AtomicU8; 65],
}

static COPY: Table = Table::new();
static CLEAR: Table = Table::new();
#[cfg(target_arch = "x86_64")]
static CHECKED_COPY: Table = Table::new();
#[cfg(target_arch = "x86_64")]
static CHECKED_CLEAR: Table = Table::new();

impl Table {
    const fn new() -> Table {
        Table {
            kernels: [const { AtomicPtr::new(std::ptr::null_mut()) }; 65],
            strategies: [const { AtomicU8::new(0) }; 65],
        }
    }

    /// Fills every slot whose bit count lies in one band of `compiled`
    /// with that band's kernel: its function (from `f`) and strategy.
    fn publish<K: Copy>(&self, compiled: &Compiled<K>, f: impl Fn(&K) -> (*mut (), Strategy)) {
        for bits in 0..self.kernels.len() {
            let Some(k) = compiled.whole_bit_count(bits) else {
                continue;
            };
            let (kernel, strategy) = f(&k);
            let ix = Strategy::ALL
                .iter()
                .position(|&s| s == strategy)
                .expect("a kernel's strategy is in Strategy::ALL");
            self.strategies[bits].store(ix as u8, Ordering::Relaxed);
            // Release: a reader that sees the function sees its strategy.
            self.kernels[bits].store(kernel, Ordering::Release);
        }
    }

    #[inline]
    fn slot(&'static self, len: usize) -> Option<(*mut (), Ran)> {
        let bits = bit_count(len);
        let kernel = self.kernels[bits].load(Ordering::Acquire);
        if kernel.is_null() {
            return None;
        }
        Some((kernel, Ran { table: self, bits }))
    }
}

/// Fills the tables from this process's compiled hint-`Auto` bands.
pub(super) fn publish(copy: &Compiled<CopyKernel>, clear: &Compiled<ClearKernel>) {
    COPY.publish(copy, |k| (k.fenced_fn() as *mut (), k.strategy()));
    CLEAR.publish(clear, |k| (k.fenced_fn() as *mut (), k.strategy()));
}

/// Fills the checked tables from this process's hint-`Auto` twins.
#[cfg(target_arch = "x86_64")]
pub(super) fn publish_checked(
    copy: &Compiled<CheckedCopyKernel>,
    clear: &Compiled<CheckedClearKernel>,
) {
    CHECKED_COPY.publish(copy, |k| (k.fenced_fn() as *mut (), k.strategy()));
    CHECKED_CLEAR.publish(clear, |k| (k.fenced_fn() as *mut (), k.strategy()));
}

/// A checked twin's fenced routine from a filled slot: all a checked call
/// needs to run it and, after a fault, to finish up to it.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub struct CheckedCopy(McCopy);

#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub struct CheckedClear(McClear);

#[cfg(target_arch = "x86_64")]
impl CopyRoutine for CheckedCopy {
    #[inline]
    unsafe fn run(&self, dst: *mut u8, src: *const u8, len: usize, raw: *mut RawFault) -> usize {
        // SAFETY: the caller's contract; the routine is a checked twin's
        // the CPU runs (`publish_checked`).
        unsafe { (self.0)(dst, src, len, raw) }
    }
}

#[cfg(target_arch = "x86_64")]
impl ClearRoutine for CheckedClear {
    #[inline]
    unsafe fn run(&self, dst: *mut u8, len: usize, raw: *mut RawFault) -> usize {
        // SAFETY: as for `CheckedCopy`.
        unsafe { (self.0)(dst, len, raw) }
    }
}

/// The checked twin `copy_checked` runs for `len` bytes, if its slot is
/// filled.
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn checked_copy(len: usize) -> Option<CheckedCopy> {
    let (routine, _) = CHECKED_COPY.slot(len)?;
    // SAFETY: a filled slot of this table holds a `CheckedCopyKernel`'s
    // fenced routine (`publish_checked`).
    Some(CheckedCopy(unsafe {
        std::mem::transmute::<*mut (), McCopy>(routine)
    }))
}

/// As [`checked_copy`], for `clear_checked`.
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn checked_clear(len: usize) -> Option<CheckedClear> {
    let (routine, _) = CHECKED_CLEAR.slot(len)?;
    // SAFETY: as in `checked_copy`.
    Some(CheckedClear(unsafe {
        std::mem::transmute::<*mut (), McClear>(routine)
    }))
}

/// Which slot ran a call, for the strategy the call returns.
#[derive(Clone, Copy)]
pub struct Ran {
    table: &'static Table,
    bits: usize,
}

impl Ran {
    /// The strategy of the kernel that ran.
    #[inline]
    pub fn strategy(self) -> Strategy {
        let ix = self.table.strategies[self.bits].load(Ordering::Relaxed);
        Strategy::ALL[ix as usize]
    }
}

/// Copies `src` into `dst` (equal lengths) with the plain single-call
/// choice if its slot is filled; `None`, with nothing written, if the
/// caller must take the band path.
#[inline]
pub fn copy(dst: &mut [u8], src: &[u8]) -> Option<Ran> {
    if dst.len() != src.len() {
        return None;
    }
    let (kernel, ran) = COPY.slot(dst.len())?;
    // SAFETY: a filled slot holds a checked `CopyKernel`'s `fenced_fn`
    // (`publish`; Acquire saw it whole); the slices are valid for their
    // equal length, and `dst`, borrowed mutably, does not overlap `src`.
    unsafe {
        let f: CopyFn = std::mem::transmute::<*mut (), CopyFn>(kernel);
        f(dst.as_mut_ptr(), src.as_ptr(), dst.len());
    }
    Some(ran)
}

/// As [`copy`], zeroing `dst`.
#[inline]
pub fn clear(dst: &mut [u8]) -> Option<Ran> {
    let (kernel, ran) = CLEAR.slot(dst.len())?;
    // SAFETY: a filled slot holds a checked `ClearKernel`'s `fenced_fn`
    // (`publish`); `dst` is a valid writable slice.
    unsafe {
        let f: ClearFn = std::mem::transmute::<*mut (), ClearFn>(kernel);
        f(dst.as_mut_ptr(), dst.len());
    }
    Some(ran)
}

/// `bulkmem::fault::copy_checked`'s fastest path only, as [`copy`] is
/// `bulkmem::copy`'s: `Some` with the checked copy's result if `auto` has
/// already settled the checked twin for this length's bit count, `None`
/// with nothing written if not (or if the lengths differ). Never panics, allocates or reads a
/// profile (the C interface's `bm_copy_checked` calls it outside its panic
/// guard); like every checked call it installs the fault handler first if
/// none has (once a process, under a lock).
#[inline]
#[cfg(target_arch = "x86_64")]
pub fn copy_checked_if_direct(dst: &mut [u8], src: &[u8]) -> Option<Result<(), Fault>> {
    if dst.len() != src.len() {
        return None;
    }
    let r = checked_copy(dst.len())?;
    // SAFETY: two valid, disjoint slices of one length; the routine is a
    // checked twin's.
    Some(unsafe { copy_exact(r, dst.as_mut_ptr(), src.as_ptr(), dst.len()) })
}

/// As [`copy_checked_if_direct`], zeroing: `bulkmem::fault::clear_checked`'s
/// fastest path only.
#[inline]
#[cfg(target_arch = "x86_64")]
pub fn clear_checked_if_direct(dst: &mut [u8]) -> Option<Result<(), Fault>> {
    let r = checked_clear(dst.len())?;
    // SAFETY: a valid writable slice; the routine is a checked twin's.
    Some(unsafe { clear_exact(r, dst.as_mut_ptr(), dst.len()) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auto::bands;
    use crate::strategy::{Hint, Op};

    /// Every filled slot runs what the bands say for every length of its
    /// bit count, and a slot is empty exactly where the bands change
    /// inside the bit count.
    #[test]
    fn filled_slots_agree_with_the_bands() {
        // Compiling this process's bands fills the tables.
        bands(Op::Copy, Hint::Auto);
        for (op, table) in [(Op::Copy, &COPY), (Op::Clear, &CLEAR)] {
            let b = bands(op, Hint::Auto);
            let mut filled = 0;
            for bits in 0..65usize {
                let (shortest, longest) = match bits {
                    0 => (0, 0),
                    64 => (1 << 63, usize::MAX),
                    _ => (1usize << (bits - 1), (1usize << bits) - 1),
                };
                let one_band = b.lookup(shortest) == b.lookup(longest)
                    && b.as_slice()
                        .iter()
                        .all(|&(start, _)| start <= shortest || start > longest);
                match table.slot(shortest) {
                    Some((kernel, ran)) => {
                        filled += 1;
                        assert!(one_band, "{op} slot {bits} filled across a band edge");
                        let s = ran.strategy();
                        assert_eq!(s, b.lookup(shortest), "{op} slot {bits}");
                        let want = match op {
                            Op::Copy => CopyKernel::new(s).unwrap().fenced_fn() as *mut (),
                            Op::Clear => ClearKernel::new(s).unwrap().fenced_fn() as *mut (),
                        };
                        assert_eq!(kernel, want, "{op} slot {bits}: another kernel than {s}'s");
                    }
                    None => assert!(!one_band, "{op} slot {bits} empty inside one band"),
                }
            }
            assert!(filled > 0, "{op}: no slot filled");
        }
    }

    /// Every filled checked slot holds the routine of the twin
    /// `copy_checked` (`clear_checked`) would take through the bands, for
    /// both ends of its bit count; the tables fill at the first call.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn filled_checked_slots_hold_the_banded_twins() {
        use crate::auto::{chosen, Request};
        // Compiling this process's bands fills the checked tables too.
        bands(Op::Copy, Hint::Auto);
        let mut filled = 0;
        for bits in 1..40usize {
            let (shortest, longest) = (1usize << (bits - 1), (1usize << bits) - 1);
            for len in [shortest, longest] {
                let req = |op| Request::single(op, len, Hint::Auto);
                if let Some(CheckedCopy(f)) = checked_copy(len) {
                    filled += 1;
                    let k: CheckedCopyKernel = chosen(&req(Op::Copy));
                    assert_eq!(f as usize, k.fenced_fn() as usize, "copy, {len} bytes");
                }
                if let Some(CheckedClear(f)) = checked_clear(len) {
                    filled += 1;
                    let k: CheckedClearKernel = chosen(&req(Op::Clear));
                    assert_eq!(f as usize, k.fenced_fn() as usize, "clear, {len} bytes");
                }
            }
        }
        assert!(filled > 0, "no checked slot filled");
    }

    #[test]
    fn direct_calls_copy_and_clear_every_length_near_the_slot_edges() {
        bands(Op::Clear, Hint::Auto);
        let src: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + 1) as u8).collect();
        for len in (0..=4200).chain([8191, 8192, 8193]) {
            let len = len.min(src.len());
            let mut dst = vec![0u8; len];
            if let Some(ran) = copy(&mut dst, &src[..len]) {
                assert_eq!(dst, src[..len], "copy of {len} by {}", ran.strategy());
            }
            let mut buf = vec![1u8; len];
            if let Some(ran) = clear(&mut buf) {
                assert!(
                    buf.iter().all(|&b| b == 0),
                    "clear of {len} by {}",
                    ran.strategy()
                );
            }
        }
        let mut short = [0u8; 3];
        assert!(copy(&mut short, &[1u8; 4]).is_none(), "lengths differ");
        assert_eq!(short, [0u8; 3]);
    }
}
