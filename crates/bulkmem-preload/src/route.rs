//! The interposed `memcpy`, `memmove`, `memset`, `mempcpy` and their
//! fortified forms.
//!
//! Each is assembly. A call below its [`small::END`] slot (4 KiB copies,
//! 512-byte sets, where the C library is the next definition) is done
//! right there by [`small`]'s code, a leaf with unwind information, whose
//! compare with `END` also sends every other call on (label 9). A
//! call below [`MIN`](crate::calls::MIN) jumps to the C library's function once it is known:
//! a load, a compare, a load, a test and a jump. Any other call asks
//! [`route`] where to go, with its arguments saved, then jumps there with
//! them restored. So no Rust frame of this library is on the stack while
//! a copy runs: a program's fault handler that throws or exits the thread
//! from inside one unwinds through the small path's frame (no personality
//! routine: passed through, as C code), the engine (built to unwind) and
//! the C library, never through this `panic=abort` code, which would
//! abort.

use core::ffi::{c_int, c_void};
use core::sync::atomic::Ordering;

use crate::calls::{
    FORTIFIED, MEMCPY, MEMCPY_CHK, MEMMOVE, MEMMOVE_CHK, MEMPCPY, MEMSET, MEMSET_CHK, MIN,
};
use crate::{engine, next, small};
use bulkmem_preload_abi::sys;

/// Where a call of `call` with `n` bytes (`destlen`: the fortified forms'
/// object size) goes: the C library's function or its stand-in, a stand-in
/// that aborts (an overflow the C library's check was not there to
/// report), or the engine's. Opens the engine if this call is the first
/// that needs it.
extern "C" fn route(call: u32, n: usize, destlen: usize) -> *const c_void {
    let fortified = call >= FORTIFIED;
    if fortified && (n > destlen || n < MIN.load(Ordering::Relaxed)) {
        // The C library's checking function reports an overflow and aborts.
        let f = match call {
            MEMCPY_CHK => &next::MEMCPY_CHK,
            MEMMOVE_CHK => &next::MEMMOVE_CHK,
            _ => &next::MEMSET_CHK,
        };
        let p = f.get();
        if !p.is_null() {
            small::resolved(call as usize, p);
            return p;
        }
        if n > destlen {
            return overflow as *const c_void;
        }
    } else if n >= MIN.load(Ordering::Relaxed) {
        if let Some(e) = engine::get() {
            return match call {
                MEMCPY | MEMCPY_CHK => e.memcpy as *const c_void,
                MEMMOVE | MEMMOVE_CHK => e.memmove as *const c_void,
                MEMPCPY => e.mempcpy as *const c_void,
                _ => e.memset as *const c_void,
            };
        }
    }
    next::c_function(call % FORTIFIED)
}

/// A fortified call past its object while the C library's check is not
/// known: what the check would do, without its message.
extern "C" fn overflow() -> ! {
    // SAFETY: abort has no preconditions.
    unsafe { sys::abort() }
}

