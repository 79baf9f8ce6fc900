//! The small path: copies of at most [`COPY_MAX`] bytes and sets of at
//! most [`SET_MAX`] done by the interposed function itself, as the C library's own
//! AVX2 routine does them, instead of a second jump into it.
//!
//! Most calls a program makes are small, and every one used to pay the
//! router (a load, a compare, a load, a test and an indirect jump) before
//! the C library's routine: 0.95x plain glibc on 8-64-byte copies
//! (`bulkmem bench preload`). Here a small call is one compare with a
//! static and the copy.
//!
//! What the C library's call would do, this does:
//! * every byte is loaded before any is stored, so overlapping buffers
//!   copy as `memmove` does (`memcpy` is `memmove` in glibc, and programs
//!   rely on it);
//! * a fault on either buffer raises SIGSEGV or SIGBUS on the calling
//!   thread, in a leaf function with unwind information, so a handler
//!   may repair and return, `siglongjmp`, throw or exit the thread;
//! * the upper halves of the vector registers are left clean
//!   (`vzeroupper`), as the ABI expects of a function;
//! * `errno`, the direction flag and the stack are untouched.
//!
//! From 65 to 512 bytes it uses 512-bit registers where the C library
//! runs its own AVX-512 routine ([`WIDE`]).
//!
//! It is on only where its slot in [`END`] is not 0: AVX2 usable (as the
//! C library found it at start), the next definition of the function the C
//! library's own (no sanitizer's interceptor or other interposer between
//! the program and the C library, whose checks it would bypass), not under
//! valgrind (whose memcheck replaces the C library's routines), and the
//! preload on and not counting every call (`BULKMEM_PRELOAD_STATS=1`).
//! Everything else takes the router as before. docs/measurements.md, "The
//! preload", has the measurements.

use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use crate::cpu_record::Leaves;
use crate::{c_library, calls};
use bulkmem_preload_abi::sys;

/// The longest copy done here. Up to 512 bytes, 16 AVX2 registers hold
/// it all, loaded at once; longer ones take a loop of 128-byte blocks.
/// Past 4 KiB the jump into the C library's routine costs under 1% of the
/// copy.
pub const COPY_MAX: usize = 4096;
/// The longest set done here: 16 stores of one register.
pub const SET_MAX: usize = 512;

/// Per interposed function (in `calls`' numbers): calls of fewer
/// bytes than this are done here; 0, none. Read by the assembly of each
/// function's first instruction.
pub static END: [AtomicUsize; 7] = [const { AtomicUsize::new(0) }; 7];

/// Which functions (bit per call number) may take the small path at all.
static ELIGIBLE: AtomicU8 = AtomicU8::new(0);

/// Where the bodies use 512-bit registers (`zmm16`-`zmm23`, which leave
/// no upper state to clear), as the C library's own AVX-512 routine does:
/// copies of 65-512 bytes, and sets of 1-512 (up to 64 bytes one masked
/// store, as glibc's, where it stays inside its page). On only where the
/// C library found AVX-512 (F and BW) and BMI2 usable and takes its own
/// AVX-512 routine, where wide stores cost no frequency: AMD from Zen 4
/// on, Intel from Sapphire Rapids on (`cpu_record::Leaves::wide_usable`). On the Zen
/// 5 VM, 64-512-byte copies at every alignment ran 0.85-0.90x glibc with
/// the AVX2 body and 0.94-1.03x with this one (a C loop of both bodies).
/// Older Intel server parts keep AVX2, as glibc does.
///
/// Per interposed function (as [`END`]), read by the bodies, a copy's as
/// `len - 65 < WIDE[call]`, a set's as `len - 1 < WIDE[call]` (0 where
/// off): one compare with a static for the range and the switch, so
/// those calls take a single branch to their body, as glibc's take one.
/// [`publish`] keeps the span below `END`, so a call inside it skips
/// `END`'s compare. Behind three compares (by length, then the switch),
/// the wide copy had run 0.96-0.97x glibc on 64-512-byte copies (Zen 5
/// VM).
pub static WIDE: [AtomicUsize; 7] = [const { AtomicUsize::new(0) }; 7];

