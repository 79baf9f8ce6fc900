//! A backend without hardware: each channel copies on the calling (offload)
//! thread after a delay proportional to the bytes, and fails on request.
//! It exercises the engine's offload scheduling (shared chunk counter,
//! prefix on cancel, redo on error, registered/unregistered mixes) on any
//! machine, CI included.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Backend, Channel, EMULATED_DELAY_PER_MIB};
use crate::plan::Extent;

/// How [`super::Offload::emulated`] channels behave.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EmulatedOptions {
    /// Channels (offload threads per batch).
    pub channels: usize,
    /// Time per MiB copied, on top of the copy itself.
    pub delay_per_mib: Duration,
    /// Fail every n-th `copy` call (counting all channels from 1); 0 never.
    pub fail_every: usize,
}

impl Default for EmulatedOptions {
    fn default() -> EmulatedOptions {
        EmulatedOptions {
            channels: 1,
            delay_per_mib: EMULATED_DELAY_PER_MIB,
            fail_every: 0,
        }
    }
}

impl EmulatedOptions {
    /// Sets [`EmulatedOptions::channels`].
    pub fn channels(mut self, n: usize) -> Self {
        self.channels = n;
        self
    }
    /// Sets [`EmulatedOptions::delay_per_mib`].
    pub fn delay_per_mib(mut self, d: Duration) -> Self {
        self.delay_per_mib = d;
        self
    }
    /// Sets [`EmulatedOptions::fail_every`].
    pub fn fail_every(mut self, n: usize) -> Self {
        self.fail_every = n;
        self
    }
}

struct Emulated {
    opts: EmulatedOptions,
    calls: Arc<AtomicUsize>,
}

impl Channel for Emulated {
    unsafe fn copy(&mut self, pieces: &[Extent]) -> Result<(), String> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let bytes: usize = pieces.iter().map(|p| p.len).sum();
        let mib = bytes as f64 / f64::from(1u32 << 20);
        std::thread::sleep(self.opts.delay_per_mib.mul_f64(mib));
        if self.opts.fail_every > 0 && call.is_multiple_of(self.opts.fail_every) {
            // A real engine may have written part of a chunk before failing:
            // so does this one, to prove the CPU redo overwrites it.
            if let Some(p) = pieces.first() {
                // SAFETY: the caller's contract: p.dst is writable for p.len.
                unsafe { core::ptr::write_bytes(p.dst, 0xEE, p.len.min(64)) };
            }
            return Err(format!("emulated failure on call {call}"));
        }
        for p in pieces {
            // SAFETY: the caller's contract: readable source, writable
            // destination, not overlapping.
            unsafe { core::ptr::copy_nonoverlapping(p.src, p.dst, p.len) };
        }
        Ok(())
    }
}

struct Bookkeeping(usize);

impl Backend for Bookkeeping {
    fn describe(&self) -> String {
        format!("emulated, {} channel(s)", self.0)
    }
    unsafe fn register(&self, _: usize, _: usize) -> Result<(), String> {
        Ok(())
    }
    fn unregister(&self, _: usize, _: usize) -> Result<(), String> {
        Ok(())
    }
}

pub(super) fn open(opts: &EmulatedOptions) -> (Box<dyn Backend>, Vec<Box<dyn Channel>>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let n = opts.channels.max(1);
    let channels = (0..n)
        .map(|_| {
            Box::new(Emulated {
                opts: opts.clone(),
                calls: calls.clone(),
            }) as Box<dyn Channel>
        })
        .collect();
    (Box::new(Bookkeeping(n)), channels)
}
