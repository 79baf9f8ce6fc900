//! The routines that may fault and survive it, the user-space
//! `copy_mc_64.S`: a checked twin of every kernel `auto` can choose, in
//! assembly, with the same instructions and loop shape as the kernel it
//! stands for, plus an exception-table entry for every instruction that
//! touches the caller's memory (`extable`), and the SIGBUS/SIGSEGV handler
//! that resumes a faulting routine at its fixup (`handler`).
//! `crate::fault` builds the public checked copies on them; the descriptor
//! table names them per strategy.
//!
//! One file per family, as the unchecked kernels are laid out: string
//! instructions and the exact byte routines (`copy_mc`, `clear_mc`),
//! temporal vector loops (`copy_mc_vec`, `clear_mc_vec`), non-temporal
//! loops (`copy_mc_nt`, `clear_mc_nt`). Each file assembles its own table
//! (one `global_asm!` is one object's text, and only within one object do
//! the table's bounding subsections bracket every entry); the handler
//! searches them all.
//!
//! Calling convention of every routine (System V, assembly so that the
//! faulting instruction pointer is known exactly): copies
//! `fn(dst: rdi, src: rsi, len: rdx, info: rcx) -> rax`, clears
//! `fn(dst: rdi, len: rsi, info: rdx) -> rax`, where `rax` is the number of
//! bytes *not* done (0: complete). On a fault the handler resumes at the
//! fixup with `r10` = the faulting address and `r11` = `si_code |
//! si_addr_lsb << 32 | signal << 48`; the fixup stores them (and the side,
//! when the routine knows it) into `*info` ([`extable::RawFault`]). Only
//! caller-saved registers are used and the stack is not touched, so `r10`
//! and `r11` are free for the handler to write.
//!
//! Guarantee of every routine: the first `len - rax` bytes are done. The
//! fast routines count whole steps (each loads before it stores), so bytes
//! past that point may already hold their copy (the interleaved
//! non-temporal copies run four page-apart streams, so up to three pages
//! past it); never anything else. The byte routines are exact and say
//! which side faulted: `fault::copy_exact` runs them from the reported
//! point up to the faulting granule, so the offset callers see is exact.

/// Assembler text every routine file starts with: `BM_EXTABLE from, to,
/// fixup` (one relative entry, Linux's `_ASM_EXTABLE` layout, appended to
/// subsection 1 of the file's table section, between the `$table` and
/// `${table}_end` symbols of subsections 0 and 2), `BM_FUNC`/`BM_ENDFUNC`
/// for a hidden global routine with call-frame information, and the small
/// copies the vector routines share (see `asm_helpers!`). `asm_epilogue!` purges them, so that two
/// files assembled into one object do not define a macro twice.
macro_rules! asm_prelude {
    ($table:literal) => {
        concat!(
            ".macro BM_EXTABLE from, to, fixup\n",
            ".pushsection .rodata.",
            $table,
            ", 1, \"a\", @progbits\n",
            ".long \\from - ., \\to - ., \\fixup - .\n",
            ".popsection\n",
            ".endm\n",
            ".pushsection .rodata.",
            $table,
            ", 0, \"a\", @progbits\n",
            ".p2align 2\n",
            ".globl ",
            $table,
            "\n.hidden ",
            $table,
            "\n",
            $table,
            ":\n.popsection\n",
            ".pushsection .rodata.",
            $table,
            ", 2, \"a\", @progbits\n",
            ".globl ",
            $table,
            "_end\n.hidden ",
            $table,
            "_end\n",
            $table,
            "_end:\n.popsection\n",
            r#"
    // A routine with call-frame information: none of them touches the
    // stack, so the return address stays at the CFA - 8 throughout, and an
    // unwinder (a thread cancelled asynchronously inside one) walks
    // through it.
    .macro BM_FUNC name
    .p2align 4
    .globl \name
    .hidden \name
    .type \name,@function
\name:
    .cfi_startproc
    .endm
    .macro BM_ENDFUNC name
    .cfi_endproc
    .size \name, . - \name
    .endm
"#,
            asm_helpers!(),
            asm_vector_helpers!()
        )
    };
}

