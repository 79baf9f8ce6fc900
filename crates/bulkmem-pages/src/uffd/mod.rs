//! Batched page moves with userfaultfd `UFFDIO_MOVE` (Linux >= 6.8), the
//! primitive Android's garbage collector compacts its heap with (the kernel's UFFDIO_MOVE batching patches).
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
//! page-aligned, and the destination pages are unpopulated.
//!
//! Failures are the crate's [`Error`], so callers handle one error type:
//! [`Error::NotSupportedHere`] when the kernel lacks what is asked,
//! [`Error::Syscall`] when userfaultfd(2) is refused, [`Error::BadRange`]
//! (and, for [`Mover::move_batch`], the engine's extent errors) for
//! arguments refused before any ioctl, and [`Error::Ioctl`] when an ioctl
//! fails in a way the mover does not recover from.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::Error;
use crate::plan::Extent;
use crate::strategy::Op;

pub(crate) mod ioctl;

use crate::move_report::hole_map;
pub use crate::move_report::{MoveFailure, MoveOptions, MoveReport};
use ioctl::*;
use ioctl::{UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES, UFFDIO_MOVE_MODE_DONTWAKE};

const PAGE: usize = 4096;

/// Owns a userfaultfd and the destination ranges registered with it.
///
/// Needs Linux 6.8 or later and permission to open a userfaultfd, hence
/// `no_run`:
///
/// ```no_run
/// # extern crate bulkmem_pages as bulkmem; // users name bulkmem
/// use bulkmem::mapping::Mapping;
/// use bulkmem::uffd::{MoveOptions, Mover};
///
/// let mut src = Mapping::anonymous(2 << 20)?;
/// src.as_mut_slice().fill(7); // populated source pages
/// let dst = Mapping::anonymous(2 << 20)?; // unpopulated destination
/// let mut mover = Mover::new()?;
/// mover.register(dst.as_mut_ptr(), dst.len())?;
/// let opts = MoveOptions::default().fallback_copy(true);
/// // SAFETY: both ranges are private anonymous mappings of this process
/// // with the same protection; nothing else touches them during the call
/// // and no reference points into them across it.
/// let report = unsafe { mover.move_range(dst.as_mut_ptr(), src.as_mut_ptr(), dst.len(), opts) }?;
/// assert!(report.is_complete());
/// assert_eq!(report.moved + report.copied, dst.len() / 4096);
/// mover.unregister(dst.as_mut_ptr(), dst.len())?;
/// assert!(dst.as_slice().iter().all(|&b| b == 7));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Mover {
    fd: OwnedFd,
    features: u64,
    registered: Vec<(usize, usize)>,
}

/// `EAGAIN` retries on one position before it counts as a failure.
const MAX_RETRIES: usize = 1000;

