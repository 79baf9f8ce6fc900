//! The loader's side of the interface (`libbulkmem_preload.so`, the first
//! stage, crates/bulkmem-preload-loader): its table, given once to
//! [`crate::bulkmem_preload_engine_attach`], and what the engine reads
//! through it: each thread's state, the signal handler depth, the fault
//! handler's place in front of SIGSEGV and SIGBUS.
//!
//! Every entry point of the engine is reached only through the table
//! `attach` returns, after [`attach`] has stored the loader's: so
//! [`get`] is never called without one.

use std::sync::atomic::{AtomicPtr, Ordering};

use crate::abi::{Loader, PerThread};

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
    thread().depth.get() != 0
}

/// Puts bulkmem's fault handler in front of SIGSEGV and SIGBUS (through
/// the loader, which keeps the program's view of them).
pub fn take_faults() {
    (get().take_faults)()
}

/// Whether bulkmem's fault handler is (still) in front.
pub fn faults_ours() -> bool {
    (get().faults_ours)()
}

/// The loader declares the C library's types and constants itself (it is
/// built without the `libc` crate): checked against `libc` here, at
/// compile time.
#[path = "../../bulkmem-preload-loader/src/sys.rs"]
#[allow(dead_code, clashing_extern_declarations)]
mod loader_sys;

const _: () = {
    use loader_sys as s;
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
    assert!(s::EINVAL == libc::EINVAL && s::ENOSYS == libc::ENOSYS);
    assert!(s::PR_SET_SECCOMP == libc::PR_SET_SECCOMP);
    assert!(s::RTLD_NOW == libc::RTLD_NOW && s::RTLD_LOCAL == libc::RTLD_LOCAL);
    assert!(s::RTLD_NODELETE == libc::RTLD_NODELETE);
    assert!(s::AT_SECURE == libc::AT_SECURE);
    assert!(s::SYS_RT_SIGPROCMASK == libc::SYS_rt_sigprocmask);
};
