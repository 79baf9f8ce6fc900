//! The C library's functions and constants the loader uses, declared here:
//! the loader is compiled without cargo (see crates/bulkmem-preload's
//! Cargo.toml), so without the `libc` crate. x86_64 Linux, glibc. The
//! engine checks these against `libc` at compile time
//! (`crates/bulkmem-preload-engine/src/loader.rs`) and makes its direct
//! system calls with [`call`].

use core::ffi::{c_char, c_int, c_long, c_ulong, c_void};

/// The kernel's `sigset_t` as glibc lays it out (1024 bits).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct SigSet {
    pub bits: [u64; 16],
}

/// glibc's `struct sigaction` on x86_64.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Sigaction {
    pub sa_sigaction: usize,
    pub sa_mask: SigSet,
    pub sa_flags: c_int,
    pub sa_restorer: usize,
}

impl Sigaction {
    pub const EMPTY: Sigaction = Sigaction {
        sa_sigaction: SIG_DFL,
        sa_mask: SigSet { bits: [0; 16] },
        sa_flags: 0,
        sa_restorer: 0,
    };
}

/// The kernel's `struct sigaction` on x86_64 (`rt_sigaction`'s), with
/// its 8-byte mask.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelSigaction {
    pub handler: usize,
    pub flags: u64,
    pub restorer: usize,
    pub mask: u64,
}

