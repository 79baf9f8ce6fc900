//! Batches of extents: on the calling thread, and on the engine's workers
//! with progress and a cancel flag.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};

use bulkmem_core::{CancelToken, Control, Engine, Extent, Options, Progress, Report, Strategy};

use bulkmem_core::placement::Placement;

use bulkmem_core::offload::{EmulatedOptions, GpuOptions, Offload};

use crate::status::{self, call, call_ptr, fail, hint, invalid, region, strategy, Fail, Res};
use crate::structs::{BmCtl, BmEngineOpts, BmExtent, BmReport};

/// The C extents as the library's, or why not (the library then checks
/// NULL pointers and overlaps before writing anything).
///
/// # Safety
/// `ext` points to `n` extents (the contract), or `n` is 0.
pub(crate) unsafe fn extents(ext: *const BmExtent, n: usize) -> Res<Vec<Extent>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if ext.is_null() {
        return Err(invalid(format!("the extent array is NULL with n = {n}")));
    }
    // SAFETY: `ext` points to `n` initialised extents (the contract).
    let c = unsafe { std::slice::from_raw_parts(ext, n) };
    Ok(c.iter()
        .map(|e| Extent {
            dst: e.dst.cast(),
            src: e.src.cast(),
            len: e.len,
        })
        .collect())
}

pub unsafe extern "C" fn bm_copy_batch(ext: *const BmExtent, n: usize) -> c_int {
    call(|| {
        // SAFETY: forwarded contract.
        let v = unsafe { extents(ext, n)? };
        // SAFETY: the extents' memory is the caller's to lend (contract);
        // copy_extents validates pointers and overlaps before writing.
        unsafe { bulkmem_core::copy_extents(&v, Options::default())? };
        Ok(0)
    })
}

pub unsafe extern "C" fn bm_clear_batch(ext: *const BmExtent, n: usize) -> c_int {
    call(|| {
        // SAFETY: forwarded contract.
        let v = unsafe { extents(ext, n)? };
        // SAFETY: as in bm_copy_batch.
        unsafe { bulkmem_core::clear_extents(&v, Options::default())? };
        Ok(0)
    })
}

/// The C `bm_engine`: an opaque box around the engine (which serialises
/// batches itself, so it may be shared between threads).
pub struct BmEngine(pub Engine);

pub unsafe extern "C" fn bm_engine_new(opts: *const BmEngineOpts) -> *mut BmEngine {
    call_ptr(|| {
        // SAFETY: forwarded contract: `opts` is NULL or a bm_engine_opts.
        let b = unsafe { builder(opts) }?;
        Ok(Box::into_raw(Box::new(BmEngine(b.build()?))))
    })
}

/// `BM_OFFLOAD_GPU`.
const OFFLOAD_GPU: c_int = 1;
/// `BM_OFFLOAD_EMULATED`.
const OFFLOAD_EMULATED: c_int = 2;

pub unsafe extern "C" fn bm_engine_new_offload(
    opts: *const BmEngineOpts,
    kind: c_int,
    device: c_int,
    channels: usize,
) -> *mut BmEngine {
    call_ptr(|| {
        let channels = if channels == 0 { 2 } else { channels };
        let o = match kind {
            OFFLOAD_GPU => {
                let device = usize::try_from(device)
                    .map_err(|_| invalid(format!("device {device} is negative")))?;
                Offload::gpu(GpuOptions::default().device(device).channels(channels))?
            }
            OFFLOAD_EMULATED => {
                Offload::try_emulated(EmulatedOptions::default().channels(channels))?
            }
            k => {
                return Err(invalid(format!(
                    "offload kind {k} is not BM_OFFLOAD_GPU (1) or BM_OFFLOAD_EMULATED (2)"
                )))
            }
        };
        // SAFETY: forwarded contract.
        let b = unsafe { builder(opts) }?.offload(o);
        Ok(Box::into_raw(Box::new(BmEngine(b.build()?))))
    })
}

pub unsafe extern "C" fn bm_engine_register(
    e: *mut BmEngine,
    addr: *const c_void,
    len: usize,
) -> c_int {
    call(|| {
        let e = offload_engine(e)?;
        region(addr, len, "addr")?;
        if len > 0 {
            // SAFETY: the C contract: the range stays mapped until
            // unregistered or the engine is freed.
            unsafe { e.register(addr.cast(), len) }?;
        }
        Ok(0)
    })
}

