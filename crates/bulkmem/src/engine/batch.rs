//! The engine's batch shapes: slices borrowed by the safe entry points, and
//! a fill's destination, each seen as a [`Batch`] (extent `i` as a run).
//! The trait itself and the adapter for extents given by address live in
//! [`crate::extent`], whose validation reads batches without the engine.

pub(super) use crate::extent::{Batch, Raw};
use crate::plan::Extent;
// Pointers for writing are rebuilt from exposed addresses: a merged run
// spans several borrows (see lib.rs).
use crate::plan::{exposed, exposed_mut};

/// A fill's destination (start, length) seen as a batch of one extent.
pub(super) struct FillShape(pub(super) *mut u8, pub(super) usize);

impl Batch for FillShape {
    fn count(&self) -> usize {
        1
    }
    fn get(&self, _: usize) -> Extent {
        Extent {
            dst: self.0,
            src: core::ptr::null(),
            len: self.1,
        }
    }
}

pub(super) struct CopySlices<'s, 'a>(pub(super) &'s [(&'a mut [u8], &'a [u8])]);
pub(super) struct ClearSlices<'s, 'a>(pub(super) &'s [&'a mut [u8]]);

impl Batch for CopySlices<'_, '_> {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn get(&self, i: usize) -> Extent {
        let (d, s) = &self.0[i];
        Extent {
            dst: exposed_mut(d.as_ptr()),
            src: exposed(s.as_ptr()),
            len: d.len(),
        }
    }
}

impl Batch for ClearSlices<'_, '_> {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn get(&self, i: usize) -> Extent {
        Extent {
            dst: exposed_mut(self.0[i].as_ptr()),
            src: core::ptr::null(),
            len: self.0[i].len(),
        }
    }
}
