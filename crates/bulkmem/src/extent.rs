//! The callers' extents as the engine and the calling-thread batches see
//! them: their walk and validation are the machine's (`extents`, shared
//! with the page mover), the length check of slice pairs is here.

use crate::error::BatchError;
pub(crate) use bulkmem_machine::extents::{next_run, validate, validate_extents, Batch, Raw};

/// The first `(dst, src)` pair whose lengths differ, as an error.
pub(crate) fn check_lengths(ops: &[(&mut [u8], &[u8])]) -> Result<(), BatchError> {
    match ops
        .iter()
        .enumerate()
        .find(|(_, (d, s))| d.len() != s.len())
    {
        Some((index, (d, s))) => Err(BatchError::LengthMismatch {
            index,
            dst: d.len(),
            src: s.len(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::plan::Extent;

    /// An extent at plain addresses, for tests that only look at them.
    pub(crate) fn ext(dst: usize, src: usize, len: usize) -> Extent {
        Extent {
            dst: dst as *mut u8,
            src: src as *const u8,
            len,
        }
    }
}
