//! A batch seen as one stream of bytes: its runs end to end, cut by the
//! job into chunks at stream positions. Nothing per extent is stored: the
//! stream keeps one mark per window of [`WINDOW`] runs (where the window
//! starts in the batch and in the stream), and a walk from a position
//! reads the batch again from the mark before it. Finding a position costs at most one window, and
//! an engine's scratch does not grow with the number of extents (it held
//! a run list of 32 bytes an extent before: docs/measurements.md, "Where
//! the 4 KiB time went").

use crate::extent::{next_run, Batch};
use crate::plan::Span;

/// Runs per mark (a power of two): a walk reads at most this many before
/// its start.
pub(super) const WINDOW: usize = 64;

/// Where a window starts: the extent its first run starts at, and the
/// run's position in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Mark {
    extent: usize,
    at: usize,
}

/// The marks of a batch, reused from batch to batch, and what the pass
/// that made them counted.
#[derive(Default)]
pub(super) struct Marks {
    marks: Vec<Mark>,
    /// Bytes in the stream.
    pub(super) total: usize,
    /// Runs in the stream (extents, empty ones included, when not
    /// coalesced).
    pub(super) runs: usize,
}

impl Marks {
    /// Marks `batch`'s runs (coalesced where `coalesce`): one pass over
    /// the extents, nothing written per extent.
    pub(super) fn mark(&mut self, batch: &dyn Batch, coalesce: bool) {
        self.marks.clear();
        let marks = &mut self.marks;
        (self.total, self.runs) = batch.mark_runs(coalesce, WINDOW, &mut |extent, at| {
            marks.push(Mark { extent, at })
        });
    }

    /// The stream of `batch` as these marks describe it (made by
    /// [`Marks::mark`] from this batch, with this `coalesce`).
    pub(super) fn stream<'a, B: Batch>(&'a self, batch: &'a B, coalesce: bool) -> Stream<'a, B> {
        Stream {
            batch,
            coalesce,
            marks: &self.marks,
            total: self.total,
        }
    }
}

/// A marked batch: what the job's workers walk. Generic over the batch
/// type so that the walk reads the caller's extents with `get` inlined.
pub(super) struct Stream<'a, B> {
    pub(super) batch: &'a B,
    coalesce: bool,
    marks: &'a [Mark],
    pub(super) total: usize,
}

impl<B> Clone for Stream<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for Stream<'_, B> {}

impl<'a, B: Batch> Stream<'a, B> {
    /// The non-empty spans covering stream positions `[p0, p1)`, in order;
    /// a span's `run` is the extent its run starts at.
    pub(super) fn spans(&self, p0: usize, p1: usize) -> Spans<'a, B> {
        // The last window starting at or before p0 (a run starting exactly
        // at p0 is the first with bytes there).
        let w = self.marks.partition_point(|m| m.at <= p0).saturating_sub(1);
        let count = self.batch.count();
        let (extent, at) = self
            .marks
            .get(w)
            .map_or((count, self.total), |m| (m.extent, m.at));
        Spans {
            batch: self.batch,
            coalesce: self.coalesce,
            count,
            extent,
            at,
            p0,
            p1,
        }
    }

    /// Where the chunk boundary for position `p` falls: the first multiple
    /// of `align` from the start of the run holding `p`, at or after `p`,
    /// or that run's end. Whole batches end at the stream's end.
    pub(super) fn boundary(&self, p: usize, align: usize) -> usize {
        if p >= self.total {
            return self.total;
        }
        match self.spans(p, self.total).next() {
            // p < total: the first span holds p and runs to its run's end.
            Some(s) => {
                let start = p - s.from;
                let len = s.from + s.len;
                let r = s.from.div_ceil(align) * align;
                start + r.min(len)
            }
            None => self.total,
        }
    }
}

/// The walk of [`Stream::spans`], run by run.
pub(super) struct Spans<'a, B> {
    batch: &'a B,
    coalesce: bool,
    count: usize,
    /// The extent the next run starts at (or, coalescing, the first
    /// non-empty one from there).
    extent: usize,
    /// The stream position of the next run.
    at: usize,
    p0: usize,
    p1: usize,
}

