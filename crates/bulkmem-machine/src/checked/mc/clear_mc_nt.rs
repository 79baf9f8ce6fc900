//! Checked non-temporal clears, the twins of `kernels::avx2::clear_nt`,
//! `kernels::avx512::clear_nt` and `kernels::clzero::clear` (and their
//! `_unfenced` forms): a head up to the next 64-byte line (a short store,
//! or a byte-masked one with AVX-512), whole lines with streaming stores
//! (256 bytes per step, then 64; `clzero` one line per instruction), a
//! tail as the head. One stream: interleaving gained nothing for clears.
//!
//! As the non-temporal copies, each is assembled fenced and unfenced from
//! one macro, and every fixup fences. `rdx` counts the bytes not yet
//! zeroed from `rdi` on (the `clzero` loop keeps its line count in `rcx`
//! and the tail's bytes in `rdx`, as the kernel does). See `crate::checked::mc` for
//! the contract.

use core::arch::global_asm;

use super::extable::RawFault;

global_asm!(
    asm_prelude!("bulkmem_mc_ntclear_extable"),
    r#"
    .pushsection .text.bulkmem_mc_ntclear,"ax",@progbits

    // The head every routine starts with: up to the next line (`masked`
    // 1: AVX-512's one byte-masked store, 2: SSE short stores, 0: AVX
    // short stores).
    .macro BM_NTCLEAR_HEAD fix, masked
    mov r8, rdx
    mov rdx, rsi
    mov rcx, rdi
    neg rcx
    and ecx, 63
    cmp rcx, rdx
    cmova rcx, rdx
    .if \masked == 1
    test rcx, rcx
    jz .Lzh_done\@
    BM_ZERO_MASKED \fix
    .elseif \masked == 2
    BM_ZERO_UPTO64_SSE \fix
    .else
    BM_ZERO_UPTO64 \fix
    .endif
    add rdi, rcx
    sub rdx, rcx
.Lzh_done\@:
    .endm

    // Streaming stores, one body for both widths (`vec`/`ptr`/`w`: ymm,
    // 32 bytes, or zmm, 64).
    .macro BM_CLEAR_NT name, fence, vec, ptr, w
    BM_FUNC \name
    BM_NTCLEAR_HEAD .Lzn_fix\@, \w / 64
    vpxor xmm0, xmm0, xmm0
.Lzn_by256\@:
    cmp rdx, 256
    jb .Lzn_by64\@
.Lzn_l0\@:
    BM_VFILL vmovntdq, \vec, \ptr, \w, 256 / \w, rdi
.Lzn_l1\@:
    BM_EXTABLE .Lzn_l0\@, .Lzn_l1\@, .Lzn_fix\@
    add rdi, 256
    sub rdx, 256
    jmp .Lzn_by256\@
.Lzn_by64\@:
    cmp rdx, 64
    jb .Lzn_tail\@
.Lzn_m0\@:
    BM_VFILL vmovntdq, \vec, \ptr, \w, 64 / \w, rdi
.Lzn_m1\@:
    BM_EXTABLE .Lzn_m0\@, .Lzn_m1\@, .Lzn_fix\@
    add rdi, 64
    sub rdx, 64
    jmp .Lzn_by64\@
.Lzn_tail\@:
    mov rcx, rdx
    .if \w == 64
    test rcx, rcx
    jz .Lzn_done\@
    BM_ZERO_MASKED .Lzn_fix\@
    .else
    BM_ZERO_UPTO64 .Lzn_fix\@
    .endif
.Lzn_done\@:
    .if \fence
    sfence
    .endif
    vzeroupper
    xor eax, eax
    ret
.Lzn_fix\@:
    mov rax, rdx
    BM_FAIL_EXIT 2, 1
    BM_ENDFUNC \name
    .endm

    // clzero zeroes the 64-byte line rax points into, without reading it
    // (AMD). rcx counts the lines left, rdx holds the tail's bytes. The
    // short head and tail are SSE stores, as the kernel's.
    .macro BM_CLEAR_CLZERO name, fence
    BM_FUNC \name
    BM_NTCLEAR_HEAD .Lzcz_fix\@, 2
    mov rcx, rdx
    shr rcx, 6
    and edx, 63
    mov rax, rdi
    test rcx, rcx
    jz .Lzcz_tail\@
    .p2align 4
.Lzcz_line\@:
    .byte 0x0f, 0x01, 0xfc
.Lzcz_line_end\@:
    BM_EXTABLE .Lzcz_line\@, .Lzcz_line_end\@, .Lzcz_fixl\@
    add rax, 64
    dec rcx
    jnz .Lzcz_line\@
.Lzcz_tail\@:
    mov rdi, rax
    mov rcx, rdx
    BM_ZERO_UPTO64_SSE .Lzcz_fix\@
    .if \fence
    sfence
    .endif
    xor eax, eax
    ret
.Lzcz_fixl\@:
    shl rcx, 6
    add rdx, rcx
.Lzcz_fix\@:
    mov rax, rdx
    BM_FAIL_EXIT 2, 1, 0
    BM_ENDFUNC \name
    .endm

    BM_CLEAR_NT bulkmem_mc_clear_avx2nt, 1, ymm, ymmword, 32
    BM_CLEAR_NT bulkmem_mc_clear_avx2nt_unfenced, 0, ymm, ymmword, 32
    BM_CLEAR_NT bulkmem_mc_clear_avx512nt, 1, zmm, zmmword, 64
    BM_CLEAR_NT bulkmem_mc_clear_avx512nt_unfenced, 0, zmm, zmmword, 64
    BM_CLEAR_CLZERO bulkmem_mc_clear_clzero, 1
    BM_CLEAR_CLZERO bulkmem_mc_clear_clzero_unfenced, 0
    .purgem BM_CLEAR_NT
    .purgem BM_CLEAR_CLZERO
    .purgem BM_NTCLEAR_HEAD

    .globl bulkmem_mc_ntclear_text_end
    .hidden bulkmem_mc_ntclear_text_end
bulkmem_mc_ntclear_text_end:
    .popsection
"#,
    asm_epilogue!()
);

