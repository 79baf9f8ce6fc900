//! The loader's side of the interface (`libbulkmem_preload.so`, the first
//! stage, crates/bulkmem-preload): its table, given once to
//! [`crate::bulkmem_preload_engine_attach`], and what the engine reads
//! through it: each thread's state (inside a handler, inside bulkmem), the
//! kernel's actions for SIGSEGV and SIGBUS, the set-up stack.
//!
//! Every entry point of the engine is reached only through the table
//! `attach` returns, after [`attach`] has stored the loader's: so
//! [`get`] is never called without one.

use std::sync::atomic::{AtomicPtr, Ordering};

use bulkmem_preload_abi::abi::{Loader, PerThread};

static LOADER: AtomicPtr<Loader> = AtomicPtr::new(std::ptr::null_mut());

/// Keeps the loader's table; false if one was kept already.
pub fn attach(l: &'static Loader) -> bool {
    LOADER
        .compare_exchange(
            std::ptr::null_mut(),
            (l as *const Loader).cast_mut(),
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_ok()
}

/// The loader's table.
#[inline]
pub fn get() -> &'static Loader {
    // SAFETY: set by `attach` before any entry point can run (see above),
    // to a table that lives as long as the process.
    unsafe { &*LOADER.load(Ordering::Acquire) }
}

/// This thread's state (in the loader's static TLS block).
#[inline]
pub fn thread() -> &'static PerThread {
    // SAFETY: the loader's block for this thread: valid as long as the
    // thread, reached by this thread only (PerThread is not Sync).
    unsafe { &*(get().thread)() }
}

/// Whether this thread is inside a signal handler of the program's.
pub fn in_handler() -> bool {
    thread().in_handler()
}

/// Runs `f` on the loader's set-up stack (see `abi::SETUP_STACK`); `None`
/// when that stack cannot be mapped.
pub fn on_own_stack<F: FnOnce() -> R, R>(f: F) -> Option<R> {
    struct Call<F, R> {
        f: Option<F>,
        r: Option<R>,
    }
    extern "C" fn run<F: FnOnce() -> R, R>(arg: *mut std::ffi::c_void) {
        // SAFETY: `on_own_stack` passes its `Call`, alive for this call.
        let c = unsafe { &mut *arg.cast::<Call<F, R>>() };
        if let Some(f) = c.f.take() {
            c.r = Some(f());
        }
    }
    let mut c = Call {
        f: Some(f),
        r: None,
    };
    (get().on_own_stack)(run::<F, R>, (&mut c as *mut Call<F, R>).cast());
    c.r
}

/// Puts the loader's trampoline in front of a SIGSEGV or SIGBUS handler
/// the loader did not install itself.
pub fn take_faults() {
    (get().take_faults)()
}

/// Whether the kernel's actions for SIGSEGV and SIGBUS are the loader's
/// (not displaced by a raw system call).
pub fn faults_ours() -> bool {
    (get().faults_ours)()
}

/// The loader declares the C library's types and constants itself (it is
/// built without the `libc` crate): checked against `libc` here, at
/// compile time. Its direct system calls (`call`) serve the engine too.
const _: () = {
    use bulkmem_preload_abi::sys as s;
    use std::mem::{offset_of, size_of};
    assert!(size_of::<s::Sigaction>() == size_of::<libc::sigaction>());
    assert!(offset_of!(s::Sigaction, sa_mask) == offset_of!(libc::sigaction, sa_mask));
    assert!(offset_of!(s::Sigaction, sa_flags) == offset_of!(libc::sigaction, sa_flags));
    assert!(offset_of!(s::Sigaction, sa_restorer) == offset_of!(libc::sigaction, sa_restorer));
    assert!(size_of::<s::SigSet>() == size_of::<libc::sigset_t>());
    assert!(s::SIGBUS == libc::SIGBUS && s::SIGSEGV == libc::SIGSEGV);
    assert!(s::SA_SIGINFO == libc::SA_SIGINFO && s::SA_RESTART == libc::SA_RESTART);
    assert!(s::SA_NODEFER == libc::SA_NODEFER && s::SA_RESETHAND == libc::SA_RESETHAND);
    assert!(s::SIG_DFL == libc::SIG_DFL && s::SIG_IGN == libc::SIG_IGN);
    assert!(s::SIG_ERR == libc::SIG_ERR);
    assert!(s::SIG_BLOCK == libc::SIG_BLOCK && s::SIG_UNBLOCK == libc::SIG_UNBLOCK);
    assert!(s::SIG_SETMASK == libc::SIG_SETMASK);
    assert!(s::ENOSYS == libc::ENOSYS);
    assert!(s::SYS_RT_SIGACTION == libc::SYS_rt_sigaction && s::SYS_TGKILL == libc::SYS_tgkill);
    assert!(s::SYS_OPENAT == libc::SYS_openat && s::SYS_PRLIMIT64 == libc::SYS_prlimit64);
    assert!(s::SYS_MMAP == libc::SYS_mmap && s::SYS_MUNMAP == libc::SYS_munmap);
    assert!(s::SYS_MPROTECT == libc::SYS_mprotect && s::SYS_READ == libc::SYS_read);
    assert!(s::SYS_CLOSE == libc::SYS_close && s::SYS_GETPID == libc::SYS_getpid);
    assert!(s::SYS_GETTID == libc::SYS_gettid && s::AT_FDCWD == libc::AT_FDCWD as i64);
    assert!(s::O_RDONLY_CLOEXEC == (libc::O_RDONLY | libc::O_CLOEXEC) as i64);
    assert!(
        s::MAP_STACK_ANON
            == (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK)
                as i64
    );
    assert!(s::PROT_READ_WRITE == (libc::PROT_READ | libc::PROT_WRITE) as i64);
    assert!(s::RLIMIT_AS == libc::RLIMIT_AS as i64 && s::RLIMIT_DATA == libc::RLIMIT_DATA as i64);
    assert!(s::RLIM_INFINITY == libc::RLIM_INFINITY);
    assert!(size_of::<s::KernelSigaction>() == 32);
    assert!(s::PR_SET_SECCOMP == libc::PR_SET_SECCOMP);
    assert!(s::RTLD_NOW == libc::RTLD_NOW && s::RTLD_LOCAL == libc::RTLD_LOCAL);
    assert!(s::RTLD_NODELETE == libc::RTLD_NODELETE);
    assert!(s::AT_SECURE == libc::AT_SECURE);
    assert!(s::SYS_RT_SIGPROCMASK == libc::SYS_rt_sigprocmask);
};
