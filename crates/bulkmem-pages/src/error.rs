//! What a mapping, a page move or a compaction can fail with: this crate's
//! own error, which `bulkmem`'s umbrella `Error` wraps (`Error::Pages`).

use std::fmt;

use crate::move_report::MoveReport;

/// Why a page move or a compaction was refused or stopped. Every error
/// except `Ioctl` is returned before anything changed; `Ioctl`'s report
/// says what had been moved (moved pages stay moved).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A count lies outside what it may be (a thread or page count).
    /// Nothing was started.
    OutOfRange {
        /// The setting, in words (e.g. `"compaction threads"`).
        what: &'static str,
        /// The value asked for.
        value: usize,
        /// The smallest value allowed.
        min: usize,
        /// The largest value allowed.
        max: usize,
    },
    /// Extent `index` of a batch move cannot be valid memory (null or
    /// wrapping around).
    BadExtent {
        /// The extent's position in the batch.
        index: usize,
        /// What is wrong with it, in words.
        reason: &'static str,
    },
    /// Extent `index` of a batch move is the first that overlaps an
    /// earlier extent `with` (`with == index`: its destination overlaps
    /// its own source).
    Overlap {
        /// The later of the two extents, in batch order.
        index: usize,
        /// The extent it overlaps.
        with: usize,
    },
    /// A memory range cannot be used as asked.
    BadRange {
        /// The range's first address.
        addr: usize,
        /// The range's length in bytes.
        len: usize,
        /// What is wrong with it, in words.
        why: String,
    },
    /// A system call failed before anything changed.
    Syscall {
        /// The call's name, as in its man page (e.g. `"userfaultfd"`).
        call: &'static str,
        /// The `errno` it set.
        errno: i32,
    },
    /// The kernel lacks something asked for (`what`: a system call, a
    /// feature, or an operation on a kind of memory), e.g. `UFFDIO_MOVE`
    /// before Linux 6.8.
    NotSupportedHere {
        /// What is missing, in words.
        what: String,
    },
    /// A userfaultfd ioctl (`op`) failed at `addr` in a way the
    /// [`Mover`](crate::uffd::Mover) does not recover from; `report` says
    /// what had been done before it (pages moved or copied stay moved).
    Ioctl {
        /// The ioctl's name (e.g. `"UFFDIO_MOVE"`).
        op: &'static str,
        /// The destination address the failing ioctl was given.
        addr: usize,
        /// The `errno` it failed with.
        errno: i32,
        /// The pages handled before the failure.
        report: Box<MoveReport>,
    },
    /// `max` compactions are running already, the most at once.
    TooManyCompactions {
        /// How many may run at once.
        max: usize,
    },
    /// A compaction's collector thread panicked (in the producer, most
    /// likely); the compaction was undone as far as it could be.
    CollectorPanicked,
}

impl From<bulkmem_machine::extents::ExtentError> for Error {
    fn from(e: bulkmem_machine::extents::ExtentError) -> Error {
        use bulkmem_machine::extents::ExtentError;
        match e {
            ExtentError::BadExtent { index, reason } => Error::BadExtent { index, reason },
            ExtentError::Overlap { index, with } => Error::Overlap { index, with },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let os = |errno: i32| std::io::Error::from_raw_os_error(errno);
        match self {
            Error::OutOfRange {
                what,
                value,
                min,
                max,
            } => write!(f, "{what}: {value} is out of range ({min} to {max})"),
            Error::BadExtent { index, reason } => write!(f, "extent {index}: {reason}"),
            Error::Overlap { index, with } if index == with => write!(
                f,
                "extent {index}: its destination overlaps its own source"
            ),
            Error::Overlap { index, with } => write!(
                f,
                "extent {index} overlaps extent {with} (a destination may overlap nothing else in the batch)"
            ),
            Error::BadRange { addr, len, why } => {
                write!(f, "range {addr:#x}+{len:#x}: {why}")
            }
            Error::Syscall {
                call: "userfaultfd",
                errno,
            } if *errno == libc::EPERM || *errno == libc::EACCES => write!(
                f,
                "userfaultfd(2) was refused ({}): without CAP_SYS_PTRACE (e.g. as root), kernels \
                 before 5.11 need vm.unprivileged_userfaultfd=1; later ones allow user-mode-only \
                 userfaultfds, so there a security module (SELinux, seccomp) is refusing it",
                os(*errno)
            ),
            Error::Syscall { call, errno } => write!(f, "{call} failed: {}", os(*errno)),
            Error::NotSupportedHere { what } => write!(f, "not supported here: {what}"),
            Error::Ioctl {
                op,
                addr,
                errno,
                report,
            } => write!(
                f,
                "{op} failed at {addr:#x}: {} (after {} pages moved, {} copied); source and \
                 destination must be private anonymous mappings with the same protections, each \
                 range inside one mapping",
                os(*errno),
                report.moved,
                report.copied
            ),
            Error::TooManyCompactions { max } => write!(
                f,
                "compact: {max} spaces are being compacted already (the most at once)"
            ),
            Error::CollectorPanicked => {
                write!(f, "compact: a collector thread panicked (in the producer?)")
            }
        }
    }
}

impl std::error::Error for Error {}
