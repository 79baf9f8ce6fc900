//! Single-call decisions compiled into length bands: a decision only
//! changes at a few lengths, so a call costs a short scan (or one table
//! load) instead of the whole evaluation, which for a 64-byte copy costs
//! more than the copy.
//!
//! [`Bands`] are the decisions as strategies (what `bulkmem info` prints
//! and what tests compare on synthetic CPUs); [`Compiled`] turns each band
//! into a CPU-checked handle of its operation ([`CopyKernel`],
//! [`ClearKernel`] or their checked twins) once, when the
//! process's bands are built, so the per-call path holds only kernels this
//! CPU runs.

#[cfg(doc)]
use crate::handle::{ClearKernel, CopyKernel};
use crate::strategy::Strategy;

/// Single-call decisions as length bands. A lookup is one table load
/// indexed by the length's bit count, unless a band starts inside that
/// power-of-two range (the rules' L1d edge, 48 KiB on Emerald Rapids):
/// only those lengths scan. With a scan for every length, tuned `auto`
/// measured 0.77x of its own `avx512` kernel at hot 4 KiB there (0.91-0.95x
/// on Zen 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bands {
    /// (first length of the band, strategy), ascending; `len` used.
    bands: [(usize, Strategy); Bands::CAP],
    len: usize,
    /// The band index for lengths of each bit count (0 for length 0, 1
    /// for 1, 2 for 2..=3, ...); [`MIXED`] where a band starts strictly
    /// inside the bit count's range, so those lengths scan.
    by_bits: [u8; 65],
}

/// How many bits `len` needs (0 for 0, 1 for 1, 2 for 2..=3, ...): the
/// index of its power-of-two range.
#[inline]
pub(super) fn bit_count(len: usize) -> usize {
    (usize::BITS - len.leading_zeros()) as usize
}

/// A bit count whose lengths span more than one band.
const MIXED: u8 = u8::MAX;

impl Bands {
    /// Enough for every edge of the rules plus a tuned ladder (`bulkmem
    /// tune` measures about 30 single-call sizes).
    pub const CAP: usize = 48;

    /// Bands from `decide` evaluated at each of `edges` (sorted ascending;
    /// the first should be 0). Between two edges the decision must not
    /// change. Past [`Bands::CAP`] changes the last band absorbs the rest.
    pub fn build(edges: &[usize], decide: impl Fn(usize) -> Strategy) -> Bands {
        let mut b = Bands {
            bands: [(0, Strategy::Auto); Bands::CAP],
            len: 0,
            by_bits: [MIXED; 65],
        };
        for &e in edges {
            let s = decide(e);
            if b.len == 0 || (b.bands[b.len - 1].1 != s && b.len < Bands::CAP) {
                b.bands[b.len] = (if b.len == 0 { 0 } else { e }, s);
                b.len += 1;
            }
        }
        if b.len == 0 {
            // No edges at all: one band, decided at length 0.
            b.bands[0] = (0, decide(0));
            b.len = 1;
        }
        for bits in 0..65usize {
            // Lengths with this bit count: [shortest, longest].
            let (shortest, longest) = match bits {
                0 => (0, 0),
                64 => (1 << 63, usize::MAX),
                _ => (1usize << (bits - 1), (1usize << bits) - 1),
            };
            let i = b.scan(shortest);
            if b.scan(longest) == i {
                b.by_bits[bits] = i as u8;
            }
        }
        b
    }

    /// The index of the band holding `len`.
    #[inline]
    fn index(&self, len: usize) -> usize {
        match self.by_bits[bit_count(len)] {
            MIXED => self.scan(len),
            i => i as usize,
        }
    }

    #[inline]
    fn scan(&self, len: usize) -> usize {
        let mut i = 0;
        for (j, &(start, _)) in self.bands[1..self.len].iter().enumerate() {
            if len < start {
                break;
            }
            i = j + 1;
        }
        i
    }

    /// The strategy for a single call of `len` bytes.
    #[inline]
    pub fn lookup(&self, len: usize) -> Strategy {
        self.bands[self.index(len)].1
    }

    /// The bands as (first length, strategy).
    pub fn as_slice(&self) -> &[(usize, Strategy)] {
        &self.bands[..self.len]
    }

    /// Whether every lookup is one table load (every band starts at a
    /// power of two) rather than a scan for some lengths.
    pub fn is_table(&self) -> bool {
        !self.by_bits.contains(&MIXED)
    }
}

/// [`Bands`] with each band's kernel resolved on this CPU once: a
/// [`CopyKernel`] or [`ClearKernel`], or on x86-64 the checked twin
/// (`CheckedCopyKernel`, `CheckedClearKernel`) of the kernel the
/// single-call bands run.
#[derive(Clone, Copy, Debug)]
pub struct Compiled<K> {
    bands: Bands,
    kernels: [K; Bands::CAP],
}

impl<K: Copy> Compiled<K> {
    /// Resolves every band of `bands`: `resolve(first length, strategy)`
    /// gives the band's kernel (a band whose strategy this CPU cannot run
    /// gets whatever `resolve` falls back to).
    pub fn new(bands: Bands, resolve: impl Fn(usize, Strategy) -> K) -> Compiled<K> {
        let slice = bands.as_slice();
        let first = resolve(slice[0].0, slice[0].1);
        let mut kernels = [first; Bands::CAP];
        for (i, &(start, s)) in slice.iter().enumerate().skip(1) {
            kernels[i] = resolve(start, s);
        }
        Compiled { bands, kernels }
    }

    /// The kernel for a single call of `len` bytes.
    #[inline]
    pub fn kernel(&self, len: usize) -> K {
        self.kernels[self.bands.index(len)]
    }

    /// The kernel of every length of `bits` bits (see [`bit_count`]), if
    /// they all lie in one band.
    pub fn whole_bit_count(&self, bits: usize) -> Option<K> {
        match self.bands.by_bits[bits] {
            MIXED => None,
            i => Some(self.kernels[i as usize]),
        }
    }
}
