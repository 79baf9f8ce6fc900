//! Template fill and the non-temporal drain (the kernel's non-temporal template-fill patches).

use std::ffi::{c_int, c_void};

use crate::status::{call, disjoint, region, Res};

/// # Safety
/// `dst` writable for `len`, `tmpl` readable for `tmpl_len` (the contract).
unsafe fn fill(
    dst: *mut c_void,
    len: usize,
    tmpl: *const c_void,
    tmpl_len: usize,
    patch: Option<extern "C" fn(usize, *mut c_void, usize, *mut c_void)>,
    ctx: *mut c_void,
) -> Res<c_int> {
    region(dst, len, "dst")?;
    region(tmpl, tmpl_len, "tmpl")?;
    disjoint(dst, len, tmpl, tmpl_len, "dst and tmpl")?;
    if len == 0 {
        // The header's promise: a length of 0 is valid and does nothing,
        // even with no template (which the library would refuse).
        return Ok(0);
    }
    // SAFETY: checked non-NULL, not wrapping, disjoint from the template.
    let d = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), len) };
    let t: &[u8] = if tmpl_len == 0 {
        &[]
    } else {
        // SAFETY: checked non-NULL and not wrapping.
        unsafe { std::slice::from_raw_parts(tmpl.cast::<u8>(), tmpl_len) }
    };
    match patch {
        None => bulkmem_core::fill(d, t)?,
        Some(f) => bulkmem_core::fill_patched(d, t, |i, elem: &mut [u8]| {
            f(i, elem.as_mut_ptr().cast(), elem.len(), ctx)
        })?,
    };
    Ok(0)
}

pub unsafe extern "C" fn bm_fill(
    dst: *mut c_void,
    len: usize,
    tmpl: *const c_void,
    tmpl_len: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { fill(dst, len, tmpl, tmpl_len, None, std::ptr::null_mut()) })
}

pub unsafe extern "C" fn bm_fill_with(
    dst: *mut c_void,
    len: usize,
    tmpl: *const c_void,
    tmpl_len: usize,
    patch: Option<extern "C" fn(usize, *mut c_void, usize, *mut c_void)>,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { fill(dst, len, tmpl, tmpl_len, patch, ctx) })
}

pub extern "C" fn bm_nt_drain() {
    bulkmem_machine::kernels::drain();
}
