//! Checked non-temporal copies, the twins of `kernels::avx2::copy_nt` and
//! `kernels::avx512::copy_nt` (and their `_unfenced` forms, which batches
//! drain once): the same shape, instruction for instruction.
//!
//! 1. A head up to the destination's next 64-byte line (a short move, or a
//!    byte-masked one with AVX-512).
//! 2. Blocks of pages read at once, in the shape `kernels::nt_copy_shape`
//!    names (set here by [`follow_shape`]): four pages, each step copying
//!    one vector group (128 bytes with AVX2, 256 with AVX-512) from each
//!    of four runs a page apart; or two pages, each step loading a group
//!    of each of two runs a page apart before storing either, and
//!    requesting both runs' next two groups. `rsi`/`rdi` stay at the
//!    block's start and `r9` walks the step within the page; a fault
//!    anywhere in the block reports the block's start plus `r9` as the
//!    first byte not copied: every byte before it is done, and bytes of
//!    the later pages past it (up to three pages) may already hold their
//!    copy.
//! 3. 256 bytes per step (loads first, then streaming stores), then 64.
//!    In the one-stream shape this is the whole body, and each 256-byte
//!    step first
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

    // `kernels::NtCopyShape` as a byte (`follow_shape`): 0 one stream,
    // prefetched; 1 four pages; 2 two pages.
    .pushsection .data.bulkmem_mc_nt_shape,"aw",@progbits
    .globl bulkmem_mc_nt_shape
    .hidden bulkmem_mc_nt_shape
bulkmem_mc_nt_shape:
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
    cmp byte ptr [rip + bulkmem_mc_nt_shape], 2
    je .Lcn_two\@
    cmp rdx, 16384
    jb .Lcn_by256\@
    cmp byte ptr [rip + bulkmem_mc_nt_shape], 0
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
    jmp .Lcn_by256\@
.Lcn_two\@:
    cmp rdx, 8192
    jb .Lcn_by256\@
.Lcn_tblock\@:
    xor r9d, r9d
    .p2align 4
.Lcn_tstep\@:
    .irp page, 0, 4096
    .irp line, 4 * \w, 4 * \w + 64, 4 * \w + 128, 4 * \w + 192, 4 * \w + 256, 4 * \w + 320, 4 * \w + 384, 4 * \w + 448
    .if \line < 12 * \w
    prefetcht0 [rsi + r9 + \page + \line]
    .endif
    .endr
    .endr
    .irp i, 0, 1, 2, 3
    \ld \vec\i, \ptr ptr [rsi + r9 + \i * \w]
    .endr
    .irp i, 4, 5, 6, 7
    \ld \vec\i, \ptr ptr [rsi + r9 + 4096 + (\i - 4) * \w]
    .endr
    .irp i, 0, 1, 2, 3
    vmovntdq \ptr ptr [rdi + r9 + \i * \w], \vec\i
    .endr
    .irp i, 4, 5, 6, 7
    vmovntdq \ptr ptr [rdi + r9 + 4096 + (\i - 4) * \w], \vec\i
    .endr
.Lcn_tstep_end\@:
    BM_EXTABLE .Lcn_tstep\@, .Lcn_tstep_end\@, .Lcn_fixblk\@
    add r9, 4 * \w
    cmp r9, 4096
    jb .Lcn_tstep\@
    add rsi, 8192
    add rdi, 8192
    sub rdx, 8192
    cmp rdx, 8192
    jae .Lcn_tblock\@
.Lcn_by256\@:
    cmp rdx, 256
    jb .Lcn_by64\@
    cmp byte ptr [rip + bulkmem_mc_nt_shape], 0
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
    /// The shape the routines take (`kernels::NtCopyShape as u8`).
    static mut bulkmem_mc_nt_shape: u8;
}

/// Gives the checked non-temporal copies the shape of the unchecked ones
/// (`kernels::nt_copy_shape`). Idempotent; called wherever a checked
/// non-temporal routine is handed out, before any runs.
pub fn follow_shape() {
    let shape = crate::kernels::nt_copy_shape() as u8;
    // SAFETY: a byte of this object's data, written only here and read by
    // the routines (every value runs a correct copy, so racing writers
    // are harmless); a byte store is atomic on x86.
    unsafe { core::ptr::addr_of_mut!(bulkmem_mc_nt_shape).write_volatile(shape) };
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
        // AVX2: six short-move widths twice (head, tail), the two page
        // steps, 256 and 64 bytes. AVX-512: masked head and tail, the same
        // four.
        super::super::extable::check(
            &table(),
            &[
                ("avx2nt", bulkmem_mc_copy_avx2nt as McCopy as usize, 16),
                (
                    "avx2nt_unfenced",
                    bulkmem_mc_copy_avx2nt_unfenced as McCopy as usize,
                    16,
                ),
                ("avx512nt", bulkmem_mc_copy_avx512nt as McCopy as usize, 6),
                (
                    "avx512nt_unfenced",
                    bulkmem_mc_copy_avx512nt_unfenced as McCopy as usize,
                    6,
                ),
            ],
            text_end(),
            fixup,
        );
    }
}
