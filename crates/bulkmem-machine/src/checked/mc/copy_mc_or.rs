//! The checked twin of `kernels/movsb_or_avx2.rs`: the string routine or
//! the AVX2 routine, by the same test of the pair's alignment. A fault
//! lands in the routine called (its own exception table), which returns
//! here as it would to any caller.

use super::copy_mc::bulkmem_mc_copy_movsb;
use super::copy_mc_vec::bulkmem_mc_copy_avx2;
use super::extable::RawFault;
use crate::kernels::movsb_or_avx2::paired;

/// Copies as `bulkmem_mc_copy_movsb` when the two addresses share their
/// offset in a line, as `bulkmem_mc_copy_avx2` otherwise; returns what
/// that routine returns (the bytes not copied).
///
/// # Safety
/// The contract of the checked routines (`crate::checked::mc`); the CPU
/// has AVX2.
pub unsafe extern "C" fn bulkmem_mc_copy_movsb_or_avx2(
    dst: *mut u8,
    src: *const u8,
    len: usize,
    fault: *mut RawFault,
) -> usize {
    if paired(dst, src) {
        // SAFETY: forwarded contract.
        unsafe { bulkmem_mc_copy_movsb(dst, src, len, fault) }
    } else {
        // SAFETY: forwarded contract, AVX2 included.
        unsafe { bulkmem_mc_copy_avx2(dst, src, len, fault) }
    }
}
