//! Programs run under a sanitizer or valgrind see the C library's calls
//! only: their tools watch memory through the C library's functions (or
//! their own interceptors of them), and an answer from bulkmem first would
//! hide what they look for (an overflowing `memcpy` under ASan with its
//! link-order check off went unreported). Checked at the first large call,
//! not at start-up: most processes never make one.

use std::ffi::CStr;

/// The tool this process runs under, if any.
pub fn present() -> Option<&'static str> {
    if running_on_valgrind() {
        return Some("valgrind");
    }
    for (sym, name) in [
        (c"__asan_init", "AddressSanitizer"),
        (c"__hwasan_init", "HWAddressSanitizer"),
        (c"__tsan_init", "ThreadSanitizer"),
        (c"__msan_init", "MemorySanitizer"),
    ] {
        if defined(sym) {
            return Some(name);
        }
    }
    None
}

fn defined(sym: &CStr) -> bool {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches every object.
    !unsafe { libc::dlsym(libc::RTLD_DEFAULT, sym.as_ptr()) }.is_null()
}

/// valgrind's RUNNING_ON_VALGRIND client request: a sequence of rotations
/// that leaves rdx as it was on a real CPU, and which valgrind recognises
/// and answers (the number of valgrinds the program runs under).
fn running_on_valgrind() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // VG_USERREQ__RUNNING_ON_VALGRIND.
        let args: [u64; 6] = [0x1001, 0, 0, 0, 0, 0];
        let mut r: u64 = 0;
        // SAFETY: rotations of rdi by 64 bits in all (a no-op) and an
        // exchange of rbx with itself; valgrind replaces the sequence
        // with its answer in rdx. Only rdx and the flags change.
        unsafe {
            core::arch::asm!(
                "rol rdi, 3", "rol rdi, 13", "rol rdi, 61", "rol rdi, 51",
                "xchg rbx, rbx",
                inout("rdx") r,
                inout("rdi") 0u64 => _,
                in("rax") args.as_ptr(),
                options(nostack, readonly),
            );
        }
        r != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}
