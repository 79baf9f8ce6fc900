//! Template fill (the kernel's non-temporal template-fill patches): repeat a prepared element (a `struct page`, a
//! buffer-pool frame header, a hash bucket) across a region, optionally
//! patching each copy (its index, its address) before it is stored.
//!
//! Write-once regions are written with non-temporal stores, so the
//! destination is never read for ownership and does not evict the caller's
//! working set: the kernel's non-temporal template-fill patches made rebinds 56-60% faster that way. Elements are
//! assembled (and patched) in a small staging window that stays in L1, and
//! each window is streamed out whole, so element boundaries never cut the
//! stream into partial cache lines.
//!
//! Ordering: every `fill*` function returns after a store fence. Callers
//! that issue many fills and need only one ordering point use [`NtWriter`]
//! and drain once (the kernel's non-temporal template-fill patches' `memcpy_nt_drain` before `prep_compound_head`).

use crate::auto;
use crate::error::Error;
use crate::handle::{CopyKernel, Fence, Unfenced};
use crate::strategy::{Hint, Strategy};

/// Target bytes per staging window: small enough to stay in L1, large
/// enough that one kernel call streams many lines.
const WINDOW: usize = 4096;

/// Checks the shapes: a non-empty template whose length divides `dst`.
pub fn check(dst_len: usize, template_len: usize) -> Result<usize, Error> {
    if template_len == 0 {
        return Err(Error::BadFill {
            dst: dst_len,
            template: 0,
        });
    }
    if !dst_len.is_multiple_of(template_len) {
        return Err(Error::BadFill {
            dst: dst_len,
            template: template_len,
        });
    }
    Ok(dst_len / template_len)
}

use crate::strategy::FillMode;

/// A decided fill: the mode reports show, and the CPU-checked kernel that
/// streams its windows (`None`: temporal stores).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Store {
    mode: FillMode,
    nt: Option<CopyKernel>,
}

impl Store {
    /// What the policy picks for filling `len` bytes with `hint`.
    fn auto(len: usize, hint: Hint) -> Store {
        let (mode, nt) = auto::fill(len, hint);
        Store { mode, nt }
    }

    /// The fence a fill owes, only where it streams (temporal stores are
    /// already ordered; the fence cost 5% on 16 KiB fills).
    fn fence(self) -> Option<Fence> {
        self.nt.map(|_| Fence::new())
    }

    /// The streaming kernel without its fence, owed to `fence`; `None`:
    /// temporal stores.
    fn kernel<'f>(self, fence: Option<&'f Fence>) -> Option<Unfenced<'f, CopyKernel>> {
        self.nt.zip(fence).map(|(k, f)| Unfenced::new(k, f))
    }
}

/// Repeats `template` across `dst`. `dst.len()` must be a multiple of
/// `template.len()` (which must not be 0); otherwise nothing is written.
/// Returns after a store fence.
pub fn fill(dst: &mut [u8], template: &[u8]) -> Result<FillMode, Error> {
    fill_hint(dst, template, Hint::Auto)
}

/// As [`fill`], telling `auto` whether the region will be read soon.
pub fn fill_hint(dst: &mut [u8], template: &[u8], hint: Hint) -> Result<FillMode, Error> {
    fill_auto(dst, template, hint, &mut NoPatch)
}

/// The one body of the calling-thread fills: check, decide, fill, fence.
fn fill_auto<P: Patch>(
    dst: &mut [u8],
    template: &[u8],
    hint: Hint,
    patch: &mut P,
) -> Result<FillMode, Error> {
    check(dst.len(), template.len())?;
    let store = Store::auto(dst.len(), hint);
    let fence = store.fence();
    let nt = store.kernel(fence.as_ref());
    // SAFETY: `dst` is a valid exclusive slice, a whole number of
    // templates long (checked); the store's kernel was checked against
    // this CPU.
    unsafe { fill_range(dst.as_mut_ptr(), dst.len(), template, 0, nt, patch) };
    drop(fence);
    Ok(store.mode)
}

