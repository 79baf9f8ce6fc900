//! Single copies and clears, checked ones, and what `auto` would do.

use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::OnceLock;

use bulkmem_core::{auto, Op, Options, Strategy};

use bulkmem_core::auto::Request;

use crate::status::{self, call, disjoint, hint, invalid, region, strategy, Res};
use crate::structs::BmFault;

/// Copies with `opts` after checking the C arguments.
///
/// # Safety
/// The header's contract: `src` readable and `dst` writable for `len`.
unsafe fn copy(opts: Options, dst: *mut c_void, src: *const c_void, len: usize) -> Res<c_int> {
    region(dst, len, "dst")?;
    region(src, len, "src")?;
    disjoint(dst, len, src, len, "dst and src")?;
    if len == 0 {
        return resolve_only(opts, Op::Copy);
    }
    // SAFETY: checked non-NULL, not wrapping, disjoint; the caller vouches
    // for the memory.
    let (d, s) = unsafe {
        (
            std::slice::from_raw_parts_mut(dst.cast::<u8>(), len),
            std::slice::from_raw_parts(src.cast::<u8>(), len),
        )
    };
    bulkmem_core::copy_opts(d, s, opts)?;
    Ok(0)
}

/// # Safety
/// `dst` writable for `len`.
unsafe fn clear(opts: Options, dst: *mut c_void, len: usize) -> Res<c_int> {
    region(dst, len, "dst")?;
    if len == 0 {
        return resolve_only(opts, Op::Clear);
    }
    // SAFETY: checked non-NULL and not wrapping; the caller vouches.
    let d = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), len) };
    bulkmem_core::clear_opts(d, opts)?;
    Ok(0)
}

/// An empty call still refuses a strategy that could not run.
fn resolve_only(opts: Options, op: Op) -> Res<c_int> {
    bulkmem_policy::auto::resolve(opts, &Request::single(op, 0, opts.hint))?;
    Ok(0)
}

/// Whether a copy's arguments are ones the checking path would accept as
/// they are (both regions non-NULL, not wrapping, disjoint, `len` not 0),
/// so the one-load path may take them without its panic guard and
/// thread-local state (about 15 ns a call, 8x a hot 64-byte copy).
/// Anything else takes the checking path, which says what is wrong.
#[inline]
fn plain_copy(dst: *mut c_void, src: *const c_void, len: usize) -> bool {
    let (d, s) = (dst as usize, src as usize);
    plain_region(d, len) && plain_region(s, len) && (d + len <= s || s + len <= d)
}

#[inline]
fn plain_region(p: usize, len: usize) -> bool {
    len != 0 && len <= isize::MAX as usize && p != 0 && p.checked_add(len).is_some()
}

/// The slices of a [`plain_copy`].
///
/// # Safety
/// `plain_copy` held, and the header's contract for the memory.
unsafe fn copy_slices<'a>(
    dst: *mut c_void,
    src: *const c_void,
    len: usize,
) -> (&'a mut [u8], &'a [u8]) {
    // SAFETY: non-NULL, not wrapping, disjoint; the caller vouches for
    // the memory.
    unsafe {
        (
            std::slice::from_raw_parts_mut(dst.cast::<u8>(), len),
            std::slice::from_raw_parts(src.cast::<u8>(), len),
        )
    }
}

pub unsafe extern "C" fn bm_copy(dst: *mut c_void, src: *const c_void, len: usize) -> c_int {
    if plain_copy(dst, src, len) {
        // SAFETY: checked just above; the header's contract.
        let (d, s) = unsafe { copy_slices(dst, src, len) };
        if bulkmem_policy::auto::direct::copy(d, s).is_some() {
            return 0;
        }
    }
    // SAFETY: forwarded contract.
    call(|| unsafe { copy(Options::default(), dst, src, len) })
}

pub unsafe extern "C" fn bm_clear(dst: *mut c_void, len: usize) -> c_int {
    if plain_region(dst as usize, len) {
        // SAFETY: non-NULL, not wrapping; the header's contract.
        let d = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), len) };
        if bulkmem_policy::auto::direct::clear(d).is_some() {
            return 0;
        }
    }
    // SAFETY: forwarded contract.
    call(|| unsafe { clear(Options::default(), dst, len) })
}

pub unsafe extern "C" fn bm_copy_hint(
    dst: *mut c_void,
    src: *const c_void,
    len: usize,
    h: c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { copy(Options::hint(hint(h)?), dst, src, len) })
}

pub unsafe extern "C" fn bm_clear_hint(dst: *mut c_void, len: usize, h: c_int) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { clear(Options::hint(hint(h)?), dst, len) })
}

pub unsafe extern "C" fn bm_copy_with(
    name: *const c_char,
    dst: *mut c_void,
    src: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { copy(Options::strategy(strategy(name)?), dst, src, len) })
}

pub unsafe extern "C" fn bm_clear_with(name: *const c_char, dst: *mut c_void, len: usize) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { clear(Options::strategy(strategy(name)?), dst, len) })
}

pub unsafe extern "C" fn bm_strategy_available(name: *const c_char) -> c_int {
    call(|| {
        if name.is_null() {
            return Err(invalid("the strategy name is NULL"));
        }
        Ok(c_int::from(strategy(name)?.available()))
    })
}