impl KernelSigaction {
    pub const DEFAULT: KernelSigaction = KernelSigaction {
        handler: SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
}

/// `rt_sigaction` as the raw system call: reaches the kernel whoever
/// interposes `sigaction`, and is async-signal-safe. Returns 0 or -errno.
#[inline]
pub fn rt_sigaction(
    sig: c_int,
    act: Option<&KernelSigaction>,
    old: Option<&mut KernelSigaction>,
) -> isize {
    let act = act.map_or(core::ptr::null(), |a| a as *const KernelSigaction);
    let old = old.map_or(core::ptr::null_mut(), |o| o as *mut KernelSigaction);
    // SAFETY: valid kernel sigaction structs (or null) and the 8-byte mask
    // size the kernel expects.
    unsafe {
        call(
            SYS_RT_SIGACTION,
            &[sig as usize, act as usize, old as usize, 8],
        )
    }
}

/// The handler the kernel has for `sig` now (`SIG_ERR` if it cannot say).
#[inline]
pub fn kernel_handler(sig: c_int) -> usize {
    let mut cur = KernelSigaction::DEFAULT;
    if rt_sigaction(sig, None, Some(&mut cur)) == 0 {
        cur.handler
    } else {
        SIG_ERR
    }
}

pub const SIGBUS: c_int = 7;
pub const SIGSEGV: c_int = 11;
pub const SA_SIGINFO: c_int = 4;
pub const SA_RESTART: c_int = 0x1000_0000;
pub const SA_NODEFER: c_int = 0x4000_0000;
pub const SA_RESETHAND: c_int = 0x8000_0000_u32 as c_int;
pub const SIG_DFL: usize = 0;
pub const SIG_IGN: usize = 1;
pub const SIG_HOLD: usize = 2;
pub const SIG_ERR: usize = usize::MAX;
pub const SIG_BLOCK: c_int = 0;
pub const SIG_UNBLOCK: c_int = 1;
pub const SIG_SETMASK: c_int = 2;
pub const ENOSYS: c_int = 38;
pub const PR_SET_SECCOMP: c_int = 22;
pub const RTLD_NOW: c_int = 2;
pub const RTLD_LOCAL: c_int = 0;
pub const RTLD_NODELETE: c_int = 0x1000;
pub const AT_SECURE: c_ulong = 23;
pub const SYS_RT_SIGPROCMASK: c_long = 14;
pub const SYS_RT_SIGACTION: c_long = 13;
pub const SYS_READ: c_long = 0;
pub const SYS_CLOSE: c_long = 3;
pub const SYS_MMAP: c_long = 9;
pub const SYS_MPROTECT: c_long = 10;
pub const SYS_MUNMAP: c_long = 11;
pub const SYS_GETPID: c_long = 39;
pub const SYS_GETTID: c_long = 186;
pub const SYS_TGKILL: c_long = 234;
pub const SYS_OPENAT: c_long = 257;
pub const SYS_PRLIMIT64: c_long = 302;
pub const AT_FDCWD: c_long = -100;
pub const O_RDONLY_CLOEXEC: c_long = 0o2000000;
pub const PROT_NONE: c_long = 0;
pub const PROT_READ_WRITE: c_long = 3;
/// `MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK`.
pub const MAP_STACK_ANON: c_long = 0x02 | 0x20 | 0x4000 | 0x20000;
pub const RLIMIT_DATA: c_long = 2;
pub const RLIMIT_AS: c_long = 9;
pub const RLIM_INFINITY: u64 = !0;

/// Every signal but those a faulting instruction raises (SIGILL, SIGTRAP,
/// SIGBUS, SIGFPE, SIGSEGV, SIGSYS), as a kernel mask.
pub const ASYNCHRONOUS: u64 = !((1 << (4 - 1))
    | (1 << (5 - 1))
    | (1 << (7 - 1))
    | (1 << (8 - 1))
    | (1 << (11 - 1))
    | (1 << (31 - 1)));

/// valgrind's RUNNING_ON_VALGRIND client request: a sequence of rotations
/// that leaves rdx as it was on a real CPU, and which valgrind recognises
/// and answers (the number of valgrinds the program runs under).
pub extern "C" fn running_on_valgrind() -> bool {
    // VG_USERREQ__RUNNING_ON_VALGRIND.
    let args: [u64; 6] = [0x1001, 0, 0, 0, 0, 0];
    let mut r: u64 = 0;
    // SAFETY: rotations of rdi by 64 bits in all (a no-op) and an exchange
    // of rbx with itself; valgrind replaces the sequence with its answer
    // in rdx. Only rdx and the flags change.
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

/// `RTLD_NEXT`.
pub fn rtld_next() -> *mut c_void {
    -1isize as *mut c_void
}

#[link(name = "c")]
extern "C" {
    pub fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
    pub fn dlopen(file: *const c_char, flags: c_int) -> *mut c_void;
    pub fn dlerror() -> *mut c_char;
    pub fn getenv(name: *const c_char) -> *mut c_char;
    pub fn getauxval(kind: c_ulong) -> c_ulong;
    pub fn write(fd: c_int, buf: *const c_void, n: usize) -> isize;
    pub fn __errno_location() -> *mut c_int;
    pub fn abort() -> !;
    pub fn sigemptyset(set: *mut SigSet) -> c_int;
    pub fn sigaddset(set: *mut SigSet, sig: c_int) -> c_int;
    pub fn pthread_sigmask(how: c_int, set: *const SigSet, old: *mut SigSet) -> c_int;
    pub fn pthread_atfork(
        prepare: Option<extern "C" fn()>,
        parent: Option<extern "C" fn()>,
        child: Option<extern "C" fn()>,
    ) -> c_int;
}

/// System call `n` with `args` (at most six), made directly: the kernel's
/// result, `-errno` on failure. Never touches `errno` (glibc's `syscall`
/// sets it), which a `memcpy` must leave as it found it.
///
/// # Safety
/// The system call's own contract for its arguments.
#[inline]
pub unsafe fn call(n: c_long, args: &[usize]) -> isize {
    let mut a = [0usize; 6];
    a[..args.len()].copy_from_slice(args);
    let r: isize;
    // SAFETY: the caller's contract; the syscall instruction clobbers rcx
    // and r11 only.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") n as isize => r,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        )
    };
    r
}

#[inline]
pub fn set_errno(e: c_int) {
    // SAFETY: errno is this thread's.
    unsafe { *__errno_location() = e };
}

/// `rt_sigprocmask` with the kernel's 8-byte set, as the raw system call:
/// glibc's `sigprocmask` drops its own signals (SIGCANCEL) from any set,
/// so restoring a saved mask with it would unblock a blocked SIGCANCEL.
#[inline]
pub fn sigprocmask_raw(how: c_int, set: u64) -> u64 {
    let mut old = 0u64;
    // SAFETY: valid 8-byte sets for the kernel, on this thread.
    unsafe {
        call(
            SYS_RT_SIGPROCMASK,
            &[
                how as usize,
                &set as *const u64 as usize,
                &mut old as *mut u64 as usize,
                8,
            ],
        )
    };
    old
}

/// A message on stderr, best effort (a closed or full stderr loses it).
pub fn warn(parts: &[&[u8]]) {
    for p in parts {
        let mut b = *p;
        while !b.is_empty() {
            // SAFETY: a valid buffer of b.len() bytes.
            let n = unsafe { write(2, b.as_ptr().cast(), b.len()) };
            if n <= 0 {
                return;
            }
            b = &b[n as usize..];
        }
    }
}
