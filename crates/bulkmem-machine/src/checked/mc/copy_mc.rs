//! Checked copies with the string instructions, and the exact byte
//! routine the others hand their fault to: the checked twins of
//! `kernels::rep` (`rep-movsb`, `rep-movsq`) and `kernels::per_page` (one
//! `rep movsq` per 4 KiB, the kernel's baseline). See the module docs of
//! `crate::checked::mc` for the calling convention and the guarantee.
//!
//! The string instructions are exact: on a fault `rcx` holds what is left.

use core::arch::global_asm;

use super::extable::RawFault;

global_asm!(
    asm_prelude!("bulkmem_mc_copy_extable"),
    r#"
    .pushsection .text.bulkmem_mc_copy,"ax",@progbits

    // The string copies fall off their fast path when the destination is
    // 1 to 63 bytes ahead of the source within a page; such copies take
    // the checked `avx2` loop where the CPU has it (`route_near_ahead`
    // says so), else the 16-byte moves of `bulkmem_mc_copy_near_ahead`,
    // as `kernels::rep::copy_near_ahead` routes the unchecked ones. Uses
    // eax only.
    .macro BM_NEAR_AHEAD
    mov eax, edi
    sub eax, esi
    and eax, 4095
    dec eax
    cmp eax, 63
    jae .Lna_far\@
    cmp byte ptr [rip + bulkmem_mc_near_ahead_avx2], 0
    jne bulkmem_mc_copy_avx2
    jmp bulkmem_mc_copy_near_ahead
.Lna_far\@:
    .endm

    // Set once the CPU is known to have AVX2 (`route_near_ahead`).
    .pushsection .data.bulkmem_mc_near_ahead_avx2,"aw",@progbits
    .globl bulkmem_mc_near_ahead_avx2
    .hidden bulkmem_mc_near_ahead_avx2
bulkmem_mc_near_ahead_avx2:
    .byte 0
    .popsection

    // rep movsb over the whole range: fast with ERMS/FSRM.
    BM_FUNC bulkmem_mc_copy_movsb
    BM_NEAR_AHEAD
    mov r8, rcx
    mov rcx, rdx
.Lmc_movsb_0:
    rep movsb
.Lmc_movsb_1:
    BM_EXTABLE .Lmc_movsb_0, .Lmc_movsb_1, .Lmc_movsb_fix
    xor eax, eax
    ret
.Lmc_movsb_fix:
    mov rax, rcx
    jmp .Lmc_copy_fail
    BM_ENDFUNC bulkmem_mc_copy_movsb

    // rep movsq, then rep movsb for the last len % 8 bytes, as
    // `kernels::rep::copy_movsq`.
    BM_FUNC bulkmem_mc_copy_movsq
    BM_NEAR_AHEAD
    mov r8, rcx
    mov r9, rdx
    and r9, 7
    mov rcx, rdx
    shr rcx, 3
.Lmc_movsq_0:
    rep movsq
.Lmc_movsq_1:
    BM_EXTABLE .Lmc_movsq_0, .Lmc_movsq_1, .Lmc_movsq_fixq
    mov rcx, r9
.Lmc_movsq_2:
    rep movsb
.Lmc_movsq_3:
    BM_EXTABLE .Lmc_movsq_2, .Lmc_movsq_3, .Lmc_movsq_fixb
    xor eax, eax
    ret
.Lmc_movsq_fixq:
    lea rax, [r9 + 8 * rcx]
    jmp .Lmc_copy_fail
.Lmc_movsq_fixb:
    mov rax, rcx
    jmp .Lmc_copy_fail
    BM_ENDFUNC bulkmem_mc_copy_movsq

    // 64 bytes per step in four unaligned 16-byte moves (SSE2: every
    // x86-64), then rep movsb over the last 0-63 bytes, as
    // `kernels::rep::copy_near_ahead`. rdx counts the bytes not yet copied
    // from rsi/rdi on.
    BM_FUNC bulkmem_mc_copy_near_ahead
    mov r8, rcx
.Lmc_na_step:
    cmp rdx, 64
    jb .Lmc_na_tail
.Lmc_na_0:
    movdqu xmm0, xmmword ptr [rsi]
    movdqu xmm1, xmmword ptr [rsi + 16]
    movdqu xmm2, xmmword ptr [rsi + 32]
    movdqu xmm3, xmmword ptr [rsi + 48]
    movdqu xmmword ptr [rdi], xmm0
    movdqu xmmword ptr [rdi + 16], xmm1
    movdqu xmmword ptr [rdi + 32], xmm2
    movdqu xmmword ptr [rdi + 48], xmm3
.Lmc_na_1:
    BM_EXTABLE .Lmc_na_0, .Lmc_na_1, .Lmc_na_fix
    add rsi, 64
    add rdi, 64
    sub rdx, 64
    jmp .Lmc_na_step
.Lmc_na_tail:
    mov rcx, rdx
.Lmc_na_2:
    rep movsb
.Lmc_na_3:
    BM_EXTABLE .Lmc_na_2, .Lmc_na_3, .Lmc_na_fixb
    xor eax, eax
    ret
.Lmc_na_fix:
    mov rax, rdx
    jmp .Lmc_copy_fail
.Lmc_na_fixb:
    mov rax, rcx
    jmp .Lmc_copy_fail
    BM_ENDFUNC bulkmem_mc_copy_near_ahead

    // The per-page loop (`kernels::per_page::copy`): for each 4 KiB piece
    // (the last may be shorter) rep movsq over its qwords and rep movsb
    // over the rest, as the unchecked kernel's `copy_page` does. rdx
    // counts the bytes left from the current piece on, rax is the piece.
    BM_FUNC bulkmem_mc_copy_per_page
    mov r8, rcx
.Lmc_pp_piece:
    test rdx, rdx
    jz .Lmc_pp_done
    mov eax, 4096
    cmp rdx, rax
    cmovb rax, rdx
    mov rcx, rax
    shr rcx, 3
.Lmc_pp_0:
    rep movsq
.Lmc_pp_1:
    BM_EXTABLE .Lmc_pp_0, .Lmc_pp_1, .Lmc_pp_fixq
    mov ecx, eax
    and ecx, 7
.Lmc_pp_2:
    rep movsb
.Lmc_pp_3:
    BM_EXTABLE .Lmc_pp_2, .Lmc_pp_3, .Lmc_pp_fixb
    sub rdx, rax
    jmp .Lmc_pp_piece
.Lmc_pp_done:
    xor eax, eax
    ret
.Lmc_pp_fixq:
    // Left: the pieces after this one, the qwords not moved, the piece's
    // last len % 8 bytes.
    sub rdx, rax
    and eax, 7
    lea rax, [rax + 8 * rcx]
    add rax, rdx
    jmp .Lmc_copy_fail
.Lmc_pp_fixb:
    sub rdx, rax
    lea rax, [rdx + rcx]
    jmp .Lmc_copy_fail
    BM_ENDFUNC bulkmem_mc_copy_per_page

    // One byte at a time, with a fixup for the load and another for the
    // store: exact to the byte, and it knows which side faulted. Only ever
    // run over the bytes between where a fast routine stopped and its
    // fault.
    BM_FUNC bulkmem_mc_copy_bytes
    mov r8, rcx
    test rdx, rdx
    jz .Lmc_bytes_done
.Lmc_bytes_loop:
.Lmc_bytes_ld:
    mov al, byte ptr [rsi]
.Lmc_bytes_st:
    BM_EXTABLE .Lmc_bytes_ld, .Lmc_bytes_st, .Lmc_bytes_fixld
    mov byte ptr [rdi], al
.Lmc_bytes_after:
    BM_EXTABLE .Lmc_bytes_st, .Lmc_bytes_after, .Lmc_bytes_fixst
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
    BM_ENDFUNC bulkmem_mc_copy_bytes

    // Bounds the last routine for the test that checks each table entry
    // lies inside one routine.
    .globl bulkmem_mc_copy_text_end
    .hidden bulkmem_mc_copy_text_end
bulkmem_mc_copy_text_end:
    .popsection
"#,
    asm_epilogue!()
);

