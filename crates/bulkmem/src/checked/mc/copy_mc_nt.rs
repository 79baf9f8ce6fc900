//! Checked non-temporal copies, the twins of `kernels::avx2::copy_nt` and
//! `kernels::avx512::copy_nt` (and their `_unfenced` forms, which batches
//! drain once): the same shape, instruction for instruction.
//!
//! 1. A head up to the destination's next 64-byte line (a short move, or a
//!    byte-masked one with AVX-512).
//! 2. On Intel (`kernels::nt_copy_interleaves`, set by [`interleave`]),
//!    blocks of [`NT_COPY_PAGES`](crate::kernels) pages read at once: each
//!    step copies one vector group (128 bytes with AVX2, 256 with AVX-512)
//!    from each of four runs a page apart, so several read streams keep
//!    DRAM busy. `rsi`/`rdi` stay at the block's start and `r9` walks the
//!    step within the page; a fault anywhere in the block reports the
//!    block's start plus `r9` as the first byte not copied: every byte
//!    before it is done, and bytes of the later pages past it (up to three
//!    pages) may already hold their copy.
//! 3. 256 bytes per step (loads first, then streaming stores), then 64.
//!    Elsewhere this is the whole body, and each 256-byte step first
//!    requests the source `PREFETCH_AHEAD` (2 KiB) ahead while that still
//!    lies in the range (a prefetch never faults).
//! 4. A tail as the head.
//!
//! Each routine is assembled twice from one macro: fenced (an `sfence`
//! before it returns) and unfenced, so the fence check follows each as an
//! ordinary function. Every fixup fences, so a fault never leaves
//! streaming stores unordered. See `crate::checked::mc` for the contract.

use core::arch::global_asm;

use super::extable::RawFault;

global_asm!(
    asm_prelude!("bulkmem_mc_ntcopy_extable"),
    r#"
    .pushsection .text.bulkmem_mc_ntcopy,"ax",@progbits

    // Set on Intel, where the page interleave was measured to win
    // (`interleave`); elsewhere one stream, prefetched.
    .pushsection .data.bulkmem_mc_nt_interleave,"aw",@progbits
    .globl bulkmem_mc_nt_interleave
    .hidden bulkmem_mc_nt_interleave
bulkmem_mc_nt_interleave:
    .byte 0
    .popsection

    // One body for both widths (`vec`/`ptr`/`w`: ymm, 32 bytes, or zmm,
    // 64; `ld` the unaligned load); a page step is four vectors.
    .macro BM_COPY_NT name, fence, vec, ptr, w, ld
    BM_FUNC \name
    mov r8, rcx
    mov rcx, rdi
    neg rcx
    and ecx, 63
    cmp rcx, rdx
    cmova rcx, rdx
    .if \w == 64
    test rcx, rcx
    jz .Lcn_head_done\@
    BM_COPY_MASKED .Lcn_fix\@
    .else
    BM_COPY_UPTO64 .Lcn_fix\@
    .endif
    add rsi, rcx
    add rdi, rcx
    sub rdx, rcx
.Lcn_head_done\@:
    cmp rdx, 16384
    jb .Lcn_by256\@
    cmp byte ptr [rip + bulkmem_mc_nt_interleave], 0
    je .Lcn_by256\@
.Lcn_block\@:
    xor r9d, r9d
    .p2align 4
.Lcn_step\@:
    .irp page, 0, 4096, 8192, 12288
    BM_VLOAD \ld, \vec, \ptr, \w, 4, rsi+r9+\page
    BM_VSTORE vmovntdq, \vec, \ptr, \w, 4, rdi+r9+\page
    .endr
.Lcn_step_end\@:
    BM_EXTABLE .Lcn_step\@, .Lcn_step_end\@, .Lcn_fixblk\@
    add r9, 4 * \w
    cmp r9, 4096
    jb .Lcn_step\@
    add rsi, 16384
    add rdi, 16384
    sub rdx, 16384
    cmp rdx, 16384
    jae .Lcn_block\@
.Lcn_by256\@:
    cmp rdx, 256
    jb .Lcn_by64\@
    cmp byte ptr [rip + bulkmem_mc_nt_interleave], 0
    jne .Lcn_l0\@
    cmp rdx, 256 + 2048
    jb .Lcn_l0\@
    prefetcht0 [rsi + 2048]
    prefetcht0 [rsi + 2048 + 64]
    prefetcht0 [rsi + 2048 + 128]
    prefetcht0 [rsi + 2048 + 192]
.Lcn_l0\@:
    BM_VLOAD \ld, \vec, \ptr, \w, 256 / \w, rsi
    BM_VSTORE vmovntdq, \vec, \ptr, \w, 256 / \w, rdi
.Lcn_l1\@:
    BM_EXTABLE .Lcn_l0\@, .Lcn_l1\@, .Lcn_fix\@
    add rsi, 256
    add rdi, 256
    sub rdx, 256
    jmp .Lcn_by256\@
.Lcn_by64\@:
    cmp rdx, 64
    jb .Lcn_tail\@
.Lcn_m0\@:
    BM_VLOAD \ld, \vec, \ptr, \w, 64 / \w, rsi
    BM_VSTORE vmovntdq, \vec, \ptr, \w, 64 / \w, rdi
.Lcn_m1\@:
    BM_EXTABLE .Lcn_m0\@, .Lcn_m1\@, .Lcn_fix\@
    add rsi, 64
    add rdi, 64
    sub rdx, 64
    jmp .Lcn_by64\@
.Lcn_tail\@:
    mov rcx, rdx
    .if \w == 64
    test rcx, rcx
    jz .Lcn_done\@
    BM_COPY_MASKED .Lcn_fix\@
    .else
    BM_COPY_UPTO64 .Lcn_fix\@
    .endif
.Lcn_done\@:
    .if \fence
    sfence
    .endif
    vzeroupper
    xor eax, eax
    ret
.Lcn_fixblk\@:
    sub rdx, r9
.Lcn_fix\@:
    mov rax, rdx
    BM_FAIL_EXIT 0, 1
    BM_ENDFUNC \name
    .endm

    BM_COPY_NT bulkmem_mc_copy_avx2nt, 1, ymm, ymmword, 32, vmovdqu
    BM_COPY_NT bulkmem_mc_copy_avx2nt_unfenced, 0, ymm, ymmword, 32, vmovdqu
    BM_COPY_NT bulkmem_mc_copy_avx512nt, 1, zmm, zmmword, 64, vmovdqu64
    BM_COPY_NT bulkmem_mc_copy_avx512nt_unfenced, 0, zmm, zmmword, 64, vmovdqu64
    .purgem BM_COPY_NT

    .globl bulkmem_mc_ntcopy_text_end
    .hidden bulkmem_mc_ntcopy_text_end
bulkmem_mc_ntcopy_text_end:
    .popsection
"#,
    asm_epilogue!()
);