pub unsafe extern "C" fn bm_strategy_supports(name: *const c_char, op: c_int) -> c_int {
    call(|| {
        if name.is_null() {
            return Err(invalid("the strategy name is NULL"));
        }
        let op = match op {
            0 => Op::Copy,
            1 => Op::Clear,
            _ => {
                return Err(invalid(format!(
                    "op {op} is not BM_OP_COPY (0) or BM_OP_CLEAR (1)"
                )))
            }
        };
        Ok(c_int::from(strategy(name)?.supports(op)))
    })
}

pub extern "C" fn bm_strategy_name(i: usize) -> *const c_char {
    match Strategy::ALL.get(i) {
        Some(&s) => status::name_of(s),
        None => std::ptr::null(),
    }
}

pub extern "C" fn bm_auto_choice(op: c_int, total: usize, runs: usize, h: c_int) -> *const c_char {
    let op = match op {
        0 => Op::Copy,
        1 => Op::Clear,
        _ => return std::ptr::null(),
    };
    let Ok(hint) = hint(h) else {
        return std::ptr::null();
    };
    let mut out = std::ptr::null();
    call(|| {
        let req = Request {
            op,
            total,
            runs: runs.max(1),
            hint,
        };
        out = status::name_of(auto::Policy::here().decide(&req).strategy);
        Ok(0)
    });
    out
}

pub extern "C" fn bm_is_tuned() -> c_int {
    c_int::from(bulkmem_policy::auto::profile().is_some())
}

pub extern "C" fn bm_profile_status() -> *const c_char {
    static S: OnceLock<CString> = OnceLock::new();
    S.get_or_init(|| {
        CString::new(auto::profile_status().to_string().replace('\0', " ")).unwrap_or_default()
    })
    .as_ptr()
}

#[cfg(target_arch = "x86_64")]
fn report_fault(e: bulkmem_core::Error, out: *mut BmFault) -> status::Fail {
    if let bulkmem_core::Error::Fault(f) = &e {
        if !out.is_null() {
            let side = match f.side {
                bulkmem_core::fault::Side::Source => 1,
                bulkmem_core::fault::Side::Destination => 2,
            };
            // SAFETY: a non-NULL `f` points to a bm_fault (the contract).
            unsafe {
                out.write(BmFault {
                    offset: f.offset,
                    addr: f.addr as *mut c_void,
                    side,
                    code: f.code,
                })
            };
        }
    }
    e.into()
}

pub unsafe extern "C" fn bm_copy_checked(
    dst: *mut c_void,
    src: *const c_void,
    len: usize,
    f: *mut BmFault,
) -> c_int {
    #[cfg(target_arch = "x86_64")]
    if plain_copy(dst, src, len) {
        // SAFETY: checked just above; the header's contract (faults are
        // caught: the checked routines touch the memory from assembly).
        let (d, s) = unsafe { copy_slices(dst, src, len) };
        match bulkmem_policy::auto::direct::copy_checked_if_direct(d, s) {
            Some(Ok(())) => return 0,
            Some(Err(e)) => return call(|| Err(report_fault(bulkmem_core::Error::Fault(e), f))),
            None => {}
        }
    }
    call(|| {
        region(dst, len, "dst")?;
        region(src, len, "src")?;
        disjoint(dst, len, src, len, "dst and src")?;
        // Installed even for length 0: bulkmem.h tells programs to make
        // such a call to put bulkmem's handler in first.
        #[cfg(target_arch = "x86_64")]
        bulkmem_core::fault::install();
        if len == 0 {
            return Ok(0);
        }
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: checked as in bm_copy; faults are caught, not UB: the
            // checked routines touch the memory only from assembly.
            let (d, s) = unsafe {
                (
                    std::slice::from_raw_parts_mut(dst.cast::<u8>(), len),
                    std::slice::from_raw_parts(src.cast::<u8>(), len),
                )
            };
            bulkmem_core::fault::copy_checked_with(Strategy::Auto, d, s)
                .map_err(|e| report_fault(e, f))?;
            Ok(0)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = f;
            Err(status::fail(libc::ENOTSUP, "checked copies need x86_64"))
        }
    })
}

pub unsafe extern "C" fn bm_clear_checked(dst: *mut c_void, len: usize, f: *mut BmFault) -> c_int {
    #[cfg(target_arch = "x86_64")]
    if plain_region(dst as usize, len) {
        // SAFETY: as in bm_copy_checked.
        let d = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), len) };
        match bulkmem_policy::auto::direct::clear_checked_if_direct(d) {
            Some(Ok(())) => return 0,
            Some(Err(e)) => return call(|| Err(report_fault(bulkmem_core::Error::Fault(e), f))),
            None => {}
        }
    }
    call(|| {
        region(dst, len, "dst")?;
        #[cfg(target_arch = "x86_64")]
        bulkmem_core::fault::install();
        if len == 0 {
            return Ok(0);
        }
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: as in bm_copy_checked.
            let d = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), len) };
            bulkmem_core::fault::clear_checked_with(Strategy::Auto, d)
                .map_err(|e| report_fault(e, f))?;
            Ok(0)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = f;
            Err(status::fail(libc::ENOTSUP, "checked clears need x86_64"))
        }
    })
}