/// One interposed function: `$call`'s arguments (the length in rdx, a
/// fortified form's object size in rcx), `$fast` the C library's function
/// for the path below `MIN` (a [`next::Next`], whose first word is the
/// pointer), `$small` the [`small`] body that does calls below its
/// [`small::END`] slot here and sends the others to label 9, after
/// `$check` (a fortified form's overflow test, to label 9 too) and `$ret`
/// (the return value into rax, which the road from label 9 overwrites).
macro_rules! router {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*), $call:expr, $fast:path,
     $check:expr, $ret:expr, $small:expr, $($bounds:tt)*) => {
        // Each entry starts a cache line: in a section of its own, which
        // this directive (in the same object: the loader is one codegen
        // unit) aligns to 64 bytes. Left to the linker, an entry moved
        // with every change elsewhere in the library, and the small calls
        // measured 3-8% apart with it.
        core::arch::global_asm!(concat!(
            ".pushsection .text.bm_entry_",
            stringify!($name),
            ",\"ax\",@progbits\n.p2align 6\n.popsection"
        ));
        $(#[$doc])*
        ///
        /// # Safety
        /// The C library function's contract.
        #[no_mangle]
        #[unsafe(naked)]
        #[link_section = concat!(".text.bm_entry_", stringify!($name))]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> *mut c_void {
            core::arch::naked_asm!(
                ".cfi_startproc",
                $check,
                $ret,
                $small,
                "9:",
                "cmp rdx, qword ptr [rip + {min}]",
                "jae 8f",
                "mov rax, qword ptr [rip + {fast}]",
                "test rax, rax",
                "jz 8f",
                "jmp rax",
                "8:",
                "push rdi",
                ".cfi_adjust_cfa_offset 8",
                "push rsi",
                ".cfi_adjust_cfa_offset 8",
                "push rdx",
                ".cfi_adjust_cfa_offset 8",
                "push rcx",
                ".cfi_adjust_cfa_offset 8",
                "sub rsp, 8",
                ".cfi_adjust_cfa_offset 8",
                "mov edi, {call}",
                "mov rsi, rdx",
                "mov rdx, rcx",
                "call {route}",
                "add rsp, 8",
                ".cfi_adjust_cfa_offset -8",
                "pop rcx",
                ".cfi_adjust_cfa_offset -8",
                "pop rdx",
                ".cfi_adjust_cfa_offset -8",
                "pop rsi",
                ".cfi_adjust_cfa_offset -8",
                "pop rdi",
                ".cfi_adjust_cfa_offset -8",
                "jmp rax",
                ".cfi_endproc",
                end = sym small::END,
                wide = sym small::WIDE,
                min = sym MIN,
                fast = sym $fast,
                call = const $call,
                route = sym route,
                $($bounds)*
            )
        }
    };
}

// The templates of `router!`'s `$check` and `$ret`: a fortified call past
// its object takes the router, which reports it; `mempcpy` returns the end.
macro_rules! plain {
    () => {
        ""
    };
}
macro_rules! fortified_check {
    () => {
        "cmp rdx, rcx\nja 9f"
    };
}
macro_rules! return_dest {
    () => {
        "mov rax, rdi"
    };
}
macro_rules! return_end {
    () => {
        "lea rax, [rdi + rdx]"
    };
}

router!(
    memcpy(d: *mut c_void, s: *const c_void, n: usize),
    MEMCPY, next::MEMCPY, plain!(), return_dest!(), small::copy_body!(),
    short = sym small::SHORT,
);
router!(
    memmove(d: *mut c_void, s: *const c_void, n: usize),
    MEMMOVE, next::MEMMOVE, plain!(), return_dest!(), small::copy_body!(),
    short = sym small::SHORT,
);
router!(
    memset(d: *mut c_void, c: c_int, n: usize),
    MEMSET, next::MEMSET, plain!(), return_dest!(), small::set_body!(),
);
router!(
    mempcpy(d: *mut c_void, s: *const c_void, n: usize),
    MEMPCPY, next::MEMPCPY, plain!(), return_end!(), small::copy_body!(),
    short = sym small::SHORT,
);
router!(
    __memcpy_chk(d: *mut c_void, s: *const c_void, n: usize, destlen: usize),
    MEMCPY_CHK, next::MEMCPY_CHK, fortified_check!(), return_dest!(), small::copy_body!(),
    short = sym small::SHORT,
);
router!(
    __memmove_chk(d: *mut c_void, s: *const c_void, n: usize, destlen: usize),
    MEMMOVE_CHK, next::MEMMOVE_CHK, fortified_check!(), return_dest!(), small::copy_body!(),
    short = sym small::SHORT,
);
router!(
    __memset_chk(d: *mut c_void, c: c_int, n: usize, destlen: usize),
    MEMSET_CHK, next::MEMSET_CHK, fortified_check!(), return_dest!(), small::set_body!(),
);