/// The short copies and clears the vector routines use for heads, tails
/// and whole calls of at most 64 bytes, each instruction pair covered by
/// an entry whose fixup is the macro's argument (nothing of the piece is
/// reported done: the fixup returns the bytes left before it).
///
/// * `BM_COPY_UPTO64 fix`: `rcx` (0..=64) bytes from `[rsi]` to `[rdi]`
///   as `kernels::small::copy_upto_64` does (two overlapping moves of the
///   largest width that fits). Clobbers rax, r9, ymm0-1.
/// * `BM_ZERO_UPTO64 fix`: `rcx` bytes at `[rdi]` zeroed, as
///   `zero_upto_64`. Clobbers rax, ymm0. `BM_ZERO_UPTO64_SSE` the same
///   with legacy SSE stores (for the `clzero` twin, which touches no AVX
///   state, as its kernel).
/// * `BM_COPY_MASKED fix` / `BM_ZERO_MASKED fix` (AVX-512BW): `rcx`
///   (1..=64) bytes with one byte-masked load and store, as the AVX-512
///   kernels' `copy_masked`/`zero_masked`; masked-off lanes neither load,
///   store nor fault. Clobber rax, k1, zmm0.
macro_rules! asm_helpers {
    () => {
        r#"
    .macro BM_COPY_UPTO64 fix
    cmp rcx, 32
    jbe .Lu64_le32\@
.Lu64_a\@:
    vmovdqu ymm0, ymmword ptr [rsi]
    vmovdqu ymm1, ymmword ptr [rsi + rcx - 32]
    vmovdqu ymmword ptr [rdi], ymm0
    vmovdqu ymmword ptr [rdi + rcx - 32], ymm1
.Lu64_b\@:
    BM_EXTABLE .Lu64_a\@, .Lu64_b\@, \fix
    jmp .Lu64_done\@
.Lu64_le32\@:
    cmp rcx, 16
    jb .Lu64_lt16\@
.Lu64_c\@:
    vmovdqu xmm0, xmmword ptr [rsi]
    vmovdqu xmm1, xmmword ptr [rsi + rcx - 16]
    vmovdqu xmmword ptr [rdi], xmm0
    vmovdqu xmmword ptr [rdi + rcx - 16], xmm1
.Lu64_d\@:
    BM_EXTABLE .Lu64_c\@, .Lu64_d\@, \fix
    jmp .Lu64_done\@
.Lu64_lt16\@:
    cmp rcx, 8
    jb .Lu64_lt8\@
.Lu64_e\@:
    mov rax, qword ptr [rsi]
    mov r9, qword ptr [rsi + rcx - 8]
    mov qword ptr [rdi], rax
    mov qword ptr [rdi + rcx - 8], r9
.Lu64_f\@:
    BM_EXTABLE .Lu64_e\@, .Lu64_f\@, \fix
    jmp .Lu64_done\@
.Lu64_lt8\@:
    cmp rcx, 4
    jb .Lu64_lt4\@
.Lu64_g\@:
    mov eax, dword ptr [rsi]
    mov r9d, dword ptr [rsi + rcx - 4]
    mov dword ptr [rdi], eax
    mov dword ptr [rdi + rcx - 4], r9d
.Lu64_h\@:
    BM_EXTABLE .Lu64_g\@, .Lu64_h\@, \fix
    jmp .Lu64_done\@
.Lu64_lt4\@:
    cmp rcx, 2
    jb .Lu64_lt2\@
.Lu64_i\@:
    movzx eax, word ptr [rsi]
    movzx r9d, word ptr [rsi + rcx - 2]
    mov word ptr [rdi], ax
    mov word ptr [rdi + rcx - 2], r9w
.Lu64_j\@:
    BM_EXTABLE .Lu64_i\@, .Lu64_j\@, \fix
    jmp .Lu64_done\@
.Lu64_lt2\@:
    test rcx, rcx
    jz .Lu64_done\@
.Lu64_k\@:
    movzx eax, byte ptr [rsi]
    mov byte ptr [rdi], al
.Lu64_l\@:
    BM_EXTABLE .Lu64_k\@, .Lu64_l\@, \fix
.Lu64_done\@:
    .endm

    .macro BM_ZERO_UPTO64 fix
    xor eax, eax
    cmp rcx, 32
    jbe .Lz64_le32\@
    vpxor xmm0, xmm0, xmm0
.Lz64_a\@:
    vmovdqu ymmword ptr [rdi], ymm0
    vmovdqu ymmword ptr [rdi + rcx - 32], ymm0
.Lz64_b\@:
    BM_EXTABLE .Lz64_a\@, .Lz64_b\@, \fix
    jmp .Lz64_done\@
.Lz64_le32\@:
    cmp rcx, 16
    jb .Lz64_lt16\@
    vpxor xmm0, xmm0, xmm0
.Lz64_c\@:
    vmovdqu xmmword ptr [rdi], xmm0
    vmovdqu xmmword ptr [rdi + rcx - 16], xmm0
.Lz64_d\@:
    BM_EXTABLE .Lz64_c\@, .Lz64_d\@, \fix
    jmp .Lz64_done\@
.Lz64_lt16\@:
    cmp rcx, 8
    jb .Lz64_lt8\@
.Lz64_e\@:
    mov qword ptr [rdi], rax
    mov qword ptr [rdi + rcx - 8], rax
.Lz64_f\@:
    BM_EXTABLE .Lz64_e\@, .Lz64_f\@, \fix
    jmp .Lz64_done\@
.Lz64_lt8\@:
    cmp rcx, 4
    jb .Lz64_lt4\@
.Lz64_g\@:
    mov dword ptr [rdi], eax
    mov dword ptr [rdi + rcx - 4], eax
.Lz64_h\@:
    BM_EXTABLE .Lz64_g\@, .Lz64_h\@, \fix
    jmp .Lz64_done\@
.Lz64_lt4\@:
    cmp rcx, 2
    jb .Lz64_lt2\@
.Lz64_i\@:
    mov word ptr [rdi], ax
    mov word ptr [rdi + rcx - 2], ax
.Lz64_j\@:
    BM_EXTABLE .Lz64_i\@, .Lz64_j\@, \fix
    jmp .Lz64_done\@
.Lz64_lt2\@:
    test rcx, rcx
    jz .Lz64_done\@
.Lz64_k\@:
    mov byte ptr [rdi], al
.Lz64_l\@:
    BM_EXTABLE .Lz64_k\@, .Lz64_l\@, \fix
.Lz64_done\@:
    .endm

    // BM_ZERO_UPTO64 with legacy SSE stores only, as `zero_upto_64`
    // compiles without AVX (the clzero kernel's head and tail): no AVX
    // state touched, no vzeroupper needed.
    .macro BM_ZERO_UPTO64_SSE fix
    xor eax, eax
    xorps xmm0, xmm0
    cmp rcx, 32
    jbe .Lzs_le32\@
.Lzs_a\@:
    movups xmmword ptr [rdi], xmm0
    movups xmmword ptr [rdi + 16], xmm0
    movups xmmword ptr [rdi + rcx - 32], xmm0
    movups xmmword ptr [rdi + rcx - 16], xmm0
.Lzs_b\@:
    BM_EXTABLE .Lzs_a\@, .Lzs_b\@, \fix
    jmp .Lzs_done\@
.Lzs_le32\@:
    cmp rcx, 16
    jb .Lzs_lt16\@
.Lzs_c\@:
    movups xmmword ptr [rdi], xmm0
    movups xmmword ptr [rdi + rcx - 16], xmm0
.Lzs_d\@:
    BM_EXTABLE .Lzs_c\@, .Lzs_d\@, \fix
    jmp .Lzs_done\@
.Lzs_lt16\@:
    cmp rcx, 8
    jb .Lzs_lt8\@
.Lzs_e\@:
    mov qword ptr [rdi], rax
    mov qword ptr [rdi + rcx - 8], rax
.Lzs_f\@:
    BM_EXTABLE .Lzs_e\@, .Lzs_f\@, \fix
    jmp .Lzs_done\@
.Lzs_lt8\@:
    cmp rcx, 4
    jb .Lzs_lt4\@
.Lzs_g\@:
    mov dword ptr [rdi], eax
    mov dword ptr [rdi + rcx - 4], eax
.Lzs_h\@:
    BM_EXTABLE .Lzs_g\@, .Lzs_h\@, \fix
    jmp .Lzs_done\@
.Lzs_lt4\@:
    cmp rcx, 2
    jb .Lzs_lt2\@
.Lzs_i\@:
    mov word ptr [rdi], ax
    mov word ptr [rdi + rcx - 2], ax
.Lzs_j\@:
    BM_EXTABLE .Lzs_i\@, .Lzs_j\@, \fix
    jmp .Lzs_done\@
.Lzs_lt2\@:
    test rcx, rcx
    jz .Lzs_done\@
.Lzs_k\@:
    mov byte ptr [rdi], al
.Lzs_l\@:
    BM_EXTABLE .Lzs_k\@, .Lzs_l\@, \fix
.Lzs_done\@:
    .endm

    // The mask of the low rcx lanes: all ones shifted right by 64 - rcx
    // (the count is taken mod 64, and rcx is 1..=64), rcx kept.
    .macro BM_MASK_RCX
    mov rax, -1
    neg ecx
    shr rax, cl
    neg ecx
    kmovq k1, rax
    .endm

    .macro BM_COPY_MASKED fix
    BM_MASK_RCX
.Lmk_a\@:
    vmovdqu8 zmm0 {{k1}} {{z}}, zmmword ptr [rsi]
    vmovdqu8 zmmword ptr [rdi] {{k1}}, zmm0
.Lmk_b\@:
    BM_EXTABLE .Lmk_a\@, .Lmk_b\@, \fix
    .endm

    .macro BM_ZERO_MASKED fix
    BM_MASK_RCX
    vpxorq zmm0, zmm0, zmm0
.Lmz_a\@:
    vmovdqu8 zmmword ptr [rdi] {{k1}}, zmm0
.Lmz_b\@:
    BM_EXTABLE .Lmz_a\@, .Lmz_b\@, \fix
    .endm
"#
    };
}

