//! Checked four-extent non-temporal copies, the twins of
//! `kernels::gang::copy_nt_avx2` and `copy_nt_avx512`: the same step (one
//! line of each extent loaded, then the four stored), the same requests of
//! the next gang's sources into L2.
//!
//! The routines take the gang's description (`kernels::gang::Gang`, whose
//! `repr(C)` layout the offsets below follow) instead of registers. Eight
//! pointers do not fit the caller-saved registers the other routines keep
//! to, so these alone save six callee-saved ones on the stack (with their
//! call-frame information, popped before either return; `r10` and `r11`
//! stay free for the handler): loading the pointers from the gang at
//! every step instead ran 5-8% behind the unchecked copy of scattered
//! 4 KiB extents on the Zen 4 VM. `rcx` is the offset every extent has
//! reached: a fault anywhere in a step reports `len - rcx` bytes not done
//! in each extent, every byte before `rcx` is done in all four, and bytes
//! of the faulting step may already hold their copy in the extents stored
//! before the fault. The caller redoes each extent from there with the
//! one-extent routine, which reports the fault exactly. Unfenced only:
//! gangs run in batches, which drain once. See `crate::checked::mc` for
//! the contract (`fn(gang: rdi, info: rsi) -> rax`).

use core::arch::global_asm;

use super::extable::RawFault;
use crate::kernels::gang::Gang;

global_asm!(
    asm_prelude!("bulkmem_mc_gang_extable"),
    r#"
    .pushsection .text.bulkmem_mc_gang,"ax",@progbits

    // Offsets into `Gang`: dst[4] at 0, src[4] at 32, len at 64, next[4]
    // at 72, requests at 104. The eight pointers of the copy live in
    // registers (six of them callee-saved, pushed with their call-frame
    // information and popped on both ways out); the next gang's four are
    // read from the gang while requests last.
    .macro BM_GANG_NT name, vec, ptr, w
    BM_FUNC \name
    .irp r, rbx, rbp, r12, r13, r14, r15
    push \r
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset \r, 0
    .endr
    mov r8, rsi
    mov rbx, qword ptr [rdi + 32]
    mov rbp, qword ptr [rdi + 40]
    mov r12, qword ptr [rdi + 48]
    mov r13, qword ptr [rdi + 56]
    mov r14, qword ptr [rdi]
    mov r15, qword ptr [rdi + 8]
    mov rsi, qword ptr [rdi + 16]
    mov r9, qword ptr [rdi + 24]
    mov rdx, qword ptr [rdi + 64]
    xor ecx, ecx
    .p2align 4
.Lg_step\@:
    cmp rcx, qword ptr [rdi + 104]
    jae .Lg_copy\@
    .irp k, 0, 1, 2, 3
    mov rax, qword ptr [rdi + 72 + 8 * \k]
    prefetcht1 byte ptr [rax + rcx]
    .endr
.Lg_copy\@:
    // The loads, then the stores, of line rcx of every extent.
    .if \w == 32
    vmovdqu ymm0, ymmword ptr [rbx + rcx]
    vmovdqu ymm1, ymmword ptr [rbx + rcx + 32]
    vmovdqu ymm2, ymmword ptr [rbp + rcx]
    vmovdqu ymm3, ymmword ptr [rbp + rcx + 32]
    vmovdqu ymm4, ymmword ptr [r12 + rcx]
    vmovdqu ymm5, ymmword ptr [r12 + rcx + 32]
    vmovdqu ymm6, ymmword ptr [r13 + rcx]
    vmovdqu ymm7, ymmword ptr [r13 + rcx + 32]
    vmovntdq ymmword ptr [r14 + rcx], ymm0
    vmovntdq ymmword ptr [r14 + rcx + 32], ymm1
    vmovntdq ymmword ptr [r15 + rcx], ymm2
    vmovntdq ymmword ptr [r15 + rcx + 32], ymm3
    vmovntdq ymmword ptr [rsi + rcx], ymm4
    vmovntdq ymmword ptr [rsi + rcx + 32], ymm5
    vmovntdq ymmword ptr [r9 + rcx], ymm6
    vmovntdq ymmword ptr [r9 + rcx + 32], ymm7
    .else
    vmovdqu64 zmm0, zmmword ptr [rbx + rcx]
    vmovdqu64 zmm1, zmmword ptr [rbp + rcx]
    vmovdqu64 zmm2, zmmword ptr [r12 + rcx]
    vmovdqu64 zmm3, zmmword ptr [r13 + rcx]
    vmovntdq zmmword ptr [r14 + rcx], zmm0
    vmovntdq zmmword ptr [r15 + rcx], zmm1
    vmovntdq zmmword ptr [rsi + rcx], zmm2
    vmovntdq zmmword ptr [r9 + rcx], zmm3
    .endif
.Lg_copied\@:
    BM_EXTABLE .Lg_copy\@, .Lg_copied\@, .Lg_fix\@
    add rcx, 64
    cmp rcx, rdx
    jb .Lg_step\@
    vzeroupper
    xor eax, eax
    .cfi_remember_state
    BM_GANG_POP
    ret
    .cfi_restore_state
.Lg_fix\@:
    mov rax, rdx
    sub rax, rcx
    BM_GANG_POP
    BM_FAIL_EXIT 0, 1
    BM_ENDFUNC \name
    .endm

    .macro BM_GANG_POP
    .irp r, r15, r14, r13, r12, rbp, rbx
    pop \r
    .cfi_adjust_cfa_offset -8
    .cfi_restore \r
    .endr
    .endm

    BM_GANG_NT bulkmem_mc_gang_avx2nt_unfenced, ymm, ymmword, 32
    BM_GANG_NT bulkmem_mc_gang_avx512nt_unfenced, zmm, zmmword, 64
    .purgem BM_GANG_NT
    .purgem BM_GANG_POP

    .globl bulkmem_mc_gang_text_end
    .hidden bulkmem_mc_gang_text_end
bulkmem_mc_gang_text_end:
    .popsection
"#,
    asm_epilogue!()
);