extern "C" {
    /// Non-zero: the routines read four pages at once (Intel).
    static mut bulkmem_mc_nt_interleave: u8;
}

/// Gives the checked non-temporal copies the shape of the unchecked ones
/// on this CPU (`kernels::nt_copy_interleaves`). Idempotent; called
/// wherever a checked non-temporal routine is handed out, before any runs.
pub(crate) fn interleave() {
    let on = u8::from(crate::kernels::nt_copy_interleaves());
    // SAFETY: a byte of this object's data, written only here and read by
    // the routines (either value runs a correct copy, so racing writers
    // are harmless); a byte store is atomic on x86.
    unsafe { core::ptr::addr_of_mut!(bulkmem_mc_nt_interleave).write_volatile(on) };
}

routines!(McCopy:
    bulkmem_mc_copy_avx2nt,
    bulkmem_mc_copy_avx2nt_unfenced,
    bulkmem_mc_copy_avx512nt,
    bulkmem_mc_copy_avx512nt_unfenced,
);

extable!(
    bulkmem_mc_ntcopy_extable,
    bulkmem_mc_ntcopy_extable_end,
    bulkmem_mc_ntcopy_text_end
);

#[cfg(test)]
mod tests {
    use super::super::McCopy;
    use super::*;

    #[test]
    fn every_entry_lies_in_its_routine() {
        // AVX2: six short-move widths twice (head, tail), the page step,
        // 256 and 64 bytes. AVX-512: masked head and tail, the same three.
        super::super::extable::check(
            &table(),
            &[
                ("avx2nt", bulkmem_mc_copy_avx2nt as McCopy as usize, 15),
                (
                    "avx2nt_unfenced",
                    bulkmem_mc_copy_avx2nt_unfenced as McCopy as usize,
                    15,
                ),
                ("avx512nt", bulkmem_mc_copy_avx512nt as McCopy as usize, 5),
                (
                    "avx512nt_unfenced",
                    bulkmem_mc_copy_avx512nt_unfenced as McCopy as usize,
                    5,
                ),
            ],
            text_end(),
            fixup,
        );
    }
}
