//! Batched page moves with userfaultfd `UFFDIO_MOVE` (Linux >= 6.8), the
//! primitive Android's garbage collector compacts its heap with (seed 003).
//!
//! A [`Mover`] owns a userfaultfd. Destination ranges are registered with it
//! ([`Mover::register`]); then [`Mover::move_range`] remaps pages from a
//! source range to the destination without copying them: the kernel moves
//! page-table entries (a whole PMD for a transparent huge page) and the
//! source becomes empty. One ioctl moves as much as the kernel accepts; the
//! wrapper continues after partial progress, retries `EAGAIN`, and handles
//! the pages `MOVE` refuses:
//!
//! * `EBUSY` (pinned, shared after `fork()`, not anon-exclusive, a large
//!   folio it cannot split): with [`MoveOptions::fallback_copy`] the page is
//!   copied with `UFFDIO_COPY` and dropped from the source, so the range
//!   still ends up complete; otherwise it is reported and skipped;
//! * `EEXIST` (the destination page is already populated or poisoned) and
//!   `ENOENT` (a source hole, without [`MoveOptions::allow_src_holes`]):
//!   reported with the address and skipped.
//!
//! Requirements (the kernel's): source and destination are private
//! anonymous mappings with identical protections (and both mlocked or
//! neither), each range lies inside one mapping, addresses and lengths are
//! page-aligned, and the destination pages are unpopulated. The ioctl
//! numbers and structures are defined here because the system headers of
//! many distributions predate `UFFDIO_MOVE`.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::extent::Extent;
use crate::strategy::Op;

const PAGE: usize = 4096;

// <linux/userfaultfd.h>
const UFFD_API: u64 = 0xAA;
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFD_FEATURE_POISON: u64 = 1 << 14;
const UFFD_FEATURE_MOVE: u64 = 1 << 16;
const UFFDIO_REGISTER_MODE_MISSING: u64 = 1 << 0;
const UFFDIO_COPY_MODE_DONTWAKE: u64 = 1 << 0;
/// Don't wake threads waiting on a fault in the destination.
pub const UFFDIO_MOVE_MODE_DONTWAKE: u64 = 1 << 0;
/// Skip source holes instead of failing with `ENOENT`.
pub const UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES: u64 = 1 << 1;
const IOCTL_BIT_MOVE: u64 = 1 << 0x05;

const fn iowr(nr: u64, size: usize) -> libc::c_ulong {
    ((3 << 30) | ((size as u64) << 16) | (UFFD_API << 8) | nr) as libc::c_ulong
}

const fn ior(nr: u64, size: usize) -> libc::c_ulong {
    ((2 << 30) | ((size as u64) << 16) | (UFFD_API << 8) | nr) as libc::c_ulong
}

#[repr(C)]
#[derive(Default)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioMove {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    moved: i64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioPoison {
    range: UffdioRange,
    mode: u64,
    updated: i64,
}

const UFFDIO_API_IOCTL: libc::c_ulong = iowr(0x3F, std::mem::size_of::<UffdioApi>());
const UFFDIO_REGISTER: libc::c_ulong = iowr(0x00, std::mem::size_of::<UffdioRegister>());
const UFFDIO_UNREGISTER: libc::c_ulong = ior(0x01, std::mem::size_of::<UffdioRange>());
const UFFDIO_COPY: libc::c_ulong = iowr(0x03, std::mem::size_of::<UffdioCopy>());
const UFFDIO_MOVE: libc::c_ulong = iowr(0x05, std::mem::size_of::<UffdioMove>());
const UFFDIO_POISON: libc::c_ulong = iowr(0x08, std::mem::size_of::<UffdioPoison>());

/// Why a userfaultfd operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum UffdError {
    /// The kernel lacks what was asked (e.g. `UFFD_FEATURE_MOVE` before 6.8).
    Unsupported(String),
    /// userfaultfd(2) itself was refused (`vm.unprivileged_userfaultfd`).
    Permission(io::Error),
    /// Arguments rejected before any ioctl: misaligned, empty, overlapping,
    /// or a destination not registered with this mover.
    Invalid(String),
    /// An ioctl failed in a way the mover does not recover from.
    Ioctl {
        op: &'static str,
        addr: usize,
        error: io::Error,
        /// What had been done before it failed.
        report: Box<MoveReport>,
    },
}

