//! Single-call decisions compiled into length bands: a decision only
//! changes at a few lengths, so a call costs a short scan (or one table
//! load) instead of the whole evaluation, which for a 64-byte copy costs
//! more than the copy.
//!
//! [`Bands`] are the decisions as strategies (what `bulkmem info` prints
//! and what tests compare on synthetic CPUs); [`Compiled`] turns each band
//! into a CPU-checked [`Kernel`] once, when the process's bands are built,
//! so the per-call path holds only kernels this CPU runs.

use crate::handle::Kernel;
use crate::strategy::{Op, Strategy};

/// Single-call decisions as length bands. When every band starts at a
/// power of two (a tuned profile's do), a lookup is one table load indexed
/// by the length's bit count: with the scan, tuned `auto` measured
/// 0.91-0.95x of its own kernel at 4 KiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bands {
    /// (first length of the band, strategy), ascending; `len` used.
    bands: [(usize, Strategy); Bands::CAP],
    len: usize,
    /// The band index for lengths of each bit count (0 for length 0, 1
    /// for 1, 2 for 2..=3, ...), when every band starts at a power of two.
    by_bits: Option<[u8; 65]>,
}

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
            by_bits: None,
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
        if b.as_slice()[1..]
            .iter()
            .all(|&(start, _)| start.is_power_of_two())
        {
            let mut t = [0u8; 65];
            for (bits, slot) in t.iter_mut().enumerate() {
                // The shortest length with this bit count; the band is the
                // same up to the next power of two.
                let shortest = if bits == 0 { 0 } else { 1usize << (bits - 1) };
                *slot = b.scan(shortest) as u8;
            }
            b.by_bits = Some(t);
        }
        b
    }

    /// The index of the band holding `len`.
    #[inline]
    fn index(&self, len: usize) -> usize {
        match &self.by_bits {
            Some(t) => t[(usize::BITS - len.leading_zeros()) as usize] as usize,
            None => self.scan(len),
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

    /// Whether a lookup is one table load (every band starts at a power of
    /// two) rather than a scan.
    pub fn is_table(&self) -> bool {
        self.by_bits.is_some()
    }
}

/// [`Bands`] with each band's kernel resolved on this CPU once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Compiled {
    bands: Bands,
    kernels: [Kernel; Bands::CAP],
}

impl Compiled {
    /// Resolves every band of `bands` for `op`; a band whose strategy this
    /// CPU cannot run (never, for a validated profile: see
    /// `load::load_profile`) gets `fallback`'s kernel.
    pub(crate) fn new(bands: Bands, op: Op, fallback: impl Fn(usize) -> Kernel) -> Compiled {
        let mut kernels = [Kernel::baseline(op); Bands::CAP];
        for (i, &(start, s)) in bands.as_slice().iter().enumerate() {
            kernels[i] = Kernel::new(s, op).unwrap_or_else(|_| fallback(start));
        }
        Compiled { bands, kernels }
    }

    /// The kernel for a single call of `len` bytes.
    #[inline]
    pub(crate) fn kernel(&self, len: usize) -> Kernel {
        self.kernels[self.bands.index(len)]
    }
}