/// The pieces the vector twins are built from, generic over the vector
/// width so that the AVX2 and AVX-512 forms of a routine are one macro
/// body (`vec` is `ymm` or `zmm`, `ptr` `ymmword` or `zmmword`, `w` 32 or
/// 64 bytes):
///
/// * `BM_VLOAD ld, vec, ptr, w, n, base`: `n` (at most 8) vectors from
///   `[base]` on into `vec0`, `vec1`, ... with the move `ld`.
/// * `BM_VSTORE st, vec, ptr, w, n, base`: the same registers out to
///   `[base]` on with the store `st` (`vmovdqa`, `vmovntdq`, ...).
/// * `BM_VFILL st, vec, ptr, w, n, base`: `vec0` stored `n` times.
/// * `BM_FAIL_EXIT side, fence, vec=1`: the end of every fixup, with `rax`
///   the bytes not done: fence (`fence` 1: streaming stores may be in
///   flight), leave the vector state clean (`vec` 1: the routine used AVX
///   registers), store the handler's `r10`, `r11` and the side into
///   `*r8`, return.
macro_rules! asm_vector_helpers {
    () => {
        r#"
    .macro BM_VLOAD ld, vec, ptr, w, n, base
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7
    .if \i < \n
    \ld \vec\i, \ptr ptr [\base + \i * \w]
    .endif
    .endr
    .endm

    .macro BM_VSTORE st, vec, ptr, w, n, base
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7
    .if \i < \n
    \st \ptr ptr [\base + \i * \w], \vec\i
    .endif
    .endr
    .endm

    .macro BM_VFILL st, vec, ptr, w, n, base
    .irp i, 0, 1, 2, 3, 4, 5, 6, 7
    .if \i < \n
    \st \ptr ptr [\base + \i * \w], \vec\()0
    .endif
    .endr
    .endm

    .macro BM_FAIL_EXIT side, fence, vec=1
    .if \fence
    sfence
    .endif
    .if \vec
    vzeroupper
    .endif
    mov qword ptr [r8], r10
    mov qword ptr [r8 + 8], r11
    mov qword ptr [r8 + 16], \side
    ret
    .endm
"#
    };
}

