//! Concurrent compaction (`bulkmem::compact`) for collectors written in C.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use bulkmem_core::compact::{self, Compaction, Fill, Mode, Options, Producer, Space, Stats, PAGE};

use crate::status::{call, call_ptr, invalid, Res};
use crate::structs::{BmCompactOptions, BmCompactSpace, BmCompactStats};

/// `int produce(void *ctx, size_t page, const void *from_space, void *out)`:
/// returns `BM_FILL_BUILT`, `BM_FILL_ZERO` or `BM_FILL_SAME`.
pub type ProduceFn = unsafe extern "C" fn(*mut c_void, usize, *const c_void, *mut c_void) -> c_int;
/// `size_t first_source(void *ctx, size_t page)`, and `last_source`.
pub type SourceFn = unsafe extern "C" fn(*mut c_void, usize) -> usize;

/// The C view of a session's statistics.
pub(crate) fn c_stats(s: &Stats) -> BmCompactStats {
    let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
    BmCompactStats {
        pages: s.pages,
        by_collector: s.by_collector as usize,
        by_mutators: s.by_mutators as usize,
        faults: s.faults as usize,
        waits: s.waits as usize,
        refaults: s.refaults as usize,
        ioctls: s.ioctls as usize,
        moved: s.moved as usize,
        copied: s.copied as usize,
        zeroed: s.zeroed as usize,
        move_fallbacks: s.move_fallbacks as usize,
        eexist: s.eexist as usize,
        released: s.released as usize,
        failed: s.failed as usize,
        pause_us: us(s.pause),
        stall_p50_us: us(s.stall.quantile(0.5)),
        stall_p99_us: us(s.stall.quantile(0.99)),
        stall_p999_us: us(s.stall.quantile(0.999)),
        stall_max_us: us(s.stall.max()),
    }
}

/// The collector's callbacks and context.
struct CProducer {
    produce: ProduceFn,
    first_source: Option<SourceFn>,
    last_source: Option<SourceFn>,
    ctx: *mut c_void,
}

// SAFETY: the header's contract: the callbacks may be called from any
// thread, concurrently for different pages, and `ctx` is safe to share.
unsafe impl Send for CProducer {}
// SAFETY: as above.
unsafe impl Sync for CProducer {}

impl Producer for CProducer {
    fn produce(&self, page: usize, from_space: *const u8, out: &mut [u8; PAGE]) -> Fill {
        // SAFETY: the collector's callback with its own context, a page
        // number, the from-space and a writable page.
        match unsafe { (self.produce)(self.ctx, page, from_space.cast(), out.as_mut_ptr().cast()) }
        {
            1 => Fill::Zero,
            2 => Fill::Same,
            _ => Fill::Built,
        }
    }

    fn first_source(&self, page: usize) -> usize {
        self.first_source.map_or(0, |f| {
            // SAFETY: as above.
            unsafe { f(self.ctx, page) }
        })
    }

    fn last_source(&self, page: usize) -> usize {
        self.last_source.map_or(usize::MAX, |f| {
            // SAFETY: as above.
            unsafe { f(self.ctx, page) }
        })
    }
}

/// The C `bm_compaction`.
pub struct BmCompaction(Compaction);

fn options(o: *const BmCompactOptions) -> Res<Options> {
    let mut opts = Options::default();
    if o.is_null() {
        return Ok(opts);
    }
    // SAFETY: a non-NULL pointer to the caller's options (the contract).
    let o = unsafe { &*o };
    opts = opts.mode(match o.mode {
        0 => Mode::Auto,
        1 => Mode::Copy,
        2 => Mode::Move,
        m => {
            return Err(invalid(format!(
                "unknown compaction mode {m} (BM_COMPACT_AUTO, _COPY or _MOVE)"
            )))
        }
    });
    if o.workers != 0 {
        opts = opts.workers(o.workers as usize);
    }
    if o.batch != 0 {
        opts = opts.batch(o.batch as usize);
    }
    Ok(match o.huge_pages {
        0 => opts,
        1 => opts.huge_pages(true),
        2 => opts.huge_pages(false),
        h => {
            return Err(invalid(format!(
                "unknown huge_pages {h} (0: the system's policy, BM_COMPACT_HUGE_ON or _OFF)"
            )))
        }
    })
}

fn producer(
    produce: Option<ProduceFn>,
    first_source: Option<SourceFn>,
    last_source: Option<SourceFn>,
    ctx: *mut c_void,
) -> Res<CProducer> {
    let produce = produce.ok_or_else(|| invalid("the produce callback is NULL"))?;
    Ok(CProducer {
        produce,
        first_source,
        last_source,
        ctx,
    })
}

