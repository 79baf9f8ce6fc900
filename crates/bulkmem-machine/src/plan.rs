//! From a caller's list of extents to the runs the kernels execute:
//! consecutive extents that continue each other (in the destination and, for
//! copies, in the source) are merged, so a batch of adjacent folios becomes
//! one long run, and empty extents are dropped.

/// One extent given by address, for memory that is not a Rust slice (a
/// mapping of another process's pages, a migration target). `src` is ignored
/// by clears. Inside the library the same type is a run: one extent, or
/// several that continue each other, merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// First byte of the destination; null (or `dst + len` wrapping) is
    /// refused unless `len` is 0.
    pub dst: *mut u8,
    /// First byte of the source, checked as `dst` for copies; ignored (may
    /// be null) for clears.
    pub src: *const u8,
    /// Bytes to copy or zero.
    pub len: usize,
}

// SAFETY: an Extent is only a description; whoever passes it to the unsafe
// `*_extents` methods vouches for the memory it names.
unsafe impl Send for Extent {}
// SAFETY: as above; the engine only reads the fields.
unsafe impl Sync for Extent {}

impl Extent {
    /// An extent at plain addresses, for tests of code that only looks at
    /// them.
    #[cfg(test)]
    pub fn at(dst: usize, src: usize, len: usize) -> Extent {
        Extent {
            dst: dst as *mut u8,
            src: src as *const u8,
            len,
        }
    }

    pub fn continued_by(&self, next: &Extent) -> bool {
        let src_ok = if self.src.is_null() {
            next.src.is_null()
        } else {
            self.src.wrapping_add(self.len) == next.src
        };
        self.dst.wrapping_add(self.len) == next.dst && src_ok
    }
}

/// One span of a batch: `len` bytes from offset `from` of run `run` (in
/// the engine's streams, the index of the extent the run starts at), and
/// their addresses.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    pub run: usize,
    pub from: usize,
    pub len: usize,
    pub dst: *mut u8,
    pub src: *const u8,
}

impl Span {
    /// Nothing: what fills a buffer of spans before it is written.
    pub const EMPTY: Span = Span {
        run: 0,
        from: 0,
        len: 0,
        dst: core::ptr::null_mut(),
        src: core::ptr::null(),
    };

    /// `[from, to)` of `run`, which is run (or extent) `i`.
    pub fn of(i: usize, run: Extent, from: usize, to: usize) -> Span {
        Span {
            run: i,
            from,
            len: to - from,
            // wrapping_add: the offsets lie in the run (whoever cut the
            // span cut it from the run), so these are the pointers add
            // would give.
            dst: run.dst.wrapping_add(from),
            src: run.src.wrapping_add(from),
        }
    }

    /// What is left of this span after its first `n` bytes (`n <= len`).
    #[inline]
    pub fn after(&self, n: usize) -> Span {
        Span {
            run: self.run,
            from: self.from + n,
            len: self.len - n,
            dst: self.dst.wrapping_add(n),
            src: self.src.wrapping_add(n),
        }
    }
}

/// Iterator adaptor that merges continuing extents; see [`coalesce`].
pub struct Coalesce<I> {
    inner: I,
    pending: Option<Extent>,
}

/// Merges consecutive runs that continue each other. Only neighbours in the
/// given order merge: nothing is sorted, so nothing allocates.
pub fn coalesce<I: IntoIterator<Item = Extent>>(runs: I) -> Coalesce<I::IntoIter> {
    Coalesce {
        inner: runs.into_iter(),
        pending: None,
    }
}

impl<I: Iterator<Item = Extent>> Iterator for Coalesce<I> {
    type Item = Extent;

    fn next(&mut self) -> Option<Extent> {
        for r in self.inner.by_ref() {
            if r.len == 0 {
                continue;
            }
            match &mut self.pending {
                Some(p) if p.continued_by(&r) => p.len += r.len,
                Some(p) => return Some(std::mem::replace(p, r)),
                None => self.pending = Some(r),
            }
        }
        self.pending.take()
    }
}

/// Total bytes and number of runs after coalescing.
pub fn shape<I: IntoIterator<Item = Extent>>(runs: I) -> (usize, usize) {
    coalesce(runs).fold((0, 0), |(t, n), r| (t + r.len, n + 1))
}

// A merged run spans several borrows, so the pointer that walks it must be
// allowed to reach all of them: it is rebuilt from an address whose extents'
// provenance has been exposed, rather than derived from one extent's borrow.
pub fn exposed_mut(p: *const u8) -> *mut u8 {
    core::ptr::with_exposed_provenance_mut(p.expose_provenance())
}

pub fn exposed(p: *const u8) -> *const u8 {
    core::ptr::with_exposed_provenance(p.expose_provenance())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dst: usize, src: usize, len: usize) -> Extent {
        Extent::at(dst, src, len)
    }

    #[test]
    fn merges_only_where_both_sides_continue() {
        let v = vec![
            run(0x1000, 0x9000, 0x1000),
            run(0x2000, 0xa000, 0x1000), // continues both
            run(0x3000, 0xc000, 0x1000), // dst continues, src jumps
            run(0x5000, 0xd000, 0x1000), // src continues, dst jumps
        ];
        let out: Vec<Extent> = coalesce(v).collect();
        assert_eq!(
            out,
            vec![
                run(0x1000, 0x9000, 0x2000),
                run(0x3000, 0xc000, 0x1000),
                run(0x5000, 0xd000, 0x1000)
            ]
        );
    }

    #[test]
    fn clears_merge_on_dst_and_empty_extents_vanish() {
        let v = vec![
            run(0x1000, 0, 0x10),
            run(0x1010, 0, 0),
            run(0x1010, 0, 0x20),
            run(0x2000, 0, 0),
        ];
        let out: Vec<Extent> = coalesce(v).collect();
        assert_eq!(out, vec![run(0x1000, 0, 0x30)]);
        assert_eq!(shape(Vec::new()), (0, 0));
    }

    #[test]
    fn order_matters_and_nothing_is_sorted() {
        let v = vec![run(0x2000, 0xa000, 0x1000), run(0x1000, 0x9000, 0x1000)];
        assert_eq!(shape(v), (0x2000, 2));
    }
}
