//! Copy routines that may fault, the user-space `copy_mc_64.S`: every
//! instruction that touches the caller's memory lies in a range whose
//! exception-table entry names the fixup that turns a SIGBUS there into
//! "this many bytes were not copied". As in Linux, each entry is written
//! right after its range (`BM_COPY_EXTABLE`), inside the routine, so a
//! new or changed routine carries its entries with it; the macro
//! collects them into one table, `bulkmem_mc_copy_extable` up to
//! `bulkmem_mc_copy_extable_end`, in program order.
//!
//! Calling convention (System V, all in `global_asm!` so the faulting
//! instruction pointer is known exactly):
//! `fn(dst: rdi, src: rsi, len: rdx, info: rcx) -> rax`, where `rax` is the
//! number of bytes *not* copied (0: complete). On a fault the handler
//! resumes at the fixup with `r10` = the faulting address and `r11` =
//! `si_code | si_addr_lsb << 32`; the fixup stores them (and the side, when
//! the routine knows it) into `*info` ([`RawFault`]). Only caller-saved
//! registers are used and the stack is not touched.
//!
//! Guarantee of every routine: the first `len - rax` bytes have been copied.
//! The fast routines count whole iterations (each loads before it stores),
//! so bytes just past that point may already hold their copy; the byte
//! routine is exact and says which side faulted, and `fault::copy_exact`
//! uses it to finish the job precisely.

use core::arch::global_asm;

use super::extable::{self, RawFault};

