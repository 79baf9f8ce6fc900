//! Errors: the umbrella [`Error`] every fallible call can be turned into,
//! and (in `area`) the narrower types of the copy, clear and batch calls,
//! which return only what they can fail with.

mod area;

use std::fmt;

pub use area::{BatchError, CopyError, EngineError, StrategyError};
use bulkmem_policy::handle::Fault;
pub use bulkmem_policy::CheckedStrategyError;

use crate::report::Report;
use crate::strategy::{Op, Strategy};
use bulkmem_pages::Error as PagesError;

/// Why an operation was refused or stopped. Every error except
/// `WorkerPanicked`, `Fault`, `MigrationFailed` and a page move's `Ioctl`
/// (in `Pages`) is returned before anything was written.
///
/// The umbrella type: the calls of one area return a narrower type that
/// names only what they can fail with ([`CopyError`], [`BatchError`],
/// [`EngineError`], [`StrategyError`], and the page moves'
/// [`PagesError`]), and each converts into this one
/// with `From`, so `?` in a function returning `Error` accepts them all.
/// The other areas (fills, checked copies, tickets, `numa`, offload)
/// return `Error` itself.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Destination and source lengths differ; `index` is the extent's
    /// position in a batch (`None` for a single copy).
    LengthMismatch {
        /// The extent's position in the batch; `None` for a single copy.
        index: Option<usize>,
        /// The destination's length in bytes.
        dst: usize,
        /// The source's length in bytes.
        src: usize,
    },
    /// The CPU (or `BULKMEM_DISABLE`) lacks a feature the strategy needs.
    Unavailable {
        /// The strategy asked for.
        strategy: Strategy,
        /// The first missing CPU feature, as `/proc/cpuinfo` names it
        /// (e.g. `"avx2"`, `"avx512bw"`, `"clzero"`).
        needs: &'static str,
    },
    /// The strategy does not implement this operation (e.g. `clzero` copy).
    Unsupported {
        /// The strategy asked for (`Auto` where a concrete kernel is
        /// required).
        strategy: Strategy,
        /// The operation it was asked to do.
        op: Op,
    },
    /// Extent `index` is the first that overlaps an earlier extent `with`
    /// (a destination overlapping another destination or any source), or
    /// itself (`with == index`: its destination overlaps its own source).
    Overlap {
        /// The later of the two extents, in batch order.
        index: usize,
        /// The extent it overlaps (`index` itself for an extent whose
        /// destination overlaps its own source).
        with: usize,
    },
    /// Extent `index` cannot be valid memory (null or wrapping around).
    BadExtent {
        /// The extent's position in the batch.
        index: usize,
        /// What is wrong with it, in words.
        reason: &'static str,
    },
    /// A fill's template is empty, or `dst` is not a whole number of
    /// templates.
    BadFill {
        /// The destination's length in bytes.
        dst: usize,
        /// The template's length in bytes (0: empty).
        template: usize,
    },
    /// A setting or count lies outside what it may be (a thread, channel,
    /// page or byte count). Nothing was started or written.
    OutOfRange {
        /// The setting, in words (e.g. `"engine threads"`).
        what: &'static str,
        /// The value asked for.
        value: usize,
        /// The smallest value allowed.
        min: usize,
        /// The largest value allowed.
        max: usize,
    },
    /// An engine's workers have no CPU to run on: none of the CPUs asked
    /// for (`asked`; empty: any online CPU) is online and in this process's
    /// affinity (`allowed`).
    NoUsableCpu {
        /// The CPUs the builder was given (empty: none named).
        asked: Vec<usize>,
        /// The CPUs this process may run on, ascending.
        allowed: Vec<usize>,
    },
    /// A worker could not be pinned to `cpu` (`sched_setaffinity` failed
    /// with `errno`).
    CannotPin {
        /// The CPU asked for.
        cpu: usize,
        /// The `errno` pinning failed with.
        errno: i32,
    },
    /// An offload was asked of an engine built without one
    /// (`EngineBuilder::offload`).
    NoOffload,
    /// Something owned by another process, here inherited by a child made
    /// by `fork()`, was used in the child (`what`: a ticket, an offload's
    /// channels), which cannot: their threads are the parent's.
    ForkedChild {
        /// What was used, in words.
        what: &'static str,
        /// The process that owns it.
        owner: u32,
    },
    /// An offload's copy engine refused a call (`call`), in its own words.
    Offload {
        /// What was asked of it (e.g. `"register"`).
        call: &'static str,
        /// Its answer.
        why: String,
    },
    /// `fault::chain_to` was given a signal other than SIGBUS or SIGSEGV,
    /// or a host keeps those signals (`fault::host`).
    NotChainable {
        /// The signal asked for.
        signal: i32,
    },
    /// A callback (a progress callback, or a fill's patch) panicked; the
    /// batch stopped and the report names the completed prefix.
    WorkerPanicked {
        /// The panic's message when its payload is a string, otherwise
        /// `"a callback panicked"`.
        message: String,
        /// What the batch had done when it stopped.
        report: Box<Report>,
    },
    /// A progress callback or patch closure submitted work to the engine
    /// running it (which waits for it): refused, nothing written.
    Reentrant,
    /// Another thread's batch on this engine, run on that thread, made no
    /// progress for `stalled_ms` milliseconds (at least
    /// a second): most likely one of its
    /// callbacks never returned (a C `longjmp` out of it). Refused instead
    /// of waiting for ever; nothing written.
    Busy {
        /// How long the other batch had made no progress.
        stalled_ms: u64,
    },
    /// The strategy has no checked (fault-surviving) form; see
    /// `fault::checked_strategies`.
    NotChecked {
        /// The strategy asked for.
        strategy: Strategy,
        /// The operation it was asked to do checked.
        op: Op,
    },
    /// A checked copy or clear stopped at a fault (SIGBUS or SIGSEGV): the
    /// bytes before `Fault::offset` are done; see [`Fault`] for the rest.
    #[cfg(target_arch = "x86_64")]
    Fault(Fault),
    /// No NUMA node `node` with memory; `nodes` are the ones there are.
    NoSuchNode {
        /// The node asked for.
        node: usize,
        /// The nodes with memory, ascending.
        nodes: Vec<usize>,
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
    /// The target node has too little free memory for the migration.
    NotEnoughMemory {
        /// The target node.
        node: usize,
        /// Bytes the migration would allocate there.
        need: u64,
        /// Bytes free there when asked.
        free: u64,
    },
    /// `numa::migrate_by_copy` stopped at `stage`; `intact` says whether
    /// the original memory (contents, addresses, protection) is unchanged.
    MigrationFailed {
        /// The step that failed, in words, as it reads after "migration by
        /// copy failed" (e.g. "mapping the new region").
        stage: String,
        /// The failing call's `errno` (`EIO` where none set one).
        errno: i32,
        /// Whether the original memory is unchanged.
        intact: bool,
    },
    /// The kernel lacks something asked for (`what`: a system call, a
    /// feature, or an operation on a kind of memory), e.g. `UFFDIO_MOVE`
    /// before Linux 6.8.
    NotSupportedHere {
        /// What is missing, in words.
        what: String,
    },
    /// A mapping, page move or compaction failed (`mapping`, `uffd`,
    /// `compact`): the page moves' own error, whose `Ioctl` carries what
    /// had been moved.
    Pages(PagesError),
}

