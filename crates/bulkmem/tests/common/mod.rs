//! Test support: memory with PROT_NONE guard pages on both sides, so any
//! access outside the usable region faults, plus canary bookkeeping that
//! catches stray writes inside it.

#![allow(dead_code)]

use std::ptr;

pub mod poison;
pub mod region;

pub const PAGE: usize = 4096;

/// `pages` usable pages between two inaccessible guard pages.
pub struct Guarded {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by the value and only reached through it.
unsafe impl Send for Guarded {}

impl Guarded {
    pub fn new(usable: usize) -> Guarded {
        let usable = usable.div_ceil(PAGE).max(1) * PAGE;
        let total = usable + 2 * PAGE;
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED, "mmap failed");
        let base = base as *mut u8;
        // SAFETY: both guard pages lie inside the mapping just created.
        unsafe {
            assert_eq!(libc::mprotect(base.cast(), PAGE, libc::PROT_NONE), 0);
            assert_eq!(
                libc::mprotect(base.add(PAGE + usable).cast(), PAGE, libc::PROT_NONE),
                0
            );
        }
        Guarded { base, len: total }
    }

    /// The usable bytes.
    pub fn usable(&self) -> usize {
        self.len - 2 * PAGE
    }

    pub fn start(&self) -> *mut u8 {
        // SAFETY: the usable region begins one page into the mapping.
        unsafe { self.base.add(PAGE) }
    }

    pub fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the usable region is mapped read-write and owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.start(), self.usable()) }
    }

    /// `len` bytes at `off` into the usable region.
    pub fn slice(&mut self, off: usize, len: usize) -> &mut [u8] {
        &mut self.bytes()[off..off + len]
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping created in `new`.
        unsafe { libc::munmap(self.base.cast(), self.len) };
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

/// Index of the first byte in `buf[from..to]` that is not the canary.
pub fn first_non_canary(buf: &[u8], from: usize, to: usize) -> Option<usize> {
    (from..to).find(|&i| buf[i] != canary(i))
}
