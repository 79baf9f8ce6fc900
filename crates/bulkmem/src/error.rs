//! Errors of the copy, clear and batch entry points.

use std::fmt;

use crate::engine::Report;
use crate::strategy::{Op, Strategy};

/// Why an operation was refused or stopped. Every error except
/// `WorkerPanicked` and `Fault` is returned before anything was written.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// Destination and source lengths differ; `index` is the extent's
    /// position in a batch (`None` for a single copy).
    LengthMismatch {
        index: Option<usize>,
        dst: usize,
        src: usize,
    },
    /// The CPU (or `BULKMEM_DISABLE`) lacks a feature the strategy needs.
    Unavailable {
        strategy: Strategy,
        needs: &'static str,
    },
    /// The strategy does not implement this operation (e.g. `clzero` copy).
    Unsupported { strategy: Strategy, op: Op },
    /// Extent `index` is the first that overlaps an earlier extent `with`
    /// (a destination overlapping another destination or any source), or
    /// itself (`with == index`: its destination overlaps its own source).
    Overlap { index: usize, with: usize },
    /// Extent `index` cannot be valid memory (null or wrapping around).
    BadExtent { index: usize, reason: &'static str },
    /// A fill's template is empty, or `dst` is not a whole number of
    /// templates.
    BadFill { dst: usize, template: usize },
    /// An engine could not be built as asked.
    Config(String),
    /// A progress callback panicked in a worker; the batch stopped and the
    /// report says what was completed.
    WorkerPanicked {
        message: String,
        report: Box<Report>,
    },
    /// The strategy has no checked (fault-surviving) form; see
    /// `fault::CHECKED_COPY` / `CHECKED_CLEAR`.
    NotChecked { strategy: Strategy, op: Op },
    /// A checked copy or clear stopped at a SIGBUS: the bytes before
    /// `Fault::offset` are done, nothing after it was written.
    #[cfg(target_arch = "x86_64")]
    Fault(crate::fault::Fault),
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
            Error::Unavailable { strategy, needs } => write!(
                f,
                "strategy {strategy} is unavailable on this CPU: it needs {needs}"
            ),
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
            Error::Config(what) => write!(f, "engine: {what}"),
            Error::WorkerPanicked { message, report } => write!(
                f,
                "a progress callback panicked ({message}); extents 0..{} are complete",
                report.extents_done
            ),
            Error::NotChecked { strategy, op } => {
                #[cfg(target_arch = "x86_64")]
                let list: Vec<&str> = match op {
                    Op::Copy => crate::fault::CHECKED_COPY,
                    Op::Clear => crate::fault::CHECKED_CLEAR,
                }
                .iter()
                .map(|s| s.name())
                .collect();
                #[cfg(not(target_arch = "x86_64"))]
                let list: Vec<&str> = Vec::new();
                write!(
                    f,
                    "strategy {strategy} has no checked {op}; checked {op} strategies are: auto, {}",
                    list.join(", ")
                )
            }
            #[cfg(target_arch = "x86_64")]
            Error::Fault(fault) => write!(f, "{fault}"),
            Error::Unsupported { strategy, op } => {
                let list: Vec<&str> = Strategy::for_op(*op).iter().map(|s| s.name()).collect();
                write!(
                    f,
                    "strategy {strategy} cannot {op}; {op} strategies are: auto, {}",
                    list.join(", ")
                )
            }
        }
    }
}

impl std::error::Error for Error {}
