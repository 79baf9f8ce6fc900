//! Test support: memory with PROT_NONE guard pages on both sides, so any
//! access outside the usable region faults, plus canary bookkeeping that
//! catches stray writes inside it.

#![allow(dead_code)]

use bulkmem::mapping::Mapping;

pub mod alone;
pub mod memcg;
pub mod poison;
pub mod region;
pub mod require;
pub mod skip;
pub mod slide_heap;
pub mod swap;

pub const PAGE: usize = 4096;

/// Runs `f` with the non-temporal copies forced into each of their
/// shapes (`bulkmem_machine::kernels::NtCopyShape`), whichever this CPU takes, then gives
/// it its own back. The shape is the process's: tests that force it take
/// turns, so each runs the shape it forced (the others, forcing nothing,
/// run any, and all are correct).
pub fn in_every_nt_shape(mut f: impl FnMut(&str)) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            bulkmem_machine::kernels::set_nt_copy_shape(None);
        }
    }
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let _restore = Restore;
    for shape in bulkmem_machine::kernels::NtCopyShape::ALL {
        bulkmem_machine::kernels::set_nt_copy_shape(Some(shape));
        f(shape.name());
    }
}

/// `pages` usable pages between two inaccessible guard pages.
pub struct Guarded(Mapping);

impl Guarded {
    pub fn new(usable: usize) -> Guarded {
        // Whole pages, so the trailing guard starts right at the end.
        let usable = usable.div_ceil(PAGE).max(1) * PAGE;
        Guarded(
            Mapping::options()
                .guard_pages(true)
                .map(usable)
                .expect("mmap failed"),
        )
    }

    /// The usable bytes.
    pub fn usable(&self) -> usize {
        self.0.len()
    }

    pub fn start(&self) -> *mut u8 {
        self.0.as_mut_ptr()
    }

    pub fn bytes(&mut self) -> &mut [u8] {
        self.0.as_mut_slice()
    }

    /// `len` bytes at `off` into the usable region.
    pub fn slice(&mut self, off: usize, len: usize) -> &mut [u8] {
        &mut self.bytes()[off..off + len]
    }
}

/// A byte that differs from its neighbours and from the source pattern, so a
/// write of the wrong byte, or to the wrong place, shows.
pub fn canary(i: usize) -> u8 {
    (i.wrapping_mul(131) ^ 0xA5) as u8 | 1
}

/// Source pattern: position-dependent and never equal to the canary.
pub fn pattern(i: usize, seed: usize) -> u8 {
    let x = (i ^ seed.wrapping_mul(0x9E37_79B9)).wrapping_mul(0x2545_F491) >> 11;
    (x as u8) & 0xFE
}

pub fn fill_canary(buf: &mut [u8], from: usize, to: usize) {
    for (i, b) in buf[from..to].iter_mut().enumerate() {
        *b = canary(from + i);
    }
}

pub fn fill_pattern(buf: &mut [u8], seed: usize) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern(i, seed);
    }
}

/// `n` bytes of [`pattern`]: a source buffer for tests that need no guards.
pub fn pattern_vec(n: usize, seed: usize) -> Vec<u8> {
    (0..n).map(|i| pattern(i, seed)).collect()
}

/// Index of the first byte in `buf[from..to]` that is not the canary.
pub fn first_non_canary(buf: &[u8], from: usize, to: usize) -> Option<usize> {
    (from..to).find(|&i| buf[i] != canary(i))
}