pub unsafe extern "C" fn bm_engine_unregister(
    e: *mut BmEngine,
    addr: *const c_void,
    len: usize,
) -> c_int {
    call(|| {
        let e = offload_engine(e)?;
        region(addr, len, "addr")?;
        if len > 0 {
            e.unregister(addr.cast(), len)?;
        }
        Ok(0)
    })
}

/// The engine behind a C handle, or EINVAL for NULL.
fn engine_ref<'a>(e: *mut BmEngine) -> Result<&'a Engine, Fail> {
    if e.is_null() {
        return Err(invalid("engine is NULL"));
    }
    // SAFETY: a non-NULL engine came from bm_engine_new* (the contract) and
    // lives until bm_engine_free.
    Ok(&unsafe { &*e }.0)
}

/// The engine behind a C handle if it has an offload (registration needs
/// one, even for a length of 0), or EINVAL.
fn offload_engine<'a>(e: *mut BmEngine) -> Result<&'a Engine, Fail> {
    let e = engine_ref(e)?;
    if e.offload().is_none() {
        return Err(invalid(
            "this engine has no offload (bm_engine_new_offload): nothing to register with",
        ));
    }
    Ok(e)
}

/// An engine builder from the C options (NULL: all defaults).
///
/// # Safety
/// `opts` is NULL or points to a `bm_engine_opts`.
pub unsafe fn builder(opts: *const BmEngineOpts) -> Result<bulkmem_core::EngineBuilder, Fail> {
    {
        let mut b = Engine::builder();
        if !opts.is_null() {
            // SAFETY: a non-NULL `opts` points to a bm_engine_opts.
            let o = unsafe { &*opts };
            if o.threads > 0 {
                b = b.threads(o.threads);
            }
            b = b.placement(match o.placement {
                0 => Placement::Spread,
                1 => Placement::Fill,
                p => {
                    return Err(invalid(format!(
                        "placement {p} is not BM_PLACE_SPREAD (0) or BM_PLACE_FILL (1)"
                    )))
                }
            });
            if o.chunk > 0 {
                b = b.chunk(o.chunk);
            }
            let s = strategy(o.strategy)?;
            if s != Strategy::Auto {
                b = b.strategy(s);
            }
            b = b.hint(hint(o.hint)?);
        }
        Ok(b)
    }
}

pub unsafe extern "C" fn bm_engine_threads(e: *const BmEngine) -> usize {
    if e.is_null() {
        return 0;
    }
    // SAFETY: a non-NULL engine came from bm_engine_new (the contract).
    unsafe { &*e }.0.threads()
}

pub unsafe extern "C" fn bm_engine_free(e: *mut BmEngine) {
    if !e.is_null() {
        // The workers' shutdown cannot unwind into C.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: `e` came from bm_engine_new and is freed once (the
            // contract).
            drop(unsafe { Box::from_raw(e) })
        }));
    }
}

/// The caller's progress callback, context and cancel flag, shared with
/// the workers.
pub struct Hooks {
    pub progress: Option<extern "C" fn(usize, usize, *mut c_void)>,
    pub ctx: *mut c_void,
    pub cancel: *const c_int,
    /// A `bm_cancel` handle's flag (NULL: none).
    pub handle: *const AtomicBool,
}

// SAFETY: the header requires the progress callback (and its context) to
// be callable from worker threads; the cancel flag is only read, with a
// volatile load.
unsafe impl Sync for Hooks {}

impl Hooks {
    fn cancelled(&self) -> bool {
        // SAFETY: a non-NULL flag is a readable int for the batch (the
        // contract); volatile because another thread sets it.
        (!self.cancel.is_null() && unsafe { self.cancel.read_volatile() } != 0)
            // SAFETY: a non-NULL handle came from bm_cancel_new and outlives
            // the batch (the contract).
            || (!self.handle.is_null() && unsafe { &*self.handle }.load(Ordering::Acquire))
    }
}

pub enum Which {
    Copy,
    Clear,
}

/// The old `bm_ctl` as hooks (NULL: none).
///
/// # Safety
/// `ctl` is NULL or points to a `bm_ctl`.
unsafe fn hooks(ctl: *const BmCtl) -> Hooks {
    if ctl.is_null() {
        return Hooks {
            progress: None,
            ctx: std::ptr::null_mut(),
            cancel: std::ptr::null(),
            handle: std::ptr::null(),
        };
    }
    // SAFETY: a non-NULL `ctl` points to a bm_ctl.
    let c = unsafe { &*ctl };
    Hooks {
        progress: c.progress,
        ctx: c.ctx,
        cancel: c.cancel,
        handle: std::ptr::null(),
    }
}

