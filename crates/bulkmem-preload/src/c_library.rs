//! Where the C library's code is: its executable segments, found once in
//! the constructor (`dl_iterate_phdr`, which reads the dynamic loader's
//! list of objects and opens nothing), so that whether a function pointer
//! is the C library's own can be told later by comparisons alone, even in
//! a signal handler.
//!
//! The small path ([`crate::small`]) runs only for functions whose next
//! definition is the C library's: another interposer between the program
//! and the C library (a sanitizer's interceptor, a program's own
//! `memcpy`) sees every call, as without the preload.

use core::ffi::{c_char, c_int, c_void, CStr};
use core::sync::atomic::{AtomicUsize, Ordering};

/// Up to this many executable segments (glibc's libc.so.6 has one).
const SEGMENTS: usize = 4;

/// `[start, end)` of each executable segment; empty ones are 0..0.
static TEXT: [[AtomicUsize; 2]; SEGMENTS] =
    [const { [AtomicUsize::new(0), AtomicUsize::new(0)] }; SEGMENTS];

/// glibc's `struct dl_phdr_info`, the fields before the ones added later.
#[repr(C)]
struct PhdrInfo {
    addr: usize,
    name: *const c_char,
    phdr: *const Phdr,
    phnum: u16,
}

/// `Elf64_Phdr`.
#[repr(C)]
struct Phdr {
    kind: u32,
    flags: u32,
    offset: u64,
    vaddr: u64,
    paddr: u64,
    filesz: u64,
    memsz: u64,
    align: u64,
}

const PT_LOAD: u32 = 1;
const PF_X: u32 = 1;

#[link(name = "c")]
extern "C" {
    fn dl_iterate_phdr(
        f: extern "C" fn(*mut PhdrInfo, usize, *mut c_void) -> c_int,
        data: *mut c_void,
    ) -> c_int;
}

/// Finds the C library (`libc.so.6`) among the loaded objects and keeps
/// its executable segments. In the constructor.
pub fn find() {
    // SAFETY: a callback of the right type; it reads what the loader
    // passes, for the duration of each call.
    unsafe { dl_iterate_phdr(each, core::ptr::null_mut()) };
}

extern "C" fn each(info: *mut PhdrInfo, _size: usize, _data: *mut c_void) -> c_int {
    // SAFETY: the loader passes a valid info for this call.
    let info = unsafe { &*info };
    if info.name.is_null() {
        return 0;
    }
    // SAFETY: a NUL-terminated path the loader keeps.
    let name = unsafe { CStr::from_ptr(info.name) }.to_bytes();
    let file = name.rsplit(|&b| b == b'/').next().unwrap_or(name);
    if file != b"libc.so.6" {
        return 0;
    }
    let mut k = 0;
    for i in 0..usize::from(info.phnum) {
        // SAFETY: `phnum` headers at `phdr`.
        let ph = unsafe { &*info.phdr.add(i) };
        if ph.kind == PT_LOAD && ph.flags & PF_X != 0 && k < SEGMENTS {
            let start = info.addr.wrapping_add(ph.vaddr as usize);
            TEXT[k][0].store(start, Ordering::Relaxed);
            TEXT[k][1].store(start.wrapping_add(ph.memsz as usize), Ordering::Release);
            k += 1;
        }
    }
    1
}

/// Whether `p` is in the C library's code. Async-signal-safe.
pub fn contains(p: *const c_void) -> bool {
    let p = p as usize;
    TEXT.iter().any(|[start, end]| {
        let end = end.load(Ordering::Acquire);
        p >= start.load(Ordering::Relaxed) && p < end
    })
}
