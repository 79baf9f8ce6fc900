//! Checked clears with the string instructions, and the exact byte routine
//! the others hand their fault to: the twins of `kernels::rep`
//! (`rep-stosb`, `rep-stosq`) and `kernels::per_page` (one `rep stosq` per
//! 4 KiB). Clears are `fn(dst: rdi, len: rsi, info: rdx) -> rax` (bytes
//! not zeroed); only the destination can fault, so every fixup records
//! side 2. See `crate::checked::mc` for the contract.

use core::arch::global_asm;

use super::extable::RawFault;

global_asm!(
    asm_prelude!("bulkmem_mc_clear_extable"),
    r#"
    .pushsection .text.bulkmem_mc_clear,"ax",@progbits

    // rep stosb over the whole range; exact: rcx holds the bytes left.
    BM_FUNC bulkmem_mc_clear_stosb
    mov r8, rdx
    mov rcx, rsi
    xor eax, eax
.Lmz_stosb_0:
    rep stosb
.Lmz_stosb_1:
    BM_EXTABLE .Lmz_stosb_0, .Lmz_stosb_1, .Lmz_stosb_fix
    xor eax, eax
    ret
.Lmz_stosb_fix:
    mov rax, rcx
    jmp .Lmz_fail
    BM_ENDFUNC bulkmem_mc_clear_stosb

    // rep stosq, then rep stosb for the last len % 8 bytes, as
    // `kernels::rep::clear_stosq`.
    BM_FUNC bulkmem_mc_clear_stosq
    mov r8, rdx
    mov r9, rsi
    and r9, 7
    mov rcx, rsi
    shr rcx, 3
    xor eax, eax
.Lmz_stosq_0:
    rep stosq
.Lmz_stosq_1:
    BM_EXTABLE .Lmz_stosq_0, .Lmz_stosq_1, .Lmz_stosq_fixq
    mov rcx, r9
.Lmz_stosq_2:
    rep stosb
.Lmz_stosq_3:
    BM_EXTABLE .Lmz_stosq_2, .Lmz_stosq_3, .Lmz_stosq_fixb
    xor eax, eax
    ret
.Lmz_stosq_fixq:
    lea rax, [r9 + 8 * rcx]
    jmp .Lmz_fail
.Lmz_stosq_fixb:
    mov rax, rcx
    jmp .Lmz_fail
    BM_ENDFUNC bulkmem_mc_clear_stosq

    // The per-page loop (`kernels::per_page::clear`): rep stosq and rep
    // stosb per 4 KiB piece. rdx counts the bytes left from the current
    // piece on, r9 is the piece (rax is the stored zero).
    BM_FUNC bulkmem_mc_clear_per_page
    mov r8, rdx
    mov rdx, rsi
    xor eax, eax
.Lmz_pp_piece:
    test rdx, rdx
    jz .Lmz_pp_done
    mov r9d, 4096
    cmp rdx, r9
    cmovb r9, rdx
    mov rcx, r9
    shr rcx, 3
.Lmz_pp_0:
    rep stosq
.Lmz_pp_1:
    BM_EXTABLE .Lmz_pp_0, .Lmz_pp_1, .Lmz_pp_fixq
    mov ecx, r9d
    and ecx, 7
.Lmz_pp_2:
    rep stosb
.Lmz_pp_3:
    BM_EXTABLE .Lmz_pp_2, .Lmz_pp_3, .Lmz_pp_fixb
    sub rdx, r9
    jmp .Lmz_pp_piece
.Lmz_pp_done:
    xor eax, eax
    ret
.Lmz_pp_fixq:
    sub rdx, r9
    and r9d, 7
    lea rax, [r9 + 8 * rcx]
    add rax, rdx
    jmp .Lmz_fail
.Lmz_pp_fixb:
    sub rdx, r9
    lea rax, [rdx + rcx]
    jmp .Lmz_fail
    BM_ENDFUNC bulkmem_mc_clear_per_page

    // One byte at a time: exact, for the bytes up to a reported fault.
    BM_FUNC bulkmem_mc_clear_bytes
    mov r8, rdx
    test rsi, rsi
    jz .Lmz_bytes_done
.Lmz_bytes_st:
    mov byte ptr [rdi], 0
.Lmz_bytes_after:
    BM_EXTABLE .Lmz_bytes_st, .Lmz_bytes_after, .Lmz_bytes_fix
    inc rdi
    dec rsi
    jnz .Lmz_bytes_st
.Lmz_bytes_done:
    xor eax, eax
    ret
.Lmz_bytes_fix:
    mov rax, rsi
    // Shared exit: rax = bytes not zeroed, r10/r11 from the handler.
.Lmz_fail:
    mov qword ptr [r8 + 16], 2
    mov qword ptr [r8], r10
    mov qword ptr [r8 + 8], r11
    ret
    BM_ENDFUNC bulkmem_mc_clear_bytes

    .globl bulkmem_mc_clear_text_end
    .hidden bulkmem_mc_clear_text_end
bulkmem_mc_clear_text_end:
    .popsection
"#,
    asm_epilogue!()
);

/// A checked zeroing routine: see the module docs of `crate::checked::mc` for the
/// contract.
pub type McClear = unsafe extern "C" fn(*mut u8, usize, *mut RawFault) -> usize;

routines!(McClear:
    bulkmem_mc_clear_stosb,
    bulkmem_mc_clear_stosq,
    bulkmem_mc_clear_per_page,
    bulkmem_mc_clear_bytes,
);

extable!(
    bulkmem_mc_clear_extable,
    bulkmem_mc_clear_extable_end,
    bulkmem_mc_clear_text_end
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_lies_in_its_routine() {
        super::super::extable::check(
            &table(),
            &[
                ("stosb", bulkmem_mc_clear_stosb as McClear as usize, 1),
                ("stosq", bulkmem_mc_clear_stosq as McClear as usize, 2),
                ("per_page", bulkmem_mc_clear_per_page as McClear as usize, 2),
                ("bytes", bulkmem_mc_clear_bytes as McClear as usize, 1),
            ],
            text_end(),
            fixup,
        );
    }
}
