//! Checked temporal vector clears, the twins of `kernels::avx2::clear` and
//! `kernels::avx512::clear`: up to 64 bytes in one short store; else an
//! unaligned head vector, an aligned body of four vectors per step, then
//! one per step, and an unaligned last vector ending at `len`. `rdx`
//! counts the bytes not yet zeroed from `rdi` on, so every fixup returns
//! it. Clears are `fn(dst: rdi, len: rsi, info: rdx) -> rax`; see
//! `crate::checked::mc` for the contract.

use core::arch::global_asm;

use super::extable::RawFault;

global_asm!(
    asm_prelude!("bulkmem_mc_vclear_extable"),
    r#"
    .pushsection .text.bulkmem_mc_vclear,"ax",@progbits

    // One body for both widths (`vec`/`ptr`/`w`: ymm, 32 bytes, or zmm,
    // 64; `stu` the unaligned store, `sta` the aligned one).
    .macro BM_CLEAR_VEC name, vec, ptr, w, stu, sta
    BM_FUNC \name
    mov r8, rdx
    mov rdx, rsi
    cmp rdx, 64
    ja .Lzv_big\@
    mov rcx, rdx
    .if \w == 64
    test rcx, rcx
    jz .Lzv_done\@
    BM_ZERO_MASKED .Lzv_fix\@
    .else
    BM_ZERO_UPTO64 .Lzv_fix\@
    .endif
    jmp .Lzv_done\@
.Lzv_big\@:
    vpxor xmm0, xmm0, xmm0
.Lzv_h0\@:
    \stu \ptr ptr [rdi], \vec\()0
.Lzv_h1\@:
    BM_EXTABLE .Lzv_h0\@, .Lzv_h1\@, .Lzv_fix\@
    mov ecx, edi
    neg ecx
    and ecx, \w - 1
    jnz .Lzv_skip\@
    mov ecx, \w
.Lzv_skip\@:
    add rdi, rcx
    sub rdx, rcx
    cmp rdx, 4 * \w
    jb .Lzv_by1\@
    .p2align 4
.Lzv_loop\@:
    BM_VFILL \sta, \vec, \ptr, \w, 4, rdi
.Lzv_l1\@:
    BM_EXTABLE .Lzv_loop\@, .Lzv_l1\@, .Lzv_fix\@
    add rdi, 4 * \w
    sub rdx, 4 * \w
    cmp rdx, 4 * \w
    jae .Lzv_loop\@
.Lzv_by1\@:
    cmp rdx, \w
    jb .Lzv_last\@
.Lzv_b0\@:
    \sta \ptr ptr [rdi], \vec\()0
.Lzv_b1\@:
    BM_EXTABLE .Lzv_b0\@, .Lzv_b1\@, .Lzv_fix\@
    add rdi, \w
    sub rdx, \w
    jmp .Lzv_by1\@
.Lzv_last\@:
    test rdx, rdx
    jz .Lzv_done\@
.Lzv_t0\@:
    \stu \ptr ptr [rdi + rdx - \w], \vec\()0
.Lzv_t1\@:
    BM_EXTABLE .Lzv_t0\@, .Lzv_t1\@, .Lzv_fix\@
.Lzv_done\@:
    vzeroupper
    xor eax, eax
    ret
.Lzv_fix\@:
    mov rax, rdx
    BM_FAIL_EXIT 2, 0
    BM_ENDFUNC \name
    .endm

    BM_CLEAR_VEC bulkmem_mc_clear_avx2, ymm, ymmword, 32, vmovdqu, vmovdqa
    BM_CLEAR_VEC bulkmem_mc_clear_avx512, zmm, zmmword, 64, vmovdqu64, vmovdqa64
    .purgem BM_CLEAR_VEC

    .globl bulkmem_mc_vclear_text_end
    .hidden bulkmem_mc_vclear_text_end
bulkmem_mc_vclear_text_end:
    .popsection
"#,
    asm_epilogue!()
);

routines!(McClear: bulkmem_mc_clear_avx2, bulkmem_mc_clear_avx512);

extable!(
    bulkmem_mc_vclear_extable,
    bulkmem_mc_vclear_extable_end,
    bulkmem_mc_vclear_text_end
);

#[cfg(test)]
mod tests {
    use super::super::McClear;
    use super::*;

    #[test]
    fn every_entry_lies_in_its_routine() {
        // Six short-store widths, head, body, by-vector and last vector.
        super::super::extable::check(
            &table(),
            &[
                ("avx2", bulkmem_mc_clear_avx2 as McClear as usize, 10),
                ("avx512", bulkmem_mc_clear_avx512 as McClear as usize, 5),
            ],
            text_end(),
            fixup,
        );
    }
}
