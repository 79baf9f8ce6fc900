//! The GPU backend: the CUDA driver API, loaded at run time.
//!
//! `libcuda.so.1` is opened with `dlopen` the first time a GPU is asked for,
//! so the crate has no build-time dependency on CUDA and behaves the same as
//! before on machines without the driver (the functions here then return
//! why). Symbols are looked up by their exact exported names, which for the
//! calls whose ABI changed over the driver's life are the `_v2` names
//! `cuda.h` maps the plain ones to (`cuMemAlloc` -> `cuMemAlloc_v2`, ...):
//! looking up the plain name would bind the old ABI.
//!
//! A channel is a pair of non-blocking streams on the device's primary
//! context, one for host-to-device and one for device-to-host copies, and
//! `depth` device staging buffers. Host memory cannot be copied to host
//! memory by a copy engine directly, so each slice goes up into a staging
//! buffer and back down to its destination; with two streams and several
//! buffers, the upload of one slice overlaps the download of the previous
//! ones, and both directions' copy engines stay busy.
//!
//! The context is pushed for the duration of every call that needs it and
//! popped after, rather than set: `register` runs on the caller's threads,
//! which may have a CUDA context of their own current, and must find it
//! current again afterwards.

use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr;
use std::sync::Arc;

mod driver;

use driver::*;

use super::{Backend, Channel, GpuInfo, GpuOptions};
use crate::plan::Extent;

/// The GPUs the driver sees, or why there are none to see.
pub(crate) fn devices() -> Result<Vec<GpuInfo>, String> {
    let drv = driver()?;
    (0..drv.device_count()?).map(|i| drv.info(i)).collect()
}

/// The retained primary context of one device, shared by the backend and
/// its channels so that it outlives every stream, event and buffer made in
/// it; released when the last of them is dropped.
struct Shared {
    drv: &'static Driver,
    ordinal: usize,
    name: String,
    dev: CUdevice,
    ctx: CUcontext,
}

// SAFETY: a CUcontext is a driver handle that any thread may make current
// and use; the other fields are plain data. Nothing here is thread-bound.
unsafe impl Send for Shared {}
// SAFETY: as above; `&Shared` only gives the handle out to driver calls,
// which are thread-safe.
unsafe impl Sync for Shared {}

impl Shared {
    /// Makes the context current on this thread until the guard drops.
    fn enter(&self) -> Result<Current<'_>, String> {
        // SAFETY: `ctx` is retained for as long as `self` lives.
        let r = unsafe { (self.drv.ctx_push_current)(self.ctx) };
        self.drv.check(r, "cuCtxPushCurrent_v2")?;
        Ok(Current {
            shared: self,
            _thread: PhantomData,
        })
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: balances the cuDevicePrimaryCtxRetain of `open`; every
        // channel holding this struct is gone, so nothing uses it after.
        let _ = unsafe { (self.drv.primary_ctx_release)(self.dev) };
    }
}

/// The context pushed on this thread; popped on drop, restoring whatever
/// the thread had current before.
struct Current<'a> {
    shared: &'a Shared,
    /// The push and pop must happen on the same thread.
    _thread: PhantomData<*const ()>,
}

impl Drop for Current<'_> {
    fn drop(&mut self) {
        let mut popped: CUcontext = ptr::null_mut();
        // SAFETY: pops the context `enter` pushed on this thread (the guard
        // cannot leave it, and guards drop in reverse order).
        let _ = unsafe { (self.shared.drv.ctx_pop_current)(&mut popped) };
    }
}

/// The device side of [`Offload::gpu`](super::Offload::gpu): what register
/// means (pinning), and the context its channels run in.
struct GpuBackend {
    shared: Arc<Shared>,
    channels: usize,
    depth: usize,
    staging: usize,
}

impl Backend for GpuBackend {
    fn describe(&self) -> String {
        let s = &self.shared;
        format!(
            "gpu {} ({}), {} channel{} x {} x {} staging",
            s.ordinal,
            s.name,
            self.channels,
            if self.channels == 1 { "" } else { "s" },
            self.depth,
            bytes(self.staging)
        )
    }

