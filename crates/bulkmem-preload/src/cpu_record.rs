//! What the C library found usable at its start, as the small path
//! (`small::decide`) asks it: its record of the CPUID leaves.

use core::ffi::c_void;

use crate::c_library;
use bulkmem_preload_abi::sys;

/// glibc's `struct cpuid_feature`.
#[repr(C)]
struct Leaf {
    cpuid: [u32; 4],
    active: [u32; 4],
}

/// `CPUID_INDEX_1`, `CPUID_INDEX_7` and `CPUID_INDEX_7_ECX_1` in glibc's
/// numbering (an index the C library does not know reads as zeros), and the words
/// of a leaf read here.
const INDEX_1: u32 = 0;
const INDEX_7: u32 = 1;
const INDEX_7_ECX_1: u32 = 6;
const EAX: usize = 0;
const EBX: usize = 1;

/// The C library's record of the CPUID leaves
/// (`__x86_get_cpuid_feature_leaf`, glibc 2.33 on): what the CPU reports
/// and what the C library decided is usable. Asked of the C library rather
/// than of CPUID: under a hypervisor each CPUID is an exit, about 5 us on
/// a 2-vCPU VM, which every process would pay at start. Looked up once
/// (one `dlsym`), for every question below.
pub(crate) struct Leaves(extern "C" fn(u32) -> *const Leaf);

impl Leaves {
    /// `None` where the C library keeps no such record (glibc before
    /// 2.33, another C library).
    pub(crate) fn find() -> Option<Leaves> {
        // SAFETY: RTLD_NEXT and a NUL-terminated name.
        let f = unsafe { sys::dlsym(sys::rtld_next(), c"__x86_get_cpuid_feature_leaf".as_ptr()) };
        if f.is_null() || !c_library::contains(f) {
            return None;
        }
        // SAFETY: glibc's `const struct cpuid_feature
        // *__x86_get_cpuid_feature_leaf(unsigned int)`.
        Some(Leaves(unsafe {
            core::mem::transmute::<*mut c_void, extern "C" fn(u32) -> *const Leaf>(f)
        }))
    }

    fn leaf(&self, index: u32) -> Option<&'static Leaf> {
        let leaf = (self.0)(index);
        // SAFETY: null or glibc's static table, valid for the process.
        unsafe { leaf.as_ref() }
    }

    /// Whether the AVX2 instructions may run, as the C library decided at
    /// its start: the CPU has them, the kernel saves the YMM state, and no
    /// `GLIBC_TUNABLES` setting took them away from its own routines.
    pub(crate) fn avx2_usable(&self) -> bool {
        /// AVX2's bit in leaf 7's EBX.
        const AVX2: u32 = 1 << 5;
        self.leaf(INDEX_7)
            .is_some_and(|l| l.active[EBX] & AVX2 != 0)
    }

    /// Whether the bodies may use 512-bit registers (`small::WIDE`): AVX-512
    /// F and BW and BMI2 usable as the C library decided, on a CPU where
    /// the C library itself takes its AVX-512 routines. glibc (2.33 on)
    /// does on Intel parts that list AVX-VNNI and not AVX512ER ("won't
    /// lower CPU frequency when ZMM load and store instructions are
    /// used": Sapphire and Emerald Rapids, not Skylake-SP or Ice Lake),
    /// and on AMD's AVX-512 parts, family 0x19 and later (Intel's display
    /// family is 6, or 0x13 for its newest). Both facts come from the
    /// record the C library keeps (leaf 1's EAX, leaf 7 and leaf 7.1).
    pub(crate) fn wide_usable(&self) -> bool {
        /// AVX-512 F and BW, and BMI2 (the set's mask), in leaf 7's EBX.
        const NEEDED: u32 = 1 << 16 | 1 << 30 | 1 << 8;
        /// AVX512ER (Xeon Phi), in leaf 7's EBX.
        const AVX512ER: u32 = 1 << 27;
        /// AVX-VNNI, in leaf 7.1's EAX.
        const AVX_VNNI: u32 = 1 << 4;
        let Some(leaf7) = self.leaf(INDEX_7) else {
            return false;
        };
        let wide = leaf7.active[EBX] & NEEDED == NEEDED;
        let family = self.leaf(INDEX_1).map_or(0, |l| {
            let eax = l.cpuid[EAX];
            let base = (eax >> 8) & 0xf;
            if base == 0xf {
                base + ((eax >> 20) & 0xff)
            } else {
                base
            }
        });
        let intel_wide = leaf7.cpuid[EBX] & AVX512ER == 0
            && self
                .leaf(INDEX_7_ECX_1)
                .is_some_and(|l| l.cpuid[EAX] & AVX_VNNI != 0);
        wide && (family >= 0x19 || intel_wide)
    }
}