impl fmt::Display for UffdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UffdError::Unsupported(what) => write!(f, "userfaultfd: not supported here: {what}"),
            UffdError::Permission(e) => write!(
                f,
                "userfaultfd(2) was refused ({e}); run as root or set vm.unprivileged_userfaultfd=1"
            ),
            UffdError::Invalid(what) => write!(f, "userfaultfd: {what}"),
            UffdError::Ioctl {
                op,
                addr,
                error,
                report,
            } => write!(
                f,
                "{op} failed at {addr:#x}: {error} (after {} pages moved, {} copied); source and \
                 destination must be private anonymous mappings with the same protections, each \
                 range inside one mapping",
                report.moved, report.copied
            ),
        }
    }
}

impl std::error::Error for UffdError {}

/// Options of [`Mover::move_range`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoveOptions {
    /// Skip source pages that are not populated (holes) instead of reporting
    /// them; they are counted in [`MoveReport::holes`].
    pub allow_src_holes: bool,
    /// Don't wake threads faulting on the destination.
    pub dont_wake: bool,
    /// Copy pages `MOVE` refuses (`EBUSY`) with `UFFDIO_COPY` and drop them
    /// from the source, so the range still ends up complete.
    pub fallback_copy: bool,
    /// Largest length per ioctl (0: the whole range). For benchmarks: 4096
    /// gives the per-page loop.
    pub max_ioctl: usize,
}

/// A page that could not be moved (nor copied).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveFailure {
    pub dst: usize,
    pub src: usize,
    /// `EEXIST`, `ENOENT`, `EBUSY`, ...
    pub errno: i32,
}

/// What a move did, in pages. Each page of the range is counted once, in
/// exactly one of `moved`, `copied`, `holes` and `failures`: when
/// [`Mover::move_range`] returns `Ok`, their sum is the range's page count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MoveReport {
    /// Pages moved by `UFFDIO_MOVE` (not the source holes it skipped).
    pub moved: usize,
    /// Moved by copy after `EBUSY` (with `fallback_copy`).
    pub copied: usize,
    /// Source holes skipped (with `allow_src_holes`), as `mincore` saw the
    /// source just before the move. A hole over a populated destination page
    /// is not skipped but refused (`EEXIST`): a failure. (A swapped-out
    /// source page looks like a hole to `mincore`: it is moved but counted
    /// here.)
    pub holes: usize,
    /// Pages left where they were: neither moved, copied nor skipped.
    pub failures: Vec<MoveFailure>,
    /// ioctls issued, and `EAGAIN` retries among them.
    pub ioctls: usize,
    pub retries: usize,
}

impl MoveReport {
    /// Every page is at the destination (moved, copied or a skipped hole).
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty()
    }

    fn absorb(&mut self, o: MoveReport) {
        self.moved += o.moved;
        self.copied += o.copied;
        self.holes += o.holes;
        self.failures.extend(o.failures);
        self.ioctls += o.ioctls;
        self.retries += o.retries;
    }
}

/// Owns a userfaultfd and the destination ranges registered with it.
#[derive(Debug)]
pub struct Mover {
    fd: OwnedFd,
    features: u64,
    registered: Vec<(usize, usize)>,
}

