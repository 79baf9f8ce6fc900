//! Copy engines beside the CPU workers (the kernel's multi-threaded migration patches' DMA offload): an
//! [`Offload`] gives the batch engine channels that copy host memory to
//! host memory without the CPU, such as a GPU's copy engines (H2D and D2H
//! streams through device staging buffers). Offload threads take chunks
//! from the same counter as the CPU workers, so CPU and channels share one
//! batch and finish together, and the engine's guarantees hold unchanged:
//! chunks are taken in order and finished by their taker (an exact prefix
//! on cancel), progress is reported between chunks, and the batch returns
//! only when every copy is complete and visible to the CPU.
//!
//! Only chunks whose every source and destination byte lies in memory
//! registered with [`crate::Engine::register`] go to a channel (a GPU can
//! DMA only pinned memory, and pinning costs more than copying once); the
//! offload thread copies other chunks itself with the CPU kernel. A channel
//! that fails on a chunk has that chunk redone on the CPU, and the report
//! counts it ([`crate::Report::offload_redone`]).
//!
//! Backends: [`Offload::gpu`] (the CUDA driver, loaded at run time with
//! `dlopen("libcuda.so.1")`: no build-time dependency, and nothing changes
//! on machines without it) and [`Offload::emulated`] (CPU threads that copy
//! with a delay and fail on request, to test the scheduling anywhere).

#[cfg(target_os = "linux")]
mod cuda;
mod emulated;
mod registry;

use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::Error;
use crate::plan::Extent;

pub use emulated::EmulatedOptions;
pub(crate) use registry::Registry;

/// A copy engine: copies pieces of registered host memory.
pub trait Channel: Send {
    /// Copies every piece and returns once the copies are complete and
    /// visible to every CPU, or the first error (pieces may then be partly
    /// copied; the engine redoes the whole chunk on the CPU).
    ///
    /// # Safety
    /// Every piece's source is readable and destination writable for its
    /// length, registered with this channel's backend, and no destination
    /// overlaps another piece's source or destination.
    unsafe fn copy(&mut self, pieces: &[Extent]) -> Result<(), String>;
}

/// What registering memory means to a backend (pinning it, for a GPU).
pub trait Backend: Send + Sync {
    /// What the backend is, for reports (`gpu 0 (NVIDIA H100), 2 channels`).
    fn describe(&self) -> String;
    /// Makes `[addr, addr + len)` usable by the channels.
    ///
    /// # Safety
    /// The range is mapped memory the caller owns and keeps mapped until
    /// [`Backend::unregister`].
    unsafe fn register(&self, addr: usize, len: usize) -> Result<(), String>;
    /// Undoes [`Backend::register`] of the same range.
    fn unregister(&self, addr: usize, len: usize) -> Result<(), String>;
}

/// Copy channels and the memory registered with them, for
/// [`crate::EngineBuilder::offload`]. Cheap to clone: clones share the
/// channels and the registrations, so several engines can use one GPU's
/// pinned memory; what is still registered when the last clone goes is
/// unregistered then.
#[derive(Clone)]
pub struct Offload(pub(crate) Arc<Inner>);

pub(crate) struct Inner {
    pub(crate) backend: ManuallyDrop<Box<dyn Backend>>,
    pub(crate) channels: ManuallyDrop<Vec<Mutex<Box<dyn Channel>>>>,
    pub(crate) registry: Registry,
    /// The process that opened the channels. A child made by `fork()` has
    /// copies of the handles but not the device state behind them (the
    /// CUDA driver refuses every call there), so it neither uses nor
    /// releases them: its batches run on the CPU workers alone.
    pid: u32,
}

impl Inner {
    /// Whether this process opened the channels (not a fork's child).
    pub(crate) fn usable_here(&self) -> bool {
        self.pid == std::process::id()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.usable_here() {
            // The parent's handles: leaked in the child, which cannot
            // release them (design.md, "Offload").
            return;
        }
        for (addr, len) in self.registry.take_all() {
            let _ = self.backend.unregister(addr, len);
        }
        // SAFETY: dropped once, here, and never used after: `self` is going.
        unsafe {
            ManuallyDrop::drop(&mut self.channels);
            ManuallyDrop::drop(&mut self.backend);
        }
    }
}

impl std::fmt::Debug for Offload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offload")
            .field("backend", &self.0.backend.describe())
            .field("channels", &self.0.channels.len())
            .finish()
    }
}

/// Each channel is a thread per batch: no more than an engine may have
/// workers ([`crate::placement::max_threads`]).
fn check_channels(n: usize) -> Result<(), Error> {
    let max = crate::machine::placement::max_threads();
    if n > max {
        return Err(Error::OutOfRange {
            what: "offload channels",
            value: n,
            min: 1,
            max,
        });
    }
    Ok(())
}

/// How [`Offload::gpu`] sets up its channels.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GpuOptions {
    /// CUDA device ordinal.
    pub device: usize,
    /// Stream pairs (H2D + D2H), each an offload thread.
    pub channels: usize,
    /// Device staging buffers per channel (2: double buffering).
    pub depth: usize,
    /// Bytes of each staging buffer.
    pub staging: usize,
}

impl Default for GpuOptions {
    fn default() -> GpuOptions {
        GpuOptions {
            device: 0,
            channels: 2,
            depth: 4,
            staging: 32 << 20,
        }
    }
}

impl GpuOptions {
    /// Sets [`GpuOptions::device`].
    pub fn device(mut self, ordinal: usize) -> Self {
        self.device = ordinal;
        self
    }
    /// Sets [`GpuOptions::channels`].
    pub fn channels(mut self, n: usize) -> Self {
        self.channels = n;
        self
    }
    /// Sets [`GpuOptions::depth`].
    pub fn depth(mut self, n: usize) -> Self {
        self.depth = n;
        self
    }
    /// Sets [`GpuOptions::staging`].
    pub fn staging(mut self, bytes: usize) -> Self {
        self.staging = bytes;
        self
    }
}