    unsafe fn register(&self, addr: usize, len: usize) -> Result<(), String> {
        if len == 0 {
            return Ok(()); // nothing to pin, and the driver refuses 0 bytes
        }
        let _cur = self.shared.enter()?;
        let p = ptr::with_exposed_provenance_mut::<c_void>(addr);
        // SAFETY: the range is mapped memory the caller owns until it is
        // unregistered (the caller's contract); pinning does not touch its
        // contents. The context is current.
        let r = unsafe { (self.shared.drv.mem_host_register)(p, len, CU_MEMHOSTREGISTER_PORTABLE) };
        self.shared
            .drv
            .check(r, &format!("cuMemHostRegister_v2({addr:#x}, {len})"))
    }

    fn unregister(&self, addr: usize, len: usize) -> Result<(), String> {
        if len == 0 {
            return Ok(());
        }
        let _cur = self.shared.enter()?;
        let p = ptr::with_exposed_provenance_mut::<c_void>(addr);
        // SAFETY: unpinning neither reads nor writes the memory; the driver
        // refuses an address it did not register. The context is current.
        let r = unsafe { (self.shared.drv.mem_host_unregister)(p) };
        self.shared
            .drv
            .check(r, &format!("cuMemHostUnregister({addr:#x})"))
    }
}

fn bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

/// One slice of a piece, staged through one device buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slice {
    /// Index of the piece in the call.
    piece: usize,
    /// Offset of the slice in the piece.
    offset: usize,
    /// Bytes, at most the staging size, never 0.
    len: usize,
    /// Staging buffer: the slice's position in the call modulo `depth`, so
    /// that consecutive slices rotate through the buffers.
    buffer: usize,
}

/// Splits `pieces` into slices of at most `staging` bytes, in order, and
/// gives each a staging buffer in rotation; empty pieces have no slices.
fn plan(pieces: &[Extent], staging: usize, depth: usize) -> Vec<Slice> {
    assert!(
        staging > 0 && depth > 0,
        "staging and depth must be nonzero"
    );
    let mut out = Vec::with_capacity(pieces.iter().map(|p| p.len.div_ceil(staging)).sum());
    for (piece, p) in pieces.iter().enumerate() {
        let mut offset = 0;
        while offset < p.len {
            let len = (p.len - offset).min(staging);
            let buffer = out.len() % depth;
            out.push(Slice {
                piece,
                offset,
                len,
                buffer,
            });
            offset += len;
        }
    }
    out
}

/// A stream pair and its staging buffers (see the module docs).
struct GpuChannel {
    shared: Arc<Shared>,
    /// Host-to-device copies.
    h2d: CUstream,
    /// Device-to-host copies.
    d2h: CUstream,
    /// Staging buffers of `staging` bytes each.
    bufs: Vec<CUdeviceptr>,
    /// `loaded[b]`: the upload into `bufs[b]` is done (recorded on `h2d`).
    loaded: Vec<CUevent>,
    /// `drained[b]`: the download out of `bufs[b]` is done (on `d2h`).
    drained: Vec<CUevent>,
    /// Recorded after a call's last download; waited for by sleeping
    /// (`CU_EVENT_BLOCKING_SYNC`). `cuStreamSynchronize` spins in the
    /// primary context's default scheduling, and a spinning channel
    /// thread took a CPU from the workers: 16 threads beside two channels
    /// ran 10-20% slower than alone on an H200 host.
    finished: CUevent,
    staging: usize,
}

// SAFETY: the channel owns its streams, events and buffers, which are
// driver handles usable from any thread that has their context current
// (every method pushes it first); `Shared` is Send + Sync. Only one thread
// uses a channel at a time (`&mut self`).
unsafe impl Send for GpuChannel {}