extern "C" {
    /// Non-zero: the string routines hand near-ahead copies to the checked
    /// `avx2` loop.
    static mut bulkmem_mc_near_ahead_avx2: u8;
}

/// Lets the checked string copies hand copies whose destination is just
/// ahead of the source to the checked `avx2` loop, as the unchecked ones
/// do (`kernels::rep::copy_near_ahead`), if this CPU has AVX2. Idempotent;
/// called wherever a checked string routine is handed out, before any
/// runs.
pub fn route_near_ahead() {
    if crate::machine::cpu::features().avx2 {
        // SAFETY: a byte of this object's data, only ever set to 1 here
        // (idempotently, so racing writers agree) and read by the
        // routines; a byte store is atomic on x86.
        unsafe { core::ptr::addr_of_mut!(bulkmem_mc_near_ahead_avx2).write_volatile(1) };
    }
}

/// A checked copy routine: see the module docs of `crate::checked::mc` for the
/// contract.
pub type McCopy = unsafe extern "C" fn(*mut u8, *const u8, usize, *mut RawFault) -> usize;

routines!(McCopy:
    bulkmem_mc_copy_movsb,
    bulkmem_mc_copy_movsq,
    bulkmem_mc_copy_per_page,
    bulkmem_mc_copy_bytes,
);