impl<B: Batch> Iterator for Spans<'_, B> {
    type Item = Span;

    #[inline]
    fn next(&mut self) -> Option<Span> {
        while self.at < self.p1 {
            let (e, r) = next_run(self.batch, &mut self.extent, self.count, self.coalesce)?;
            let start = self.at;
            self.at += r.len;
            if start >= self.p0 && self.at <= self.p1 {
                if r.len != 0 {
                    return Some(Span::of(e, r, 0, r.len));
                }
            } else if self.at > self.p0 {
                let (from, to) = (self.p0.saturating_sub(start), self.p1.min(self.at) - start);
                if to > from {
                    return Some(Span::of(e, r, from, to));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extent::tests::ext;
    use crate::extent::Raw;
    use crate::plan::Extent;
    use crate::strategy::Op;

    /// Every span of `[p0, p1)` as (extent, from, len, dst).
    fn spans(s: &Stream<'_, Raw<'_>>, p0: usize, p1: usize) -> Vec<(usize, usize, usize, usize)> {
        s.spans(p0, p1)
            .map(|x| (x.run, x.from, x.len, x.dst as usize))
            .collect()
    }

    /// The same from the runs themselves, one by one.
    fn reference(
        runs: &[(usize, usize, usize)],
        p0: usize,
        p1: usize,
    ) -> Vec<(usize, usize, usize, usize)> {
        let mut at = 0;
        let mut out = Vec::new();
        for &(e, dst, len) in runs {
            let (start, end) = (at, at + len);
            at = end;
            let (from, to) = (p0.max(start) - start, p1.min(end).max(start) - start);
            if end > p0 && to > from {
                out.push((e, from, to - from, dst + from));
            }
        }
        out
    }

    #[test]
    fn windows_mark_the_stream_and_walks_start_anywhere() {
        // 200 extents: runs of one to three continuing 4 KiB pages, some
        // empty extents between, so that windows, merges and empty
        // extents fall everywhere.
        let mut ops = Vec::new();
        let mut dst = 0x100_0000;
        for i in 0..200usize {
            let len = if i % 7 == 3 { 0 } else { 4096 };
            ops.push(ext(dst, dst + 0x1000_0000, len));
            // Every third extent jumps: the others continue it.
            dst += len + if i % 3 == 0 { 0x10_0000 } else { 0 };
        }
        let batch = Raw(&ops, Op::Copy);
        for coalesce in [false, true] {
            // The runs as plan::coalesce (or the extents) give them, with
            // the extent each starts at.
            let mut runs: Vec<(usize, usize, usize)> = Vec::new();
            for (i, e) in ops.iter().enumerate() {
                let dst = e.dst as usize;
                match runs.last_mut() {
                    _ if coalesce && e.len == 0 => {}
                    // Sources continue wherever destinations do.
                    Some((_, d, l)) if coalesce && *d + *l == dst => *l += e.len,
                    _ => runs.push((i, dst, e.len)),
                }
            }
            let mut m = Marks::default();
            m.mark(&batch, coalesce);
            let total: usize = runs.iter().map(|r| r.2).sum();
            assert_eq!((m.total, m.runs), (total, runs.len()));
            assert_eq!(m.marks.len(), runs.len().div_ceil(WINDOW));
            let s = m.stream(&batch, coalesce);
            for p0 in (0..=total).step_by(1000) {
                for p1 in [p0, p0 + 1, p0 + 4096, p0 + 300_000, total] {
                    assert_eq!(
                        spans(&s, p0, p1),
                        reference(&runs, p0, p1),
                        "{coalesce} {p0} {p1}"
                    );
                }
            }
        }
    }

    #[test]
    fn boundaries_fall_on_the_alignment_within_a_run_or_at_its_end() {
        let ops = [
            ext(0x10000, 0x90000, 10000),
            ext(0x40000, 0xb0000, 0),
            ext(0x50000, 0xc0000, 5000),
        ];
        let batch = Raw(&ops, Op::Copy);
        let mut m = Marks::default();
        m.mark(&batch, true);
        let s = m.stream(&batch, true);
        assert_eq!(s.boundary(0, 4096), 0);
        assert_eq!(s.boundary(1, 4096), 4096);
        assert_eq!(s.boundary(4096, 4096), 4096);
        assert_eq!(s.boundary(8193, 4096), 10000);
        assert_eq!(s.boundary(10000, 4096), 10000);
        assert_eq!(s.boundary(10001, 4096), 14096);
        assert_eq!(s.boundary(14097, 4096), 15000);
        assert_eq!(s.boundary(99999, 4096), 15000);
        let empty: [Extent; 0] = [];
        let batch = Raw(&empty, Op::Copy);
        m.mark(&batch, true);
        let s = m.stream(&batch, true);
        assert_eq!(
            (s.total, s.boundary(0, 4096), s.spans(0, 0).count()),
            (0, 0, 0)
        );
    }
}
