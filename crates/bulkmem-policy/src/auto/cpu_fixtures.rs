//! Synthetic descriptions of the CPUs the project has met (Zen 2 and Zen 3
//! without ERMS/FSRM, Zen 5, Skylake-like and Emerald Rapids Intel, an old x86,
//! the 2-vCPU Emerald Rapids VM), one place for every test of the rules,
//! the profile and `auto` to hold its choices against.

use super::Machine;
use crate::machine::cpu::{Features, Vendor};

const MIB: usize = 1 << 20;

/// AMD EPYC 7713 as the kernel's batched folio-copy patches describe it: AVX2, CLZERO, no ERMS/FSRM;
/// 32 MiB L3 per 8-core (16-thread) CCX.
pub fn zen3() -> Machine {
    Machine {
        vendor: Vendor::Amd,
        family: 0x19,
        features: Features {
            avx2: true,
            clzero: true,
            rep_good: true,
            ..Features::default()
        },
        l1d_bytes: 32 << 10,
        l2_bytes: 512 << 10,
        llc_bytes: 32 * MIB,
        llc_cpus: 16,
        x86: true,
    }
}

/// AMD EPYC as a 2-vCPU VM showed it (family 0x17 model 0x31, Zen 2):
/// AVX2, CLZERO, no ERMS/FSRM, no AVX-512; 16 MiB L3 per 4-core
/// (8-thread) CCX.
pub fn zen2() -> Machine {
    Machine {
        family: 0x17,
        l1d_bytes: 32 << 10,
        l2_bytes: 512 << 10,
        llc_bytes: 16 * MIB,
        llc_cpus: 8,
        ..zen3()
    }
}

/// AMD EPYC 9655: FSRM, ERMS, AVX-512, CLZERO.
pub fn zen5() -> Machine {
    Machine {
        vendor: Vendor::Amd,
        family: 0x1a,
        features: Features {
            erms: true,
            fsrm: true,
            avx2: true,
            avx512f: true,
            avx512bw: true,
            clzero: true,
            rep_good: true,
            ..Features::default()
        },
        l1d_bytes: 48 << 10,
        l2_bytes: MIB,
        llc_bytes: 32 * MIB,
        llc_cpus: 16,
        x86: true,
    }
}

/// AMD EPYC 9004 (Zen 4, family 0x19): as Zen 5 to the rules' eyes,
/// FSRM, ERMS, AVX-512, CLZERO, 1 MiB L2, 32 MiB L3 per CCX.
pub fn zen4() -> Machine {
    Machine {
        family: 0x19,
        llc_cpus: 16,
        ..zen5()
    }
}

/// A Skylake-SP-like Intel: ERMS without FSRM, AVX-512, no CLZERO.
pub fn intel_erms() -> Machine {
    Machine {
        vendor: Vendor::Intel,
        family: 6,
        features: Features {
            erms: true,
            avx2: true,
            avx512f: true,
            avx512bw: true,
            ..Features::default()
        },
        l1d_bytes: 32 << 10,
        l2_bytes: MIB,
        llc_bytes: 38 * MIB,
        llc_cpus: 56,
        x86: true,
    }
}

/// A 16-vCPU Emerald Rapids VM: family 6 model 0xcf,
/// ERMS FSRM FZRM FSRS FSRC AVX-512, no CLZERO, 48 KiB L1d, 2 MiB L2,
/// one 300 MiB L3 shared by all 16 CPUs.
pub fn intel_emr() -> Machine {
    Machine {
        vendor: Vendor::Intel,
        family: 6,
        features: Features {
            erms: true,
            fsrm: true,
            fzrm: true,
            fsrs: true,
            fsrc: true,
            avx2: true,
            avx512f: true,
            avx512bw: true,
            movdir64b: true,
            ..Features::default()
        },
        l1d_bytes: 48 << 10,
        l2_bytes: 2 * MIB,
        llc_bytes: 300 * MIB,
        llc_cpus: 16,
        x86: true,
    }
}

/// An x86 of before AVX2, ERMS and CLZERO.
pub fn old_x86() -> Machine {
    Machine {
        vendor: Vendor::Intel,
        family: 6,
        features: Features::default(),
        l1d_bytes: 32 << 10,
        l2_bytes: 256 << 10,
        llc_bytes: 8 * MIB,
        llc_cpus: 4,
        x86: true,
    }
}

/// The 2-vCPU Emerald Rapids VM (family 6 model 0xcf): ERMS FSRM
/// AVX-512, no FZRM/FSRS; the VM reports one 260 MiB L3 for its 2 CPUs.
pub fn intel_emr_2vcpu() -> Machine {
    Machine {
        features: Features {
            erms: true,
            fsrm: true,
            avx2: true,
            avx512f: true,
            avx512bw: true,
            ..Features::default()
        },
        llc_bytes: 260 * MIB,
        llc_cpus: 2,
        ..intel_emr()
    }
}

/// Every description above but the VM's: the machines a rule must hold
/// on.
pub fn machines() -> [Machine; 7] {
    [
        zen2(),
        zen3(),
        zen4(),
        zen5(),
        intel_erms(),
        intel_emr(),
        old_x86(),
    ]
}