/// Per interposed function (as [`END`]; the copies read it): calls of
/// fewer bytes than this, at most [`SHORT_MAX`], take the copy's short
/// branches at once. One compare with a static is then both the switch
/// and the first split by length, where a copy used to ask `END`, then
/// `WIDE`, then its length: a random 8-64-byte copy paid two extra
/// compares ahead of the branches it mispredicts, and ran 0.96-0.98x
/// glibc. On a Xeon (CPUID model 0xa7), `preload-workload`, medians of
/// 6-8 children in alternation with the old order: 8-64 0.980x -> 0.993x
/// glibc, 64-512 1.011x -> 1.012x; `bench preload`: 8-64 1.000x, 64-512
/// 1.019x. docs/measurements.md ("Small calls: one compare for the short
/// copies") has the fixed lengths and the shapes that lost.
pub static SHORT: [AtomicUsize; 7] = [const { AtomicUsize::new(0) }; 7];

/// The longest copy [`SHORT`] sends to the short branches: two 16-byte
/// registers.
const SHORT_MAX: usize = 32;

/// Whether [`decide`] found the wide bodies usable ([`WIDE`]).
static WIDE_ON: AtomicBool = AtomicBool::new(false);

/// The first length a copy's (a set's) wide body takes, and the last.
const WIDE_COPY: (usize, usize) = (65, 512);
const WIDE_SET: (usize, usize) = (1, 512);

/// Decides, in the constructor, which functions may take the small path
/// in this process, then [`publish`]es. The fortified forms are not
/// looked up here (each `dlsym` costs every process a microsecond or
/// more): each is decided when its first call resolves it ([`resolved`]).
pub fn decide() {
    c_library::find();
    let Some(leaves) = Leaves::find() else {
        return;
    };
    if !leaves.avx2_usable() || sys::running_on_valgrind() {
        return;
    }
    for call in [
        calls::MEMCPY_CALL,
        calls::MEMMOVE_CALL,
        calls::MEMSET_CALL,
        calls::MEMPCPY_CALL,
    ] {
        eligible_if_c_library(call, calls::NEXT[call].get());
    }
    AVX2.store(true, Ordering::Relaxed);
    WIDE_ON.store(leaves.wide_usable(), Ordering::Relaxed);
    publish();
}

/// Whether [`decide`] found AVX2 usable and no valgrind.
static AVX2: AtomicBool = AtomicBool::new(false);

/// Function `call`'s next definition `p` is now known (a fortified form's
/// first call): its small path goes on if `p` is the C library's.
/// Async-signal-safe.
pub fn resolved(call: usize, p: *const c_void) {
    if AVX2.load(Ordering::Relaxed) && eligible_if_c_library(call, p) {
        publish();
    }
}

fn eligible_if_c_library(call: usize, p: *const c_void) -> bool {
    let ok = !p.is_null() && c_library::contains(p);
    if ok {
        ELIGIBLE.fetch_or(1 << call, Ordering::Relaxed);
    }
    ok
}

/// Sets [`END`] from the loader's `MIN` (calls from it go to the engine),
/// and [`SHORT`] and [`WIDE`] inside it: after [`decide`], and again once
/// the engine has published its settings. A call racing with it finds
/// the short and wide spans off while `END` changes, and so takes the
/// checked road.
pub fn publish() {
    let min = calls::MIN.load(Ordering::Acquire);
    let eligible = ELIGIBLE.load(Ordering::Relaxed);
    let wide_on = WIDE_ON.load(Ordering::Relaxed);
    for (call, (end, wide)) in END.iter().zip(&WIDE).enumerate() {
        let set = call == calls::MEMSET_CALL || call == calls::MEMSET_CHK_CALL;
        let (max, (lo, hi)) = if set {
            (SET_MAX, WIDE_SET)
        } else {
            (COPY_MAX, WIDE_COPY)
        };
        let on = eligible & (1 << call) != 0;
        let below = if on { min.min(max + 1) } else { 0 };
        // Lengths lo..lo + span take the wide body: all of them below
        // `below`, the small path's bound, and at most hi.
        let span = if wide_on {
            below.min(hi + 1).saturating_sub(lo)
        } else {
            0
        };
        wide.store(0, Ordering::Release);
        SHORT[call].store(0, Ordering::Release);
        end.store(below, Ordering::Release);
        SHORT[call].store(below.min(SHORT_MAX + 1), Ordering::Release);
        wide.store(span, Ordering::Release);
    }
}

