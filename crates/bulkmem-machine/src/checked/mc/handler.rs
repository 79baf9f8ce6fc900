//! The SIGBUS and SIGSEGV handler: resumes a checked routine at its fixup
//! when the fault is ours, and passes every other signal on to whoever had
//! it before bulkmem.
//!
//! "Ours" means: the kernel raised it for a memory access (`si_code > 0`,
//! not `kill`/`raise`/`sigqueue`) and the interrupted instruction pointer is
//! in one of the exception tables. A synchronous fault is delivered to the
//! thread that faulted, so the instruction pointer in the ucontext is that
//! thread's: no per-thread state is needed, and many threads can fault at
//! once. SIGBUS is a bad page (poison, a file mapping past its end);
//! SIGSEGV an unmapped or protected one (`PROT_NONE`, a read-only
//! destination).
//!
//! Everything the handler does is async-signal-safe: it reads static
//! tables, rewrites the interrupted context, and when chaining calls
//! `sigaction`, `pthread_sigmask`, `raise` or the previous handler itself.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::extable::RawFault;

/// The signals bulkmem takes, in [`slot`] order.
const SIGNALS: [libc::c_int; 2] = [libc::SIGBUS, libc::SIGSEGV];

/// The disposition a signal had before bulkmem took it, in one of two
/// slots so that [`reinstall`] can publish a new one without writing the
/// slot a running handler may be reading.
struct Previous {
    slots: [UnsafeCell<MaybeUninit<libc::sigaction>>; 2],
    /// Index of the valid slot, or usize::MAX before the first install.
    current: AtomicUsize,
}

// SAFETY: slots are written only under INSTALL's lock, and only the slot
// that `current` does not name; readers (the handler) read the slot
// `current` names after an Acquire load that pairs with the Release store
// publishing it.
unsafe impl Sync for Previous {}

impl Previous {
    const fn new() -> Previous {
        Previous {
            slots: [
                UnsafeCell::new(MaybeUninit::uninit()),
                UnsafeCell::new(MaybeUninit::uninit()),
            ],
            current: AtomicUsize::new(usize::MAX),
        }
    }
}

static PREVIOUS: [Previous; 2] = [Previous::new(), Previous::new()];

static INSTALLED: AtomicBool = AtomicBool::new(false);
static INSTALL: Mutex<()> = Mutex::new(());
/// Set by [`host`]: the caller's handler calls [`resume`], and bulkmem
/// installs nothing.
static HOSTED: AtomicBool = AtomicBool::new(false);

/// Serves a SIGBUS that is not a checked routine's but a concurrent
/// compaction session's (a mutator touched a page not produced yet):
/// `fn(address) -> served`. A function pointer rather than a call, so the
/// handler names nothing above it; 0 until a session is prepared.
static SERVER: AtomicUsize = AtomicUsize::new(0);

/// The `si_code` of a SIGBUS for an address the kernel cannot back, which
/// is what a userfaultfd in SIGBUS mode raises for a missing page.
const BUS_ADRERR: i32 = 2;

/// Installs `serve` as the SIGBUS server (see `SERVER`).
pub fn set_server(serve: unsafe fn(usize) -> bool) {
    SERVER.store(serve as usize, Ordering::Release);
}

/// See `fault::host`.
pub fn host() {
    let _guard = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    HOSTED.store(true, Ordering::Release);
    INSTALLED.store(true, Ordering::Release);
}

/// The index of `sig` in [`SIGNALS`].
fn slot(sig: libc::c_int) -> usize {
    usize::from(sig == libc::SIGSEGV)
}

/// Makes sure the handler is installed for both signals; cheap after the
/// first call.
#[inline]
pub fn ensure() {
    if !INSTALLED.load(Ordering::Acquire) {
        install_slow(false);
    }
}

/// Puts bulkmem's handler back in front of both signals (see
/// `fault::reinstall`). Returns whether it had to for either.
pub fn reinstall() -> bool {
    if HOSTED.load(Ordering::Acquire) {
        return false;
    }
    install_slow(true)
}

