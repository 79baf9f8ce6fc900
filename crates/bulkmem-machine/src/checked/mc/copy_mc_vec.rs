//! Checked temporal vector copies, the twins of `kernels::avx2::copy` and
//! `kernels::avx512::copy`: the same widths and loop shape (up to 64 bytes
//! in one short move; else an unaligned head vector, an aligned body of
//! four vectors per step, then one vector per step, and an unaligned last
//! vector ending at `len` that may overlap bytes already copied). The head
//! is stored first rather than last, so a fault in the body reports the
//! head done. `rdx` counts the bytes not yet copied from `rsi`/`rdi` on, so
//! every fixup returns `rdx`. See `crate::checked::mc` for the contract.

use core::arch::global_asm;

use super::extable::RawFault;

global_asm!(
    asm_prelude!("bulkmem_mc_vcopy_extable"),
    r#"
    .pushsection .text.bulkmem_mc_vcopy,"ax",@progbits

    // One body for both widths: `vec`/`ptr`/`w` name the vector (ymm, 32
    // bytes, or zmm, 64), `ld` its unaligned move and `sta` its aligned
    // store. Up to 64 bytes: AVX2's overlapping short moves, AVX-512's one
    // byte-masked move, as the kernels do.
    .macro BM_COPY_VEC name, vec, ptr, w, ld, sta
    BM_FUNC \name
    mov r8, rcx
    cmp rdx, 64
    ja .Lcv_big\@
    mov rcx, rdx
    .if \w == 64
    test rcx, rcx
    jz .Lcv_done\@
    BM_COPY_MASKED .Lcv_fix\@
    .else
    BM_COPY_UPTO64 .Lcv_fix\@
    .endif
    jmp .Lcv_done\@
.Lcv_big\@:
.Lcv_h0\@:
    \ld \vec\()0, \ptr ptr [rsi]
    \ld \ptr ptr [rdi], \vec\()0
.Lcv_h1\@:
    BM_EXTABLE .Lcv_h0\@, .Lcv_h1\@, .Lcv_fix\@
    // The body starts 1..=w bytes in, where the destination is aligned.
    mov ecx, edi
    neg ecx
    and ecx, \w - 1
    jnz .Lcv_skip\@
    mov ecx, \w
.Lcv_skip\@:
    add rsi, rcx
    add rdi, rcx
    sub rdx, rcx
    cmp rdx, 4 * \w
    jb .Lcv_by1\@
    .p2align 4
.Lcv_loop\@:
    BM_VLOAD \ld, \vec, \ptr, \w, 4, rsi
    BM_VSTORE \sta, \vec, \ptr, \w, 4, rdi
.Lcv_l1\@:
    BM_EXTABLE .Lcv_loop\@, .Lcv_l1\@, .Lcv_fix\@
    add rsi, 4 * \w
    add rdi, 4 * \w
    sub rdx, 4 * \w
    cmp rdx, 4 * \w
    jae .Lcv_loop\@
.Lcv_by1\@:
    cmp rdx, \w
    jb .Lcv_last\@
.Lcv_b0\@:
    \ld \vec\()0, \ptr ptr [rsi]
    \sta \ptr ptr [rdi], \vec\()0
.Lcv_b1\@:
    BM_EXTABLE .Lcv_b0\@, .Lcv_b1\@, .Lcv_fix\@
    add rsi, \w
    add rdi, \w
    sub rdx, \w
    jmp .Lcv_by1\@
.Lcv_last\@:
    test rdx, rdx
    jz .Lcv_done\@
.Lcv_t0\@:
    \ld \vec\()0, \ptr ptr [rsi + rdx - \w]
    \ld \ptr ptr [rdi + rdx - \w], \vec\()0
.Lcv_t1\@:
    BM_EXTABLE .Lcv_t0\@, .Lcv_t1\@, .Lcv_fix\@
.Lcv_done\@:
    vzeroupper
    xor eax, eax
    ret
.Lcv_fix\@:
    mov rax, rdx
    BM_FAIL_EXIT 0, 0
    BM_ENDFUNC \name
    .endm

    BM_COPY_VEC bulkmem_mc_copy_avx2, ymm, ymmword, 32, vmovdqu, vmovdqa
    BM_COPY_VEC bulkmem_mc_copy_avx512, zmm, zmmword, 64, vmovdqu64, vmovdqa64
    .purgem BM_COPY_VEC

    .globl bulkmem_mc_vcopy_text_end
    .hidden bulkmem_mc_vcopy_text_end
bulkmem_mc_vcopy_text_end:
    .popsection
"#,
    asm_epilogue!()
);

routines!(McCopy: bulkmem_mc_copy_avx2, bulkmem_mc_copy_avx512);

extable!(
    bulkmem_mc_vcopy_extable,
    bulkmem_mc_vcopy_extable_end,
    bulkmem_mc_vcopy_text_end
);

#[cfg(test)]
mod tests {
    use super::super::McCopy;
    use super::*;

    #[test]
    fn every_entry_lies_in_its_routine() {
        // Six short-copy widths, head, body, by-vector and last vector.
        super::super::extable::check(
            &table(),
            &[
                ("avx2", bulkmem_mc_copy_avx2 as McCopy as usize, 10),
                ("avx512", bulkmem_mc_copy_avx512 as McCopy as usize, 5),
            ],
            text_end(),
            fixup,
        );
    }
}