impl From<PagesError> for Error {
    fn from(e: PagesError) -> Error {
        Error::Pages(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::LengthMismatch {
                index: Some(i),
                dst,
                src,
            } => write!(
                f,
                "extent {i}: destination is {dst} bytes but source is {src} bytes"
            ),
            Error::LengthMismatch {
                index: None,
                dst,
                src,
            } => write!(f, "destination is {dst} bytes but source is {src} bytes"),
            Error::Unavailable { strategy, needs } => {
                let (strategy, needs) = (*strategy, *needs);
                StrategyError::Unavailable { strategy, needs }.fmt(f)
            }
            Error::Overlap { index, with } if index == with => write!(
                f,
                "extent {index}: its destination overlaps its own source"
            ),
            Error::Overlap { index, with } => write!(
                f,
                "extent {index} overlaps extent {with} (a destination may overlap nothing else in the batch)"
            ),
            Error::BadExtent { index, reason } => write!(f, "extent {index}: {reason}"),
            Error::BadFill { template: 0, .. } => write!(f, "the fill template is empty"),
            Error::BadFill { dst, template } => write!(
                f,
                "a destination of {dst} bytes is not a whole number of {template}-byte templates"
            ),
            Error::OutOfRange {
                what,
                value,
                min,
                max,
            } => write!(f, "{what}: {value} is out of range ({min} to {max})"),
            Error::NoUsableCpu { asked, allowed } if asked.is_empty() => write!(
                f,
                "engine: this process may run on no online CPU (affinity: {allowed:?})"
            ),
            Error::NoUsableCpu { asked, allowed } => write!(
                f,
                "engine: none of the CPUs {asked:?} is online and allowed to this process \
                 (affinity: {allowed:?})"
            ),
            Error::CannotPin { cpu, errno } => write!(
                f,
                "engine: cannot pin a worker to CPU {cpu}: {}",
                std::io::Error::from_raw_os_error(*errno)
            ),
            Error::NoOffload => write!(f, "this engine has no offload (EngineBuilder::offload)"),
            Error::ForkedChild { what, owner } => write!(
                f,
                "{what} cannot be used in a child made by fork(): it belongs to process {owner} \
                 (the parent)"
            ),
            Error::Offload { call, why } => write!(f, "offload: cannot {call}: {why}"),
            Error::NotChainable { signal } => write!(
                f,
                "fault::chain_to: signal {signal} is not SIGBUS or SIGSEGV, or a host keeps \
                 them (fault::host)"
            ),
            Error::WorkerPanicked { message, report } => write!(
                f,
                "a callback panicked in the engine ({message}); extents 0..{} are complete",
                report.extents_done
            ),
            Error::Reentrant => write!(
                f,
                "a callback submitted a batch to the engine that is running it (it would wait for itself)"
            ),
            Error::Busy { stalled_ms } => write!(
                f,
                "the engine is running another thread's batch on that thread, which has made no \
                 progress for {stalled_ms} ms (a callback that never returned?)"
            ),
            Error::NotChecked { strategy, op } => {
                let (strategy, op) = (*strategy, *op);
                CheckedStrategyError::NotChecked { strategy, op }.fmt(f)
            }
            #[cfg(target_arch = "x86_64")]
            Error::Fault(fault) => write!(f, "{fault}"),
            Error::NoSuchNode { node, nodes } if nodes.len() == 1 => write!(
                f,
                "there is no NUMA node {node}: this machine has one node ({}), so there is nowhere to migrate to",
                nodes[0]
            ),
            Error::NoSuchNode { node, nodes } => write!(
                f,
                "there is no NUMA node {node} with memory; the nodes are {}",
                nodes.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
            ),
            Error::BadRange { addr, len, why } => {
                write!(f, "range {addr:#x}+{len:#x}: {why}")
            }
            Error::Syscall { call, errno } => write!(
                f,
                "{call} failed: {}",
                std::io::Error::from_raw_os_error(*errno)
            ),
            Error::NotEnoughMemory { node, need, free } => write!(
                f,
                "node {node} has {} MiB free, the migration needs {} MiB",
                free >> 20,
                need >> 20
            ),
            Error::MigrationFailed {
                stage,
                errno,
                intact,
            } => write!(
                f,
                "migration by copy failed {stage}: {}; {}",
                std::io::Error::from_raw_os_error(*errno),
                if *intact {
                    "the original memory is intact"
                } else {
                    "the original memory may have changed"
                }
            ),
            Error::NotSupportedHere { what } => write!(f, "not supported here: {what}"),
            Error::Pages(e) => e.fmt(f),
            Error::Unsupported { strategy, op } => {
                let (strategy, op) = (*strategy, *op);
                StrategyError::Unsupported { strategy, op }.fmt(f)
            }
        }
    }
}

impl std::error::Error for Error {}
