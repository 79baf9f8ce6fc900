//! Zeroing routines that may fault (a destination past the end of a file,
//! a poisoned page): the clear half of [`super::copy_mc`], same contract,
//! with `fn(dst: rdi, len: rsi, info: rdx) -> rax` (bytes not zeroed). Only
//! the destination can fault, so every fixup records side 2. Exception-table
//! entries sit beside their ranges (`BM_CLEAR_EXTABLE`) and make a table of
//! their own, `bulkmem_mc_clear_extable` up to `bulkmem_mc_clear_extable_end`.

use core::arch::global_asm;

use super::extable::{self, RawFault};

global_asm!(
    r#"
    // copy_mc.rs's BM_COPY_EXTABLE for this file's table. Its own name:
    // both files may be assembled as one module, where a macro defined
    // twice is an error.
    .macro BM_CLEAR_EXTABLE from, to, fixup
    .pushsection .rodata.bulkmem_mc_clear_extable, 1, "a", @progbits
    .long \from - ., \to - ., \fixup - .
    .popsection
    .endm

    .pushsection .rodata.bulkmem_mc_clear_extable, 0, "a", @progbits
    .p2align 2
    .globl bulkmem_mc_clear_extable
    .hidden bulkmem_mc_clear_extable
bulkmem_mc_clear_extable:
    .popsection
    .pushsection .rodata.bulkmem_mc_clear_extable, 2, "a", @progbits
    .globl bulkmem_mc_clear_extable_end
    .hidden bulkmem_mc_clear_extable_end
bulkmem_mc_clear_extable_end:
    .popsection

    .pushsection .text.bulkmem_mc_clear,"ax",@progbits

    // rep stosb over the whole range; exact: rcx holds the bytes left.
    .p2align 4
    .globl bulkmem_mc_clear_stosb
    .hidden bulkmem_mc_clear_stosb
    .type bulkmem_mc_clear_stosb,@function
bulkmem_mc_clear_stosb:
    mov r8, rdx
    mov rcx, rsi
    xor eax, eax
.Lmz_stosb_0:
    rep stosb
.Lmz_stosb_1:
    BM_CLEAR_EXTABLE .Lmz_stosb_0, .Lmz_stosb_1, .Lmz_stosb_fix
    xor eax, eax
    ret
.Lmz_stosb_fix:
    mov rax, rcx
    jmp .Lmz_fail
    .size bulkmem_mc_clear_stosb, . - bulkmem_mc_clear_stosb

    // AVX2 non-temporal: rep stosb up to a 64-byte aligned destination,
    // 256 bytes of streaming stores per iteration, rep stosb for the tail.
    // r9: fence at the end (batches fence once per chunk). Fixups fence.
    .p2align 4
    .globl bulkmem_mc_clear_avx2nt
    .hidden bulkmem_mc_clear_avx2nt
    .type bulkmem_mc_clear_avx2nt,@function
bulkmem_mc_clear_avx2nt:
    mov r9d, 1
    jmp .Lmz_nt_body
    .size bulkmem_mc_clear_avx2nt, . - bulkmem_mc_clear_avx2nt

    .p2align 4
    .globl bulkmem_mc_clear_avx2nt_unfenced
    .hidden bulkmem_mc_clear_avx2nt_unfenced
    .type bulkmem_mc_clear_avx2nt_unfenced,@function
bulkmem_mc_clear_avx2nt_unfenced:
    xor r9d, r9d
.Lmz_nt_body:
    mov r8, rdx
    mov rdx, rsi
    xor eax, eax
    cmp rdx, 512
    jb .Lmz_nt_tail
    mov rcx, rdi
    neg rcx
    and ecx, 63
    sub rdx, rcx
    jrcxz .Lmz_nt_h1
.Lmz_nt_h0:
    rep stosb
.Lmz_nt_h1:
    BM_CLEAR_EXTABLE .Lmz_nt_h0, .Lmz_nt_h1, .Lmz_nt_fixh
    vpxor xmm0, xmm0, xmm0
    .p2align 4
.Lmz_nt_loop:
    vmovntdq ymmword ptr [rdi], ymm0
    vmovntdq ymmword ptr [rdi + 32], ymm0
    vmovntdq ymmword ptr [rdi + 64], ymm0
    vmovntdq ymmword ptr [rdi + 96], ymm0
    vmovntdq ymmword ptr [rdi + 128], ymm0
    vmovntdq ymmword ptr [rdi + 160], ymm0
    vmovntdq ymmword ptr [rdi + 192], ymm0
    vmovntdq ymmword ptr [rdi + 224], ymm0
.Lmz_nt_l1:
    BM_CLEAR_EXTABLE .Lmz_nt_loop, .Lmz_nt_l1, .Lmz_nt_fixl
    add rdi, 256
    sub rdx, 256
    cmp rdx, 256
    jae .Lmz_nt_loop
    vzeroupper
.Lmz_nt_tail:
    mov rcx, rdx
    jrcxz .Lmz_nt_t1
.Lmz_nt_t0:
    rep stosb
.Lmz_nt_t1:
    BM_CLEAR_EXTABLE .Lmz_nt_t0, .Lmz_nt_t1, .Lmz_nt_fixt
    test r9d, r9d
    jz .Lmz_nt_done
    sfence
.Lmz_nt_done:
    xor eax, eax
    ret
.Lmz_nt_fixh:
    lea rax, [rcx + rdx]
    sfence
    jmp .Lmz_fail
.Lmz_nt_fixl:
    vzeroupper
    sfence
    mov rax, rdx
    jmp .Lmz_fail
.Lmz_nt_fixt:
    sfence
    mov rax, rcx
    jmp .Lmz_fail
    .size bulkmem_mc_clear_avx2nt_unfenced, . - bulkmem_mc_clear_avx2nt_unfenced

    // One byte at a time: exact, for the bytes around a reported fault.
    .p2align 4
    .globl bulkmem_mc_clear_bytes
    .hidden bulkmem_mc_clear_bytes
    .type bulkmem_mc_clear_bytes,@function
bulkmem_mc_clear_bytes:
    mov r8, rdx
    test rsi, rsi
    jz .Lmz_bytes_done
.Lmz_bytes_st:
    mov byte ptr [rdi], 0
.Lmz_bytes_after:
    BM_CLEAR_EXTABLE .Lmz_bytes_st, .Lmz_bytes_after, .Lmz_bytes_fix
    inc rdi
    dec rsi
    jnz .Lmz_bytes_st
.Lmz_bytes_done:
    xor eax, eax
    ret
.Lmz_bytes_fix:
    mov rax, rsi
.Lmz_fail:
    mov qword ptr [r8 + 16], 2
    mov qword ptr [r8], r10
    mov qword ptr [r8 + 8], r11
    ret
    .size bulkmem_mc_clear_bytes, . - bulkmem_mc_clear_bytes

    // Bounds the last routine for the test that checks each table entry
    // lies inside one routine.
    .globl bulkmem_mc_clear_text_end
    .hidden bulkmem_mc_clear_text_end
bulkmem_mc_clear_text_end:
    .popsection
"#
);