routines!(McClear:
    bulkmem_mc_clear_avx2nt,
    bulkmem_mc_clear_avx2nt_unfenced,
    bulkmem_mc_clear_avx512nt,
    bulkmem_mc_clear_avx512nt_unfenced,
    bulkmem_mc_clear_clzero,
    bulkmem_mc_clear_clzero_unfenced,
);

extable!(
    bulkmem_mc_ntclear_extable,
    bulkmem_mc_ntclear_extable_end,
    bulkmem_mc_ntclear_text_end
);

#[cfg(test)]
mod tests {
    use super::super::McClear;
    use super::*;

    #[test]
    fn every_entry_lies_in_its_routine() {
        // AVX2: six short-store widths twice (head, tail), 256 and 64
        // bytes. AVX-512: masked head and tail, 256 and 64. clzero: short
        // head and tail, the line.
        let k = |f: McClear| f as usize;
        super::super::extable::check(
            &table(),
            &[
                ("avx2nt", k(bulkmem_mc_clear_avx2nt), 14),
                ("avx2nt_unfenced", k(bulkmem_mc_clear_avx2nt_unfenced), 14),
                ("avx512nt", k(bulkmem_mc_clear_avx512nt), 4),
                (
                    "avx512nt_unfenced",
                    k(bulkmem_mc_clear_avx512nt_unfenced),
                    4,
                ),
                ("clzero", k(bulkmem_mc_clear_clzero), 13),
                ("clzero_unfenced", k(bulkmem_mc_clear_clzero_unfenced), 13),
            ],
            text_end(),
            fixup,
        );
    }
}
