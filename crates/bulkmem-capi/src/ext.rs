//! The sized (`_v2`) entry points and cancel handles: structs that carry
//! their own size first, so a later release can add fields at the end and
//! still serve programs built against an older header, in the manner of
//! Linux's `open_how` and `clone_args`.
//!
//! Inputs: a size below the struct's first version (`*_SIZE_VER0`) is
//! -EINVAL; a size up to ours is read and the fields past it are zero
//! (their defaults); a larger size is accepted only if the bytes we do not
//! know are zero (-E2BIG otherwise: the program asked for something this
//! library cannot do). Outputs: a size below VER0 is -EINVAL; we write the
//! fields that fit and zero any bytes we do not know, leaving `size` as
//! the caller set it.

use std::ffi::{c_int, c_void};
use std::mem::size_of;
use std::sync::atomic::{AtomicBool, Ordering};

use bulkmem_core::Report;

use crate::batch::{self, BmEngine, Hooks, Which};
use crate::compact::{self, BmCompaction};
use crate::sized::{
    BmCtlV2, BmEngineOptsV2, BmReportV2, CTL_V2_VER0, ENGINE_OPTS_V2_VER0, REPORT_V2_VER0,
};
use crate::status::{self, call, call_ptr, fail, invalid, Res};
use crate::structs::{BmCompactStatsV2, BmEngineOpts, BmExtent, COMPACT_STATS_V2_VER0};

/// The `size` a sized struct starts with, checked against its first
/// version.
///
/// # Safety
/// `p` points to at least a `size_t` (the contract: a sized struct).
unsafe fn size_of_c<T>(p: *const T, ver0: usize, what: &str) -> Res<usize> {
    // SAFETY: every sized struct starts with its size (the contract).
    let size = unsafe { p.cast::<usize>().read() };
    if size < ver0 {
        return Err(invalid(format!(
            "{what}.size is {size}, below its first version's {ver0} (use its _INIT macro)"
        )));
    }
    Ok(size)
}

/// Reads a sized input struct (NULL: `None`).
///
/// # Safety
/// `p` is NULL or points to `size` readable bytes starting with `size`;
/// `T` is valid all-zero.
unsafe fn read_in<T: Copy>(p: *const T, ver0: usize, what: &str) -> Res<Option<T>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    let size = unsafe { size_of_c(p, ver0, what)? };
    let ours = size_of::<T>();
    if size > ours {
        // SAFETY: the caller's struct is `size` bytes long (the contract).
        let tail = unsafe { std::slice::from_raw_parts(p.cast::<u8>().add(ours), size - ours) };
        if tail.iter().any(|&b| b != 0) {
            return Err(fail(
                libc::E2BIG,
                format!(
                    "{what} sets fields this library (bulkmem {}) does not know: size {size}, \
                     it knows {ours}",
                    env!("CARGO_PKG_VERSION")
                ),
            ));
        }
    }
    // SAFETY: `T` is valid all-zero (raw pointers, integers, Option<fn>).
    let mut out: T = unsafe { std::mem::zeroed() };
    // SAFETY: `size.min(ours)` bytes are readable at `p` and fit in `out`.
    unsafe {
        std::ptr::copy_nonoverlapping(
            p.cast::<u8>(),
            (&mut out as *mut T).cast::<u8>(),
            size.min(ours),
        )
    };
    Ok(Some(out))
}

/// Writes a sized output struct checked by [`size_of_c`], keeping the
/// caller's `size` and zeroing bytes past ours.
///
/// # Safety
/// `p` is NULL or points to `size` writable bytes starting with `size`.
unsafe fn write_out<T>(p: *mut T, val: &T, size: usize) {
    if p.is_null() {
        return;
    }
    let ours = size_of::<T>();
    let skip = size_of::<usize>();
    let dst = p.cast::<u8>();
    // SAFETY: `size` bytes are writable at `p` (the contract); `val` has
    // `ours` bytes; the size field itself is left alone.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (val as *const T).cast::<u8>().add(skip),
            dst.add(skip),
            size.min(ours) - skip,
        );
        if size > ours {
            std::ptr::write_bytes(dst.add(ours), 0, size - ours);
        }
    }
}

pub unsafe extern "C" fn bm_engine_new_v2(opts: *const BmEngineOptsV2) -> *mut BmEngine {
    call_ptr(|| {
        // SAFETY: forwarded contract.
        let o = unsafe { read_in(opts, ENGINE_OPTS_V2_VER0, "bm_engine_opts_v2")? };
        let old = o.map(|o| BmEngineOpts {
            threads: o.threads,
            placement: o.placement,
            chunk: o.chunk,
            strategy: o.strategy,
            hint: o.hint,
        });
        let p = old
            .as_ref()
            .map_or(std::ptr::null(), |o| o as *const BmEngineOpts);
        // SAFETY: `p` is NULL or points to a bm_engine_opts.
        let b = unsafe { batch::builder(p) }?;
        Ok(Box::into_raw(Box::new(BmEngine(b.build()?))))
    })
}