/// Repeats `template` across `dst`, letting `patch(index, element)` edit
/// each element (a copy in a staging buffer, or in place when temporal)
/// before it is stored. Each index is patched exactly once, in order.
/// Returns after a store fence.
pub fn fill_patched<P: FnMut(usize, &mut [u8])>(
    dst: &mut [u8],
    template: &[u8],
    patch: P,
) -> Result<FillMode, Error> {
    fill_patched_hint(dst, template, Hint::Auto, patch)
}

/// As [`fill_patched`] with a hint.
pub fn fill_patched_hint<P: FnMut(usize, &mut [u8])>(
    dst: &mut [u8],
    template: &[u8],
    hint: Hint,
    mut patch: P,
) -> Result<FillMode, Error> {
    fill_auto(dst, template, hint, &mut Patcher(&mut patch))
}

/// Something that may edit element `index` before it is stored. A trait
/// rather than `Option<FnMut>` so the no-patch fill compiles to no calls.
pub trait Patch {
    const ACTIVE: bool;
    fn patch(&mut self, index: usize, element: &mut [u8]);
}

pub struct NoPatch;

impl Patch for NoPatch {
    const ACTIVE: bool = false;
    #[inline(always)]
    fn patch(&mut self, _: usize, _: &mut [u8]) {}
}

pub struct Patcher<'p, P>(pub &'p mut P);

impl<P: FnMut(usize, &mut [u8])> Patch for Patcher<'_, P> {
    const ACTIVE: bool = true;
    #[inline(always)]
    fn patch(&mut self, index: usize, element: &mut [u8]) {
        (self.0)(index, element)
    }
}

/// Elements per staging window: about [`WINDOW`] bytes, rounded so a
/// window is a whole number of cache lines (element boundaries then stay
/// off the streaming path whenever `dst` is line-aligned).
///
/// A window whose elements end on a line boundary can take up to 64
/// elements (lengths prime to 64): worth it for small elements, where many
/// boundaries share a line, but it staged 256 MiB for a 4 MiB + 1 template.
/// Past [`MAX_STAGE`] a window is the fewest whole elements of about
/// [`WINDOW`] (one, for large elements): its boundaries cut a line now and
/// then, which for elements that large costs nothing measurable.
fn window_elements(len: usize) -> usize {
    let per_line_period = 64 / gcd(len, 64);
    let aligned = (WINDOW / len).max(1).div_ceil(per_line_period) * per_line_period;
    if aligned.saturating_mul(len) <= MAX_STAGE {
        aligned
    } else {
        (WINDOW / len).max(1)
    }
}

/// The most staging memory a line-aligned window may take.
const MAX_STAGE: usize = 4 * WINDOW;

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Fills `len` bytes at `dst` (a whole number of elements) with elements
/// numbered from `first`, streaming with `nt` (the fence is its borrow's),
/// or with temporal stores where it is `None`.
///
/// # Safety
/// `dst` writable for `len` bytes and not accessed by anyone else meanwhile;
/// `len` a multiple of `template.len() > 0`.
pub(crate) unsafe fn fill_range<P: Patch>(
    dst: *mut u8,
    len: usize,
    template: &[u8],
    first: usize,
    nt: Option<Unfenced<'_, CopyKernel>>,
    patch: &mut P,
) {
    let l = template.len();
    let count = len / l;
    let Some(kernel) = nt else {
        // Temporal: build elements in place; without a patch, copy the
        // growing filled prefix onto the rest (log2(count) calls).
        // SAFETY: the caller guarantees `dst..dst+len` is ours.
        let d = unsafe { std::slice::from_raw_parts_mut(dst, len) };
        if P::ACTIVE {
            build(d, template, first, patch, false);
        } else if count > 0 {
            d[..l].copy_from_slice(template);
            let mut done = l;
            while done < len {
                let n = done.min(len - done);
                let (head, tail) = d.split_at_mut(done);
                tail[..n].copy_from_slice(&head[..n]);
                done += n;
            }
        }
        return;
    };
    let k = window_elements(l).min(count.max(1));
    if k == 1 && !P::ACTIVE && l > MAX_STAGE {
        // Large unpatched elements stream straight from the template: no
        // staging copy at all. (Smaller ones keep the stage, placed away
        // from the destination's page offset: 4 KiB templates streamed from
        // an aliasing address ran at 18 GB/s instead of 35.)
        for i in 0..count {
            // SAFETY: element i lies inside dst..dst+len; the template is
            // the caller's separate slice of `l` bytes.
            unsafe { kernel.copy_raw(dst.add(i * l), template.as_ptr(), l) };
        }
        return;
    }
    let mut raw = vec![0u8; k * l + 4096];
    let off = stage_offset(
        raw.as_ptr() as usize,
        dst as usize,
        template.as_ptr() as usize,
    );
    let stage = &mut raw[off..off + k * l];
    for e in stage.chunks_exact_mut(l) {
        e.copy_from_slice(template);
    }
    let mut i = 0;
    while i < count {
        let n = k.min(count - i);
        let bytes = n * l;
        if P::ACTIVE {
            build(&mut stage[..bytes], template, first + i, patch, true);
        }
        // SAFETY: elements i..i+n lie inside dst..dst+len; the staging
        // buffer is a separate allocation of at least `bytes`.
        unsafe { kernel.copy_raw(dst.add(i * l), stage.as_ptr(), bytes) };
        i += n;
    }
}

