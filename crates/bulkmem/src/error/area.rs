//! The errors of one area each: what the copy, clear and batch calls can
//! fail with and nothing more, so that a caller's `match` is exhaustive
//! without a catch-all arm. Each converts into the umbrella [`Error`], so
//! `?` in a function returning `Error` keeps working, and each displays
//! exactly as the `Error` it converts into (one set of messages).

use std::fmt;

use super::Error;
use crate::report::Report;
use crate::strategy::{Op, Strategy};
use bulkmem_machine::extents::ExtentError;
use bulkmem_policy::CheckedStrategyError;
pub use bulkmem_policy::StrategyError;

/// Why a single copy was refused: what [`copy_opts`](crate::copy_opts) can
/// fail with. Nothing was written.
///
/// ```
/// use bulkmem::{CopyError, Options, Strategy};
///
/// let src = [1u8; 100];
/// let mut dst = [0u8; 64];
/// match bulkmem::copy_opts(&mut dst, &src, Options::strategy(Strategy::Auto)) {
///     Err(CopyError::LengthMismatch { dst, src }) => assert_eq!((dst, src), (64, 100)),
///     Err(CopyError::Unavailable { .. } | CopyError::Unsupported { .. }) => unreachable!("auto always runs"),
///     Ok(_) => unreachable!("the lengths differ"),
/// }
/// assert_eq!(dst, [0u8; 64]); // refused before anything was written
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyError {
    /// Destination and source lengths differ.
    LengthMismatch {
        /// The destination's length in bytes.
        dst: usize,
        /// The source's length in bytes.
        src: usize,
    },
    /// As [`StrategyError::Unavailable`].
    Unavailable {
        /// The strategy asked for.
        strategy: Strategy,
        /// The first missing CPU feature, as `/proc/cpuinfo` names it.
        needs: &'static str,
    },
    /// As [`StrategyError::Unsupported`].
    Unsupported {
        /// The strategy asked for.
        strategy: Strategy,
        /// The operation it was asked to do.
        op: Op,
    },
}

/// Why a batch was refused: what the calling-thread batch calls
/// ([`copy_batch`](crate::copy_batch), [`clear_batch`](crate::clear_batch),
/// [`copy_extents`](crate::copy_extents) and their kin) can fail with, and
/// [`EngineError::Batch`] for the engine's. Every one is found before
/// anything is written; `index` is the first offending extent's position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchError {
    /// Extent `index`'s destination and source lengths differ.
    LengthMismatch {
        /// The extent's position in the batch.
        index: usize,
        /// The destination's length in bytes.
        dst: usize,
        /// The source's length in bytes.
        src: usize,
    },
    /// Extent `index` is the first that overlaps an earlier extent `with`
    /// (a destination overlapping another destination or any source), or
    /// itself (`with == index`: its destination overlaps its own source).
    /// Only batches given by address can overlap; slices cannot.
    Overlap {
        /// The later of the two extents, in batch order.
        index: usize,
        /// The extent it overlaps (`index` itself for an extent whose
        /// destination overlaps its own source).
        with: usize,
    },
    /// Extent `index` cannot be valid memory (a null or wrapping pointer).
    BadExtent {
        /// The extent's position in the batch.
        index: usize,
        /// What is wrong with it, in words.
        reason: &'static str,
    },
    /// As [`StrategyError::Unavailable`].
    Unavailable {
        /// The strategy asked for.
        strategy: Strategy,
        /// The first missing CPU feature, as `/proc/cpuinfo` names it.
        needs: &'static str,
    },
    /// As [`StrategyError::Unsupported`].
    Unsupported {
        /// The strategy asked for.
        strategy: Strategy,
        /// The operation it was asked to do.
        op: Op,
    },
}

/// Why an [`Engine`](crate::Engine) batch call
/// ([`copy_batch`](crate::Engine::copy_batch) and its kin) failed: the
/// batch was refused ([`Batch`](EngineError::Batch), nothing written), the
/// engine could not take it (`Reentrant`, `Busy`, nothing written), or a
/// callback panicked part way (`WorkerPanicked`, with what was done).
///
/// A cancelled batch is not an error: it returns `Ok` with
/// [`Report::cancelled`] set, because the caller asked for it and needs
/// the report of what was written.
///
/// ```
/// use bulkmem::{BatchError, Engine, EngineError};
///
/// let engine = Engine::builder().threads(1).build()?;
/// let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
/// let mut batch = [(&mut a[..], &[1u8; 8][..]), (&mut b[..], &[2u8; 9][..])];
/// match engine.copy_batch(&mut batch) {
///     Err(EngineError::Batch(BatchError::LengthMismatch { index, dst, src })) => {
///         assert_eq!((index, dst, src), (1, 8, 9)); // the second extent
///     }
///     other => panic!("expected a length mismatch, got {other:?}"),
/// }
/// assert_eq!((a, b), ([0; 8], [0; 8])); // nothing written, not even extent 0
/// # Ok::<(), bulkmem::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineError {
    /// The batch itself was refused before anything was written.
    Batch(BatchError),
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
    /// a second): refused instead of waiting
    /// for ever; nothing written.
    Busy {
        /// How long the other batch had made no progress.
        stalled_ms: u64,
    },
}

