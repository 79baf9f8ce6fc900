//! What a profile holds: the machine it was measured on and its cells,
//! and the limits every profile keeps.

use crate::machine::cpu::{self, Facts};
use crate::strategy::{Op, Strategy};

use super::super::Request;

/// The profile format this bulkmem reads and writes. Raised also when a
/// kernel changes enough to change which strategy wins somewhere, so that
/// a profile measured against the old kernels is reported outdated rather
/// than followed: 2 since the non-temporal copies read four pages at once
/// (they gained 10-15% over glibc's `memcpy`, which profiles had chosen
/// above 128 MiB); 3 since single calls are measured with a read of the
/// destination after each (a format-2 profile timed the copy alone and
/// chose streaming stores its callers then paid for in DRAM reads).
pub const FORMAT: u32 = 3;

/// The most cells a profile may hold: `bulkmem tune` writes about 90, and
/// building the length bands from a profile runs in every process that
/// uses `auto` (every preloaded one), so a file cannot make that costly.
pub const MAX_CELLS: usize = 4096;

/// Batches whose mean run is below this are measured and looked up as
/// batches of small (4 KiB) extents; the rest as batches of 2 MiB extents.
/// Below it the per-run start-up of a primitive still shows; above it only
/// bandwidth does.
pub const SMALL_EXTENT_MAX: usize = 32 << 10;

/// Which CPU a profile was measured on. Any difference makes a profile
/// foreign: features (after `BULKMEM_DISABLE`), caches and the CPUs that
/// share them all change which primitive wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// [`Vendor::name`](crate::machine::cpu::Vendor::name): "AMD", "Intel" or
    /// "other".
    pub vendor: String,
    /// CPUID display family ([`Facts::family`]).
    pub family: u32,
    /// CPUID display model ([`Facts::model`]).
    pub model: u32,
    /// CPUID stepping.
    pub stepping: u32,
    /// Feature names, space-separated, in `Features::names` order.
    pub features: String,
    /// Bytes of the first CPU's L1 data cache (0: unknown).
    pub l1d: usize,
    /// Bytes of the first CPU's L2 (0: unknown).
    pub l2: usize,
    /// Bytes of one LLC domain (assumed 32 MiB where sysfs does not say).
    pub llc: usize,
    /// CPUs sharing one LLC domain.
    pub llc_cpus: usize,
    /// Online CPUs.
    pub cpus: usize,
}

impl Identity {
    /// The running machine's.
    pub fn this() -> Identity {
        Identity::of(cpu::facts())
    }

    /// The identity of the machine `i` describes (a [`CpuInfo`](crate::machine::cpu::CpuInfo)
    /// derefs to its facts).
    pub fn of(i: &Facts) -> Identity {
        Identity {
            vendor: i.vendor.name().to_string(),
            family: i.family,
            model: i.model,
            stepping: i.stepping,
            features: i.features.names().join(" "),
            l1d: i.caches.l1d.unwrap_or(0),
            l2: i.caches.l2.unwrap_or(0),
            llc: i.llc_bytes(),
            llc_cpus: i.llc_cpus(),
            cpus: i.caches.cpus,
        }
    }

    /// A file-name-safe key: vendor, family, model and stepping in clear,
    /// then a hash of everything else.
    pub fn key(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in format!(
            "{}|{}|{}|{}|{}|{}",
            self.features, self.l1d, self.l2, self.llc, self.llc_cpus, self.cpus
        )
        .bytes()
        {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        format!(
            "{}-{:x}-{:x}-{:x}-{:08x}",
            self.vendor.to_ascii_lowercase(),
            self.family,
            self.model,
            self.stepping,
            h as u32
        )
    }

    /// The first field that differs from `other` (the running CPU's), as
    /// "what differs (this CPU: value)": only `other`'s value is shown, so
    /// a message never quotes a profile file's text.
    pub fn difference(&self, other: &Identity) -> Option<String> {
        let fields: [(&str, String, String); 10] = [
            ("vendor", self.vendor.clone(), other.vendor.clone()),
            (
                "family",
                format!("{:#x}", self.family),
                format!("{:#x}", other.family),
            ),
            (
                "model",
                format!("{:#x}", self.model),
                format!("{:#x}", other.model),
            ),
            (
                "stepping",
                self.stepping.to_string(),
                other.stepping.to_string(),
            ),
            ("features", self.features.clone(), other.features.clone()),
            ("L1d bytes", self.l1d.to_string(), other.l1d.to_string()),
            ("L2 bytes", self.l2.to_string(), other.l2.to_string()),
            ("LLC bytes", self.llc.to_string(), other.llc.to_string()),
            (
                "CPUs per LLC",
                self.llc_cpus.to_string(),
                other.llc_cpus.to_string(),
            ),
            ("online CPUs", self.cpus.to_string(), other.cpus.to_string()),
        ];
        fields
            .into_iter()
            .find(|(_, a, b)| a != b)
            .map(|(what, _, b)| format!("{what} differs (this CPU: '{b}')"))
    }
}

/// The shape of a request, as the tuner measures it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Shape {
    /// One contiguous call, measured hot (the same buffers every call).
    Single,
    /// A batch of runs shorter than 32 KiB, measured as
    /// cache-cold 4 KiB extents.
    SmallExtents,
    /// A batch of longer runs, measured as cache-cold 2 MiB extents.
    LargeExtents,
}

