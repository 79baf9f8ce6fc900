//! A stack of the loader's for bulkmem's one-time set-up (opening the
//! engine, building its policy), which needs 64-96 KiB: a caller on a
//! 16 KiB thread stack, a coroutine's or under `ulimit -s 64` has less.
//! The stack is mapped for the call, with a guard page below it, and
//! unmapped after; a program's handler that leaves the set-up with
//! `siglongjmp` leaves the mapping behind (1 MiB of address space, most
//! of it never touched).

use core::ffi::c_void;

use crate::thread;
use bulkmem_preload_abi::abi::SETUP_STACK;
use bulkmem_preload_abi::sys;

const GUARD: usize = 4096;

// `bulkmem_preload_on_stack(f, arg, top)`: calls `f(arg)` with the stack
// pointer at `top`, then comes back to the caller's stack. The frame is
// kept in rbp, which the call-frame information names, so that an unwinder
// or a backtrace taken on the new stack walks on to the caller.
core::arch::global_asm!(
    ".pushsection .text.bulkmem_preload_on_stack,\"ax\",@progbits",
    ".p2align 4",
    ".hidden bulkmem_preload_on_stack",
    ".type bulkmem_preload_on_stack,@function",
    "bulkmem_preload_on_stack:",
    ".cfi_startproc",
    "push rbp",
    ".cfi_adjust_cfa_offset 8",
    ".cfi_offset rbp, -16",
    "mov rbp, rsp",
    ".cfi_def_cfa_register rbp",
    "mov rsp, rdx",
    "mov rax, rdi",
    "mov rdi, rsi",
    "call rax",
    "mov rsp, rbp",
    ".cfi_def_cfa_register rsp",
    "pop rbp",
    ".cfi_adjust_cfa_offset -8",
    "ret",
    ".cfi_endproc",
    ".size bulkmem_preload_on_stack, . - bulkmem_preload_on_stack",
    ".popsection",
);

extern "C" {
    #[link_name = "bulkmem_preload_on_stack"]
    fn on_stack(f: extern "C" fn(*mut c_void), arg: *mut c_void, top: usize);
}

/// Runs `f(arg)` on a stack of [`SETUP_STACK`] bytes, as bulkmem's own
/// code; false, without running it, if the stack cannot be mapped.
pub extern "C" fn on_own_stack(f: extern "C" fn(*mut c_void), arg: *mut c_void) -> bool {
    let len = SETUP_STACK + GUARD;
    // SAFETY: an anonymous private mapping of our own; no memory
    // arguments.
    let base = unsafe {
        sys::call(
            sys::SYS_MMAP,
            &[
                0,
                len,
                sys::PROT_READ_WRITE as usize,
                sys::MAP_STACK_ANON as usize,
                usize::MAX, // fd -1
                0,
            ],
        )
    };
    if base < 0 {
        return false;
    }
    // SAFETY: the guard page is the lowest page of our own mapping.
    unsafe {
        sys::call(
            sys::SYS_MPROTECT,
            &[base as usize, GUARD, sys::PROT_NONE as usize],
        )
    };
    let top = base as usize + len;
    let t = thread::this();
    let was = t.inside_at.replace(top);
    // SAFETY: `top` is the 16-aligned end of a mapping of ours, which
    // stays mapped until `f` is back; `f` is a function of this signature.
    unsafe { on_stack(f, arg, top) };
    t.leave(was);
    // SAFETY: our own mapping, no longer in use.
    unsafe { sys::call(sys::SYS_MUNMAP, &[base as usize, len]) };
    true
}