/// Both bodies' branches for up to 32 bytes by `rdx`, the length: to 22
/// for 2-3 bytes, 23 for 4-7, 24 for 8-15, 25 for 16-32, 30 (return)
/// for none; one byte falls through.
macro_rules! ladder {
    () => {
        concat!(
            "cmp edx, 16\n",
            "jae 25f\n",
            "cmp edx, 8\n",
            "jae 24f\n",
            "cmp edx, 4\n",
            "jae 23f\n",
            "cmp edx, 1\n",
            "ja 22f\n",
            "jb 30f\n",
        )
    };
}
pub(crate) use ladder;

/// The copy of `rdx` bytes from `rsi` to `rdi` for interposed function
/// `{call}`, if below its [`END`] slot (else to label 9, the router's
/// road): up to 512 every load before any store, beyond that a loop that
/// never overwrites a source byte it has not read; `rax` already holds
/// the return value. Its first compare sends lengths below [`SHORT`] to
/// the short branches (label 70, the [`ladder`]), then
/// [`WIDE`]'s to the 512-bit bodies (50-52), and only the rest (33-64
/// bytes, or no wide body) ask `END`. Labels 22-70 are this body's.
macro_rules! copy_body {
    () => {
        concat!(
            "cmp rdx, qword ptr [rip + {short} + 8 * {call}]\n",
            "jb 70f\n",
            "lea r9, [rdx - 65]\n",
            "cmp r9, qword ptr [rip + {wide} + 8 * {call}]\n",
            "jb 50f\n",
            "cmp rdx, qword ptr [rip + {end} + 8 * {call}]\n",
            "jae 9f\n",
            // 33-64 bytes: two 32-byte registers.
            "cmp edx, 64\n",
            "ja 27f\n",
            "vmovdqu ymm0, ymmword ptr [rsi]\n",
            "vmovdqu ymm1, ymmword ptr [rsi + rdx - 32]\n",
            "vmovdqu ymmword ptr [rdi], ymm0\n",
            "vmovdqu ymmword ptr [rdi + rdx - 32], ymm1\n",
            "vzeroupper\n",
            "ret\n",
            "70:\n",
            $crate::small::ladder!(),
            "movzx ecx, byte ptr [rsi]\n",
            "mov byte ptr [rdi], cl\n",
            "30:\n",
            "ret\n",
            "22:\n",
            "movzx ecx, word ptr [rsi]\n",
            "movzx r8d, word ptr [rsi + rdx - 2]\n",
            "mov word ptr [rdi], cx\n",
            "mov word ptr [rdi + rdx - 2], r8w\n",
            "ret\n",
            "23:\n",
            "mov ecx, dword ptr [rsi]\n",
            "mov r8d, dword ptr [rsi + rdx - 4]\n",
            "mov dword ptr [rdi], ecx\n",
            "mov dword ptr [rdi + rdx - 4], r8d\n",
            "ret\n",
            "24:\n",
            "mov rcx, qword ptr [rsi]\n",
            "mov r8, qword ptr [rsi + rdx - 8]\n",
            "mov qword ptr [rdi], rcx\n",
            "mov qword ptr [rdi + rdx - 8], r8\n",
            "ret\n",
            "25:\n",
            "vmovdqu xmm0, xmmword ptr [rsi]\n",
            "vmovdqu xmm1, xmmword ptr [rsi + rdx - 16]\n",
            "vmovdqu xmmword ptr [rdi], xmm0\n",
            "vmovdqu xmmword ptr [rdi + rdx - 16], xmm1\n",
            "ret\n",
            // 65 bytes and more in 256-bit registers (65-512 took the
            // 512-bit bodies, labels 50-52, at the top where `WIDE` is on).
            "27:\n",
            "vmovdqu ymm0, ymmword ptr [rsi]\n",
            "vmovdqu ymm1, ymmword ptr [rsi + 32]\n",
            "cmp edx, 128\n",
            "ja 28f\n",
            "vmovdqu ymm2, ymmword ptr [rsi + rdx - 64]\n",
            "vmovdqu ymm3, ymmword ptr [rsi + rdx - 32]\n",
            "vmovdqu ymmword ptr [rdi], ymm0\n",
            "vmovdqu ymmword ptr [rdi + 32], ymm1\n",
            "vmovdqu ymmword ptr [rdi + rdx - 64], ymm2\n",
            "vmovdqu ymmword ptr [rdi + rdx - 32], ymm3\n",
            "vzeroupper\n",
            "ret\n",
            "28:\n",
            "vmovdqu ymm2, ymmword ptr [rsi + 64]\n",
            "vmovdqu ymm3, ymmword ptr [rsi + 96]\n",
            "cmp edx, 256\n",
            "ja 29f\n",
            "vmovdqu ymm4, ymmword ptr [rsi + rdx - 128]\n",
            "vmovdqu ymm5, ymmword ptr [rsi + rdx - 96]\n",
            "vmovdqu ymm6, ymmword ptr [rsi + rdx - 64]\n",
            "vmovdqu ymm7, ymmword ptr [rsi + rdx - 32]\n",
            "vmovdqu ymmword ptr [rdi], ymm0\n",
            "vmovdqu ymmword ptr [rdi + 32], ymm1\n",
            "vmovdqu ymmword ptr [rdi + 64], ymm2\n",
            "vmovdqu ymmword ptr [rdi + 96], ymm3\n",
            "vmovdqu ymmword ptr [rdi + rdx - 128], ymm4\n",
            "vmovdqu ymmword ptr [rdi + rdx - 96], ymm5\n",
            "vmovdqu ymmword ptr [rdi + rdx - 64], ymm6\n",
            "vmovdqu ymmword ptr [rdi + rdx - 32], ymm7\n",
            "vzeroupper\n",
            "ret\n",
            "29:\n",
            "cmp edx, 512\n",
            "ja 40f\n",
            "vmovdqu ymm4, ymmword ptr [rsi + 128]\n",
            "vmovdqu ymm5, ymmword ptr [rsi + 160]\n",
            "vmovdqu ymm6, ymmword ptr [rsi + 192]\n",
            "vmovdqu ymm7, ymmword ptr [rsi + 224]\n",
            "vmovdqu ymm8, ymmword ptr [rsi + rdx - 256]\n",
            "vmovdqu ymm9, ymmword ptr [rsi + rdx - 224]\n",
            "vmovdqu ymm10, ymmword ptr [rsi + rdx - 192]\n",
            "vmovdqu ymm11, ymmword ptr [rsi + rdx - 160]\n",
            "vmovdqu ymm12, ymmword ptr [rsi + rdx - 128]\n",
            "vmovdqu ymm13, ymmword ptr [rsi + rdx - 96]\n",
            "vmovdqu ymm14, ymmword ptr [rsi + rdx - 64]\n",
            "vmovdqu ymm15, ymmword ptr [rsi + rdx - 32]\n",
            "vmovdqu ymmword ptr [rdi], ymm0\n",
            "vmovdqu ymmword ptr [rdi + 32], ymm1\n",
            "vmovdqu ymmword ptr [rdi + 64], ymm2\n",
            "vmovdqu ymmword ptr [rdi + 96], ymm3\n",
            "vmovdqu ymmword ptr [rdi + 128], ymm4\n",
            "vmovdqu ymmword ptr [rdi + 160], ymm5\n",
            "vmovdqu ymmword ptr [rdi + 192], ymm6\n",
            "vmovdqu ymmword ptr [rdi + 224], ymm7\n",
            "vmovdqu ymmword ptr [rdi + rdx - 256], ymm8\n",
            "vmovdqu ymmword ptr [rdi + rdx - 224], ymm9\n",
            "vmovdqu ymmword ptr [rdi + rdx - 192], ymm10\n",
            "vmovdqu ymmword ptr [rdi + rdx - 160], ymm11\n",
            "vmovdqu ymmword ptr [rdi + rdx - 128], ymm12\n",
            "vmovdqu ymmword ptr [rdi + rdx - 96], ymm13\n",
            "vmovdqu ymmword ptr [rdi + rdx - 64], ymm14\n",
            "vmovdqu ymmword ptr [rdi + rdx - 32], ymm15\n",
            "vzeroupper\n",
            "ret\n",
            // 513 bytes and more: the first 128 (ymm0-3, loaded above)
            // and the last 128 (ymm4-7) are held while a loop of aligned
            // 128-byte stores copies the middle, in the direction that
            // never overwrites a source byte before reading it; then
            // the ends are stored.
            "40:\n",
            "vmovdqu ymm4, ymmword ptr [rsi + rdx - 128]\n",
            "vmovdqu ymm5, ymmword ptr [rsi + rdx - 96]\n",
            "vmovdqu ymm6, ymmword ptr [rsi + rdx - 64]\n",
            "vmovdqu ymm7, ymmword ptr [rsi + rdx - 32]\n",
            "mov r9, rsi\n",
            "sub r9, rdi\n",
            "mov rcx, rdi\n",
            "sub rcx, rsi\n",
            "cmp rcx, rdx\n",
            "jb 42f\n",
            // Forward (the destination starts below the source, or they
            // are apart): from dst + 128 rounded down to 32 while below
            // dst + n - 128.
            "lea r10, [rdi + 128]\n",
            "and r10, -32\n",
            "lea r8, [rdi + rdx - 128]\n",
            "41:\n",
            "vmovdqu ymm8, ymmword ptr [r10 + r9]\n",
            "vmovdqu ymm9, ymmword ptr [r10 + r9 + 32]\n",
            "vmovdqu ymm10, ymmword ptr [r10 + r9 + 64]\n",
            "vmovdqu ymm11, ymmword ptr [r10 + r9 + 96]\n",
            "vmovdqa ymmword ptr [r10], ymm8\n",
            "vmovdqa ymmword ptr [r10 + 32], ymm9\n",
            "vmovdqa ymmword ptr [r10 + 64], ymm10\n",
            "vmovdqa ymmword ptr [r10 + 96], ymm11\n",
            "add r10, 128\n",
            "cmp r10, r8\n",
            "jb 41b\n",
            "jmp 43f\n",
            // Backward (the destination starts inside the source): blocks
            // ending at dst + n - 128 rounded up to 32, down while above
            // dst + 128.
            "42:\n",
            "lea r10, [rdi + rdx - 97]\n",
            "and r10, -32\n",
            "lea r8, [rdi + 128]\n",
            "44:\n",
            "vmovdqu ymm8, ymmword ptr [r10 + r9 - 32]\n",
            "vmovdqu ymm9, ymmword ptr [r10 + r9 - 64]\n",
            "vmovdqu ymm10, ymmword ptr [r10 + r9 - 96]\n",
            "vmovdqu ymm11, ymmword ptr [r10 + r9 - 128]\n",
            "vmovdqa ymmword ptr [r10 - 32], ymm8\n",
            "vmovdqa ymmword ptr [r10 - 64], ymm9\n",
            "vmovdqa ymmword ptr [r10 - 96], ymm10\n",
            "vmovdqa ymmword ptr [r10 - 128], ymm11\n",
            "sub r10, 128\n",
            "cmp r10, r8\n",
            "ja 44b\n",
            "43:\n",
            "vmovdqu ymmword ptr [rdi + rdx - 128], ymm4\n",
            "vmovdqu ymmword ptr [rdi + rdx - 96], ymm5\n",
            "vmovdqu ymmword ptr [rdi + rdx - 64], ymm6\n",
            "vmovdqu ymmword ptr [rdi + rdx - 32], ymm7\n",
            "vmovdqu ymmword ptr [rdi], ymm0\n",
            "vmovdqu ymmword ptr [rdi + 32], ymm1\n",
            "vmovdqu ymmword ptr [rdi + 64], ymm2\n",
            "vmovdqu ymmword ptr [rdi + 96], ymm3\n",
            "vzeroupper\n",
            "ret\n",
            // 65-512 bytes, every load before any store, in zmm16-23: no
            // VEX register is written, so no vzeroupper is owed. On a
            // cache line of its own (after a return: the padding never
            // runs): left where the code above put it, 64-512-byte copies
            // ran 1-3% slower with each change there.
            ".p2align 6\n",
            "50:\n",
            "vmovdqu64 zmm16, zmmword ptr [rsi]\n",
            "cmp edx, 128\n",
            "ja 51f\n",
            "vmovdqu64 zmm17, zmmword ptr [rsi + rdx - 64]\n",
            "vmovdqu64 zmmword ptr [rdi], zmm16\n",
            "vmovdqu64 zmmword ptr [rdi + rdx - 64], zmm17\n",
            "ret\n",
            "51:\n",
            "vmovdqu64 zmm17, zmmword ptr [rsi + 64]\n",
            "cmp edx, 256\n",
            "ja 52f\n",
            "vmovdqu64 zmm18, zmmword ptr [rsi + rdx - 128]\n",
            "vmovdqu64 zmm19, zmmword ptr [rsi + rdx - 64]\n",
            "vmovdqu64 zmmword ptr [rdi], zmm16\n",
            "vmovdqu64 zmmword ptr [rdi + 64], zmm17\n",
            "vmovdqu64 zmmword ptr [rdi + rdx - 128], zmm18\n",
            "vmovdqu64 zmmword ptr [rdi + rdx - 64], zmm19\n",
            "ret\n",
            "52:\n",
            "vmovdqu64 zmm18, zmmword ptr [rsi + 128]\n",
            "vmovdqu64 zmm19, zmmword ptr [rsi + 192]\n",
            "vmovdqu64 zmm20, zmmword ptr [rsi + rdx - 256]\n",
            "vmovdqu64 zmm21, zmmword ptr [rsi + rdx - 192]\n",
            "vmovdqu64 zmm22, zmmword ptr [rsi + rdx - 128]\n",
            "vmovdqu64 zmm23, zmmword ptr [rsi + rdx - 64]\n",
            "vmovdqu64 zmmword ptr [rdi], zmm16\n",
            "vmovdqu64 zmmword ptr [rdi + 64], zmm17\n",
            "vmovdqu64 zmmword ptr [rdi + 128], zmm18\n",
            "vmovdqu64 zmmword ptr [rdi + 192], zmm19\n",
            "vmovdqu64 zmmword ptr [rdi + rdx - 256], zmm20\n",
            "vmovdqu64 zmmword ptr [rdi + rdx - 192], zmm21\n",
            "vmovdqu64 zmmword ptr [rdi + rdx - 128], zmm22\n",
            "vmovdqu64 zmmword ptr [rdi + rdx - 64], zmm23\n",
            "ret\n",
        )
    };
}
pub(crate) use copy_body;

