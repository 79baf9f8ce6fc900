//! The policy's refusals: why a named strategy cannot run an operation
//! here, plain or checked. Each is found before anything is written, and
//! each displays as the umbrella error it converts into in `bulkmem` (one
//! set of messages, kept here).

use std::fmt;

use crate::strategy::{Op, Strategy};

/// Why a named strategy cannot run an operation here: what
/// [`Kernel::new`](crate::handle::Kernel::new) and the calls that take a
/// strategy can fail with. Nothing was written.
///
/// `Unavailable` is this machine's answer (fall back to `Auto`, or try the
/// next strategy); `Unsupported` is the caller's mistake (a clear-only
/// strategy asked to copy, or `Auto` where a concrete kernel is needed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrategyError {
    /// The CPU (or `BULKMEM_DISABLE`) lacks a feature the strategy needs.
    Unavailable {
        /// The strategy asked for.
        strategy: Strategy,
        /// The first missing CPU feature, as `/proc/cpuinfo` names it.
        needs: &'static str,
    },
    /// The strategy does not implement this operation (e.g. `clzero` copy).
    Unsupported {
        /// The strategy asked for.
        strategy: Strategy,
        /// The operation it was asked to do.
        op: Op,
    },
}

/// Why a checked (fault-surviving) kernel cannot be had for a strategy:
/// what [`CheckedCopyKernel::new`](crate::handle::CheckedCopyKernel::new)
/// and its kin can fail with. Nothing was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckedStrategyError {
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
    /// The strategy has no checked form for `op`.
    NotChecked {
        /// The strategy asked for.
        strategy: Strategy,
        /// The operation it was asked to do checked.
        op: Op,
    },
}

impl From<StrategyError> for CheckedStrategyError {
    fn from(e: StrategyError) -> CheckedStrategyError {
        match e {
            StrategyError::Unavailable { strategy, needs } => {
                CheckedStrategyError::Unavailable { strategy, needs }
            }
            StrategyError::Unsupported { strategy, op } => {
                CheckedStrategyError::Unsupported { strategy, op }
            }
        }
    }
}

impl fmt::Display for StrategyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |s: &[Strategy]| s.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ");
        match *self {
            StrategyError::Unavailable { strategy, needs } => write!(
                f,
                "strategy {strategy} is unavailable on this CPU: it needs {needs}"
            ),
            StrategyError::Unsupported {
                strategy: Strategy::Auto,
                op,
            } => write!(
                f,
                "auto is a choice made per call, not one {op} kernel: name a concrete strategy ({})",
                names(Strategy::for_op(op))
            ),
            StrategyError::Unsupported { strategy, op } => write!(
                f,
                "strategy {strategy} cannot {op}; {op} strategies are: auto, {}",
                names(Strategy::for_op(op))
            ),
        }
    }
}

impl fmt::Display for CheckedStrategyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CheckedStrategyError::Unavailable { strategy, needs } => {
                StrategyError::Unavailable { strategy, needs }.fmt(f)
            }
            CheckedStrategyError::Unsupported { strategy, op } => {
                StrategyError::Unsupported { strategy, op }.fmt(f)
            }
            CheckedStrategyError::NotChecked { strategy, op } => {
                #[cfg(target_arch = "x86_64")]
                let list: Vec<&str> = match op {
                    Op::Copy => crate::descriptor::CHECKED_COPY.as_slice(),
                    Op::Clear => crate::descriptor::CHECKED_CLEAR.as_slice(),
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
        }
    }
}

impl std::error::Error for StrategyError {}

impl std::error::Error for CheckedStrategyError {}