/// Publishes `act` as what `sig` chains to, in the slot the handler is not
/// reading; under INSTALL.
fn publish(sig: libc::c_int, act: libc::sigaction) {
    let prev = &PREVIOUS[slot(sig)];
    let next = match prev.current.load(Ordering::Relaxed) {
        0 => 1,
        _ => 0,
    };
    // SAFETY: only INSTALL's holder writes slots, and never the one
    // `current` names, which is the only one the handler reads.
    unsafe { (*prev.slots[next].get()).write(act) };
    prev.current.store(next, Ordering::Release);
}

/// See `fault::chain_to`; false for a signal other than SIGBUS or SIGSEGV.
pub fn chain_to(sig: libc::c_int, act: &libc::sigaction) -> bool {
    if !SIGNALS.contains(&sig) || HOSTED.load(Ordering::Acquire) {
        return false;
    }
    let _guard = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    for s in SIGNALS {
        install_one(s);
    }
    INSTALLED.store(true, Ordering::Release);
    publish(sig, *act);
    true
}

/// Whether SIGBUS and SIGSEGV are both currently handled by bulkmem (one
/// `sigaction` query each).
pub fn is_installed() -> bool {
    HOSTED.load(Ordering::Acquire)
        || SIGNALS
            .iter()
            .all(|&s| current_disposition(s).sa_sigaction == ours())
}

fn current_disposition(sig: libc::c_int) -> libc::sigaction {
    let mut cur = MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: querying (null new action) writes only `cur`.
    let rc = unsafe { libc::sigaction(sig, core::ptr::null(), cur.as_mut_ptr()) };
    assert_eq!(rc, 0, "sigaction({sig}) query failed");
    // SAFETY: sigaction filled it in (and it started zeroed).
    unsafe { cur.assume_init() }
}

fn install_slow(force: bool) -> bool {
    let _guard = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if INSTALLED.load(Ordering::Acquire) && (!force || HOSTED.load(Ordering::Acquire)) {
        return false;
    }
    let mut changed = false;
    for sig in SIGNALS {
        changed |= install_one(sig);
    }
    INSTALLED.store(true, Ordering::Release);
    changed
}

/// Puts the handler in front of `sig` unless it is there; under INSTALL.
fn install_one(sig: libc::c_int) -> bool {
    let cur = current_disposition(sig);
    if cur.sa_sigaction == ours() {
        return false;
    }
    // Publish what we will chain to before we can receive anything.
    publish(sig, cur);

    // SAFETY: a zeroed sigaction is a valid empty one; we fill the handler,
    // flags and an empty mask before passing it.
    let mut ours: libc::sigaction = unsafe { core::mem::zeroed() };
    ours.sa_sigaction = self::ours();
    ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // Nothing the program can send interrupts the handler: a compaction
    // session's fault is served with a page claimed, and a handler of the
    // program's that ran inside it and touched that page, `siglongjmp`ed
    // out or cancelled the thread would leave the page claimed for ever
    // (or fault with SIGBUS blocked, which kills). They are delivered when
    // the handler returns; `chain` runs the program's handler under the
    // mask the kernel would have given it.
    ours.sa_mask = crate::threads::asynchronous_all();
    // SAFETY: installs a valid action for `sig`; the old one is not needed
    // (it was read above under the same lock).
    let rc = unsafe { libc::sigaction(sig, &ours, core::ptr::null_mut()) };
    assert_eq!(rc, 0, "sigaction({sig}) install failed");
    true
}

fn ours() -> usize {
    on_fault as *const () as usize
}