/// The set of `rdx` bytes at `rdi` to the low byte of `esi` for
/// interposed function `{call}`, if below its [`END`] slot (at most 513;
/// else to label 9); `rax` already holds the return value. Above 32
/// bytes to 26, else the [`ladder`]. Labels 20-52.
macro_rules! set_body {
    () => {
        concat!(
            "lea r9, [rdx - 1]\n",
            "cmp r9, qword ptr [rip + {wide} + 8 * {call}]\n",
            "jb 50f\n",
            "cmp rdx, qword ptr [rip + {end} + 8 * {call}]\n",
            "jae 9f\n",
            "21:\n",
            "movzx ecx, sil\n",
            "movabs r8, 0x0101010101010101\n",
            "imul rcx, r8\n",
            "cmp rdx, 32\n",
            "ja 26f\n",
            $crate::small::ladder!(),
            "mov byte ptr [rdi], cl\n",
            "30:\n",
            "ret\n",
            "22:\n",
            "mov word ptr [rdi], cx\n",
            "mov word ptr [rdi + rdx - 2], cx\n",
            "ret\n",
            "23:\n",
            "mov dword ptr [rdi], ecx\n",
            "mov dword ptr [rdi + rdx - 4], ecx\n",
            "ret\n",
            "24:\n",
            "mov qword ptr [rdi], rcx\n",
            "mov qword ptr [rdi + rdx - 8], rcx\n",
            "ret\n",
            "25:\n",
            "vmovq xmm0, rcx\n",
            "vpunpcklqdq xmm0, xmm0, xmm0\n",
            "vmovdqu xmmword ptr [rdi], xmm0\n",
            "vmovdqu xmmword ptr [rdi + rdx - 16], xmm0\n",
            "ret\n",
            "26:\n",
            "vmovq xmm0, rcx\n",
            "vpbroadcastq ymm0, xmm0\n",
            "vmovdqu ymmword ptr [rdi], ymm0\n",
            "vmovdqu ymmword ptr [rdi + rdx - 32], ymm0\n",
            "cmp edx, 64\n",
            "jbe 31f\n",
            "vmovdqu ymmword ptr [rdi + 32], ymm0\n",
            "vmovdqu ymmword ptr [rdi + rdx - 64], ymm0\n",
            "cmp edx, 128\n",
            "jbe 31f\n",
            "vmovdqu ymmword ptr [rdi + 64], ymm0\n",
            "vmovdqu ymmword ptr [rdi + 96], ymm0\n",
            "vmovdqu ymmword ptr [rdi + rdx - 128], ymm0\n",
            "vmovdqu ymmword ptr [rdi + rdx - 96], ymm0\n",
            "cmp edx, 256\n",
            "jbe 31f\n",
            "vmovdqu ymmword ptr [rdi + 128], ymm0\n",
            "vmovdqu ymmword ptr [rdi + 160], ymm0\n",
            "vmovdqu ymmword ptr [rdi + 192], ymm0\n",
            "vmovdqu ymmword ptr [rdi + 224], ymm0\n",
            "vmovdqu ymmword ptr [rdi + rdx - 256], ymm0\n",
            "vmovdqu ymmword ptr [rdi + rdx - 224], ymm0\n",
            "vmovdqu ymmword ptr [rdi + rdx - 192], ymm0\n",
            "vmovdqu ymmword ptr [rdi + rdx - 160], ymm0\n",
            "31:\n",
            "vzeroupper\n",
            "ret\n",
            // 1-512 bytes from zmm16 (see the copy's): labels 50-52.
            "50:\n",
            "vpbroadcastb zmm16, esi\n",
            "cmp edx, 64\n",
            "jbe 52f\n",
            "vmovdqu64 zmmword ptr [rdi], zmm16\n",
            "vmovdqu64 zmmword ptr [rdi + rdx - 64], zmm16\n",
            "cmp edx, 128\n",
            "jbe 51f\n",
            "vmovdqu64 zmmword ptr [rdi + 64], zmm16\n",
            "vmovdqu64 zmmword ptr [rdi + rdx - 128], zmm16\n",
            "cmp edx, 256\n",
            "jbe 51f\n",
            "vmovdqu64 zmmword ptr [rdi + 128], zmm16\n",
            "vmovdqu64 zmmword ptr [rdi + 192], zmm16\n",
            "vmovdqu64 zmmword ptr [rdi + rdx - 256], zmm16\n",
            "vmovdqu64 zmmword ptr [rdi + rdx - 192], zmm16\n",
            "51:\n",
            "ret\n",
            // 1-64 bytes: one store under a mask of the first n bytes,
            // unless the 64 bytes run into the next page (a masked store
            // there may take a slow assist): those take the branches.
            "52:\n",
            "mov r9d, edi\n",
            "and r9d, 4095\n",
            "cmp r9d, 4096 - 64\n",
            "ja 21b\n",
            "mov r8, -1\n",
            "bzhi r8, r8, rdx\n",
            "kmovq k1, r8\n",
            "vmovdqu8 zmmword ptr [rdi] {{k1}}, zmm16\n",
            "ret\n",
        )
    };
}
pub(crate) use set_body;

/// Which calls' small path is on in this process, bit `n` for call `n`
/// (`calls`' numbers: 0 `memcpy`, 1 `memmove`, 2 `memset`, 3 `mempcpy`,
/// 4-6 their fortified forms), for `bulkmem_preload_state`.
pub fn paths_on() -> u64 {
    END.iter()
        .enumerate()
        .filter(|(_, e)| e.load(Ordering::Relaxed) > 0)
        .fold(0, |bits, (call, _)| bits | 1 << call)
}
