//! What this CPU can do: the instruction-set features the kernels need,
//! detected once from CPUID with the cache sizes the rules need
//! ([`facts`], cheap: what every process under the preload pays), plus the
//! full cache, CPU and page layout from [`topology`](super::topology) ([`info`], read
//! only when something needs it).
//!
//! Features can be hidden with the environment variable `BULKMEM_DISABLE`
//! (a comma-separated list of feature names, e.g. `BULKMEM_DISABLE=erms,fsrm`)
//! so that `auto` and the benchmarks can be run as if on an older CPU. Hiding
//! a feature makes the strategies that need it unavailable; it never enables
//! anything the hardware lacks.

use std::fmt;
use std::sync::OnceLock;

use super::cpuid_cache;
pub use super::cpuid_cache::{CacheFacts, CacheSource};
use super::topology::Topology;

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

            /// Whether `feature` is present. By index rather than by a
            /// `match` on the field: inlined where `self` is the process's
            /// cached facts, a match became a table of the fields' addresses
            /// (22 of them, 1.9 KB of relocations every process the preload
            /// is loaded into applies at start-up).
            pub const fn has(&self, feature: Feature) -> bool {
                [$(self.$field),*][feature as usize]
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

/// What the copy path needs to know about the CPU, cheap to learn: CPUID
/// (vendor, model, features, cache sizes), `BULKMEM_DISABLE`, and two small
/// files (`cpu/online`, the first record of `/proc/cpuinfo`). No sysfs walk:
/// under the preload every process start pays this.
#[derive(Clone, Debug)]
pub struct Facts {
    /// Who made the CPU.
    pub vendor: Vendor,
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
    /// Cache sizes and sharing as the rules and the profile identity use
    /// them (CPUID, sysfs where CPUID says nothing; see
    /// `cpuid_cache`).
    pub caches: CacheFacts,
}

impl Facts {
    /// Bytes in the last-level cache one CPU can use (one LLC instance).
    pub fn llc_bytes(&self) -> usize {
        self.caches.llc
    }

    /// Online CPUs sharing one LLC, at least 1.
    pub fn llc_cpus(&self) -> usize {
        self.caches.llc_cpus
    }
}

/// Everything bulkmem knows about the machine it runs on: the [`Facts`]
/// (reachable through `Deref`: `info().features`) and the full layout.
#[derive(Clone, Debug)]
pub struct CpuInfo {
    /// The cheap facts, the same as [`facts`] returns.
    pub facts: Facts,
    /// Brand string from CPUID, e.g. "AMD EPYC 9655 96-Core Processor"
    /// (three more CPUID leaves, which the copy path does without).
    pub brand: String,
    /// Caches, CPUs, NUMA nodes and page sizes, from sysfs.
    pub topology: Topology,
}

impl std::ops::Deref for CpuInfo {
    type Target = Facts;

    fn deref(&self) -> &Facts {
        &self.facts
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

/// The cheap machine facts, detected on first use and cached for the life
/// of the process: what `auto`, the kernels and the profile need.
pub fn facts() -> &'static Facts {
    static FACTS: OnceLock<Facts> = OnceLock::new();
    FACTS.get_or_init(|| {
        let raw = detect();
        let mut features = raw.features;
        let mut disabled = Vec::new();
        let mut unknown_disabled = Vec::new();
        if let Some(list) = super::environment::var("BULKMEM_DISABLE") {
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
        Facts {
            caches: raw.caches,
            vendor: raw.vendor,
            family: raw.family,
            model: raw.model,
            stepping: raw.stepping,
            features,
            disabled,
            unknown_disabled,
        }
    })
}

/// The features the kernels may use ([`facts`]`().features`).
pub fn features() -> &'static Features {
    &facts().features
}

/// The machine description with its full sysfs layout, read on first use
/// (an engine's build, `bulkmem info`) and cached for the life of the
/// process. The copy path never needs it: see [`facts`].
pub fn info() -> &'static CpuInfo {
    static INFO: OnceLock<CpuInfo> = OnceLock::new();
    INFO.get_or_init(|| CpuInfo {
        facts: facts().clone(),
        brand: brand(),
        topology: Topology::detect(),
    })
}

struct Raw {
    vendor: Vendor,
    family: u32,
    model: u32,
    stepping: u32,
    features: Features,
    caches: CacheFacts,
}

// Each CPUID is a VM exit under a hypervisor (about 7 us measured in this
// project's VM), and every process under the preload pays them: the leaves
// below are the fewest that give the features and the caches, each read
// once (the brand string waits for `info`, std's feature cache is not
// consulted: it would read its own dozen leaves).
#[cfg(target_arch = "x86_64")]
fn detect() -> Raw {
    use std::arch::x86_64::{__cpuid, __cpuid_count};

    let bit = |reg: u32, n: u32| reg & (1 << n) != 0;

    // CPUID is unprivileged and present on every x86_64 CPU, and the leaves
    // read below are only read when the maximum-leaf queries say they exist.
    let leaf0 = __cpuid(0);
    let mut vendor_bytes = [0u8; 12];
    for (i, reg) in [leaf0.ebx, leaf0.edx, leaf0.ecx].into_iter().enumerate() {
        vendor_bytes[4 * i..4 * i + 4].copy_from_slice(&reg.to_le_bytes());
    }
    let vendor = match &vendor_bytes {
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

    // What the OS saves on a context switch (XCR0): YMM needs SSE and AVX
    // state (bits 1, 2), ZMM also opmask and both ZMM halves (5, 6, 7).
    let xcr0 = if bit(leaf1.ecx, 27) {
        // SAFETY: OSXSAVE (leaf 1 ECX[27]) says XGETBV is enabled.
        unsafe { xgetbv0() }
    } else {
        0
    };
    let ymm = bit(leaf1.ecx, 28) && xcr0 & 0x6 == 0x6;
    let zmm = ymm && xcr0 & 0xe0 == 0xe0;

    let mut f = Features::default();
    let mut hybrid = false;
    if max_leaf >= 7 {
        let l7 = __cpuid_count(7, 0);
        f.erms = bit(l7.ebx, 9);
        f.fsrm = bit(l7.edx, 4);
        f.movdir64b = bit(l7.ecx, 28);
        f.avx2 = ymm && bit(l7.ebx, 5);
        f.avx512f = zmm && bit(l7.ebx, 16);
        f.avx512bw = f.avx512f && bit(l7.ebx, 30);
        hybrid = bit(l7.edx, 15);
        if l7.eax >= 1 {
            let l71 = __cpuid_count(7, 1);
            f.fzrm = bit(l71.eax, 10);
            f.fsrs = bit(l71.eax, 11);
            f.fsrc = bit(l71.eax, 12);
        }
    }

    let max_ext = __cpuid(0x8000_0000).eax;
    let amd = vendor == Vendor::Amd;
    let mut package = None;
    if amd && max_ext >= 0x8000_0008 {
        let l = __cpuid(0x8000_0008);
        f.clzero = bit(l.ebx, 0);
        package = Some((l.ecx & 0xff) as usize + 1);
    }
    f.rep_good = proc_cpuinfo_has_flag("rep_good");
    let leaves = if amd {
        cpuid_cache::amd_leaves(max_ext, package)
    } else {
        cpuid_cache::intel_leaves(max_leaf, hybrid)
    };

    Raw {
        vendor,
        family,
        model,
        stepping: leaf1.eax & 0xf,
        features: f,
        caches: cpuid_cache::detect(leaves),
    }
}

/// XCR0.
///
/// # Safety
/// Only where CPUID leaf 1 reports OSXSAVE.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "xsave")]
unsafe fn xgetbv0() -> u64 {
    // SAFETY: the caller checked OSXSAVE; XCR0 always exists then.
    unsafe { std::arch::x86_64::_xgetbv(0) }
}

/// The brand string (CPUID 0x80000002..4), or the vendor string.
#[cfg(target_arch = "x86_64")]
fn brand() -> String {
    use std::arch::x86_64::__cpuid;

    let max_ext = __cpuid(0x8000_0000).eax;
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
        let l0 = __cpuid(0);
        let mut v = Vec::with_capacity(12);
        for reg in [l0.ebx, l0.edx, l0.ecx] {
            v.extend_from_slice(&reg.to_le_bytes());
        }
        brand = String::from_utf8_lossy(&v).into_owned();
    }
    brand
}

#[cfg(not(target_arch = "x86_64"))]
fn brand() -> String {
    std::env::consts::ARCH.to_string()
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Raw {
    Raw {
        vendor: Vendor::Other,
        family: 0,
        model: 0,
        stepping: 0,
        features: Features::default(),
        caches: cpuid_cache::detect(None),
    }
}

/// Whether the first CPU's `flags` line in /proc/cpuinfo lists `flag`.
/// Reads only until that line: the kernel formats the file a CPU at a
/// time, and a many-CPU machine's whole file is hundreds of KiB.
#[cfg(target_arch = "x86_64")]
fn proc_cpuinfo_has_flag(flag: &str) -> bool {
    use std::io::Read;

    let Ok(mut file) = std::fs::File::open("/proc/cpuinfo") else {
        return false;
    };
    let mut text = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(line) = first_flags_line(&text) {
            return line.split_whitespace().any(|f| f == flag);
        }
        match file.read(&mut chunk) {
            Ok(0) | Err(_) => return false,
            Ok(n) => text.extend_from_slice(&chunk[..n]),
        }
        if text.len() > 1 << 20 {
            return false;
        }
    }
}

/// The value of the first complete `flags` line, if `text` holds one.
#[cfg(target_arch = "x86_64")]
fn first_flags_line(text: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(text).ok().or_else(|| {
        // A chunk boundary may split a character: use the valid prefix.
        let valid = std::str::from_utf8(text).unwrap_err().valid_up_to();
        std::str::from_utf8(&text[..valid]).ok()
    })?;
    let complete = &text[..text.rfind('\n')? + 1];
    complete
        .lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, flags)| flags)
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

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn only_a_complete_flags_line_counts() {
        assert_eq!(
            first_flags_line(b"processor\t: 0\nflags\t\t: fpu erm"),
            None
        );
        assert_eq!(
            first_flags_line(b"processor\t: 0\nflags\t\t: fpu rep_good\nbugs\t: x\n"),
            Some(" fpu rep_good")
        );
        // The first CPU's line, not a later one's.
        assert_eq!(
            first_flags_line(b"flags\t: a\nflags\t: b rep_good\n"),
            Some(" a")
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_first_flags_line_answers_as_the_whole_file() {
        let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let whole = |flag: &str| {
            text.lines()
                .find(|l| l.starts_with("flags"))
                .and_then(|l| l.split_once(':'))
                .is_some_and(|(_, f)| f.split_whitespace().any(|x| x == flag))
        };
        for flag in ["rep_good", "fpu", "sse2", "no_such_flag"] {
            assert_eq!(proc_cpuinfo_has_flag(flag), whole(flag), "{flag}");
        }
    }

    #[test]
    fn detection_is_consistent_with_std() {
        let i = info();
        #[cfg(target_arch = "x86_64")]
        for (name, std) in [
            ("avx2", std::arch::is_x86_feature_detected!("avx2")),
            ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
            ("avx512bw", std::arch::is_x86_feature_detected!("avx512bw")),
        ] {
            if !i.disabled.iter().any(|d| d == name) {
                assert_eq!(i.features.names().contains(&name), std, "{name}");
            }
        }
        assert!(!i.brand.is_empty());
    }
}
