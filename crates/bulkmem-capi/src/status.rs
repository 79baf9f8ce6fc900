//! Return codes: every entry point runs inside [`call`], which turns a
//! library error into a negative errno, records its message for
//! `bm_last_error`, and catches panics so nothing unwinds into C.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

use bulkmem_core::{
    BatchError, CopyError, EngineError, Error, Hint, PagesError, Strategy, StrategyError,
};

/// A failure on its way to C: the negative errno and the words.
pub struct Fail {
    pub code: c_int,
    pub msg: String,
}

pub type Res<T> = Result<T, Fail>;

pub fn fail(errno: c_int, msg: impl Into<String>) -> Fail {
    Fail {
        code: -errno,
        msg: msg.into(),
    }
}

pub fn invalid(msg: impl Into<String>) -> Fail {
    fail(libc::EINVAL, msg)
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        let errno = match &e {
            Error::Unavailable { .. } | Error::NotSupportedHere { .. } => libc::ENOTSUP,
            Error::NoSuchNode { .. } => libc::ENODEV,
            Error::NotEnoughMemory { .. } => libc::ENOMEM,
            Error::Syscall { errno, .. } | Error::MigrationFailed { errno, .. } => *errno,
            Error::Pages(p) => pages_errno(p),
            Error::WorkerPanicked { .. } => libc::ENOTRECOVERABLE,
            Error::Busy { .. } => libc::EBUSY,
            #[cfg(target_arch = "x86_64")]
            Error::Fault(f) => fault_errno(f.signal, f.code),
            _ => libc::EINVAL,
        };
        fail(errno, e.to_string())
    }
}

impl From<PagesError> for Fail {
    fn from(e: PagesError) -> Fail {
        fail(pages_errno(&e), e.to_string())
    }
}

/// A page move's or compaction's errno: the failing call's own where one
/// failed, `ENOTSUP` where the kernel lacks what was asked, else `EINVAL`.
fn pages_errno(e: &PagesError) -> c_int {
    match e {
        PagesError::NotSupportedHere { .. } => libc::ENOTSUP,
        PagesError::Syscall { errno, .. } | PagesError::Ioctl { errno, .. } => *errno,
        _ => libc::EINVAL,
    }
}

/// The narrower errors of the copy, clear and batch calls go through the
/// umbrella `Error`, so each failure keeps the one errno C callers (and
/// the C tests) know it by, whichever Rust type carried it.
macro_rules! via_umbrella {
    ($($t:ty),*) => {$(
        impl From<$t> for Fail {
            fn from(e: $t) -> Fail {
                Error::from(e).into()
            }
        }
    )*};
}

via_umbrella!(StrategyError, CopyError, BatchError, EngineError);

/// `EFAULT` for SIGSEGV (an unmapped or protected page), `EHWPOISON`
/// for SIGBUS's machine-check codes, `EIO` for the other SIGBUS (a mapping
/// past the end of its file, software poison). The errno carries the
/// signal because `bm_fault`'s layout is frozen without one, and SIGBUS
/// and SIGSEGV codes overlap (BUS_ADRERR and SEGV_ACCERR are both 2).
pub fn fault_errno(signal: i32, si_code: i32) -> c_int {
    if signal == libc::SIGSEGV {
        libc::EFAULT
    } else if si_code == libc::BUS_MCEERR_AR || si_code == libc::BUS_MCEERR_AO {
        libc::EHWPOISON
    } else {
        libc::EIO
    }
}

/// Longest `bm_last_error` message kept (longer ones are cut at a char
/// boundary).
const LAST_MAX: usize = 511;

thread_local! {
    // A fixed buffer overwritten in place: the pointer bm_last_error hands
    // out stays valid for the thread's lifetime, whatever C evaluates first.
    static LAST: RefCell<[u8; LAST_MAX + 1]> = const { RefCell::new([0; LAST_MAX + 1]) };
}

pub fn set_last(msg: &str) {
    let mut n = msg.len().min(LAST_MAX);
    while !msg.is_char_boundary(n) {
        n -= 1;
    }
    LAST.with(|l| {
        let mut buf = l.borrow_mut();
        for (d, s) in buf.iter_mut().zip(msg[..n].bytes()) {
            *d = if s == 0 { b' ' } else { s };
        }
        buf[n] = 0;
    });
}

/// The calling thread's last failure message (a pointer valid for the
/// thread's lifetime).
pub fn last() -> *const c_char {
    LAST.with(|l| l.borrow().as_ptr().cast())
}

thread_local! {
    /// How many `bm_*` calls this thread is inside (nested through
    /// callbacks): panics here are caught by [`call`] and must not print.
    static IN_CALL: Cell<usize> = const { Cell::new(0) };
}

/// Installs, once per process, a panic hook that stays silent for panics
/// on threads inside a `bm_*` call (they are caught and become
/// `-ENOTRECOVERABLE` with the message in `bm_last_error`) and hands every
/// other panic to the hook that was there before (the application's, or
/// Rust's default).
fn quiet_caught_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_CALL.with(|c| c.get()) == 0 {
                previous(info);
            }
        }));
    });
}

/// Marks this thread as inside a `bm_*` call until dropped (also when a
/// panic unwinds through it).
struct InCall;

impl InCall {
    fn enter() -> InCall {
        IN_CALL.with(|c| c.set(c.get() + 1));
        InCall
    }
}