/// A fill checked and decided once, for a caller that writes it in pieces
/// on several threads (the engine): the one crate-internal way in, so the
/// caller needs neither the modes nor the patch machinery.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    store: Store,
    element: usize,
}

impl Plan {
    /// Checks the shapes ([`check`]) and picks the mode `auto` would for
    /// filling `dst_len` bytes with `hint`.
    pub(crate) fn new(dst_len: usize, template_len: usize, hint: Hint) -> Result<Plan, Error> {
        check(dst_len, template_len)?;
        Ok(Plan {
            store: Store::auto(dst_len, hint),
            element: template_len,
        })
    }

    /// The strategy name reports use ([`FillMode::strategy`]).
    pub(crate) fn strategy(self) -> Strategy {
        self.store.mode.strategy()
    }

    /// Pieces must start and end on multiples of this: whole staging
    /// windows, so their boundaries are element- and line-aligned.
    pub(crate) fn align(self) -> usize {
        self.element * window_elements(self.element)
    }

    /// Fills one piece of `len` bytes at `dst` with elements numbered from
    /// `first`, its streamed stores owed to `fence`.
    ///
    /// # Safety
    /// As [`fill_range`]: `dst` writable for `len` bytes and not accessed by
    /// anyone else meanwhile; `len` a multiple of `template.len()`, which is
    /// the template length this plan was made for; run on this machine.
    pub(crate) unsafe fn run(
        self,
        dst: *mut u8,
        len: usize,
        template: &[u8],
        first: usize,
        fence: &Fence,
    ) {
        let nt = self.store.kernel(Some(fence));
        // SAFETY: forwarded contract.
        unsafe { fill_range(dst, len, template, first, nt, &mut NoPatch) }
    }

    /// As [`Plan::run`], applying `patch(index, element)` to every element
    /// before it is stored.
    ///
    /// # Safety
    /// As [`Plan::run`].
    pub(crate) unsafe fn run_with<P: FnMut(usize, &mut [u8])>(
        self,
        dst: *mut u8,
        len: usize,
        template: &[u8],
        first: usize,
        fence: &Fence,
        patch: &mut P,
    ) {
        let nt = self.store.kernel(Some(fence));
        // SAFETY: forwarded contract.
        unsafe { fill_range(dst, len, template, first, nt, &mut Patcher(patch)) }
    }
}