/// A checked zeroing routine: see the module docs for the contract.
pub(crate) type McClear = unsafe extern "C" fn(*mut u8, usize, *mut RawFault) -> usize;

extern "C" {
    pub(crate) fn bulkmem_mc_clear_stosb(d: *mut u8, n: usize, i: *mut RawFault) -> usize;
    pub(crate) fn bulkmem_mc_clear_avx2nt(d: *mut u8, n: usize, i: *mut RawFault) -> usize;
    pub(crate) fn bulkmem_mc_clear_avx2nt_unfenced(d: *mut u8, n: usize, i: *mut RawFault)
        -> usize;
    pub(crate) fn bulkmem_mc_clear_bytes(d: *mut u8, n: usize, i: *mut RawFault) -> usize;
    static bulkmem_mc_clear_extable: [i32; 3];
    static bulkmem_mc_clear_extable_end: [i32; 3];
}

/// The fixup for a fault at `rip`, if it is one of this file's
/// instructions that write the caller's memory. Async-signal-safe.
pub(super) fn fixup(rip: usize) -> Option<usize> {
    let start = (&raw const bulkmem_mc_clear_extable).cast::<i32>();
    let end = (&raw const bulkmem_mc_clear_extable_end).cast::<i32>();
    // SAFETY: the two symbols delimit the table assembled above, whole
    // entries of three relative i32s.
    unsafe { extable::search(start, end, rip) }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        static bulkmem_mc_clear_text_end: u8;
    }

    #[test]
    fn every_entry_lies_in_its_routine() {
        // SAFETY: the two symbols delimit the table, as in `fixup`.
        let table = unsafe {
            extable::entries(
                (&raw const bulkmem_mc_clear_extable).cast(),
                (&raw const bulkmem_mc_clear_extable_end).cast(),
            )
        };
        let routines = [
            ("stosb", bulkmem_mc_clear_stosb as McClear as usize),
            ("avx2nt", bulkmem_mc_clear_avx2nt as McClear as usize),
            (
                "avx2nt_unfenced",
                bulkmem_mc_clear_avx2nt_unfenced as McClear as usize,
            ),
            ("bytes", bulkmem_mc_clear_bytes as McClear as usize),
        ];
        let text_end = (&raw const bulkmem_mc_clear_text_end) as usize;
        // A lost or misplaced entry changes a count: the fault it covered
        // would kill the process instead of being reported.
        assert_eq!(
            extable::per_routine(&table, &routines, text_end),
            [
                ("stosb", 1),
                ("avx2nt", 0),
                ("avx2nt_unfenced", 3),
                ("bytes", 1),
            ]
        );
        for &[from, to, fix] in &table {
            assert_eq!(fixup(from), Some(fix));
            assert_eq!(fixup(to - 1), Some(fix));
        }
    }
}