// Intel syntax (Rust's default). Local labels are unique per routine because
// every global_asm! of the crate is assembled into one module.
global_asm!(
    r#"
    // One exception-table entry, [from, to) -> fixup, each field relative
    // to itself (Linux's _ASM_EXTABLE) so the table needs no load-time
    // relocation. Invoked right after each range, so a routine and its
    // entries are written (and reviewed) together. Entries go to
    // subsection 1, between the bounds in subsections 0 and 2, which the
    // assembler lays out in that order wherever they appear in the source.
    .macro BM_COPY_EXTABLE from, to, fixup
    .pushsection .rodata.bulkmem_mc_copy_extable, 1, "a", @progbits
    .long \from - ., \to - ., \fixup - .
    .popsection
    .endm

    .pushsection .rodata.bulkmem_mc_copy_extable, 0, "a", @progbits
    .p2align 2
    .globl bulkmem_mc_copy_extable
    .hidden bulkmem_mc_copy_extable
bulkmem_mc_copy_extable:
    .popsection
    .pushsection .rodata.bulkmem_mc_copy_extable, 2, "a", @progbits
    .globl bulkmem_mc_copy_extable_end
    .hidden bulkmem_mc_copy_extable_end
bulkmem_mc_copy_extable_end:
    .popsection

    .pushsection .text.bulkmem_mc_copy,"ax",@progbits

    // rep movsb over the whole range: fast with ERMS/FSRM, and exact: on a
    // fault rcx holds the bytes left.
    .p2align 4
    .globl bulkmem_mc_copy_movsb
    .hidden bulkmem_mc_copy_movsb
    .type bulkmem_mc_copy_movsb,@function
bulkmem_mc_copy_movsb:
    mov r8, rcx
    mov rcx, rdx
.Lmc_movsb_0:
    rep movsb
.Lmc_movsb_1:
    BM_COPY_EXTABLE .Lmc_movsb_0, .Lmc_movsb_1, .Lmc_movsb_fix
    xor eax, eax
    ret
.Lmc_movsb_fix:
    mov rax, rcx
    jmp .Lmc_copy_fail
    .size bulkmem_mc_copy_movsb, . - bulkmem_mc_copy_movsb

    // rep movsq, then rep movsb for the last len % 8 bytes: the per-page
    // kernel's instruction, for CPUs without fast short strings.
    .p2align 4
    .globl bulkmem_mc_copy_movsq
    .hidden bulkmem_mc_copy_movsq
    .type bulkmem_mc_copy_movsq,@function
bulkmem_mc_copy_movsq:
    mov r8, rcx
    mov r9, rdx
    and r9, 7
    mov rcx, rdx
    shr rcx, 3
.Lmc_movsq_0:
    rep movsq
.Lmc_movsq_1:
    BM_COPY_EXTABLE .Lmc_movsq_0, .Lmc_movsq_1, .Lmc_movsq_fixq
    mov rcx, r9
.Lmc_movsq_2:
    rep movsb
.Lmc_movsq_3:
    BM_COPY_EXTABLE .Lmc_movsq_2, .Lmc_movsq_3, .Lmc_movsq_fixb
    xor eax, eax
    ret
.Lmc_movsq_fixq:
    lea rax, [r9 + 8 * rcx]
    jmp .Lmc_copy_fail
.Lmc_movsq_fixb:
    mov rax, rcx
    jmp .Lmc_copy_fail
    .size bulkmem_mc_copy_movsq, . - bulkmem_mc_copy_movsq

    // AVX2, temporal, shaped for small and medium copies (a 4 KiB page is
    // the common case): below 64 bytes rep movsb; else one unaligned
    // 32-byte head, an aligned body of 128 then 32 bytes per iteration
    // (loads before stores), and a last unaligned 32 bytes ending at len
    // that may overlap bytes already copied. rdx always counts the bytes
    // not yet copied from rsi/rdi on, so every fixup returns rdx.
    .p2align 4
    .globl bulkmem_mc_copy_avx2
    .hidden bulkmem_mc_copy_avx2
    .type bulkmem_mc_copy_avx2,@function
bulkmem_mc_copy_avx2:
    mov r8, rcx
    cmp rdx, 64
    jb .Lmc_avx2_small
.Lmc_avx2_h0:
    vmovdqu ymm0, ymmword ptr [rsi]
    vmovdqu ymmword ptr [rdi], ymm0
.Lmc_avx2_h1:
    BM_COPY_EXTABLE .Lmc_avx2_h0, .Lmc_avx2_h1, .Lmc_avx2_fix
    mov rcx, rdi
    neg rcx
    and ecx, 31
    jnz .Lmc_avx2_skip
    mov ecx, 32
.Lmc_avx2_skip:
    add rsi, rcx
    add rdi, rcx
    sub rdx, rcx
    cmp rdx, 128
    jb .Lmc_avx2_by32
    .p2align 4
.Lmc_avx2_loop:
    vmovdqu ymm0, ymmword ptr [rsi]
    vmovdqu ymm1, ymmword ptr [rsi + 32]
    vmovdqu ymm2, ymmword ptr [rsi + 64]
    vmovdqu ymm3, ymmword ptr [rsi + 96]
    vmovdqa ymmword ptr [rdi], ymm0
    vmovdqa ymmword ptr [rdi + 32], ymm1
    vmovdqa ymmword ptr [rdi + 64], ymm2
    vmovdqa ymmword ptr [rdi + 96], ymm3
.Lmc_avx2_l1:
    BM_COPY_EXTABLE .Lmc_avx2_loop, .Lmc_avx2_l1, .Lmc_avx2_fix
    add rsi, 128
    add rdi, 128
    sub rdx, 128
    cmp rdx, 128
    jae .Lmc_avx2_loop
.Lmc_avx2_by32:
    cmp rdx, 32
    jb .Lmc_avx2_last
.Lmc_avx2_b0:
    vmovdqu ymm0, ymmword ptr [rsi]
    vmovdqa ymmword ptr [rdi], ymm0
.Lmc_avx2_b1:
    BM_COPY_EXTABLE .Lmc_avx2_b0, .Lmc_avx2_b1, .Lmc_avx2_fix
    add rsi, 32
    add rdi, 32
    sub rdx, 32
    jmp .Lmc_avx2_by32
.Lmc_avx2_last:
    test rdx, rdx
    jz .Lmc_avx2_done
.Lmc_avx2_t0:
    vmovdqu ymm0, ymmword ptr [rsi + rdx - 32]
    vmovdqu ymmword ptr [rdi + rdx - 32], ymm0
.Lmc_avx2_t1:
    BM_COPY_EXTABLE .Lmc_avx2_t0, .Lmc_avx2_t1, .Lmc_avx2_fix
.Lmc_avx2_done:
    vzeroupper
    xor eax, eax
    ret
.Lmc_avx2_small:
    mov rcx, rdx
.Lmc_avx2_s0:
    rep movsb
.Lmc_avx2_s1:
    BM_COPY_EXTABLE .Lmc_avx2_s0, .Lmc_avx2_s1, .Lmc_avx2_fixs
    xor eax, eax
    ret
.Lmc_avx2_fix:
    vzeroupper
    mov rax, rdx
    jmp .Lmc_copy_fail
.Lmc_avx2_fixs:
    mov rax, rcx
    jmp .Lmc_copy_fail
    .size bulkmem_mc_copy_avx2, . - bulkmem_mc_copy_avx2

    // AVX-512, temporal: the AVX2 routine's shape with 64-byte vectors (on
    // Zen 4/5 and recent Intel the load/store ports move 64 bytes a cycle,
    // so a hot 4 KiB copy takes half the time of 32-byte vectors). Below
    // 128 bytes the AVX2 routine does it (entered with the arguments as
    // they came).
    .p2align 4
    .globl bulkmem_mc_copy_avx512
    .hidden bulkmem_mc_copy_avx512
    .type bulkmem_mc_copy_avx512,@function
bulkmem_mc_copy_avx512:
    cmp rdx, 128
    jb bulkmem_mc_copy_avx2
    mov r8, rcx
.Lmc_z_h0:
    vmovdqu64 zmm0, zmmword ptr [rsi]
    vmovdqu64 zmmword ptr [rdi], zmm0
.Lmc_z_h1:
    BM_COPY_EXTABLE .Lmc_z_h0, .Lmc_z_h1, .Lmc_z_fix
    mov rcx, rdi
    neg rcx
    and ecx, 63
    jnz .Lmc_z_skip
    mov ecx, 64
.Lmc_z_skip:
    add rsi, rcx
    add rdi, rcx
    sub rdx, rcx
    cmp rdx, 256
    jb .Lmc_z_by64
    .p2align 4
.Lmc_z_loop:
    vmovdqu64 zmm0, zmmword ptr [rsi]
    vmovdqu64 zmm1, zmmword ptr [rsi + 64]
    vmovdqu64 zmm2, zmmword ptr [rsi + 128]
    vmovdqu64 zmm3, zmmword ptr [rsi + 192]
    vmovdqa64 zmmword ptr [rdi], zmm0
    vmovdqa64 zmmword ptr [rdi + 64], zmm1
    vmovdqa64 zmmword ptr [rdi + 128], zmm2
    vmovdqa64 zmmword ptr [rdi + 192], zmm3
.Lmc_z_l1:
    BM_COPY_EXTABLE .Lmc_z_loop, .Lmc_z_l1, .Lmc_z_fix
    add rsi, 256
    add rdi, 256
    sub rdx, 256
    cmp rdx, 256
    jae .Lmc_z_loop
.Lmc_z_by64:
    cmp rdx, 64
    jb .Lmc_z_last
.Lmc_z_b0:
    vmovdqu64 zmm0, zmmword ptr [rsi]
    vmovdqa64 zmmword ptr [rdi], zmm0
.Lmc_z_b1:
    BM_COPY_EXTABLE .Lmc_z_b0, .Lmc_z_b1, .Lmc_z_fix
    add rsi, 64
    add rdi, 64
    sub rdx, 64
    jmp .Lmc_z_by64
.Lmc_z_last:
    test rdx, rdx
    jz .Lmc_z_done
.Lmc_z_t0:
    vmovdqu64 zmm0, zmmword ptr [rsi + rdx - 64]
    vmovdqu64 zmmword ptr [rdi + rdx - 64], zmm0
.Lmc_z_t1:
    BM_COPY_EXTABLE .Lmc_z_t0, .Lmc_z_t1, .Lmc_z_fix
.Lmc_z_done:
    vzeroupper
    xor eax, eax
    ret
.Lmc_z_fix:
    vzeroupper
    mov rax, rdx
    jmp .Lmc_copy_fail
    .size bulkmem_mc_copy_avx512, . - bulkmem_mc_copy_avx512

    // AVX2, non-temporal: rep movsb up to a 64-byte aligned destination,
    // then 256 bytes per iteration (eight loads, then eight streaming stores
    // filling four whole write-combining lines), rep movsb for the tail.
    // r9 says whether to fence at the end: batches fence once per chunk.
    // Every exit through a fixup fences, so a fault never leaves streaming
    // stores unordered.
    .p2align 4
    .globl bulkmem_mc_copy_avx2nt
    .hidden bulkmem_mc_copy_avx2nt
    .type bulkmem_mc_copy_avx2nt,@function
bulkmem_mc_copy_avx2nt:
    mov r9d, 1
    jmp .Lmc_nt_body
    .size bulkmem_mc_copy_avx2nt, . - bulkmem_mc_copy_avx2nt

    .p2align 4
    .globl bulkmem_mc_copy_avx2nt_unfenced
    .hidden bulkmem_mc_copy_avx2nt_unfenced
    .type bulkmem_mc_copy_avx2nt_unfenced,@function
bulkmem_mc_copy_avx2nt_unfenced:
    xor r9d, r9d
.Lmc_nt_body:
    mov r8, rcx
    cmp rdx, 512
    jb .Lmc_nt_tail
    mov rcx, rdi
    neg rcx
    and ecx, 63
    sub rdx, rcx
    jrcxz .Lmc_nt_h1
.Lmc_nt_h0:
    rep movsb
.Lmc_nt_h1:
    BM_COPY_EXTABLE .Lmc_nt_h0, .Lmc_nt_h1, .Lmc_nt_fixh
    .p2align 4
.Lmc_nt_loop:
    vmovdqu ymm0, ymmword ptr [rsi]
    vmovdqu ymm1, ymmword ptr [rsi + 32]
    vmovdqu ymm2, ymmword ptr [rsi + 64]
    vmovdqu ymm3, ymmword ptr [rsi + 96]
    vmovdqu ymm4, ymmword ptr [rsi + 128]
    vmovdqu ymm5, ymmword ptr [rsi + 160]
    vmovdqu ymm6, ymmword ptr [rsi + 192]
    vmovdqu ymm7, ymmword ptr [rsi + 224]
    vmovntdq ymmword ptr [rdi], ymm0
    vmovntdq ymmword ptr [rdi + 32], ymm1
    vmovntdq ymmword ptr [rdi + 64], ymm2
    vmovntdq ymmword ptr [rdi + 96], ymm3
    vmovntdq ymmword ptr [rdi + 128], ymm4
    vmovntdq ymmword ptr [rdi + 160], ymm5
    vmovntdq ymmword ptr [rdi + 192], ymm6
    vmovntdq ymmword ptr [rdi + 224], ymm7
.Lmc_nt_l1:
    BM_COPY_EXTABLE .Lmc_nt_loop, .Lmc_nt_l1, .Lmc_nt_fixl
    add rsi, 256
    add rdi, 256
    sub rdx, 256
    cmp rdx, 256
    jae .Lmc_nt_loop
    vzeroupper
.Lmc_nt_tail:
    mov rcx, rdx
    // An empty rep movsb is not free after streaming stores: skip it.
    jrcxz .Lmc_nt_t1
.Lmc_nt_t0:
    rep movsb
.Lmc_nt_t1:
    BM_COPY_EXTABLE .Lmc_nt_t0, .Lmc_nt_t1, .Lmc_nt_fixt
    test r9d, r9d
    jz .Lmc_nt_done
    sfence
.Lmc_nt_done:
    xor eax, eax
    ret
.Lmc_nt_fixh:
    lea rax, [rcx + rdx]
    sfence
    jmp .Lmc_copy_fail
.Lmc_nt_fixl:
    vzeroupper
    sfence
    mov rax, rdx
    jmp .Lmc_copy_fail
.Lmc_nt_fixt:
    sfence
    mov rax, rcx
    jmp .Lmc_copy_fail
    .size bulkmem_mc_copy_avx2nt_unfenced, . - bulkmem_mc_copy_avx2nt_unfenced

    // One byte at a time, with a fixup for the load and another for the
    // store: exact to the byte, and it knows which side faulted. Only ever
    // run over the few bytes around a fault the fast routines reported.
    .p2align 4
    .globl bulkmem_mc_copy_bytes
    .hidden bulkmem_mc_copy_bytes
    .type bulkmem_mc_copy_bytes,@function
bulkmem_mc_copy_bytes:
    mov r8, rcx
    test rdx, rdx
    jz .Lmc_bytes_done
.Lmc_bytes_loop:
.Lmc_bytes_ld:
    mov al, byte ptr [rsi]
.Lmc_bytes_st:
    BM_COPY_EXTABLE .Lmc_bytes_ld, .Lmc_bytes_st, .Lmc_bytes_fixld
    mov byte ptr [rdi], al
.Lmc_bytes_after:
    BM_COPY_EXTABLE .Lmc_bytes_st, .Lmc_bytes_after, .Lmc_bytes_fixst
    inc rsi
    inc rdi
    dec rdx
    jnz .Lmc_bytes_loop
.Lmc_bytes_done:
    xor eax, eax
    ret
.Lmc_bytes_fixld:
    mov qword ptr [r8 + 16], 1
    mov rax, rdx
    jmp .Lmc_fail_side
.Lmc_bytes_fixst:
    mov qword ptr [r8 + 16], 2
    mov rax, rdx
    jmp .Lmc_fail_side

    // Shared exits: rax = bytes not copied, r10/r11 from the handler.
.Lmc_copy_fail:
    mov qword ptr [r8 + 16], 0
.Lmc_fail_side:
    mov qword ptr [r8], r10
    mov qword ptr [r8 + 8], r11
    ret
    .size bulkmem_mc_copy_bytes, . - bulkmem_mc_copy_bytes

    // Bounds the last routine for the test that checks each table entry
    // lies inside one routine.
    .globl bulkmem_mc_copy_text_end
    .hidden bulkmem_mc_copy_text_end
bulkmem_mc_copy_text_end:
    .popsection
"#
);