/// Where in a scratch allocation at `base` the staging window starts: half
/// a page away (mod 4 KiB) from the destination and away from the template.
/// When all three share their offset within a page, every load aliases the
/// store before it ("4K aliasing"): 4 KiB templates filled at 18 GB/s
/// instead of 35.
fn stage_offset(base: usize, dst: usize, template: usize) -> usize {
    let apart = |a: usize, b: usize| {
        let d = a.wrapping_sub(b) % 4096;
        d.min(4096 - d)
    };
    let mut want = (dst + 2048) % 4096;
    if apart(want, template % 4096) < 512 {
        want = (want + 1024) % 4096;
    }
    (want + 4096 - base % 4096) % 4096
}

/// Writes `template` into every element of `out` and patches each, numbered
/// from `first`. Common element sizes get a loop over fixed-size arrays:
/// with a run-time length every element copy was a `memcpy` call, which
/// capped 64-byte fills at 3 ns per element (21 GB/s).
#[inline]
fn build<P: Patch>(out: &mut [u8], template: &[u8], first: usize, patch: &mut P, streaming: bool) {
    macro_rules! fixed {
        ($($n:literal)*) => {
            match template.len() {
                $($n => return build_fixed::<$n, P>(out, template.try_into().expect("length matched"), first, patch),)*
                _ => {}
            }
        };
    }
    fixed!(8 16 24 32 40 48 56 64 96 128 192 256 512);
    if !streaming {
        for (i, e) in out.chunks_exact_mut(template.len()).enumerate() {
            e.copy_from_slice(template);
            patch.patch(first + i, e);
        }
        return;
    }
    // Not `copy_from_slice`: glibc's memcpy uses `rep movsb` from 2 KiB on
    // (see `auto::element_copy`).
    let copy = auto::element_copy();
    for (i, e) in out.chunks_exact_mut(template.len()).enumerate() {
        // SAFETY: `e` and `template` have the same length and cannot
        // overlap (one is borrowed mutably); the kernel suits this CPU.
        unsafe { copy.copy_raw(e.as_mut_ptr(), template.as_ptr(), e.len()) };
        patch.patch(first + i, e);
    }
}

#[inline(always)]
fn build_fixed<const N: usize, P: Patch>(
    out: &mut [u8],
    template: &[u8; N],
    first: usize,
    patch: &mut P,
) {
    let (elements, _) = out.as_chunks_mut::<N>();
    for (i, e) in elements.iter_mut().enumerate() {
        *e = *template;
        patch.patch(first + i, e);
    }
}

/// Non-temporal writes without a fence per call: fill or copy many regions,
/// then [`NtWriter::drain`] once. Until the drain, another thread that sees
/// a flag released after these writes may still read stale data; after it,
/// the writes are ordered before anything this thread does next. Dropping
/// the writer drains. A writer belongs to the thread that made it (the
/// fence orders that thread's stores), so it is neither `Send` nor `Sync`.
pub struct NtWriter {
    store: Store,
    /// The drain owed since the first write after the last drain (the
    /// fence also binds the writer to its thread).
    fence: Option<Fence>,
}

impl Default for NtWriter {
    fn default() -> Self {
        NtWriter::new()
    }
}

impl NtWriter {
    /// Streams with the best non-temporal kernel this CPU has (temporal
    /// stores where it has none, which need no drain).
    pub fn new() -> NtWriter {
        NtWriter {
            store: Store::auto(usize::MAX, Hint::Stream),
            fence: None,
        }
    }

    /// How this writer stores: chosen once, when it was made.
    pub fn mode(&self) -> FillMode {
        self.store.mode
    }

    /// As [`fill`] with non-temporal stores, without the fence.
    pub fn fill(&mut self, dst: &mut [u8], template: &[u8]) -> Result<(), Error> {
        check(dst.len(), template.len())?;
        let fence = self.fence.get_or_insert_with(Fence::new);
        let nt = self.store.kernel(Some(fence));
        // SAFETY: as in fill_hint.
        unsafe { fill_range(dst.as_mut_ptr(), dst.len(), template, 0, nt, &mut NoPatch) };
        Ok(())
    }