// Reached only by the string routines' jump: named for the table test.
#[cfg(test)]
routines!(McCopy: bulkmem_mc_copy_near_ahead);

extable!(
    bulkmem_mc_copy_extable,
    bulkmem_mc_copy_extable_end,
    bulkmem_mc_copy_text_end
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The 16-byte routine the string twins hand near-ahead copies to on
    /// CPUs without AVX2 (elsewhere the tests reach the `avx2` twin).
    #[test]
    fn the_sixteen_byte_routine_copies_exactly() {
        let src: Vec<u8> = (0..700u32).map(|i| (i * 13 + 5) as u8).collect();
        for len in [0, 1, 15, 63, 64, 65, 127, 128, 129, 200, 640] {
            for d_off in [0, 1, 8, 33] {
                let mut dst = vec![0xEEu8; 704];
                let mut info = RawFault::default();
                // SAFETY: both ranges lie in their vectors; no fault can
                // occur (so no handler is needed).
                let left = unsafe {
                    bulkmem_mc_copy_near_ahead(
                        dst.as_mut_ptr().add(d_off),
                        src.as_ptr(),
                        len,
                        &mut info,
                    )
                };
                assert_eq!(left, 0);
                assert_eq!(&dst[d_off..d_off + len], &src[..len], "{len} +{d_off}");
                assert!(dst[..d_off]
                    .iter()
                    .chain(&dst[d_off + len..])
                    .all(|&b| b == 0xEE));
            }
        }
    }

    #[test]
    fn every_entry_lies_in_its_routine() {
        // A lost or misplaced entry changes a count: the fault it covered
        // would kill the process instead of being reported.
        super::super::extable::check(
            &table(),
            &[
                ("movsb", bulkmem_mc_copy_movsb as McCopy as usize, 1),
                ("movsq", bulkmem_mc_copy_movsq as McCopy as usize, 2),
                (
                    "near_ahead",
                    bulkmem_mc_copy_near_ahead as McCopy as usize,
                    2,
                ),
                ("per_page", bulkmem_mc_copy_per_page as McCopy as usize, 2),
                ("bytes", bulkmem_mc_copy_bytes as McCopy as usize, 2),
            ],
            text_end(),
            fixup,
        );
    }
}
