//! What this CPU can do: the instruction-set features the kernels need,
//! detected once from CPUID, plus the cache and page geometry from
//! [`crate::topology`].
//!
//! Features can be hidden with the environment variable `BULKMEM_DISABLE`
//! (a comma-separated list of feature names, e.g. `BULKMEM_DISABLE=erms,fsrm`)
//! so that `auto` and the benchmarks can be run as if on an older CPU. Hiding
//! a feature makes the strategies that need it unavailable; it never enables
//! anything the hardware lacks.

use std::fmt;
use std::sync::OnceLock;

use crate::topology::Topology;

/// CPU vendor, as far as the kernels' choices care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    /// CPUID vendor "AuthenticAMD" (or Hygon's "HygonGenuine", a Zen
    /// derivative).
    Amd,
    /// CPUID vendor "GenuineIntel".
    Intel,
    /// Any other vendor, or no CPUID (not x86-64).
    Other,
}

impl Vendor {
    /// Short name, as [`CpuInfo`]'s `Display` prints it: "AMD", "Intel" or
    /// "other".
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Amd => "AMD",
            Vendor::Intel => "Intel",
            Vendor::Other => "other",
        }
    }
}

macro_rules! features {
    ($( $(#[$doc:meta])* $variant:ident $field:ident = $name:literal ),* $(,)?) => {
        /// One feature of [`Features`], by name: what a strategy needs
        /// (generated with `Features` from one list, so the two cannot
        /// drift apart).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Feature {
            $( $(#[$doc])* $variant, )*
        }

        impl Feature {
            /// Every feature, in `Features::names` order.
            pub const ALL: &'static [Feature] = &[$(Feature::$variant),*];

            /// The name `BULKMEM_DISABLE`, profiles and `bulkmem info` use.
            pub const fn name(self) -> &'static str {
                match self {
                    $( Feature::$variant => $name, )*
                }
            }
        }

        /// Instruction-set features relevant to bulk copy and clear.
        ///
        /// AVX2/AVX-512 are only reported when the OS also saves their
        /// registers (XCR0), so a reported feature is safe to execute.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct Features {
            $( $(#[$doc])* pub $field: bool, )*
        }

        impl Features {
            /// Every feature name `BULKMEM_DISABLE` and [`Features::names`] use.
            pub const ALL_NAMES: &'static [&'static str] = &[$($name),*];

            /// Names of the features that are present, in a fixed order.
            pub fn names(&self) -> Vec<&'static str> {
                let mut v = Vec::new();
                $( if self.$field { v.push($name); } )*
                v
            }

            /// Whether `feature` is present.
            pub const fn has(&self, feature: Feature) -> bool {
                match feature {
                    $( Feature::$variant => self.$field, )*
                }
            }

            /// Turns off the named feature; `false` if the name is unknown.
            pub fn disable(&mut self, name: &str) -> bool {
                match name {
                    $( $name => { self.$field = false; true } )*
                    _ => false,
                }
            }
        }
    };
}

features! {
    /// Enhanced REP MOVSB/STOSB: byte-granular string ops run at full speed.
    Erms erms = "erms",
    /// Fast short REP MOVSB: no start-up penalty for short copies.
    Fsrm fsrm = "fsrm",
    /// Fast zero-length REP MOVSB.
    Fzrm fzrm = "fzrm",
    /// Fast short REP STOSB.
    Fsrs fsrs = "fsrs",
    /// Fast short REP CMPSB/SCASB.
    Fsrc fsrc = "fsrc",
    /// 256-bit AVX2 integer vectors (with OS support for YMM state).
    Avx2 avx2 = "avx2",
    /// AVX-512 Foundation (with OS support for ZMM and mask state).
    Avx512f avx512f = "avx512f",
    /// AVX-512 byte and word instructions: the masked byte loads and stores
    /// of the AVX-512 kernels' heads and tails.
    Avx512bw avx512bw = "avx512bw",
    /// AMD CLZERO: zero one cache line without reading it.
    Clzero clzero = "clzero",
    /// 64-byte direct store (Intel).
    Movdir64b movdir64b = "movdir64b",
    /// Linux's judgement that REP string ops are good here (/proc/cpuinfo
    /// `rep_good`); informational, CPUID has no such bit.
    RepGood rep_good = "rep_good",
}

/// Everything bulkmem knows about the machine it runs on.
#[derive(Clone, Debug)]
pub struct CpuInfo {
    /// Who made the CPU.
    pub vendor: Vendor,
    /// Brand string from CPUID, e.g. "AMD EPYC 9655 96-Core Processor".
    pub brand: String,
    /// Display family from CPUID leaf 1 (base plus extended family where
    /// the base is 0xf, e.g. 0x1a for Zen 5); 0 without CPUID.
    pub family: u32,
    /// Display model from CPUID leaf 1 (extended model included for
    /// families 0x6 and 0xf); 0 without CPUID.
    pub model: u32,
    /// Stepping from CPUID leaf 1; 0 without CPUID.
    pub stepping: u32,
    /// The features the kernels may use: detected, minus those hidden by
    /// `BULKMEM_DISABLE`.
    pub features: Features,
    /// Feature names hidden by `BULKMEM_DISABLE` (only ones that were present).
    pub disabled: Vec<String>,
    /// Names in `BULKMEM_DISABLE` that are not features; reported by `info`.
    pub unknown_disabled: Vec<String>,
    /// Caches, CPUs, NUMA nodes and page sizes, from sysfs.
    pub topology: Topology,
}

impl CpuInfo {
    /// Bytes in the last-level cache one CPU can use (one LLC domain).
    pub fn llc_bytes(&self) -> usize {
        self.topology.llc_bytes()
    }

    /// Online CPUs sharing one LLC (the largest domain), at least 1.
    pub fn llc_cpus(&self) -> usize {
        self.topology
            .llc_domains
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(1)
            .max(1)
    }
}

impl fmt::Display for CpuInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} family {:#x} model {:#x})",
            self.brand,
            self.vendor.name(),
            self.family,
            self.model
        )
    }
}