/// The offset of `si_addr_lsb` in x86-64 Linux's siginfo_t: the sigfault
/// member's union starts at 16 with the 8-byte `si_addr`, and the short
/// `_addr_lsb` follows it (no `_trapno` on x86). libc does not expose it.
/// The kernel fills it for SIGBUS's `BUS_MCEERR_*` codes only; for
/// SIGSEGV the same bytes belong to other members, so it is read as 0.
const SI_ADDR_LSB_OFFSET: usize = 24;

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel's arguments for this SA_SIGINFO handler, which
    // runs with every asynchronous signal blocked (its sa_mask).
    unsafe {
        if !resume_masked(sig, info, ctx, true) {
            chain(sig, info, ctx, (*info).si_code);
        }
    }
}

/// The kernel's signal mask on x86-64: one word.
type KernelSet = u64;

/// `rt_sigprocmask(how, set, old)` with the kernel's 8-byte set, as a raw
/// system call: glibc's `pthread_sigmask` would quietly leave its internal
/// signals out, and the set must be exactly the one asked for.
///
/// # Safety
/// Async-signal-safe; `set` and `old` may be null.
unsafe fn sigprocmask(how: libc::c_int, set: *const KernelSet, old: *mut KernelSet) {
    // SAFETY: the kernel reads and writes 8-byte sets at valid or null
    // pointers.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, how, set, old, 8usize) };
}

/// See `fault::resume`: if the fault is a checked routine's, rewrites the
/// interrupted context to resume at the routine's fixup.
///
/// # Safety
/// The kernel's arguments for a SIGSEGV or SIGBUS handler (`ctx` may be
/// null: then nothing is ours).
pub unsafe fn resume(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) -> bool {
    // SAFETY: forwarded; a host's handler may run with any mask.
    unsafe { resume_masked(sig, info, ctx, false) }
}

/// [`resume`], told whether every asynchronous signal is blocked already
/// (in bulkmem's own handler): if not, a compaction fault is served with
/// them blocked for its duration.
///
/// # Safety
/// As [`resume`].
unsafe fn resume_masked(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
    masked: bool,
) -> bool {
    if info.is_null() || ctx.is_null() || !SIGNALS.contains(&sig) {
        return false;
    }
    // SAFETY: the kernel passes a valid siginfo and ucontext to the
    // handler; we only read the siginfo and update the saved registers of
    // the interrupted context, which sigreturn will load.
    unsafe {
        let code = (*info).si_code;
        if code <= 0 {
            return false;
        }
        if sig == libc::SIGBUS && code == BUS_ADRERR {
            let serve = SERVER.load(Ordering::Acquire);
            if serve != 0 {
                // SAFETY: only `set_server` stores here, and it stores a
                // function of this type.
                let serve: unsafe fn(usize) -> bool = core::mem::transmute(serve);
                let mut old: KernelSet = 0;
                if !masked {
                    let all = crate::threads::asynchronous_all();
                    sigprocmask(
                        libc::SIG_BLOCK,
                        (&all as *const libc::sigset_t).cast(),
                        &mut old,
                    );
                }
                let served = serve((*info).si_addr() as usize);
                if !masked {
                    sigprocmask(libc::SIG_SETMASK, &old, core::ptr::null_mut());
                }
                if served {
                    return true; // the page is there now: the access retries
                }
            }
        }
        let uc = ctx.cast::<libc::ucontext_t>();
        let gregs = &mut (*uc).uc_mcontext.gregs;
        let rip = gregs[libc::REG_RIP as usize] as usize;
        let Some(fix) = super::fixup(rip) else {
            return false;
        };
        let lsb = if sig == libc::SIGBUS {
            info.cast::<u8>()
                .add(SI_ADDR_LSB_OFFSET)
                .cast::<i16>()
                .read() as u16
        } else {
            0
        };
        gregs[libc::REG_R10 as usize] = (*info).si_addr() as usize as i64;
        gregs[libc::REG_R11 as usize] = RawFault::pack(sig, code, lsb) as i64;
        gregs[libc::REG_RIP as usize] = fix as i64;
        true
    }
}