impl GpuChannel {
    /// Creates a channel; the context must be current on this thread.
    /// Whatever was created before a failure is freed by `Drop`.
    fn new(shared: &Arc<Shared>, depth: usize, staging: usize) -> Result<GpuChannel, String> {
        if depth == 0 || staging == 0 {
            return Err(format!(
                "a channel needs staging buffers (depth {depth}, staging {staging})"
            ));
        }
        let drv = shared.drv;
        let mut ch = GpuChannel {
            shared: Arc::clone(shared),
            h2d: ptr::null_mut(),
            d2h: ptr::null_mut(),
            bufs: Vec::with_capacity(depth),
            loaded: Vec::with_capacity(depth),
            drained: Vec::with_capacity(depth),
            finished: ptr::null_mut(),
            staging,
        };
        // SAFETY: the handles are valid places to write; the context is
        // current (the caller's contract).
        let r = unsafe { (drv.stream_create)(&mut ch.h2d, CU_STREAM_NON_BLOCKING) };
        drv.check(r, "cuStreamCreate")?;
        // SAFETY: as above.
        let r = unsafe { (drv.stream_create)(&mut ch.d2h, CU_STREAM_NON_BLOCKING) };
        drv.check(r, "cuStreamCreate")?;
        // SAFETY: as above.
        let r = unsafe {
            (drv.event_create)(
                &mut ch.finished,
                CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING,
            )
        };
        drv.check(r, "cuEventCreate(blocking)")?;
        for _ in 0..depth {
            let mut buf: CUdeviceptr = 0;
            // SAFETY: as above.
            let r = unsafe { (drv.mem_alloc)(&mut buf, staging) };
            drv.check(r, &format!("cuMemAlloc_v2({staging})"))?;
            ch.bufs.push(buf);
            for events in [&mut ch.loaded, &mut ch.drained] {
                let mut ev: CUevent = ptr::null_mut();
                // SAFETY: as above.
                let r = unsafe { (drv.event_create)(&mut ev, CU_EVENT_DISABLE_TIMING) };
                drv.check(r, "cuEventCreate")?;
                events.push(ev);
            }
        }
        Ok(ch)
    }

    /// Queues every slice: slice `i` goes up into its buffer on `h2d` once
    /// the download of slice `i - depth` out of that buffer is done, and
    /// comes down on `d2h` once its upload is done.
    ///
    /// # Safety
    /// As [`Channel::copy`] for `pieces`; `slices` planned from them with
    /// this channel's staging size and depth; the context current.
    unsafe fn enqueue(&self, pieces: &[Extent], slices: &[Slice]) -> Result<(), String> {
        let drv = self.shared.drv;
        let depth = self.bufs.len();
        for (i, s) in slices.iter().enumerate() {
            let p = pieces[s.piece];
            let b = s.buffer;
            let (buf, loaded, drained) = (self.bufs[b], self.loaded[b], self.drained[b]);
            let src = p.src.wrapping_add(s.offset).cast::<c_void>();
            let dst = p.dst.wrapping_add(s.offset).cast::<c_void>();
            // Earlier calls synchronized both streams before returning, so
            // a buffer's first use in this call has nothing to wait for.
            if i >= depth {
                // SAFETY: live handles of this channel; `drained` was
                // recorded for slice i - depth earlier in this call.
                let r = unsafe { (drv.stream_wait_event)(self.h2d, drained, 0) };
                drv.check(r, "cuStreamWaitEvent(h2d)")?;
            }
            // SAFETY: `src` is readable for the slice (the caller's contract)
            // until the streams are synchronized before `copy` returns; `buf`
            // holds `staging` bytes and `s.len <= staging`.
            let r = unsafe { (drv.memcpy_htod_async)(buf, src, s.len, self.h2d) };
            drv.check(r, "cuMemcpyHtoDAsync_v2")?;
            // SAFETY: live handles of this channel.
            let r = unsafe { (drv.event_record)(loaded, self.h2d) };
            drv.check(r, "cuEventRecord(loaded)")?;
            // SAFETY: live handles; `loaded` was just recorded.
            let r = unsafe { (drv.stream_wait_event)(self.d2h, loaded, 0) };
            drv.check(r, "cuStreamWaitEvent(d2h)")?;
            // SAFETY: `dst` is writable for the slice and written by nothing
            // else until the streams are synchronized (the caller's
            // contract); `buf` holds the slice once `loaded` fires.
            let r = unsafe { (drv.memcpy_dtoh_async)(dst, buf, s.len, self.d2h) };
            drv.check(r, "cuMemcpyDtoHAsync_v2")?;
            // SAFETY: live handles of this channel.
            let r = unsafe { (drv.event_record)(drained, self.d2h) };
            drv.check(r, "cuEventRecord(drained)")?;
        }
        Ok(())
    }

