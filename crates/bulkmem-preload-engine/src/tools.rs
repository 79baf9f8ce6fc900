//! Programs run under a sanitizer or valgrind see the C library's calls
//! only: their tools watch memory through the C library's functions (or
//! their own interceptors of them), and an answer from bulkmem first would
//! hide what they look for (an overflowing `memcpy` under ASan with its
//! link-order check off went unreported). Checked at the first large call,
//! not at start-up: most processes never make one.

use std::ffi::CStr;

/// The tool this process runs under, if any.
pub fn present() -> Option<&'static str> {
    if (crate::loader::get().on_valgrind)() {
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