/// Runs an engine batch; `out` receives the report whenever there is one.
///
/// # Safety
/// The header's contract for engine batches.
pub unsafe fn run(
    which: Which,
    e: *mut BmEngine,
    ext: *const BmExtent,
    n: usize,
    hooks: Hooks,
    out: &dyn Fn(&Report),
) -> Res<c_int> {
    if e.is_null() {
        return Err(invalid("the engine is NULL"));
    }
    // SAFETY: a non-NULL engine came from bm_engine_new.
    let engine = unsafe { &(*e).0 };
    // SAFETY: forwarded contract.
    let v = unsafe { extents(ext, n)? };
    // Wrapping lengths are refused by the engine; the report's total just
    // has to stay a number.
    let total = v.iter().fold(0usize, |a, x| a.saturating_add(x.len));
    let token = CancelToken::new();
    // A flag set before the call still lets the engine validate the batch
    // first (a bad batch is -EINVAL whatever the flag says); it then runs
    // no chunk and reports the batch cancelled.
    if hooks.cancelled() {
        token.cancel();
    }
    let on_progress = |p: Progress| {
        if let Some(f) = hooks.progress {
            f(p.done, p.total, hooks.ctx);
        }
        if hooks.cancelled() {
            token.cancel();
        }
    };
    let control = Control {
        cancel: Some(&token),
        progress: Some(&on_progress),
    };
    // SAFETY: the extents' memory is the caller's to lend for the call; the
    // engine validates pointers and overlaps before writing.
    let result = unsafe {
        match which {
            Which::Copy => engine.copy_extents(&v, control),
            Which::Clear => engine.clear_extents(&v, control),
        }
    };
    let report: Report = match result {
        Ok(r) => r,
        Err(bulkmem_core::EngineError::WorkerPanicked { report, message }) => {
            out(&report);
            return Err(fail(
                libc::ENOTRECOVERABLE,
                format!("a worker panicked ({message})"),
            ));
        }
        Err(e) => {
            // Refused before anything ran: nothing done, not cancelled.
            let mut nothing = Report::cancelled_before_start(total);
            nothing.cancelled = false;
            out(&nothing);
            return Err(e.into());
        }
    };
    out(&report);
    if report.cancelled {
        return Err(fail(
            libc::ECANCELED,
            format!(
                "cancelled after {} of {} bytes (extents 0..{} complete)",
                report.bytes_done, report.total, report.extents_done
            ),
        ));
    }
    Ok(0)
}

pub(crate) fn write_report(out: *mut BmReport, r: &Report) {
    if out.is_null() {
        return;
    }
    let c = BmReport {
        total: r.total,
        bytes_done: r.bytes_done,
        extents_done: r.extents_done,
        workers: r.workers,
        cancelled: c_int::from(r.cancelled),
        strategy: status::name_of(r.strategy),
    };
    // SAFETY: a non-NULL report points to a bm_report (the contract).
    unsafe { out.write(c) };
}

pub unsafe extern "C" fn bm_engine_copy_batch(
    e: *mut BmEngine,
    ext: *const BmExtent,
    n: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { run(Which::Copy, e, ext, n, hooks(std::ptr::null()), &|_| ()) })
}

pub unsafe extern "C" fn bm_engine_clear_batch(
    e: *mut BmEngine,
    ext: *const BmExtent,
    n: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { run(Which::Clear, e, ext, n, hooks(std::ptr::null()), &|_| ()) })
}

pub unsafe extern "C" fn bm_engine_copy_batch_ctl(
    e: *mut BmEngine,
    ext: *const BmExtent,
    n: usize,
    ctl: *const BmCtl,
    report: *mut BmReport,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe {
        run(Which::Copy, e, ext, n, hooks(ctl), &|r| {
            write_report(report, r)
        })
    })
}

pub unsafe extern "C" fn bm_engine_clear_batch_ctl(
    e: *mut BmEngine,
    ext: *const BmExtent,
    n: usize,
    ctl: *const BmCtl,
    report: *mut BmReport,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe {
        run(Which::Clear, e, ext, n, hooks(ctl), &|r| {
            write_report(report, r)
        })
    })
}