/// A checked copy routine: see the module docs for the contract.
pub(crate) type McCopy = unsafe extern "C" fn(*mut u8, *const u8, usize, *mut RawFault) -> usize;

extern "C" {
    pub(crate) fn bulkmem_mc_copy_movsb(
        d: *mut u8,
        s: *const u8,
        n: usize,
        i: *mut RawFault,
    ) -> usize;
    pub(crate) fn bulkmem_mc_copy_movsq(
        d: *mut u8,
        s: *const u8,
        n: usize,
        i: *mut RawFault,
    ) -> usize;
    pub(crate) fn bulkmem_mc_copy_avx2(
        d: *mut u8,
        s: *const u8,
        n: usize,
        i: *mut RawFault,
    ) -> usize;
    pub(crate) fn bulkmem_mc_copy_avx512(
        d: *mut u8,
        s: *const u8,
        n: usize,
        i: *mut RawFault,
    ) -> usize;
    pub(crate) fn bulkmem_mc_copy_avx2nt(
        d: *mut u8,
        s: *const u8,
        n: usize,
        i: *mut RawFault,
    ) -> usize;
    pub(crate) fn bulkmem_mc_copy_avx2nt_unfenced(
        d: *mut u8,
        s: *const u8,
        n: usize,
        i: *mut RawFault,
    ) -> usize;
    pub(crate) fn bulkmem_mc_copy_bytes(
        d: *mut u8,
        s: *const u8,
        n: usize,
        i: *mut RawFault,
    ) -> usize;
    static bulkmem_mc_copy_extable: [i32; 3];
    static bulkmem_mc_copy_extable_end: [i32; 3];
}

