//! Checked four-extent non-temporal copies, the twins of
//! `kernels::gang::copy_nt_avx2` and `copy_nt_avx512`: the same step (one
//! line of each extent loaded, then the four stored), the same requests of
//! the next gang's sources into L2.
//!
//! The routines take the gang's description (`kernels::gang::Gang`, whose
//! `repr(C)` layout the offsets below follow) instead of registers: twelve
//! pointers do not fit the caller-saved registers a routine may use
//! without touching the stack, so each step loads its pointers from it (L1
//! hits beside four line misses). `rcx` is the offset every extent has
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
    // at 72, requests (bytes of each next source to request) at 104.
    .macro BM_GANG_NT name, vec, ptr, w
    BM_FUNC \name
    mov r8, rsi
    xor ecx, ecx
    mov rdx, qword ptr [rdi + 64]
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
    .irp k, 0, 1, 2, 3
    mov rax, qword ptr [rdi + 32 + 8 * \k]
    vmovdqu ymm\k, ymmword ptr [rax + rcx]
    vmovdqu ymm1\k, ymmword ptr [rax + rcx + 32]
    .endr
    .irp k, 0, 1, 2, 3
    mov rax, qword ptr [rdi + 8 * \k]
    vmovntdq ymmword ptr [rax + rcx], ymm\k
    vmovntdq ymmword ptr [rax + rcx + 32], ymm1\k
    .endr
    .else
    .irp k, 0, 1, 2, 3
    mov rax, qword ptr [rdi + 32 + 8 * \k]
    vmovdqu64 zmm\k, zmmword ptr [rax + rcx]
    .endr
    .irp k, 0, 1, 2, 3
    mov rax, qword ptr [rdi + 8 * \k]
    vmovntdq zmmword ptr [rax + rcx], zmm\k
    .endr
    .endif
.Lg_copied\@:
    BM_EXTABLE .Lg_copy\@, .Lg_copied\@, .Lg_fix\@
    add rcx, 64
    cmp rcx, rdx
    jb .Lg_step\@
    vzeroupper
    xor eax, eax
    ret
.Lg_fix\@:
    mov rax, rdx
    sub rax, rcx
    BM_FAIL_EXIT 0, 1
    BM_ENDFUNC \name
    .endm

    BM_GANG_NT bulkmem_mc_gang_avx2nt_unfenced, ymm, ymmword, 32
    BM_GANG_NT bulkmem_mc_gang_avx512nt_unfenced, zmm, zmmword, 64
    .purgem BM_GANG_NT

    .globl bulkmem_mc_gang_text_end
    .hidden bulkmem_mc_gang_text_end
bulkmem_mc_gang_text_end:
    .popsection
"#,
    asm_epilogue!()
);

/// A checked gang routine: bytes not done in each extent (0: all done).
pub(crate) type McGang = unsafe extern "C" fn(*const Gang, *mut RawFault) -> usize;

extern "C" {
    pub(crate) fn bulkmem_mc_gang_avx2nt_unfenced(g: *const Gang, i: *mut RawFault) -> usize;
    pub(crate) fn bulkmem_mc_gang_avx512nt_unfenced(g: *const Gang, i: *mut RawFault) -> usize;
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