/// This thread's `errno`.
pub(crate) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl Mover {
    /// Opens a userfaultfd (user-mode faults only, which needs no privilege
    /// where the sysctl allows it) and negotiates `UFFD_FEATURE_MOVE` (and
    /// `UFFD_FEATURE_POISON` where the kernel has it).
    pub fn new() -> Result<Mover, Error> {
        // Ask for no features first: the answer lists what the kernel has.
        // UFFDIO_API may be issued once per descriptor, so the features are
        // then enabled on a second one.
        let (_, offered) = open_with(0)?;
        if offered & UFFD_FEATURE_MOVE == 0 {
            return Err(Error::NotSupportedHere {
                what: "userfaultfd UFFD_FEATURE_MOVE (UFFDIO_MOVE needs Linux 6.8 or later)".into(),
            });
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
    pub fn register(&mut self, addr: *mut u8, len: usize) -> Result<(), Error> {
        check_aligned("range to register", addr as usize, len)?;
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
            return Err(Error::BadRange {
                addr: addr as usize,
                len,
                why: format!(
                    "cannot register it with userfaultfd: {} (it must be mapped, private and \
                     anonymous)",
                    io::Error::last_os_error()
                ),
            });
        }
        if r.ioctls & IOCTL_BIT_MOVE == 0 {
            return Err(Error::NotSupportedHere {
                what: format!(
                    "UFFDIO_MOVE on {:#x}+{len:#x} (not private anonymous memory?)",
                    addr as usize
                ),
            });
        }
        self.registered.push((addr as usize, len));
        Ok(())
    }

    /// Unregisters a range given to [`Mover::register`].
    pub fn unregister(&mut self, addr: *mut u8, len: usize) -> Result<(), Error> {
        check_aligned("range to unregister", addr as usize, len)?;
        let mut r = UffdioRange {
            start: addr as u64,
            len: len as u64,
        };
        // SAFETY: valid uffd and struct.
        if unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_UNREGISTER, &mut r) } != 0 {
            return Err(Error::BadRange {
                addr: addr as usize,
                len,
                why: format!(
                    "cannot unregister it from userfaultfd: {}",
                    io::Error::last_os_error()
                ),
            });
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
    ) -> Result<MoveReport, Error> {
        let (d, s) = (dst as usize, src as usize);
        check_aligned("destination", d, len)?;
        check_aligned("source", s, len)?;
        if len == 0 {
            return Ok(MoveReport::default());
        }
        if d < s + len && s < d + len {
            return Err(Error::BadRange {
                addr: d,
                len,
                why: format!("the destination overlaps the source {s:#x}+{len:#x}"),
            });
        }
        if !self.is_registered(d, len) {
            return Err(Error::BadRange {
                addr: d,
                len,
                why: "the destination is not registered with this Mover (call register first)"
                    .into(),
            });
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
            let (dst, src) = ((d + done) as *mut u8, (s + done) as *mut u8);
            // SAFETY: [done, done + n) lies in both ranges the caller vouched for.
            let (moved, err) = unsafe { self.move_once(dst, src, n, mode) };
            report.count_moved(&holes, done, moved);
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
                    return Err(Error::Ioctl {
                        op: "UFFDIO_MOVE",
                        addr: at_d,
                        errno: e,
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
    ) -> Result<MoveReport, Error> {
        crate::extents::validate_extents(Op::Copy, extents)?;
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
                Err(Error::Ioctl {
                    op,
                    addr,
                    errno,
                    report,
                }) => {
                    total.absorb(*report);
                    return Err(Error::Ioctl {
                        op,
                        addr,
                        errno,
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
    pub unsafe fn poison(&self, addr: *mut u8, len: usize) -> Result<(), Error> {
        if !self.supports_poison() {
            return Err(Error::NotSupportedHere {
                what: "userfaultfd UFFD_FEATURE_POISON (UFFDIO_POISON needs Linux 6.6 or later)"
                    .into(),
            });
        }
        check_aligned("range to poison", addr as usize, len)?;
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
            return Err(Error::Ioctl {
                op: "UFFDIO_POISON",
                addr: addr as usize,
                errno: errno(),
                report: Box::default(),
            });
        }
        Ok(())
    }
}

/// Opens a userfaultfd (user-mode faults only where the kernel knows the
/// flag) and negotiates `features`; returns the fd and the features the
/// kernel reports.
pub(crate) fn open_with(features: u64) -> Result<(OwnedFd, u64), Error> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: userfaultfd(2) takes flags only and returns a new fd.
    let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY) };
    if fd < 0 && errno() == libc::EINVAL {
        // Kernels before 5.11 do not know UFFD_USER_MODE_ONLY.
        // SAFETY: as above.
        fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
    }
    if fd < 0 {
        return Err(match errno() {
            libc::ENOSYS if seccomp_filtered() => Error::NotSupportedHere {
                what: "userfaultfd(2): this process's seccomp filter answers ENOSYS (a \
                       container runtime's or sandbox's policy; the kernel may have it)"
                    .into(),
            },
            libc::ENOSYS => Error::NotSupportedHere {
                what: "userfaultfd(2) (this kernel has none: ENOSYS)".into(),
            },
            // EPERM's Display says which sysctl or capability is missing.
            e => Error::Syscall {
                call: "userfaultfd",
                errno: e,
            },
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
        return Err(Error::NotSupportedHere {
            what: format!("userfaultfd UFFDIO_API: {}", io::Error::last_os_error()),
        });
    }
    Ok((fd, api.features))
}

/// Whether a seccomp filter is in force for this process (`Seccomp: 2` in
/// /proc/self/status): then an `ENOSYS` may be the filter's, not the
/// kernel's.
fn seccomp_filtered() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Seccomp:") && l.split_whitespace().nth(1) == Some("2"))
    })
}

/// Page alignment, and a range that does not wrap around the address
/// space (every entry point checks this before any arithmetic on the end).
pub(crate) fn check_aligned(what: &str, addr: usize, len: usize) -> Result<(), Error> {
    let why = if !addr.is_multiple_of(PAGE) || !len.is_multiple_of(PAGE) {
        format!("the {what} is not page-aligned (address and length must be multiples of 4096)")
    } else if addr
        .checked_add(len)
        .is_none_or(|end| end > isize::MAX as usize)
    {
        format!("the {what} runs past the end of the address space")
    } else {
        return Ok(());
    };
    Err(Error::BadRange { addr, len, why })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_errors_say_what_is_wrong() {
        let e = check_aligned("source", 0x1001, 4096).unwrap_err();
        assert!(
            e.to_string()
                .contains("0x1001+0x1000: the source is not page-aligned"),
            "{e}"
        );
        assert!(check_aligned("x", 0x2000, 0x3000).is_ok());
    }

    #[test]
    fn a_refused_userfaultfd_says_how_to_allow_it() {
        let e = Error::Syscall {
            call: "userfaultfd",
            errno: libc::EPERM,
        }
        .to_string();
        assert!(
            e.contains("vm.unprivileged_userfaultfd=1") && e.contains("CAP_SYS_PTRACE"),
            "{e}"
        );
    }
}