impl Drop for InCall {
    fn drop(&mut self) {
        IN_CALL.with(|c| c.set(c.get().saturating_sub(1)));
    }
}

/// Runs an entry point: `Ok(code)` is returned as is, a failure as its
/// negative errno (its message kept for `bm_last_error`), and a panic as
/// `-ENOTRECOVERABLE`, without the panic printing anything.
pub fn call(f: impl FnOnce() -> Res<c_int>) -> c_int {
    quiet_caught_panics();
    let caught = {
        let _in = InCall::enter();
        catch_unwind(AssertUnwindSafe(f))
    };
    match caught {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            set_last(&e.msg);
            e.code
        }
        Err(panic) => {
            set_last(&format!(
                "internal error (a bug in bulkmem): {}",
                panic_message(&panic)
            ));
            -libc::ENOTRECOVERABLE
        }
    }
}

/// As [`call`] for entry points that return a pointer: NULL and `errno` on
/// failure.
pub fn call_ptr<T>(f: impl FnOnce() -> Res<*mut T>) -> *mut T {
    let mut out = std::ptr::null_mut();
    let code = call(|| {
        out = f()?;
        Ok(0)
    });
    if code != 0 {
        // SAFETY: __errno_location returns the calling thread's errno.
        unsafe { *libc::__errno_location() = -code };
    }
    out
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// A C string argument naming a strategy; NULL means `auto`.
pub fn strategy(name: *const c_char) -> Res<Strategy> {
    if name.is_null() {
        return Ok(Strategy::Auto);
    }
    // SAFETY: a non-NULL strategy argument is a NUL-terminated string (the
    // header's contract).
    let s = unsafe { CStr::from_ptr(name) }
        .to_str()
        .map_err(|_| invalid("the strategy name is not UTF-8"))?;
    // The library's one parser, as the CLI and BULKMEM_STRATEGY use it:
    // case, surrounding spaces and '_' for '-' do not matter, so a name
    // that works on the command line works here.
    s.parse::<Strategy>().map_err(|e| invalid(e.to_string()))
}

pub fn hint(h: c_int) -> Res<Hint> {
    match h {
        0 => Ok(Hint::Auto),
        1 => Ok(Hint::Reuse),
        2 => Ok(Hint::Stream),
        _ => Err(invalid(format!(
            "hint {h} is not BM_HINT_AUTO (0), BM_HINT_REUSE (1) or BM_HINT_STREAM (2)"
        ))),
    }
}

/// `len` bytes at `p` can be turned into a slice: not NULL (unless empty)
/// and not wrapping around the address space.
pub fn region(p: *const c_void, len: usize, what: &str) -> Res<()> {
    if len == 0 {
        return Ok(());
    }
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL with a length of {len}")));
    }
    if (p as usize).checked_add(len).is_none() || len > isize::MAX as usize {
        return Err(invalid(format!("{what} {p:p} + {len} wraps around")));
    }
    Ok(())
}

/// Two checked regions (`a` of `alen` bytes, `b` of `blen`) do not
/// overlap: copies are memcpy, not memmove.
pub fn disjoint(
    a: *const c_void,
    alen: usize,
    b: *const c_void,
    blen: usize,
    what: &str,
) -> Res<()> {
    let (a, b) = (a as usize, b as usize);
    if alen > 0 && blen > 0 && a < b + blen && b < a + alen {
        return Err(invalid(format!(
            "{what} overlap ({a:#x}+{alen} and {b:#x}+{blen}): copies are memcpy, not memmove"
        )));
    }
    Ok(())
}

/// NUL-terminated static names of every strategy, in `Strategy::ALL`
/// order.
pub fn name_of(s: Strategy) -> *const c_char {
    static NAMES: std::sync::OnceLock<Vec<CString>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        Strategy::ALL
            .iter()
            .map(|s| CString::new(s.name()).expect("names have no NUL"))
            .collect()
    });
    let i = Strategy::ALL.iter().position(|&x| x == s).unwrap_or(0);
    names[i].as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Set in the child [`a_caught_panic_is_enotrecoverable_and_prints_nothing`]
    /// starts: it runs the calls there.
    const CHILD: &str = "BULKMEM_CAPI_TEST_PANIC_CHILD";

    /// A panic inside a `bm_*` call becomes `-ENOTRECOVERABLE` with its
    /// message in `bm_last_error`, prints nothing, and leaves the library
    /// working, twice in a row. In a child (this test binary again, output
    /// not captured), so that what the panic hook writes reaches a stderr
    /// the test reads: no C program can make bulkmem panic, and the
    /// library exports nothing only tests use.
    #[test]
    fn a_caught_panic_is_enotrecoverable_and_prints_nothing() {
        if std::env::var_os(CHILD).is_some() {
            for _ in 0..2 {
                assert_eq!(
                    call(|| panic!("a deliberate panic")),
                    -libc::ENOTRECOVERABLE
                );
                // SAFETY: `last` returns this thread's NUL-terminated message.
                let msg = unsafe { std::ffi::CStr::from_ptr(last()) };
                assert!(msg.to_string_lossy().contains("deliberate"), "{msg:?}");
            }
            assert_eq!(call(|| Ok(7)), 7);
            return;
        }
        let o = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "status::tests::a_caught_panic_is_enotrecoverable_and_prints_nothing",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{out}{err}");
        assert!(out.contains("1 passed"), "the child ran no test: {out}");
        assert_eq!(err, "", "the caught panic printed");
    }
}