/// # Safety
/// The header's contract for `_v2` engine batches.
unsafe fn run_v2(
    which: Which,
    e: *mut BmEngine,
    ext: *const BmExtent,
    n: usize,
    ctl: *const BmCtlV2,
    report: *mut BmReportV2,
) -> Res<c_int> {
    // SAFETY: forwarded contract.
    let c = unsafe { read_in(ctl, CTL_V2_VER0, "bm_ctl_v2")? };
    let size = if report.is_null() {
        0
    } else {
        // SAFETY: forwarded contract.
        unsafe { size_of_c(report, REPORT_V2_VER0, "bm_report_v2")? }
    };
    let hooks = Hooks {
        progress: c.and_then(|c| c.progress),
        ctx: c.map_or(std::ptr::null_mut(), |c| c.ctx),
        cancel: c.map_or(std::ptr::null(), |c| c.cancel),
        handle: c.map_or(std::ptr::null(), |c| c.cancel_handle),
    };
    let out = |r: &Report| {
        let (partial, (partial_extent, partial_bytes)) = match r.partial {
            Some(p) => (1, p),
            None => (0, (0, 0)),
        };
        let v = BmReportV2 {
            size,
            total: r.total,
            bytes_done: r.bytes_done,
            extents_done: r.extents_done,
            workers: r.workers,
            cancelled: c_int::from(r.cancelled),
            strategy: status::name_of(r.strategy),
            chunks: r.chunks,
            offloaded: r.offloaded,
            offload_redone: r.offload_redone,
            partial,
            partial_extent,
            partial_bytes,
        };
        // SAFETY: `report` is NULL or a checked sized struct of `size`.
        unsafe { write_out(report, &v, size) };
    };
    // SAFETY: forwarded contract.
    unsafe { batch::run(which, e, ext, n, hooks, &out) }
}

pub unsafe extern "C" fn bm_engine_copy_batch_v2(
    e: *mut BmEngine,
    ext: *const BmExtent,
    n: usize,
    ctl: *const BmCtlV2,
    report: *mut BmReportV2,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { run_v2(Which::Copy, e, ext, n, ctl, report) })
}

pub unsafe extern "C" fn bm_engine_clear_batch_v2(
    e: *mut BmEngine,
    ext: *const BmExtent,
    n: usize,
    ctl: *const BmCtlV2,
    report: *mut BmReportV2,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { run_v2(Which::Clear, e, ext, n, ctl, report) })
}

/// The C `bm_cancel`: a flag set from any thread, read by batches.
pub extern "C" fn bm_cancel_new() -> *mut c_void {
    call_ptr(|| Ok(Box::into_raw(Box::new(AtomicBool::new(false))).cast()))
}

pub unsafe extern "C" fn bm_cancel_set(c: *mut c_void) -> c_int {
    call(|| {
        if c.is_null() {
            return Err(invalid("the cancel handle is NULL"));
        }
        // SAFETY: a non-NULL handle came from bm_cancel_new (the contract).
        unsafe { &*c.cast::<AtomicBool>() }.store(true, Ordering::Release);
        Ok(0)
    })
}

pub unsafe extern "C" fn bm_cancel_free(c: *mut c_void) {
    if !c.is_null() {
        // SAFETY: from bm_cancel_new, freed once, no batch using it (the
        // contract).
        drop(unsafe { Box::from_raw(c.cast::<AtomicBool>()) });
    }
}

pub unsafe extern "C" fn bm_compact_finish_v2(
    c: *mut BmCompaction,
    out: *mut BmCompactStatsV2,
) -> c_int {
    call(|| {
        // Checked first: a bad size leaves the session running.
        let size = if out.is_null() {
            0
        } else {
            // SAFETY: a non-NULL sized struct (the contract).
            unsafe { size_of_c(out, COMPACT_STATS_V2_VER0, "bm_compact_stats_v2")? }
        };
        // SAFETY: forwarded contract.
        let stats = unsafe { compact::finish(c) }?;
        let v2 = BmCompactStatsV2 {
            size,
            stats: compact::c_stats(&stats),
            memory_waits: stats.memory_waits as usize,
        };
        // SAFETY: `size` writable bytes at `out`, or NULL (the contract).
        unsafe { write_out(out, &v2, size) };
        Ok(0)
    })
}
