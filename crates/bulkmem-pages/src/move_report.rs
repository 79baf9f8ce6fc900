//! What a page move did: the options it ran with and its page accounting.
//! Plain data, apart from `uffd` (which fills it in), so that errors can
//! carry a partial report without depending on the mover.

const PAGE: usize = 4096;

/// Options of [`Mover::move_range`](crate::uffd::Mover::move_range).
///
/// Start from [`MoveOptions::default`] (everything off, whole range per
/// ioctl) and set what you need with the methods of the same names:
/// `MoveOptions::default().fallback_copy(true)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MoveOptions {
    /// Skip source pages that are not populated (holes) instead of reporting
    /// them; they are counted in [`MoveReport::holes`].
    pub allow_src_holes: bool,
    /// Don't wake threads faulting on the destination.
    pub dont_wake: bool,
    /// Copy pages `MOVE` refuses (`EBUSY`) with `UFFDIO_COPY` and drop them
    /// from the source, so the range still ends up complete.
    pub fallback_copy: bool,
    /// Largest length per ioctl (0: the whole range). For benchmarks: 4096
    /// gives the per-page loop.
    pub max_ioctl: usize,
}

impl MoveOptions {
    /// Sets [`allow_src_holes`](MoveOptions::allow_src_holes).
    #[must_use]
    pub fn allow_src_holes(mut self, on: bool) -> MoveOptions {
        self.allow_src_holes = on;
        self
    }

    /// Sets [`dont_wake`](MoveOptions::dont_wake).
    #[must_use]
    pub fn dont_wake(mut self, on: bool) -> MoveOptions {
        self.dont_wake = on;
        self
    }

    /// Sets [`fallback_copy`](MoveOptions::fallback_copy).
    #[must_use]
    pub fn fallback_copy(mut self, on: bool) -> MoveOptions {
        self.fallback_copy = on;
        self
    }

    /// Sets [`max_ioctl`](MoveOptions::max_ioctl), in bytes (0: no limit).
    #[must_use]
    pub fn max_ioctl(mut self, bytes: usize) -> MoveOptions {
        self.max_ioctl = bytes;
        self
    }
}

/// A page that could not be moved (nor copied).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveFailure {
    /// The destination page's address.
    pub dst: usize,
    /// The source page's address (still holding the page, if it had one).
    pub src: usize,
    /// `EEXIST`, `ENOENT`, `EBUSY`, ...
    pub errno: i32,
}

/// What a move did, in pages. Each page of the range is counted once, in
/// exactly one of `moved`, `copied`, `holes` and `failures`: when
/// [`Mover::move_range`](crate::uffd::Mover::move_range) returns `Ok`, their sum
/// is the range's page count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MoveReport {
    /// Pages moved by `UFFDIO_MOVE` (not the source holes it skipped).
    pub moved: usize,
    /// Moved by copy after `EBUSY` (with `fallback_copy`).
    pub copied: usize,
    /// Source holes skipped (with `allow_src_holes`), as `mincore` saw the
    /// source just before the move. A hole over a populated destination page
    /// is not skipped but refused (`EEXIST`): a failure. (A swapped-out
    /// source page looks like a hole to `mincore`: it is moved but counted
    /// here.)
    pub holes: usize,
    /// Pages left where they were: neither moved, copied nor skipped.
    pub failures: Vec<MoveFailure>,
    /// ioctls issued, `EAGAIN` retries included.
    pub ioctls: usize,
    /// `EAGAIN` retries among `ioctls`.
    pub retries: usize,
}

impl MoveReport {
    /// Every page is at the destination (moved, copied or a skipped hole).
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty()
    }

    pub(super) fn absorb(&mut self, o: MoveReport) {
        self.moved += o.moved;
        self.copied += o.copied;
        self.holes += o.holes;
        self.failures.extend(o.failures);
        self.ioctls += o.ioctls;
        self.retries += o.retries;
    }

    /// Counts `bytes` the kernel reported moved at offset `at` of the range:
    /// it counts the source holes it skips as moved, so the pages `holes`
    /// (from [`hole_map`]) marks are taken out of `moved`.
    pub(super) fn count_moved(&mut self, holes: &[bool], at: usize, bytes: usize) {
        let skipped = holes
            .get(at / PAGE..(at + bytes) / PAGE)
            .map_or(0, |h| h.iter().filter(|&&hole| hole).count());
        self.holes += skipped;
        self.moved += bytes / PAGE - skipped;
    }
}

/// Which pages of `[addr, addr + len)` are not resident, per mincore(2)
/// (empty if it cannot say: every page then counts as populated).
pub(super) fn hole_map(addr: usize, len: usize) -> Vec<bool> {
    let mut v = vec![0u8; len.div_ceil(PAGE)];
    // SAFETY: `v` has one byte per page of the range; mincore only writes it.
    let rc = unsafe { libc::mincore(addr as *mut libc::c_void, len, v.as_mut_ptr()) };
    if rc != 0 {
        return Vec::new();
    }
    v.iter().map(|&b| b & 1 == 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_holes_are_not_counted_as_moved() {
        let holes = [false, true, true, false];
        let mut r = MoveReport::default();
        r.count_moved(&holes, PAGE, 2 * PAGE);
        r.count_moved(&holes, 3 * PAGE, PAGE);
        assert_eq!((r.moved, r.holes), (1, 2));
        // Without a hole map every page the kernel reports is a moved page.
        let mut r = MoveReport::default();
        r.count_moved(&[], 0, 4 * PAGE);
        assert_eq!((r.moved, r.holes), (4, 0));
    }
}
