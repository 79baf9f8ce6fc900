//! `bench batch --offload KIND[:CHANNELS]`: the flag, opening the offload
//! before anything is measured, and the ranges registered with it.

use bulkmem::offload::{EmulatedOptions, GpuOptions, Offload};

use crate::cli::{usage, Failure};

/// `--offload KIND[:CHANNELS]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffloadSpec {
    gpu: bool,
    channels: usize,
}

pub(super) fn parse_offload(s: &str) -> Result<OffloadSpec, String> {
    let (kind, n) = s.split_once(':').unwrap_or((s, "2"));
    let channels = n
        .parse::<usize>()
        .ok()
        .filter(|&c| (1..=64).contains(&c))
        .ok_or_else(|| format!("'{n}': channels must be 1 to 64"))?;
    match kind {
        "gpu" => Ok(OffloadSpec {
            gpu: true,
            channels,
        }),
        "emulated" => Ok(OffloadSpec {
            gpu: false,
            channels,
        }),
        _ => Err(format!("'{kind}': expected gpu or emulated")),
    }
}

/// Opens the offload now, so a machine without one is told at once
/// (usage error, exit 2), before anything is measured.
pub(super) fn open_offload(spec: OffloadSpec) -> Result<(Offload, &'static str), Failure> {
    if spec.gpu {
        let o = Offload::gpu(GpuOptions::default().channels(spec.channels))
            .map_err(|e| usage(e.to_string()))?;
        Ok((o, "gpu"))
    } else {
        let o = Offload::emulated(EmulatedOptions::default().channels(spec.channels));
        Ok((o, "emulated"))
    }
}

/// Ranges registered with an offload, unregistered when it goes.
pub(super) struct Registered(pub(super) Vec<(Offload, *const u8, usize)>);

impl Drop for Registered {
    fn drop(&mut self) {
        for (o, addr, len) in &self.0 {
            let _ = o.unregister(*addr, *len);
        }
    }
}