/// Assembler text every routine file ends with: forgets the prelude's
/// macros (see [`asm_prelude!`]).
macro_rules! asm_epilogue {
    () => {
        r#"
    .purgem BM_EXTABLE
    .purgem BM_FUNC
    .purgem BM_ENDFUNC
    .purgem BM_COPY_UPTO64
    .purgem BM_ZERO_UPTO64
    .purgem BM_ZERO_UPTO64_SSE
    .purgem BM_MASK_RCX
    .purgem BM_COPY_MASKED
    .purgem BM_ZERO_MASKED
    .purgem BM_VLOAD
    .purgem BM_VSTORE
    .purgem BM_VFILL
    .purgem BM_FAIL_EXIT
"#
    };
}

/// The Rust side of one file's table: the bounding symbols, `fixup` (the
/// fixup for a faulting instruction pointer if it is one of the file's
/// covered instructions; async-signal-safe: reads static memory only) and,
/// for tests, the entries and the end of the file's text.
macro_rules! extable {
    ($start:ident, $end:ident, $text_end:ident) => {
        extern "C" {
            static $start: [i32; 3];
            static $end: [i32; 3];
            #[cfg(test)]
            static $text_end: u8;
        }

        /// The fixup for a fault at `rip`, if `rip` is one of this file's
        /// instructions that touch the caller's memory. Async-signal-safe.
        pub(super) fn fixup(rip: usize) -> Option<usize> {
            let start = (&raw const $start).cast::<i32>();
            let end = (&raw const $end).cast::<i32>();
            // SAFETY: the two symbols delimit the table the prelude
            // assembles for this file: whole entries of three relative i32s.
            unsafe { super::extable::search(start, end, rip) }
        }

        /// The table's entries as absolute `[from, to, fixup]`.
        #[cfg(test)]
        pub(super) fn table() -> Vec<[usize; 3]> {
            // SAFETY: as in `fixup`.
            unsafe { super::extable::entries((&raw const $start).cast(), (&raw const $end).cast()) }
        }

        /// The end of the file's last routine.
        #[cfg(test)]
        fn text_end() -> usize {
            (&raw const $text_end) as usize
        }
    };
}

