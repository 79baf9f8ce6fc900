//! Processes the engine is never opened in, which then see the C library
//! alone: what the preload would need there (files, mappings, threads) is
//! not the program's to give.
//!
//! * **A seccomp filter** (`Seccomp:` not 0 in `/proc/thread-self/status`: a filter is
//!   per thread), also
//!   one inherited across `exec` from a launcher whose allow-list suits the
//!   C library: the engine's opening, bulkmem's set-up and its helper
//!   threads make system calls the program never made, which such a filter
//!   kills or refuses.
//! * **An address-space or data limit near** (`RLIMIT_AS`, `RLIMIT_DATA`
//!   within [`HEADROOM`] of what the process has mapped): the engine's
//!   mapping and its helpers' stacks would take the program's last
//!   headroom, and its own next `malloc` would fail.
//!
//! Read with raw system calls on the set-up stack, once, at the first
//! call that would open the engine: nothing at start-up.

use core::ffi::c_long;

use bulkmem_preload_abi::sys;

/// What the engine may take of an address-space or data limit: its
/// mapping (about 10 MiB), helper stacks (256 KiB each) and its tables,
/// with room to spare.
const HEADROOM: u64 = 256 << 20;

/// Whether the engine must not be opened in this process.
pub fn now() -> bool {
    seccomp() || limits_near()
}

/// Opens `path` (NUL-terminated) with a raw system call: the descriptor,
/// or `Err(errno)`.
fn open(path: &[u8]) -> Result<usize, isize> {
    // SAFETY: a NUL-terminated path; no other memory argument.
    let fd = unsafe {
        sys::call(
            sys::SYS_OPENAT,
            &[
                sys::AT_FDCWD as usize,
                path.as_ptr() as usize,
                sys::O_RDONLY_CLOEXEC as usize,
            ],
        )
    };
    if fd < 0 {
        Err(-fd)
    } else {
        Ok(fd as usize)
    }
}

/// Reads from `fd` into `buf`: the bytes read (0 at the end or on an
/// error).
fn read(fd: usize, buf: &mut [u8]) -> usize {
    // SAFETY: our own buffer, of its length.
    let r = unsafe { sys::call(sys::SYS_READ, &[fd, buf.as_mut_ptr() as usize, buf.len()]) };
    usize::try_from(r).unwrap_or(0)
}

fn close(fd: usize) {
    // SAFETY: our own descriptor.
    unsafe { sys::call(sys::SYS_CLOSE, &[fd]) };
}

/// Reads `path` into `buf` (as much as fits): the bytes read, or
/// `Err(errno)`.
fn read_file(path: &[u8], buf: &mut [u8]) -> Result<usize, isize> {
    let fd = open(path)?;
    let mut n = 0;
    while n < buf.len() {
        let r = read(fd, &mut buf[n..]);
        if r == 0 {
            break;
        }
        n += r;
    }
    close(fd);
    Ok(n)
}

/// The decimal number at the start of `text`, after blanks.
fn number(text: &[u8]) -> Option<u64> {
    let digits = text
        .iter()
        .skip_while(|b| b.is_ascii_whitespace())
        .take_while(|b| b.is_ascii_digit());
    let mut v: u64 = 0;
    let mut any = false;
    for d in digits {
        v = v.saturating_mul(10).saturating_add(u64::from(d - b'0'));
        any = true;
    }
    any.then_some(v)
}

/// A seccomp mode or filter on this thread. A status that cannot be read
/// for any reason but a missing /proc counts as one: a filter may be what
/// refused it. Read in small pieces (the caller's stack may be small), by
/// the system calls the dynamic loader makes anyway, so an allow-list that
/// lets the program start lets this through.
fn seccomp() -> bool {
    const KEY: &[u8] = b"\nSeccomp:";
    const KEEP: usize = 16;
    let fd = match open(b"/proc/thread-self/status\0") {
        Ok(fd) => fd,
        Err(e) => return e != 2, // ENOENT: no /proc
    };
    // Each piece is read after the last KEEP bytes of the one before, so a
    // key split between two reads is found whole.
    let mut buf = [0u8; 256 + KEEP];
    let mut kept = 0;
    let mut mode = None;
    loop {
        let r = read(fd, &mut buf[kept..]);
        if r == 0 {
            break;
        }
        let text = &buf[..kept + r];
        if let Some(at) = text.windows(KEY.len()).position(|w| w == KEY) {
            // The number may be cut off by the piece's end: read it with
            // the rest of the line when it is near the end.
            if text.len() - at >= KEY.len() + 4 {
                mode = number(&text[at + KEY.len()..]);
                break;
            }
        }
        let len = text.len();
        let keep = len.min(KEEP);
        buf.copy_within(len - keep..len, 0);
        kept = keep;
    }
    close(fd);
    mode.is_none_or(|m| m != 0)
}

fn limit(resource: c_long) -> u64 {
    let mut r = [sys::RLIM_INFINITY; 2];
    // SAFETY: prlimit64 on this process, writing our two-word buffer.
    let rc = unsafe {
        sys::call(
            sys::SYS_PRLIMIT64,
            &[0, resource as usize, 0, r.as_mut_ptr() as usize],
        )
    };
    if rc == 0 {
        r[0]
    } else {
        0
    }
}

/// `RLIMIT_AS` or `RLIMIT_DATA` within [`HEADROOM`] of the process's
/// address space or data (`/proc/self/statm`'s first and sixth fields).
fn limits_near() -> bool {
    let (as_limit, data_limit) = (limit(sys::RLIMIT_AS), limit(sys::RLIMIT_DATA));
    if as_limit == sys::RLIM_INFINITY && data_limit == sys::RLIM_INFINITY {
        return false;
    }
    let mut buf = [0u8; 256];
    let Ok(n) = read_file(b"/proc/self/statm\0", &mut buf) else {
        return true;
    };
    let mut fields = buf[..n]
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .map(|f| number(f).unwrap_or(u64::MAX));
    let size = fields.next().unwrap_or(u64::MAX);
    let data = fields.nth(4).unwrap_or(u64::MAX);
    let near = |pages: u64, lim: u64| {
        lim != sys::RLIM_INFINITY && pages.saturating_mul(4096).saturating_add(HEADROOM) > lim
    };
    near(size, as_limit) || near(data, data_limit)
}
