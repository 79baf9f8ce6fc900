//! Helper threads the C library never hears of: started with the `clone`
//! system call on a stack of their own, joined by waiting for the kernel to
//! clear their thread id.
//!
//! A thread started with `pthread_create` changes the process for good in
//! ways the program can see: glibc's first one installs its SIGSETXID
//! handler (`SigCgt` in `/proc/PID/status` shows signal 33) and clears
//! `__libc_single_threaded`, which turns the program's own `malloc` and
//! `shared_ptr` onto their multi-threaded paths. A helper does nothing that
//! needs the C library's thread state: it runs checked routines, atomics
//! and raw `futex` calls, never allocates or frees, never touches `errno`,
//! and leaves with the `exit` system call. It shares its starter's
//! thread-pointer register (no TLS of its own), which nothing it runs reads.
//!
//! The stack is mapped per thread (with a guard page below it) and unmapped
//! once the thread is gone: the kernel clears the id word at the top of the
//! mapping (`CLONE_CHILD_CLEARTID`) when the thread no longer runs on it.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

const GUARD: usize = 4096;
/// The thread-id word and the start of the stack below it, at the top of
/// the mapping.
const TOP_RESERVE: usize = 64;

const CLONE_FLAGS: u64 = (libc::CLONE_VM
    | libc::CLONE_FS
    | libc::CLONE_FILES
    | libc::CLONE_SIGHAND
    | libc::CLONE_THREAD
    | libc::CLONE_SYSVSEM
    | libc::CLONE_PARENT_SETTID
    | libc::CLONE_CHILD_CLEARTID) as u64;

// `bulkmem_preload_clone(flags, stack_top, tid_word, f, arg)`: the new
// thread calls `f(arg)` on `stack_top` and exits; the caller gets its id
// or -errno.
std::arch::global_asm!(
    ".pushsection .text.bulkmem_preload_clone,\"ax\",@progbits",
    ".p2align 4",
    ".hidden bulkmem_preload_clone",
    ".type bulkmem_preload_clone,@function",
    "bulkmem_preload_clone:",
    ".cfi_startproc",
    "sub rsi, 16",
    "mov qword ptr [rsi], rcx",
    "mov qword ptr [rsi + 8], r8",
    "mov r10, rdx",
    "xor r8d, r8d",
    "mov eax, 56",
    "syscall",
    "test rax, rax",
    "jz 2f",
    "ret",
    "2:",
    ".cfi_undefined rip",
    "xor ebp, ebp",
    "pop rax",
    "pop rdi",
    "call rax",
    "xor edi, edi",
    "mov eax, 60",
    "syscall",
    "ud2",
    ".cfi_endproc",
    ".size bulkmem_preload_clone, . - bulkmem_preload_clone",
    ".popsection",
);

extern "C" {
    #[link_name = "bulkmem_preload_clone"]
    fn clone_raw(
        flags: u64,
        stack_top: usize,
        tid: *mut u32,
        f: extern "C" fn(*mut c_void),
        arg: *mut c_void,
    ) -> i64;
}

/// System calls made directly, never touching `errno` (the loader's: a
/// helper has no `errno` of its own, and a copy must leave the caller's as
/// it was).
pub use bulkmem_preload_abi::sys::call as syscall;

/// This thread's id (the kernel's).
pub fn gettid() -> u32 {
    // SAFETY: no arguments.
    unsafe { syscall(libc::SYS_gettid, &[]) as u32 }
}

/// The stacks of the helpers alive, with the thread that started each:
/// the signal trampoline asks whether a signal landed on one
/// ([`owner_of_stack`]). A slot is the stack mapping's base (0: free).
const SLOTS: usize = 128;
static STACK_BASE: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static STACK_LEN: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static STACK_OWNER: [AtomicU32; SLOTS] = [const { AtomicU32::new(0) }; SLOTS];

fn register(base: usize, len: usize, owner: u32) -> Option<usize> {
    (0..SLOTS).find(|&i| {
        if STACK_BASE[i]
            .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        STACK_LEN[i].store(len, Ordering::Relaxed);
        STACK_OWNER[i].store(owner, Ordering::Relaxed);
        STACK_BASE[i].store(base, Ordering::Release);
        true
    })
}

fn unregister(slot: usize) {
    STACK_BASE[slot].store(0, Ordering::Release);
}