impl From<StrategyError> for Error {
    fn from(e: StrategyError) -> Error {
        match e {
            StrategyError::Unavailable { strategy, needs } => {
                Error::Unavailable { strategy, needs }
            }
            StrategyError::Unsupported { strategy, op } => Error::Unsupported { strategy, op },
        }
    }
}

impl From<CheckedStrategyError> for Error {
    fn from(e: CheckedStrategyError) -> Error {
        match e {
            CheckedStrategyError::Unavailable { strategy, needs } => {
                Error::Unavailable { strategy, needs }
            }
            CheckedStrategyError::Unsupported { strategy, op } => {
                Error::Unsupported { strategy, op }
            }
            CheckedStrategyError::NotChecked { strategy, op } => Error::NotChecked { strategy, op },
        }
    }
}

impl From<StrategyError> for CopyError {
    fn from(e: StrategyError) -> CopyError {
        match e {
            StrategyError::Unavailable { strategy, needs } => {
                CopyError::Unavailable { strategy, needs }
            }
            StrategyError::Unsupported { strategy, op } => CopyError::Unsupported { strategy, op },
        }
    }
}

impl From<StrategyError> for BatchError {
    fn from(e: StrategyError) -> BatchError {
        match e {
            StrategyError::Unavailable { strategy, needs } => {
                BatchError::Unavailable { strategy, needs }
            }
            StrategyError::Unsupported { strategy, op } => BatchError::Unsupported { strategy, op },
        }
    }
}

impl From<StrategyError> for EngineError {
    fn from(e: StrategyError) -> EngineError {
        EngineError::Batch(e.into())
    }
}

impl From<BatchError> for EngineError {
    fn from(e: BatchError) -> EngineError {
        EngineError::Batch(e)
    }
}

impl From<CopyError> for Error {
    fn from(e: CopyError) -> Error {
        match e {
            CopyError::LengthMismatch { dst, src } => Error::LengthMismatch {
                index: None,
                dst,
                src,
            },
            CopyError::Unavailable { strategy, needs } => Error::Unavailable { strategy, needs },
            CopyError::Unsupported { strategy, op } => Error::Unsupported { strategy, op },
        }
    }
}

impl From<ExtentError> for BatchError {
    fn from(e: ExtentError) -> BatchError {
        match e {
            ExtentError::BadExtent { index, reason } => BatchError::BadExtent { index, reason },
            ExtentError::Overlap { index, with } => BatchError::Overlap { index, with },
        }
    }
}

impl From<ExtentError> for EngineError {
    fn from(e: ExtentError) -> EngineError {
        EngineError::Batch(e.into())
    }
}

impl From<ExtentError> for Error {
    fn from(e: ExtentError) -> Error {
        BatchError::from(e).into()
    }
}

impl From<BatchError> for Error {
    fn from(e: BatchError) -> Error {
        match e {
            BatchError::LengthMismatch { index, dst, src } => Error::LengthMismatch {
                index: Some(index),
                dst,
                src,
            },
            BatchError::Overlap { index, with } => Error::Overlap { index, with },
            BatchError::BadExtent { index, reason } => Error::BadExtent { index, reason },
            BatchError::Unavailable { strategy, needs } => Error::Unavailable { strategy, needs },
            BatchError::Unsupported { strategy, op } => Error::Unsupported { strategy, op },
        }
    }
}

impl From<EngineError> for Error {
    fn from(e: EngineError) -> Error {
        match e {
            EngineError::Batch(b) => b.into(),
            EngineError::WorkerPanicked { message, report } => {
                Error::WorkerPanicked { message, report }
            }
            EngineError::Reentrant => Error::Reentrant,
            EngineError::Busy { stalled_ms } => Error::Busy { stalled_ms },
        }
    }
}

impl EngineError {
    /// What the batch had written when it stopped: the report of a
    /// [`WorkerPanicked`](EngineError::WorkerPanicked) batch; `None` for
    /// the others, which wrote nothing.
    pub fn report(&self) -> Option<&Report> {
        match self {
            EngineError::WorkerPanicked { report, .. } => Some(report),
            _ => None,
        }
    }
}

macro_rules! display_as_umbrella {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&Error::from(self.clone()), f)
            }
        }

        impl std::error::Error for $t {}
    )*};
}

display_as_umbrella!(CopyError, BatchError, EngineError);