/// Hands a signal that is not ours to the previous disposition.
///
/// # Safety
/// Called from the handler with the kernel's arguments.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void, code: i32) {
    let prev = &PREVIOUS[slot(sig)];
    let idx = prev.current.load(Ordering::Acquire);
    if idx > 1 {
        // Cannot happen: we publish before installing. Be the default.
        // SAFETY: async-signal-safe calls with valid arguments.
        unsafe { default_action(sig, code) };
        return;
    }
    // SAFETY: `current` names a slot written before it was published.
    let prev = unsafe { (*prev.slots[idx].get()).assume_init_read() };
    let h = prev.sa_sigaction;
    if h == libc::SIG_IGN && code <= 0 {
        return; // an ignored kill(SIGBUS) stays ignored
    }
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // SAFETY: as above.
        unsafe { default_action(sig, code) };
        return;
    }
    if prev.sa_flags & libc::SA_RESETHAND != 0 {
        // One delivery, then the default, as the kernel does. The slot is
        // rewritten without INSTALL's lock: a signal handler cannot take
        // it, and a racing install publishes in the other slot.
        let mut dfl = prev;
        dfl.sa_sigaction = libc::SIG_DFL;
        dfl.sa_flags &= !libc::SA_RESETHAND;
        let p = &PREVIOUS[slot(sig)];
        // SAFETY: `idx` is the slot this handler read; a writer under the
        // lock writes only the other one.
        unsafe { (*p.slots[idx].get()).write(dfl) };
    }
    // Run the previous handler under the mask the kernel would have given
    // it (ours blocks more): the interrupted context's, plus its own
    // sa_mask, plus the signal itself unless it asked for SA_NODEFER.
    // SAFETY: the kernel's ucontext, whose uc_sigmask is the interrupted
    // mask; sets are read as the kernel's first word.
    let mut mask: KernelSet = unsafe {
        let uc = ctx.cast::<libc::ucontext_t>();
        let interrupted = if uc.is_null() {
            0
        } else {
            (&raw const (*uc).uc_sigmask).cast::<KernelSet>().read()
        };
        interrupted
            | (&prev.sa_mask as *const libc::sigset_t)
                .cast::<KernelSet>()
                .read()
    };
    if prev.sa_flags & libc::SA_NODEFER == 0 {
        mask |= 1 << (sig - 1);
    } else {
        mask &= !(1 << (sig - 1));
    }
    let mut old: KernelSet = 0;
    // SAFETY: async-signal-safe; valid sets.
    unsafe { sigprocmask(libc::SIG_SETMASK, &mask, &mut old) };
    if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the application installed this address as an SA_SIGINFO
        // handler, so it has this signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { core::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a handler installed without SA_SIGINFO takes the signal
        // number only.
        let f: extern "C" fn(libc::c_int) = unsafe { core::mem::transmute(h) };
        f(sig);
    }
    // SAFETY: restores the mask saved above.
    unsafe { sigprocmask(libc::SIG_SETMASK, &old, core::ptr::null_mut()) };
}

/// What the signal would have done without us: terminate (with a core
/// dump). A fault re-executes the instruction after we return and dies of
/// it; a sent signal is raised again, and delivered once the handler
/// returns. The default is set with the raw system call: an interposed
/// `sigaction` (an `LD_PRELOAD`'s) could put a handler back in front of
/// it, and the fault would then loop for ever.
///
/// # Safety
/// Called from the handler.
unsafe fn default_action(sig: libc::c_int, code: i32) {
    /// The kernel's `struct sigaction` on x86_64, with its 8-byte mask.
    #[repr(C)]
    struct KernelSigaction {
        handler: usize,
        flags: u64,
        restorer: usize,
        mask: u64,
    }
    let dfl = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: rt_sigaction with a valid kernel action and its mask size;
    // raise is async-signal-safe.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            &dfl as *const KernelSigaction,
            core::ptr::null_mut::<KernelSigaction>(),
            8usize,
        );
        INSTALLED.store(false, Ordering::Relaxed);
        if code <= 0 {
            libc::raise(sig);
        }
    }
}
