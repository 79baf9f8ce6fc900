//! What calibration fails with: its own measuring (a buffer that cannot be
//! mapped, a CPU that cannot be pinned to, a strategy that wrote wrong
//! bytes, whose numbers would be meaningless) or the library's refusal of
//! a call it made. The library's error knows nothing of calibration.

use std::fmt;

/// Why a calibration stopped; no profile was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// Calibration could not measure.
    Measure {
        /// What went wrong, in words.
        what: String,
    },
    /// The library refused a call calibration made.
    Library(bulkmem::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Measure { what } => write!(f, "calibration failed: {what}"),
            Error::Library(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

/// The library's errors, narrow and umbrella alike, as `Library`.
macro_rules! from_library {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error::Library(e.into())
            }
        }
    )*};
}

from_library!(
    bulkmem::Error,
    bulkmem::BatchError,
    bulkmem::CopyError,
    bulkmem::EngineError,
    bulkmem::StrategyError
);