    /// As [`fill_patched`] with non-temporal stores, without the fence.
    pub fn fill_patched<P: FnMut(usize, &mut [u8])>(
        &mut self,
        dst: &mut [u8],
        template: &[u8],
        mut patch: P,
    ) -> Result<(), Error> {
        check(dst.len(), template.len())?;
        let fence = self.fence.get_or_insert_with(Fence::new);
        let nt = self.store.kernel(Some(fence));
        // SAFETY: as in fill_hint.
        unsafe {
            fill_range(
                dst.as_mut_ptr(),
                dst.len(),
                template,
                0,
                nt,
                &mut Patcher(&mut patch),
            )
        };
        Ok(())
    }

    /// A non-temporal copy without the fence.
    ///
    /// # Panics
    /// If the lengths differ.
    pub fn copy(&mut self, dst: &mut [u8], src: &[u8]) {
        assert_eq!(dst.len(), src.len(), "NtWriter::copy: lengths differ");
        let fence = self.fence.get_or_insert_with(Fence::new);
        match self.store.kernel(Some(fence)) {
            // SAFETY: equal-length slices that cannot overlap; kernel chosen
            // for this CPU.
            Some(k) => unsafe { k.copy_raw(dst.as_mut_ptr(), src.as_ptr(), dst.len()) },
            None => dst.copy_from_slice(src),
        }
    }

    /// The store fence: everything written through this writer is ordered
    /// before this thread's later stores (such as releasing a flag).
    pub fn drain(&mut self) {
        // Dropping the fence drains; so does dropping the writer.
        self.fence = None;
    }
}

// Their store fences, checked in the machine code.
#[cfg(all(test, target_arch = "x86_64"))]
#[path = "fill_fences.rs"]
mod fences;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_whole_lines_and_about_4k() {
        for l in [1, 3, 8, 48, 64, 100, 128, 255, 4096] {
            let k = window_elements(l);
            // Whole lines: the fewest elements that end on a line boundary
            // and hold every whole element that fits in WINDOW (at least one).
            let fits = (WINDOW / l).max(1);
            let period = 64 / gcd(l, 64);
            assert_eq!((k * l) % 64, 0, "len {l}");
            assert!(k >= fits, "len {l}: {k} elements, {fits} fit in a window");
            assert!(
                k - period < fits,
                "len {l}: {k} is not the fewest whole lines"
            );
            assert!(k * l <= MAX_STAGE, "len {l}: {k}");
        }
        assert_eq!(window_elements(64), 64);
        assert_eq!(window_elements(100), 48);
        assert_eq!(window_elements(4096), 1);
        // Past MAX_STAGE, staging stays small rather than line-aligned: as
        // many whole elements as fit in WINDOW, at least one.
        for l in [257, 1023, 4095, 5000, (4 << 20) + 1] {
            let k = window_elements(l);
            assert!(k >= 1 && k * l <= WINDOW.max(l), "len {l}: {k}");
            assert!((k + 1) * l > WINDOW, "len {l}: {k} leaves room for another");
        }
        assert_eq!(window_elements((4 << 20) + 1), 1);
    }

    #[test]
    fn the_stage_keeps_away_from_dst_and_template_within_a_page() {
        for (base, dst, t) in [
            (0x10000, 0x20000, 0x30000),
            (0x10040, 0x20800, 0x30000),
            (0x10010, 0x20000, 0x30800),
        ] {
            let s = base + stage_offset(base, dst, t);
            assert!(s >= base && s < base + 4096);
            let apart = |a: usize, b: usize| {
                let d = a.wrapping_sub(b) % 4096;
                d.min(4096 - d)
            };
            assert!(apart(s, dst) >= 1024, "{base:x} {dst:x} {t:x}");
            assert!(apart(s, t) >= 512, "{base:x} {dst:x} {t:x}");
        }
    }

    #[test]
    fn shape_errors_name_both_lengths() {
        assert_eq!(check(128, 64), Ok(2));
        assert_eq!(check(0, 64), Ok(0));
        assert_eq!(
            check(100, 64),
            Err(Error::BadFill {
                dst: 100,
                template: 64
            })
        );
        assert_eq!(
            check(64, 0),
            Err(Error::BadFill {
                dst: 64,
                template: 0
            })
        );
    }
}