/// A checked gang routine: bytes not done in each extent (0: all done).
pub type McGang = unsafe extern "C" fn(*const Gang, *mut RawFault) -> usize;

extern "C" {
    pub fn bulkmem_mc_gang_avx2nt_unfenced(g: *const Gang, i: *mut RawFault) -> usize;
    pub fn bulkmem_mc_gang_avx512nt_unfenced(g: *const Gang, i: *mut RawFault) -> usize;
}

extable!(
    bulkmem_mc_gang_extable,
    bulkmem_mc_gang_extable_end,
    bulkmem_mc_gang_text_end
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_lies_in_its_routine() {
        super::super::extable::check(
            &table(),
            &[
                (
                    "gang avx2nt",
                    bulkmem_mc_gang_avx2nt_unfenced as McGang as usize,
                    1,
                ),
                (
                    "gang avx512nt",
                    bulkmem_mc_gang_avx512nt_unfenced as McGang as usize,
                    1,
                ),
            ],
            text_end(),
            fixup,
        );
    }

    #[test]
    fn the_offsets_are_the_gangs_layout() {
        let g = Gang {
            dst: [core::ptr::null_mut(); 4],
            src: [core::ptr::null(); 4],
            len: 0,
            next: [core::ptr::null(); 4],
            requests: 0,
        };
        let base = &g as *const Gang as usize;
        assert_eq!(&g.dst as *const _ as usize - base, 0);
        assert_eq!(&g.src as *const _ as usize - base, 32);
        assert_eq!(&g.len as *const _ as usize - base, 64);
        assert_eq!(&g.next as *const _ as usize - base, 72);
        assert_eq!(&g.requests as *const _ as usize - base, 104);
    }
}