/// Declares a file's routines, each of the routine type `$ty` (`McCopy` or
/// `McClear`).
macro_rules! routines {
    (McCopy: $($name:ident),* $(,)?) => {
        extern "C" {
            $(pub fn $name(d: *mut u8, s: *const u8, n: usize, i: *mut RawFault) -> usize;)*
        }
    };
    (McClear: $($name:ident),* $(,)?) => {
        extern "C" {
            $(pub fn $name(d: *mut u8, n: usize, i: *mut RawFault) -> usize;)*
        }
    };
}

pub mod clear_mc;
pub mod clear_mc_nt;
pub mod clear_mc_vec;
pub mod copy_mc;
pub mod copy_mc_gang;
pub mod copy_mc_nt;
pub mod copy_mc_or;
pub mod copy_mc_vec;
pub mod extable;
pub mod handler;

pub use clear_mc::McClear;
pub use copy_mc::McCopy;

/// Every table's entries as absolute `[from, to, fixup]` (for the fence
/// check: the fixups of the non-temporal routines must fence).
#[cfg(test)]
pub fn entries() -> Vec<[usize; 3]> {
    [
        copy_mc::table(),
        copy_mc_vec::table(),
        copy_mc_nt::table(),
        copy_mc_gang::table(),
        clear_mc::table(),
        clear_mc_vec::table(),
        clear_mc_nt::table(),
    ]
    .concat()
}

/// The fixup for a fault at `rip` in any checked routine. Async-signal-safe.
pub fn fixup(rip: usize) -> Option<usize> {
    copy_mc::fixup(rip)
        .or_else(|| copy_mc_vec::fixup(rip))
        .or_else(|| copy_mc_nt::fixup(rip))
        .or_else(|| copy_mc_gang::fixup(rip))
        .or_else(|| clear_mc::fixup(rip))
        .or_else(|| clear_mc_vec::fixup(rip))
        .or_else(|| clear_mc_nt::fixup(rip))
}
