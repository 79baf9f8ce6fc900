//! Errors of the copy and clear entry points.

use std::fmt;

use crate::strategy::{Op, Strategy};

/// Why an operation was refused. Every error is returned before anything was
/// written.
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