    /// Waits for both streams, the downloads first (the last thing queued),
    /// asleep: every download waited for its upload, so the last one's
    /// completion covers both streams, and the h2d wait after it finds
    /// nothing left. On return every queued copy is complete and its
    /// writes visible.
    fn synchronize(&self) -> Result<(), String> {
        let drv = self.shared.drv;
        // SAFETY: live handles of this channel.
        let r = unsafe { (drv.event_record)(self.finished, self.d2h) };
        drv.check(r, "cuEventRecord(finished)")?;
        // SAFETY: a live event, just recorded; waiting touches no memory.
        let r = unsafe { (drv.event_synchronize)(self.finished) };
        drv.check(r, "cuEventSynchronize(finished)")?;
        // SAFETY: live streams of this channel; waiting touches no memory.
        let r = unsafe { (drv.stream_synchronize)(self.d2h) };
        drv.check(r, "cuStreamSynchronize(d2h)")?;
        // SAFETY: as above.
        let r = unsafe { (drv.stream_synchronize)(self.h2d) };
        drv.check(r, "cuStreamSynchronize(h2d)")
    }

    /// Waits for both streams whatever happens, so that no DMA into the
    /// caller's memory outlives the call even when an error cut it short.
    fn drain_quietly(&self) {
        let drv = self.shared.drv;
        for s in [self.d2h, self.h2d] {
            if !s.is_null() {
                // SAFETY: a live stream of this channel.
                let _ = unsafe { (drv.stream_synchronize)(s) };
            }
        }
    }
}

impl Channel for GpuChannel {
    unsafe fn copy(&mut self, pieces: &[Extent]) -> Result<(), String> {
        let slices = plan(pieces, self.staging, self.bufs.len());
        if slices.is_empty() {
            return Ok(());
        }
        let _cur = self.shared.enter()?;
        // SAFETY: the pieces are the caller's (same contract); the slices
        // were planned from them with this channel's sizes; the context is
        // current.
        let queued = unsafe { self.enqueue(pieces, &slices) };
        let done = queued.and_then(|()| self.synchronize());
        if done.is_err() {
            self.drain_quietly();
        }
        done
    }
}

impl Drop for GpuChannel {
    fn drop(&mut self) {
        let Ok(_cur) = self.shared.enter() else {
            return; // the context's release frees what is left
        };
        self.drain_quietly();
        let drv = self.shared.drv;
        let finished = std::mem::replace(&mut self.finished, ptr::null_mut());
        let finished = (!finished.is_null()).then_some(finished);
        for ev in self
            .loaded
            .drain(..)
            .chain(self.drained.drain(..))
            .chain(finished)
        {
            // SAFETY: an event this channel created; no queued work uses it.
            let _ = unsafe { (drv.event_destroy)(ev) };
        }
        for buf in self.bufs.drain(..) {
            // SAFETY: a buffer this channel allocated; no copy is queued.
            let _ = unsafe { (drv.mem_free)(buf) };
        }
        for s in [self.h2d, self.d2h] {
            if !s.is_null() {
                // SAFETY: a stream this channel created, idle.
                let _ = unsafe { (drv.stream_destroy)(s) };
            }
        }
    }
}

/// What [`open`] gives [`Offload::gpu`](super::Offload::gpu): the backend
/// and its channels.
type Opened = (Box<dyn Backend>, Vec<Box<dyn Channel>>);

/// Opens `opts.channels` channels on GPU `opts.device`, or says why not.
pub(crate) fn open(opts: &GpuOptions) -> Result<Opened, String> {
    let drv = driver()?;
    let info = drv.info(opts.device)?;
    let dev = drv.device(opts.device)?;
    let mut ctx: CUcontext = ptr::null_mut();
    // SAFETY: `ctx` is a valid place to write; `dev` came from cuDeviceGet.
    let r = unsafe { (drv.primary_ctx_retain)(&mut ctx, dev) };
    drv.check(r, "cuDevicePrimaryCtxRetain")?;
    let shared = Arc::new(Shared {
        drv,
        ordinal: opts.device,
        name: info.name,
        dev,
        ctx,
    });
    let channels = {
        let _cur = shared.enter()?;
        (0..opts.channels)
            .map(|_| {
                GpuChannel::new(&shared, opts.depth, opts.staging)
                    .map(|c| Box::new(c) as Box<dyn Channel>)
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    let backend = GpuBackend {
        shared,
        channels: opts.channels,
        depth: opts.depth,
        staging: opts.staging,
    };
    Ok((Box::new(backend), channels))
}

#[cfg(test)]
mod tests;