/// The thread that started the helper whose stack holds `addr`, if one
/// does. Async-signal-safe.
pub fn owner_of_stack(addr: usize) -> Option<u32> {
    (0..SLOTS).find_map(|i| {
        let base = STACK_BASE[i].load(Ordering::Acquire);
        (base != 0
            && base != usize::MAX
            && addr >= base
            && addr - base < STACK_LEN[i].load(Ordering::Relaxed))
        .then(|| STACK_OWNER[i].load(Ordering::Relaxed))
    })
}

/// In a child of `fork`: no helper exists here.
pub fn forget_all() {
    for b in &STACK_BASE {
        b.store(0, Ordering::Relaxed);
    }
}

/// A started thread, to be [`RawThread::join`]ed.
pub struct RawThread {
    base: usize,
    len: usize,
    slot: Option<usize>,
    /// The kernel's id for it (clone's answer).
    id: u32,
}

impl RawThread {
    fn tid(&self) -> &AtomicU32 {
        // SAFETY: the word lies in our mapping, which lives until `join`
        // unmaps it; the kernel writes it atomically.
        unsafe { AtomicU32::from_ptr((self.base + self.len - 8) as *mut u32) }
    }

    /// Starts `f(arg)` on a new thread with `stack` bytes of stack; `None`
    /// if the stack cannot be mapped or the kernel refuses the thread.
    /// The thread inherits the caller's signal mask.
    pub fn spawn(stack: usize, f: extern "C" fn(*mut c_void), arg: *mut c_void) -> Option<Self> {
        let len = stack + GUARD + TOP_RESERVE;
        // SAFETY: an anonymous private mapping of our own.
        let base = unsafe {
            syscall(
                libc::SYS_mmap,
                &[
                    0,
                    len,
                    (libc::PROT_READ | libc::PROT_WRITE) as usize,
                    (libc::MAP_PRIVATE
                        | libc::MAP_ANONYMOUS
                        | libc::MAP_NORESERVE
                        | libc::MAP_STACK) as usize,
                    usize::MAX, // fd -1
                    0,
                ],
            )
        };
        if base < 0 {
            return None;
        }
        // SAFETY: the lowest page of our own mapping.
        unsafe {
            syscall(
                libc::SYS_mprotect,
                &[base as usize, GUARD, libc::PROT_NONE as usize],
            )
        };
        // Known as a helper's before it can run (or take a signal).
        let slot = register(base as usize, len, gettid());
        let mut t = RawThread {
            base: base as usize,
            len,
            slot,
            id: 0,
        };
        let top = (t.base + len - TOP_RESERVE) & !15;
        // SAFETY: `top` is the 16-aligned top of our mapping's stack part,
        // the id word lies above it; `f` takes `arg`.
        let r = unsafe { clone_raw(CLONE_FLAGS, top, t.tid().as_ptr(), f, arg) };
        if r <= 0 {
            t.unmap();
            return None;
        }
        t.id = r as u32;
        Some(t)
    }

    /// Waits until the thread is gone, and frees its stack.
    pub fn join(self) {
        let w = self.tid();
        loop {
            let v = w.load(Ordering::Acquire);
            if v == 0 {
                break;
            }
            // SAFETY: FUTEX_WAIT (shared: the kernel's wake at the thread's
            // exit is) on our live word with the value just read.
            unsafe {
                syscall(
                    libc::SYS_futex,
                    &[
                        w.as_ptr() as usize,
                        libc::FUTEX_WAIT as usize,
                        v as usize,
                        0,
                    ],
                )
            };
        }
        // The id word is cleared when the thread lets go of its memory,
        // a moment before the kernel takes it out of the thread group: a
        // program that asks right after the call returns (a /proc/self/task
        // count, unshare(CLONE_NEWUSER), which wants one thread) must not
        // see it. Gone means tgkill answers ESRCH.
        // SAFETY: getpid has no arguments.
        let pid = unsafe { syscall(libc::SYS_getpid, &[]) } as usize;
        for _ in 0..1_000_000 {
            // SAFETY: signal 0 checks the thread's existence, sends nothing.
            let r = unsafe { syscall(libc::SYS_tgkill, &[pid, self.id as usize, 0]) };
            if r == -(libc::ESRCH as isize) {
                break;
            }
            // SAFETY: no arguments.
            unsafe { syscall(libc::SYS_sched_yield, &[]) };
        }
        self.unmap();
    }

    fn unmap(self) {
        if let Some(slot) = self.slot {
            unregister(slot);
        }
        // SAFETY: our own mapping, no longer used by any thread.
        unsafe { syscall(libc::SYS_munmap, &[self.base, self.len]) };
    }
}