/// `EAGAIN` retries on one position before it counts as a failure.
const MAX_RETRIES: usize = 1000;

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl Mover {
    /// Opens a userfaultfd (user-mode faults only, which needs no privilege
    /// where the sysctl allows it) and negotiates `UFFD_FEATURE_MOVE` (and
    /// `UFFD_FEATURE_POISON` where the kernel has it).
    pub fn new() -> Result<Mover, UffdError> {
        // Ask for no features first: the answer lists what the kernel has.
        // UFFDIO_API may be issued once per descriptor, so the features are
        // then enabled on a second one.
        let (_, offered) = open_with(0)?;
        if offered & UFFD_FEATURE_MOVE == 0 {
            return Err(UffdError::Unsupported(
                "UFFD_FEATURE_MOVE (UFFDIO_MOVE needs Linux 6.8 or later)".into(),
            ));
        }
        let (fd, features) = open_with(UFFD_FEATURE_MOVE | (offered & UFFD_FEATURE_POISON))?;
        Ok(Mover {
            fd,
            features,
            registered: Vec::new(),
        })
    }

    /// Whether `UFFDIO_POISON` is available (Linux >= 6.6).
    pub fn supports_poison(&self) -> bool {
        self.features & UFFD_FEATURE_POISON != 0
    }

    /// Registers `[addr, addr + len)` (page-aligned, inside private
    /// anonymous mappings) as a destination, in missing-page mode.
    pub fn register(&mut self, addr: *mut u8, len: usize) -> Result<(), UffdError> {
        check_aligned("register", addr as usize, len)?;
        let mut r = UffdioRegister {
            range: UffdioRange {
                start: addr as u64,
                len: len as u64,
            },
            mode: UFFDIO_REGISTER_MODE_MISSING,
            ioctls: 0,
        };
        // SAFETY: valid uffd and struct; registering only changes how the
        // kernel treats faults in the range.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_REGISTER, &mut r) } != 0 {
            return Err(UffdError::Invalid(format!(
                "cannot register {:#x}+{len:#x}: {} (it must be mapped, private and anonymous)",
                addr as usize,
                io::Error::last_os_error()
            )));
        }
        if r.ioctls & IOCTL_BIT_MOVE == 0 {
            return Err(UffdError::Unsupported(format!(
                "UFFDIO_MOVE is not allowed on {:#x}+{len:#x} (not private anonymous memory?)",
                addr as usize
            )));
        }
        self.registered.push((addr as usize, len));
        Ok(())
    }

    /// Unregisters a range given to [`Mover::register`].
    pub fn unregister(&mut self, addr: *mut u8, len: usize) -> Result<(), UffdError> {
        check_aligned("unregister", addr as usize, len)?;
        let mut r = UffdioRange {
            start: addr as u64,
            len: len as u64,
        };
        // SAFETY: valid uffd and struct.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_UNREGISTER, &mut r) } != 0 {
            return Err(UffdError::Invalid(format!(
                "cannot unregister {:#x}+{len:#x}: {}",
                addr as usize,
                io::Error::last_os_error()
            )));
        }
        self.registered
            .retain(|&(a, l)| (a, l) != (addr as usize, len));
        Ok(())
    }

    fn is_registered(&self, addr: usize, len: usize) -> bool {
        // Registered ranges may abut; walk them in address order.
        let mut spans = self.registered.clone();
        spans.sort_unstable();
        let mut at = addr;
        for (a, l) in spans {
            if a <= at && at < a + l {
                at = a + l;
            }
            if at >= addr + len {
                return true;
            }
        }
        false
    }

    /// One raw `UFFDIO_MOVE`: returns the bytes moved and the errno if it
    /// stopped early. For benchmarks and callers that handle errors
    /// themselves.
    ///
    /// # Safety
    /// As [`Mover::move_range`].
    pub unsafe fn move_once(
        &self,
        dst: *mut u8,
        src: *mut u8,
        len: usize,
        mode: u64,
    ) -> (usize, Option<i32>) {
        let mut m = UffdioMove {
            dst: dst as u64,
            src: src as u64,
            len: len as u64,
            mode,
            moved: 0,
        };
        // SAFETY: valid uffd and struct; the caller vouches for the ranges.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_MOVE, &mut m) };
        let moved = m.moved.max(0) as usize;
        if rc == 0 {
            (moved, None)
        } else {
            (moved, Some(errno()))
        }
    }

    /// Moves the pages of `[src, src + len)` to `[dst, dst + len)`.
    ///
    /// # Safety
    /// Both ranges are private anonymous memory of this process that nobody
    /// accesses during the call; afterwards the source pages are gone (reads
    /// see zero-filled pages, unless the source is itself registered with a
    /// userfaultfd, whose handler must then serve its faults). No Rust
    /// reference may point into either range across the call.
    pub unsafe fn move_range(
        &self,
        dst: *mut u8,
        src: *mut u8,
        len: usize,
        opts: MoveOptions,
    ) -> Result<MoveReport, UffdError> {
        let (d, s) = (dst as usize, src as usize);
        check_aligned("destination", d, len)?;
        check_aligned("source", s, len)?;
        if len == 0 {
            return Ok(MoveReport::default());
        }
        if d < s + len && s < d + len {
            return Err(UffdError::Invalid(format!(
                "source {s:#x}+{len:#x} and destination {d:#x}+{len:#x} overlap"
            )));
        }
        if !self.is_registered(d, len) {
            return Err(UffdError::Invalid(format!(
                "destination {d:#x}+{len:#x} is not registered with this Mover (call register first)"
            )));
        }
        let mut report = MoveReport::default();
        // The kernel counts the source holes it skips as moved bytes: tell
        // them apart with the source's residency before the move. (A hole
        // over a populated destination page is not skipped but refused:
        // a failure, not a hole.)
        let holes = if opts.allow_src_holes {
            hole_map(s, len)
        } else {
            Vec::new()
        };
        let mut mode = 0;
        if opts.dont_wake {
            mode |= UFFDIO_MOVE_MODE_DONTWAKE;
        }
        if opts.allow_src_holes {
            mode |= UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES;
        }
        let step = if opts.max_ioctl == 0 {
            len
        } else {
            opts.max_ioctl.max(PAGE) / PAGE * PAGE
        };
        let mut done = 0;
        let mut retries_here = 0;
        while done < len {
            let n = step.min(len - done);
            report.ioctls += 1;
            // SAFETY: [done, done + n) lies in both ranges the caller vouched for.
            let (moved, err) =
                unsafe { self.move_once((d + done) as *mut u8, (s + done) as *mut u8, n, mode) };
            let skipped = holes
                .get(done / PAGE..(done + moved) / PAGE)
                .map_or(0, |h| h.iter().filter(|&&hole| hole).count());
            report.holes += skipped;
            report.moved += moved / PAGE - skipped;
            done += moved;
            let Some(e) = err else {
                retries_here = 0;
                continue;
            };
            let (at_d, at_s) = (d + done, s + done);
            match e {
                libc::EAGAIN if retries_here < MAX_RETRIES => {
                    retries_here += 1;
                    report.retries += 1;
                    if moved == 0 {
                        std::thread::yield_now();
                    }
                }
                libc::EBUSY if opts.fallback_copy => {
                    // SAFETY: one page inside both ranges.
                    match unsafe { self.copy_page(at_d, at_s, opts.dont_wake) } {
                        Ok(()) => report.copied += 1,
                        Err(e) => report.failures.push(MoveFailure {
                            dst: at_d,
                            src: at_s,
                            errno: e,
                        }),
                    }
                    done += PAGE;
                    retries_here = 0;
                }
                libc::EEXIST | libc::ENOENT | libc::EBUSY | libc::EAGAIN => {
                    report.failures.push(MoveFailure {
                        dst: at_d,
                        src: at_s,
                        errno: e,
                    });
                    done += PAGE;
                    retries_here = 0;
                }
                _ => {
                    return Err(UffdError::Ioctl {
                        op: "UFFDIO_MOVE",
                        addr: at_d,
                        error: io::Error::from_raw_os_error(e),
                        report: Box::new(report),
                    });
                }
            }
        }
        Ok(report)
    }

    /// Copies one page with UFFDIO_COPY and drops it from the source.
    ///
    /// # Safety
    /// `dst` and `src` are page-aligned pages the caller owns (as in
    /// move_range).
    unsafe fn copy_page(&self, dst: usize, src: usize, dont_wake: bool) -> Result<(), i32> {
        let mut c = UffdioCopy {
            dst: dst as u64,
            src: src as u64,
            len: PAGE as u64,
            mode: if dont_wake {
                UFFDIO_COPY_MODE_DONTWAKE
            } else {
                0
            },
            copy: 0,
        };
        // SAFETY: valid uffd; the kernel reads the source page and fills the
        // (unpopulated, registered) destination page.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_COPY, &mut c) } != 0 {
            return Err(errno());
        }
        // SAFETY: the source page is the caller's; dropping it makes the
        // source look moved-from, as MOVE would have left it.
        unsafe { libc::madvise(src as *mut libc::c_void, PAGE, libc::MADV_DONTNEED) };
        Ok(())
    }

    /// Moves many ranges: sorted by destination, and merged where both
    /// destination and source continue each other, so contiguous runs go in
    /// one ioctl. Extents are `(dst, src, len)`; their `len`s must be
    /// page-aligned. No destination may overlap another destination or any
    /// source (checked first).
    ///
    /// # Safety
    /// As [`Mover::move_range`], for every extent.
    pub unsafe fn move_batch(
        &self,
        extents: &[Extent],
        opts: MoveOptions,
    ) -> Result<MoveReport, UffdError> {
        crate::extent::validate_extents(Op::Copy, extents)
            .map_err(|e| UffdError::Invalid(e.to_string()))?;
        for e in extents {
            check_aligned("destination", e.dst as usize, e.len)?;
            check_aligned("source", e.src as usize, e.len)?;
        }
        let mut sorted: Vec<Extent> = extents.iter().copied().filter(|e| e.len > 0).collect();
        sorted.sort_unstable_by_key(|e| e.dst as usize);
        let mut total = MoveReport::default();
        let mut i = 0;
        while i < sorted.len() {
            let mut run = sorted[i];
            i += 1;
            while i < sorted.len()
                && run.dst as usize + run.len == sorted[i].dst as usize
                && run.src as usize + run.len == sorted[i].src as usize
            {
                run.len += sorted[i].len;
                i += 1;
            }
            // SAFETY: the caller vouches for every extent; a run is a union
            // of extents that continue each other.
            match unsafe { self.move_range(run.dst, run.src as *mut u8, run.len, opts) } {
                Ok(r) => total.absorb(r),
                Err(UffdError::Ioctl {
                    op,
                    addr,
                    error,
                    report,
                }) => {
                    total.absorb(*report);
                    return Err(UffdError::Ioctl {
                        op,
                        addr,
                        error,
                        report: Box::new(total),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    /// Marks `[addr, addr + len)` (registered, unpopulated) as poisoned:
    /// any access raises SIGBUS with that address, as a hardware-poisoned
    /// page would. For tests of fault handling (Linux >= 6.6).
    ///
    /// # Safety
    /// Accessing the range afterwards raises SIGBUS; nothing may rely on
    /// reading it.
    pub unsafe fn poison(&self, addr: *mut u8, len: usize) -> Result<(), UffdError> {
        if !self.supports_poison() {
            return Err(UffdError::Unsupported(
                "UFFD_FEATURE_POISON (Linux 6.6 or later)".into(),
            ));
        }
        check_aligned("poison range", addr as usize, len)?;
        let mut p = UffdioPoison {
            range: UffdioRange {
                start: addr as u64,
                len: len as u64,
            },
            mode: 0,
            updated: 0,
        };
        // SAFETY: valid uffd and struct; the caller accepts the SIGBUS.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_POISON, &mut p) } != 0 {
            return Err(UffdError::Ioctl {
                op: "UFFDIO_POISON",
                addr: addr as usize,
                error: io::Error::last_os_error(),
                report: Box::default(),
            });
        }
        Ok(())
    }
}

/// Opens a userfaultfd (user-mode faults only where the kernel knows the
/// flag) and negotiates `features`; returns the fd and the features the
/// kernel reports.
fn open_with(features: u64) -> Result<(OwnedFd, u64), UffdError> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: userfaultfd(2) takes flags only and returns a new fd.
    let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY) };
    if fd < 0 && errno() == libc::EINVAL {
        // Kernels before 5.11 do not know UFFD_USER_MODE_ONLY.
        // SAFETY: as above.
        fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
    }
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS) => UffdError::Unsupported("no userfaultfd(2) in this kernel".into()),
            _ => UffdError::Permission(e),
        });
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    let mut api = UffdioApi {
        api: UFFD_API,
        features,
        ioctls: 0,
    };
    // SAFETY: a valid uffd and a properly sized, writable struct.
    if unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API_IOCTL, &mut api) } != 0 {
        return Err(UffdError::Unsupported(format!(
            "UFFDIO_API: {}",
            io::Error::last_os_error()
        )));
    }
    Ok((fd, api.features))
}