impl Offload {
    /// Channels on a GPU's copy engines through the CUDA driver, loaded
    /// now. [`Error::NotSupportedHere`] says why not where there is no
    /// driver or device.
    pub fn gpu(opts: GpuOptions) -> Result<Offload, Error> {
        let at_least = |what, value, min| Error::OutOfRange {
            what,
            value,
            min,
            max: usize::MAX,
        };
        if opts.channels == 0 {
            return Err(at_least("offload channels", 0, 1));
        }
        if opts.depth == 0 {
            return Err(at_least("offload depth", 0, 1));
        }
        if opts.staging < 4096 {
            return Err(at_least("offload staging bytes", opts.staging, 4096));
        }
        check_channels(opts.channels)?;
        #[cfg(target_os = "linux")]
        {
            let (backend, channels) =
                cuda::open(&opts).map_err(|what| Error::NotSupportedHere {
                    what: format!("GPU offload: {what}"),
                })?;
            Ok(Offload::new(backend, channels))
        }
        #[cfg(not(target_os = "linux"))]
        Err(Error::NotSupportedHere {
            what: "GPU offload: the CUDA driver is loaded on Linux only".into(),
        })
    }

    /// Channels that copy on CPU threads after a delay, failing on request:
    /// the engine's offload scheduling (prefix, cancel, redo on error)
    /// tested where there is no copy engine.
    ///
    /// `channels` is taken as given: prefer [`Offload::try_emulated`] for
    /// a count that is not a constant.
    pub fn emulated(opts: EmulatedOptions) -> Offload {
        let (backend, channels) = emulated::open(&opts);
        Offload::new(backend, channels)
    }

    /// As [`Offload::emulated`], refusing more channels than
    /// [`crate::placement::max_threads`] ([`Error::OutOfRange`]) instead of
    /// allocating one per channel asked for.
    pub fn try_emulated(opts: EmulatedOptions) -> Result<Offload, Error> {
        check_channels(opts.channels)?;
        Ok(Offload::emulated(opts))
    }

    fn new(backend: Box<dyn Backend>, channels: Vec<Box<dyn Channel>>) -> Offload {
        Offload(Arc::new(Inner {
            backend: ManuallyDrop::new(backend),
            channels: ManuallyDrop::new(channels.into_iter().map(Mutex::new).collect()),
            registry: Registry::default(),
            pid: std::process::id(),
        }))
    }

    /// [`Error::ForkedChild`] in a child made by `fork()`: see [`Inner`].
    fn check_process(&self) -> Result<(), Error> {
        if self.0.usable_here() {
            return Ok(());
        }
        Err(Error::ForkedChild {
            what: "an offload's channels",
            owner: self.0.pid,
        })
    }

    /// Registers `[addr, addr + len)` with the backend (a GPU pins it), so
    /// that chunks wholly inside registered memory go to the channels.
    /// Pinning costs more than copying once: register long-lived buffers.
    /// Errors: an overlap with a registered range, or the backend's refusal
    /// (nothing is registered then).
    ///
    /// # Safety
    /// The range is mapped memory the caller owns and keeps mapped until it
    /// is unregistered or the last clone of this offload is dropped.
    pub unsafe fn register(&self, addr: *const u8, len: usize) -> Result<(), Error> {
        let addr = addr as usize;
        self.check_process()?;
        let bad = |why| Error::BadRange { addr, len, why };
        self.0.registry.add(addr, len).map_err(bad)?;
        // SAFETY: the caller's contract.
        if let Err(why) = unsafe { self.0.backend.register(addr, len) } {
            let _ = self.0.registry.remove(addr, len);
            return Err(Error::Offload {
                call: "register",
                why,
            });
        }
        Ok(())
    }

    /// Undoes [`Offload::register`] of exactly that range. A batch running
    /// meanwhile on another thread may still use it: unregister between
    /// batches.
    pub fn unregister(&self, addr: *const u8, len: usize) -> Result<(), Error> {
        let addr = addr as usize;
        self.check_process()?;
        let bad = |why| Error::BadRange { addr, len, why };
        self.0.registry.remove(addr, len).map_err(bad)?;
        self.0
            .backend
            .unregister(addr, len)
            .map_err(|why| Error::Offload {
                call: "unregister",
                why,
            })
    }

    /// What the offload is (backend and channel count).
    pub fn describe(&self) -> String {
        self.0.backend.describe()
    }

    /// How many channels (offload threads per batch).
    pub fn channels(&self) -> usize {
        self.0.channels.len()
    }
}

/// The GPUs the CUDA driver sees (name, copy engines, PCIe link), or why
/// there are none here, for `bulkmem info`.
pub fn gpus() -> Result<Vec<GpuInfo>, String> {
    #[cfg(target_os = "linux")]
    {
        cuda::devices()
    }
    #[cfg(not(target_os = "linux"))]
    Err("the CUDA driver is loaded on Linux only".into())
}

/// One GPU as the driver describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GpuInfo {
    /// CUDA device ordinal.
    pub ordinal: usize,
    /// Marketing name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Asynchronous copy engines (`CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT`).
    pub copy_engines: u32,
    /// PCI address, `domain:bus:device`.
    pub pci: String,
    /// Device memory in bytes.
    pub memory: u64,
}

/// How long [`EmulatedOptions`] channels take per MiB by default: slow
/// enough that CPU workers take chunks meanwhile.
pub(crate) const EMULATED_DELAY_PER_MIB: Duration = Duration::from_micros(200);