/// The machine description, detected on first use and cached for the life
/// of the process.
pub fn info() -> &'static CpuInfo {
    static INFO: OnceLock<CpuInfo> = OnceLock::new();
    INFO.get_or_init(|| {
        let raw = detect();
        let mut features = raw.features;
        let mut disabled = Vec::new();
        let mut unknown_disabled = Vec::new();
        if let Some(list) = crate::environment::var("BULKMEM_DISABLE") {
            for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                let name = name.to_ascii_lowercase();
                let was_on = features.names().contains(&name.as_str());
                if !features.disable(&name) {
                    unknown_disabled.push(name);
                } else if was_on {
                    disabled.push(name);
                }
            }
        }
        CpuInfo {
            vendor: raw.vendor,
            brand: raw.brand,
            family: raw.family,
            model: raw.model,
            stepping: raw.stepping,
            features,
            disabled,
            unknown_disabled,
            topology: Topology::detect(),
        }
    })
}

struct Raw {
    vendor: Vendor,
    brand: String,
    family: u32,
    model: u32,
    stepping: u32,
    features: Features,
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Raw {
    use std::arch::x86_64::{__cpuid, __cpuid_count};

    let bit = |reg: u32, n: u32| reg & (1 << n) != 0;

    // CPUID is unprivileged and present on every x86_64 CPU, and the leaves
    // read below are only read when the maximum-leaf queries say they exist.
    let leaf0 = __cpuid(0);
    let mut vendor_bytes = Vec::with_capacity(12);
    for reg in [leaf0.ebx, leaf0.edx, leaf0.ecx] {
        vendor_bytes.extend_from_slice(&reg.to_le_bytes());
    }
    let vendor = match &vendor_bytes[..] {
        b"AuthenticAMD" | b"HygonGenuine" => Vendor::Amd,
        b"GenuineIntel" => Vendor::Intel,
        _ => Vendor::Other,
    };
    let max_leaf = leaf0.eax;

    let leaf1 = __cpuid(1);
    let base_family = (leaf1.eax >> 8) & 0xf;
    let base_model = (leaf1.eax >> 4) & 0xf;
    let (family, model) = if base_family == 0xf {
        (
            base_family + ((leaf1.eax >> 20) & 0xff),
            base_model | (((leaf1.eax >> 16) & 0xf) << 4),
        )
    } else if base_family == 0x6 {
        (base_family, base_model | (((leaf1.eax >> 16) & 0xf) << 4))
    } else {
        (base_family, base_model)
    };

    let mut f = Features::default();
    if max_leaf >= 7 {
        let l7 = __cpuid_count(7, 0);
        f.erms = bit(l7.ebx, 9);
        f.fsrm = bit(l7.edx, 4);
        f.movdir64b = bit(l7.ecx, 28);
        if l7.eax >= 1 {
            let l71 = __cpuid_count(7, 1);
            f.fzrm = bit(l71.eax, 10);
            f.fsrs = bit(l71.eax, 11);
            f.fsrc = bit(l71.eax, 12);
        }
    }
    // These also check that the OS saves the wide registers (XCR0).
    f.avx2 = std::arch::is_x86_feature_detected!("avx2");
    f.avx512f = std::arch::is_x86_feature_detected!("avx512f");
    f.avx512bw = std::arch::is_x86_feature_detected!("avx512bw");

    let max_ext = __cpuid(0x8000_0000).eax;
    if max_ext >= 0x8000_0008 {
        f.clzero = bit(__cpuid(0x8000_0008).ebx, 0);
    }
    let mut brand = String::new();
    if max_ext >= 0x8000_0004 {
        let mut bytes = Vec::with_capacity(48);
        for leaf in 0x8000_0002..=0x8000_0004u32 {
            let r = __cpuid(leaf);
            for reg in [r.eax, r.ebx, r.ecx, r.edx] {
                bytes.extend_from_slice(&reg.to_le_bytes());
            }
        }
        brand = String::from_utf8_lossy(&bytes)
            .trim_matches(char::from(0))
            .trim()
            .to_string();
    }
    if brand.is_empty() {
        brand = String::from_utf8_lossy(&vendor_bytes).into_owned();
    }
    f.rep_good = proc_cpuinfo_has_flag("rep_good");

    Raw {
        vendor,
        brand,
        family,
        model,
        stepping: leaf1.eax & 0xf,
        features: f,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Raw {
    Raw {
        vendor: Vendor::Other,
        brand: std::env::consts::ARCH.to_string(),
        family: 0,
        model: 0,
        stepping: 0,
        features: Features::default(),
    }
}

#[cfg(target_arch = "x86_64")]
fn proc_cpuinfo_has_flag(flag: &str) -> bool {
    let Ok(text) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    text.lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .is_some_and(|(_, flags)| flags.split_whitespace().any(|f| f == flag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disable_knows_every_listed_name() {
        for name in Features::ALL_NAMES {
            let mut f = Features {
                erms: true,
                fsrm: true,
                fzrm: true,
                fsrs: true,
                fsrc: true,
                avx2: true,
                avx512f: true,
                avx512bw: true,
                clzero: true,
                movdir64b: true,
                rep_good: true,
            };
            assert!(f.disable(name), "{name}");
            assert!(!f.names().contains(name), "{name} still listed");
            assert_eq!(f.names().len(), Features::ALL_NAMES.len() - 1);
        }
        assert!(!Features::default().disable("sse9"));
    }

    #[test]
    fn detection_is_consistent_with_std() {
        let i = info();
        #[cfg(target_arch = "x86_64")]
        if !i.disabled.iter().any(|d| d == "avx2") {
            assert_eq!(i.features.avx2, std::arch::is_x86_feature_detected!("avx2"));
        }
        assert!(!i.brand.is_empty());
    }
}