/// Page alignment, and a range that does not wrap around the address
/// space (every entry point checks this before any arithmetic on the end).
fn check_aligned(what: &str, addr: usize, len: usize) -> Result<(), UffdError> {
    if !addr.is_multiple_of(PAGE) || !len.is_multiple_of(PAGE) {
        return Err(UffdError::Invalid(format!(
            "{what} {addr:#x}+{len:#x} is not page-aligned (address and length must be multiples of 4096)"
        )));
    }
    if addr
        .checked_add(len)
        .is_none_or(|end| end > isize::MAX as usize)
    {
        return Err(UffdError::Invalid(format!(
            "{what} {addr:#x}+{len:#x} runs past the end of the address space"
        )));
    }
    Ok(())
}

/// Which pages of `[addr, addr + len)` are not resident, per mincore(2)
/// (empty if it cannot say: every page then counts as populated).
fn hole_map(addr: usize, len: usize) -> Vec<bool> {
    let mut v = vec![0u8; len.div_ceil(PAGE)];
    // SAFETY: `v` has one byte per page of the range; mincore only writes it.
    let rc = unsafe { libc::mincore(addr as *mut libc::c_void, len, v.as_mut_ptr()) };
    if rc != 0 {
        return Vec::new();
    }
    v.iter().map(|&b| b & 1 == 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        // Values from <linux/userfaultfd.h> on x86_64.
        assert_eq!(UFFDIO_API_IOCTL, 0xC018_AA3F);
        assert_eq!(UFFDIO_REGISTER, 0xC020_AA00);
        assert_eq!(UFFDIO_UNREGISTER, 0x8010_AA01);
        assert_eq!(UFFDIO_COPY, 0xC028_AA03);
        assert_eq!(UFFDIO_MOVE, 0xC028_AA05);
        assert_eq!(UFFDIO_POISON, 0xC020_AA08);
    }

    #[test]
    fn alignment_errors_say_what_is_wrong() {
        let e = check_aligned("source", 0x1001, 4096).unwrap_err();
        assert!(
            e.to_string().contains("source 0x1001") && e.to_string().contains("page-aligned"),
            "{e}"
        );
        assert!(check_aligned("x", 0x2000, 0x3000).is_ok());
    }
}