/// The fixup for a fault at `rip`, if `rip` is one of this file's
/// instructions that touch the caller's memory. Async-signal-safe.
pub(super) fn fixup(rip: usize) -> Option<usize> {
    let start = (&raw const bulkmem_mc_copy_extable).cast::<i32>();
    let end = (&raw const bulkmem_mc_copy_extable_end).cast::<i32>();
    // SAFETY: the two symbols delimit the table assembled above, whole
    // entries of three relative i32s.
    unsafe { extable::search(start, end, rip) }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        static bulkmem_mc_copy_text_end: u8;
    }

    #[test]
    fn every_entry_lies_in_its_routine() {
        // SAFETY: the two symbols delimit the table, as in `fixup`.
        let table = unsafe {
            extable::entries(
                (&raw const bulkmem_mc_copy_extable).cast(),
                (&raw const bulkmem_mc_copy_extable_end).cast(),
            )
        };
        let routines = [
            ("movsb", bulkmem_mc_copy_movsb as McCopy as usize),
            ("movsq", bulkmem_mc_copy_movsq as McCopy as usize),
            ("avx2", bulkmem_mc_copy_avx2 as McCopy as usize),
            ("avx512", bulkmem_mc_copy_avx512 as McCopy as usize),
            ("avx2nt", bulkmem_mc_copy_avx2nt as McCopy as usize),
            (
                "avx2nt_unfenced",
                bulkmem_mc_copy_avx2nt_unfenced as McCopy as usize,
            ),
            ("bytes", bulkmem_mc_copy_bytes as McCopy as usize),
        ];
        let text_end = (&raw const bulkmem_mc_copy_text_end) as usize;
        // A lost or misplaced entry changes a count: the fault it covered
        // would kill the process instead of being reported.
        assert_eq!(
            extable::per_routine(&table, &routines, text_end),
            [
                ("movsb", 1),
                ("movsq", 2),
                ("avx2", 5),
                ("avx512", 4),
                ("avx2nt", 0),
                ("avx2nt_unfenced", 3),
                ("bytes", 2),
            ]
        );
        for &[from, to, fix] in &table {
            assert_eq!(fixup(from), Some(fix));
            assert_eq!(fixup(to - 1), Some(fix));
        }
    }
}