fn put_stats(out: *mut BmCompactStats, s: &Stats) {
    if !out.is_null() {
        // SAFETY: a non-NULL pointer to the caller's struct.
        unsafe { out.write(c_stats(s)) };
    }
}

pub extern "C" fn bm_compact_supported() -> c_int {
    call(|| Ok(c_int::from(compact::support()?.moves)))
}

pub unsafe extern "C" fn bm_compact_prepare(
    heap: *mut c_void,
    len: usize,
    produce: Option<ProduceFn>,
    first_source: Option<SourceFn>,
    ctx: *mut c_void,
    opts: *const BmCompactOptions,
) -> *mut BmCompaction {
    call_ptr(|| {
        let p = producer(produce, first_source, None, ctx)?;
        let opts = options(opts)?;
        // SAFETY: the header's contract: the caller's pause.
        let s = unsafe { Compaction::prepare(heap.cast(), len, Arc::new(p), opts) }?;
        Ok(Box::into_raw(Box::new(BmCompaction(s))))
    })
}

pub unsafe extern "C" fn bm_compact_prepare_spaces(
    spaces: *const BmCompactSpace,
    n: usize,
    opts: *const BmCompactOptions,
) -> *mut BmCompaction {
    call_ptr(|| {
        if spaces.is_null() || n == 0 {
            return Err(invalid("no spaces (NULL or n == 0)"));
        }
        // SAFETY: the caller's array of n spaces (the contract).
        let given = unsafe { std::slice::from_raw_parts(spaces, n) };
        let mut list = Vec::with_capacity(n);
        for (i, sp) in given.iter().enumerate() {
            let p = producer(sp.produce, sp.first_source, sp.last_source, sp.ctx)
                .map_err(|_| invalid(format!("space {i}: the produce callback is NULL")))?;
            list.push(Space::new(sp.heap.cast(), sp.len, Arc::new(p)));
        }
        let opts = options(opts)?;
        // SAFETY: the header's contract: the caller's pause.
        let s = unsafe { Compaction::prepare_spaces(list, opts) }?;
        Ok(Box::into_raw(Box::new(BmCompaction(s))))
    })
}

fn session<'a>(c: *mut BmCompaction) -> Res<&'a mut BmCompaction> {
    if c.is_null() {
        return Err(invalid("the compaction is NULL"));
    }
    // SAFETY: a non-NULL handle from bm_compact_prepare (the contract).
    Ok(unsafe { &mut *c })
}

pub unsafe extern "C" fn bm_compact_start(c: *mut BmCompaction) -> c_int {
    call(|| {
        session(c)?.0.start()?;
        Ok(0)
    })
}

pub unsafe extern "C" fn bm_compact_ensure(
    c: *mut BmCompaction,
    addr: *const c_void,
    len: usize,
) -> c_int {
    call(|| {
        session(c)?.0.ensure(addr.cast(), len)?;
        Ok(0)
    })
}

pub unsafe extern "C" fn bm_compact_finish(
    c: *mut BmCompaction,
    out: *mut BmCompactStats,
) -> c_int {
    call(|| {
        // SAFETY: forwarded contract.
        let stats = unsafe { finish(c) }?;
        put_stats(out, &stats);
        Ok(0)
    })
}

/// Ends the session `c` (freed) and returns its statistics, and with
/// them [`c_stats`]'s C view: `bm_compact_finish` and its sized twin.
///
/// # Safety
/// `c` is NULL or a handle from `bm_compact_prepare*` not used after.
pub(crate) unsafe fn finish(c: *mut BmCompaction) -> Res<Stats> {
    session(c)?;
    // SAFETY: the handle came from Box::into_raw in bm_compact_prepare
    // and is not used after this call (the contract).
    let s = unsafe { Box::from_raw(c) };
    Ok(s.0.finish()?)
}

pub unsafe extern "C" fn bm_compact_stop_the_world(
    heap: *mut c_void,
    len: usize,
    produce: Option<ProduceFn>,
    first_source: Option<SourceFn>,
    ctx: *mut c_void,
    opts: *const BmCompactOptions,
    out: *mut BmCompactStats,
) -> c_int {
    call(|| {
        let p = producer(produce, first_source, None, ctx)?;
        let opts = options(opts)?;
        // SAFETY: the header's contract: the caller's pause.
        let stats = unsafe { compact::stop_the_world(heap.cast(), len, &p, opts) }?;
        put_stats(out, &stats);
        Ok(0)
    })
}
