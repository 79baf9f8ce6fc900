//! Each thread's [`PerThread`], in this library's static TLS block.
//!
//! Stable Rust without the standard library has no thread-locals, so the
//! block is declared in assembly with the initial-exec model: the loader
//! is loaded with the program (`LD_PRELOAD`), its block is part of every
//! thread's initial TLS, and an access is two instructions that never
//! allocate or lock (a signal handler, or a call from inside `malloc`, may
//! make one).

use bulkmem_preload_abi::abi::PerThread;

core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 4",
    "bulkmem_preload_tls:",
    ".zero 192",
    ".popsection",
    ".pushsection .text.bulkmem_preload_thread,\"ax\",@progbits",
    ".p2align 4",
    ".globl bulkmem_preload_thread",
    ".hidden bulkmem_preload_thread",
    ".type bulkmem_preload_thread,@function",
    "bulkmem_preload_thread:",
    ".cfi_startproc",
    "mov rax, qword ptr [rip + bulkmem_preload_tls@GOTTPOFF]",
    "add rax, qword ptr fs:[0]",
    "ret",
    ".cfi_endproc",
    ".size bulkmem_preload_thread, . - bulkmem_preload_thread",
    ".popsection",
);

const _: () = assert!(core::mem::size_of::<PerThread>() <= 192);

extern "C" {
    /// The address of this thread's block (zeroed at thread start, which
    /// is the state "outside everything").
    #[link_name = "bulkmem_preload_thread"]
    pub fn thread_ptr() -> *mut PerThread;
}

/// The function the engine is given to reach the same block.
pub extern "C" fn thread_for_engine() -> *mut PerThread {
    // SAFETY: the assembly above: no arguments, no side effects.
    unsafe { thread_ptr() }
}

/// This thread's state.
#[inline(always)]
pub fn this() -> &'static PerThread {
    // SAFETY: the block lives as long as the thread, is only reached by
    // this thread, and zero bytes are a valid PerThread (0, false, null).
    unsafe { &*thread_ptr() }
}

/// Whether this thread is inside a signal handler of the program's.
#[inline]
pub fn in_handler() -> bool {
    this().in_handler()
}

/// Whether this thread runs bulkmem's own code.
#[inline]
pub fn inside() -> bool {
    this().inside()
}