impl Shape {
    /// Every shape, in the order the tuner measures and the file lists them.
    pub const ALL: [Shape; 3] = [Shape::Single, Shape::SmallExtents, Shape::LargeExtents];

    /// The shape's name in the profile file: "single", "batch-4K" or
    /// "batch-2M".
    pub fn name(self) -> &'static str {
        match self {
            Shape::Single => "single",
            Shape::SmallExtents => "batch-4K",
            Shape::LargeExtents => "batch-2M",
        }
    }

    /// The extent length the tuner measures this shape with (0: single).
    pub fn extent(self) -> usize {
        match self {
            Shape::Single => 0,
            Shape::SmallExtents => 4 << 10,
            Shape::LargeExtents => 2 << 20,
        }
    }

    /// The shape `req` is looked up as.
    pub fn of(req: &Request) -> Shape {
        if req.runs <= 1 {
            Shape::Single
        } else if req.mean_run() < SMALL_EXTENT_MAX {
            Shape::SmallExtents
        } else {
            Shape::LargeExtents
        }
    }

    /// The shape named `s` in a profile file.
    pub(super) fn parse(s: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|sh| sh.name() == s)
    }
}

/// One measured class: an operation, a shape and a size.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// The operation measured.
    pub op: Op,
    /// The request shape measured.
    pub shape: Shape,
    /// A single call's length, or a batch's total, in bytes.
    pub size: usize,
    /// The strategy with the highest GB/s (lower quartile of its runs).
    pub winner: Strategy,
    /// The second fastest; `None` when only one strategy was measured.
    pub runner_up: Option<Strategy>,
    /// Winner's GB/s over the runner-up's (1.0 without a runner-up).
    pub margin: f64,
    /// What `auto` uses here with hint `Auto`.
    pub choice: Strategy,
    /// Median GB/s per strategy, in measurement order.
    pub gbps: Vec<(Strategy, f64)>,
}

impl Cell {
    fn best(&self, keep: impl Fn(Strategy) -> bool) -> Option<Strategy> {
        self.gbps
            .iter()
            .filter(|(s, _)| keep(*s))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|c| c.0)
    }

    /// The fastest cache-allocating strategy measured (hint `Reuse`).
    pub fn best_temporal(&self) -> Option<Strategy> {
        self.best(|s| !s.is_non_temporal())
    }

    /// The fastest non-temporal strategy measured (hint `Stream`).
    pub fn best_non_temporal(&self) -> Option<Strategy> {
        self.best(|s| s.is_non_temporal())
    }

    /// The GB/s `s` measured here (lower quartile of its runs).
    pub fn gbps_of(&self, s: Strategy) -> Option<f64> {
        self.gbps.iter().find(|c| c.0 == s).map(|c| c.1)
    }
}

/// A parsed, validated profile.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// The file format version ([`FORMAT`] for every profile that loads).
    pub format: u32,
    /// The bulkmem version that measured it.
    pub bulkmem: String,
    /// Unix seconds.
    pub created: u64,
    /// Measured with `bulkmem tune --quick` (fewer sizes and runs).
    pub quick: bool,
    /// The machine it was measured on; a profile applies only where this
    /// equals [`Identity::this`].
    pub cpu: Identity,
    /// Sorted by (op, shape, size).
    pub cells: Vec<Cell>,
    /// The shape the non-temporal copies measured fastest in
    /// (`crate::NtCopyShape`); `None`: the CPU's built-in one.
    pub nt_copy_shape: Option<crate::kernels::NtCopyShape>,
}
