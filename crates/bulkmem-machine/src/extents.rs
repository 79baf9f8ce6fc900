//! Extents given by address, and the check that a batch of them is safe to
//! run: no null or wrapping pointer, no destination overlapping another
//! destination or any source. Here, under the engine and the page mover,
//! because both check batches: the engine's calls and workers walk a batch
//! with [`next_run`], and `uffd`'s batch moves validate theirs the same way.

use crate::plan::Extent;
use crate::strategy::Op;

/// Why a batch of extents cannot run, as [`validate`] finds it; nothing
/// has been written. Each floor above turns it into its own error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtentError {
    /// Extent `index` cannot be valid memory (null or wrapping around).
    BadExtent {
        /// The extent's position in the batch.
        index: usize,
        /// What is wrong with it, in words.
        reason: &'static str,
    },
    /// Extent `index` is the first that overlaps an earlier extent `with`
    /// (`with == index`: its destination overlaps its own source).
    Overlap {
        /// The later of the two extents, in batch order.
        index: usize,
        /// The extent it overlaps.
        with: usize,
    },
}

/// A batch as the caller gave it: extent `i` as a run (src null for clears).
pub trait Batch {
    /// How many extents the batch holds.
    fn count(&self) -> usize;
    /// Extent `i` as a run (`src` null for clears).
    fn get(&self, i: usize) -> Extent;

    /// Counts the runs (as [`next_run`] gives them) and their bytes,
    /// calling `mark(extent, at)` for every `window`-th run (a power of
    /// two) with the extent it starts at and its position in the stream.
    /// Returns (bytes, runs). One pass, nothing stored per run: the engine
    /// does this before its workers start, so it is the serial part of
    /// every batch. A provided method: each batch type gets this loop with
    /// `get` inlined.
    fn mark_runs(
        &self,
        coalesce: bool,
        window: usize,
        mark: &mut dyn FnMut(usize, usize),
    ) -> (usize, usize) {
        debug_assert!(window.is_power_of_two());
        let (n, mut i, mut at, mut runs) = (self.count(), 0, 0, 0);
        while let Some((start, r)) = next_run(self, &mut i, n, coalesce) {
            if runs & (window - 1) == 0 {
                mark(start, at);
            }
            at += r.len;
            runs += 1;
        }
        (at, runs)
    }
}

/// The run that starts at extent `*i` (or, coalescing, at the first
/// non-empty extent from there) and the extent it starts at; `*i` moves
/// past it. `n` is `count()`. Runs are the extents one by one, empty ones
/// included, or coalesced (`plan::coalesce`: continuing extents merged,
/// empty ones dropped). The engine's workers walk a batch with this,
/// reading the caller's extents where they are: nothing per extent is
/// stored (docs/design.md, "Where the 4 KiB time went").
#[inline(always)]
pub fn next_run<B: Batch + ?Sized>(
    b: &B,
    i: &mut usize,
    n: usize,
    coalesce: bool,
) -> Option<(usize, Extent)> {
    if coalesce {
        while *i < n && b.get(*i).len == 0 {
            *i += 1;
        }
    }
    if *i >= n {
        return None;
    }
    let start = *i;
    let mut r = b.get(start);
    *i += 1;
    if coalesce {
        while *i < n {
            let next = b.get(*i);
            if next.len != 0 && !r.continued_by(&next) {
                break;
            }
            r.len += next.len;
            *i += 1;
        }
    }
    Some((start, r))
}

/// Extents given by address, as a batch for `op` (sources are dropped for
/// clears).
pub struct Raw<'s>(pub &'s [Extent], pub Op);

impl Batch for Raw<'_> {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn get(&self, i: usize) -> Extent {
        let e = self.0[i];
        Extent {
            dst: e.dst,
            src: if self.1 == Op::Copy {
                e.src
            } else {
                core::ptr::null()
            },
            len: e.len,
        }
    }
}

/// [`validate`] for a slice of extents (used by `uffd::Mover::move_batch`).
pub fn validate_extents(op: Op, extents: &[Extent]) -> Result<(), ExtentError> {
    validate(op, &Raw(extents, op), &mut Vec::new())
}

/// Checks a raw batch: non-null pointers, and no destination overlapping
/// another destination or any source. The error names the first extent that
/// conflicts with itself or an earlier one (as if the extents were checked
/// one by one in order). `spans` is reusable scratch.
pub fn validate(
    op: Op,
    batch: &dyn Batch,
    spans: &mut Vec<(usize, usize, usize, bool)>,
) -> Result<(), ExtentError> {
    for i in 0..batch.count() {
        let r = batch.get(i);
        if r.len == 0 {
            continue;
        }
        let ok = |p: usize| p != 0 && p.checked_add(r.len).is_some();
        if !ok(r.dst as usize) {
            return Err(ExtentError::BadExtent {
                index: i,
                reason: "null or wrapping destination",
            });
        }
        if op == Op::Copy && !ok(r.src as usize) {
            return Err(ExtentError::BadExtent {
                index: i,
                reason: "null or wrapping source",
            });
        }
    }
    if !conflicts(op, batch, batch.count(), spans) {
        return Ok(());
    }
    // Only on the error path: the shortest conflicting prefix ends at the
    // first bad extent (conflict in a prefix is monotone in its length).
    let (mut lo, mut hi) = (0, batch.count());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if conflicts(op, batch, mid, spans) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let index = hi - 1;
    let with = (0..=index)
        .find(|&j| conflicts_pair(op, batch.get(index), batch.get(j), index == j))
        .unwrap_or(index);
    Err(ExtentError::Overlap { index, with })
}

fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

fn conflicts_pair(op: Op, a: Extent, b: Extent, same: bool) -> bool {
    if a.len == 0 || b.len == 0 {
        return false;
    }
    let span = |p: *const u8, len: usize| (p as usize, p as usize + len);
    let (ad, bd) = (span(a.dst, a.len), span(b.dst, b.len));
    if op == Op::Clear {
        return !same && overlaps(ad, bd);
    }
    let (as_, bs) = (span(a.src, a.len), span(b.src, b.len));
    (!same && overlaps(ad, bd)) || overlaps(ad, bs) || overlaps(as_, bd)
}

/// Whether extents `0..n` hold any conflict. Sweeps intervals in address
/// order remembering the furthest-reaching destination and source so far:
/// an interval conflicts with an earlier-starting one iff it starts before
/// the furthest reach (one of the two being a destination).
fn conflicts(
    op: Op,
    batch: &dyn Batch,
    n: usize,
    spans: &mut Vec<(usize, usize, usize, bool)>,
) -> bool {
    spans.clear();
    for i in 0..n {
        let r = batch.get(i);
        if r.len == 0 {
            continue;
        }
        spans.push((r.dst as usize, r.dst as usize + r.len, i, true));
        if op == Op::Copy {
            spans.push((r.src as usize, r.src as usize + r.len, i, false));
        }
    }
    spans.sort_unstable();
    let mut reach_dst = 0usize;
    let mut reach_src = 0usize;
    for &(start, end, _, is_dst) in spans.iter() {
        if start < reach_dst || (is_dst && start < reach_src) {
            return true;
        }
        if is_dst {
            reach_dst = reach_dst.max(end);
        } else {
            reach_src = reach_src.max(end);
        }
    }
    false
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An extent at plain addresses, for tests that only look at them.
    pub(crate) fn ext(dst: usize, src: usize, len: usize) -> Extent {
        Extent {
            dst: dst as *mut u8,
            src: src as *const u8,
            len,
        }
    }

    fn check(op: Op, v: &[Extent]) -> Result<(), ExtentError> {
        validate(op, &Raw(v, op), &mut Vec::new())
    }

    #[test]
    fn runs_come_one_by_one_or_coalesced_with_where_the_next_starts() {
        let ops = [
            ext(0x10000, 0x90000, 4096),
            ext(0x20000, 0xa0000, 8192),
            ext(0x40000, 0xb0000, 0),
            // Continues the second across the empty one: merged when
            // coalescing.
            ext(0x22000, 0xa2000, 4096),
            ext(0x50000, 0xc0000, 0),
        ];
        let batch = Raw(&ops, Op::Copy);
        let all = |coalesce| {
            let mut i = 0;
            std::iter::from_fn(|| next_run(&batch, &mut i, ops.len(), coalesce))
                .map(|(e, r)| (e, r.len, r.dst as usize))
                .collect::<Vec<_>>()
        };
        // Extent by extent, empty ones included.
        let lens: Vec<usize> = all(false).iter().map(|r| r.1).collect();
        assert_eq!(lens, [4096, 8192, 0, 4096, 0]);
        // Coalesced: the empty extents vanish, the second run merges three.
        assert_eq!(all(true), [(0, 4096, 0x10000), (1, 12288, 0x20000)]);
        // A run takes the empty extents after it; a walk may start at an
        // empty extent.
        let mut i = 1;
        assert_eq!(
            next_run(&batch, &mut i, ops.len(), true).map(|r| r.0),
            Some(1)
        );
        assert_eq!(i, 5);
        let mut i = 4;
        assert_eq!(next_run(&batch, &mut i, ops.len(), true), None);
        let mut marks = Vec::new();
        let shape = batch.mark_runs(false, 2, &mut |e, at| marks.push((e, at)));
        assert_eq!(shape, (16384, 5));
        assert_eq!(marks, [(0, 0), (2, 12288), (4, 16384)]);
    }

    #[test]
    fn validation_finds_overlaps_and_names_the_first_extent() {
        // Disjoint, with a source read twice: fine.
        assert_eq!(
            check(
                Op::Copy,
                &[ext(0x1000, 0x9000, 0x100), ext(0x2000, 0x9000, 0x100)]
            ),
            Ok(())
        );
        // dst 1 overlaps dst 2.
        let e = check(
            Op::Copy,
            &[
                ext(0x1000, 0x9000, 0x100),
                ext(0x2000, 0xa000, 0x100),
                ext(0x20ff, 0xb000, 0x10),
            ],
        );
        assert_eq!(e, Err(ExtentError::Overlap { index: 2, with: 1 }));
        // dst 2 overlaps src 0.
        let e = check(
            Op::Copy,
            &[
                ext(0x1000, 0x9000, 0x100),
                ext(0x2000, 0xa000, 0x100),
                ext(0x9080, 0xb000, 0x100),
            ],
        );
        assert_eq!(e, Err(ExtentError::Overlap { index: 2, with: 0 }));
        // An extent copying onto itself overlaps itself.
        assert!(check(Op::Copy, &[ext(0x1000, 0x1800, 0x1000)]).is_err());
        // Clears ignore src; touching (not overlapping) is fine.
        assert_eq!(
            check(
                Op::Clear,
                &[ext(0x1000, 0x1000, 0x100), ext(0x1100, 0, 0x100)]
            ),
            Ok(())
        );
        // A long early destination swallowing a later one is still found.
        let e = check(
            Op::Clear,
            &[
                ext(0x5000, 0, 0x10),
                ext(0x1000, 0, 0x3000),
                ext(0x2000, 0, 0x10),
                ext(0x7000, 0, 0x10),
            ],
        );
        assert_eq!(e, Err(ExtentError::Overlap { index: 2, with: 1 }));
        // Empty extents never conflict, even null ones.
        assert_eq!(
            check(Op::Copy, &[ext(0, 0, 0), ext(0x1000, 0x2000, 0x10)]),
            Ok(())
        );
        assert_eq!(
            check(Op::Copy, &[ext(0x1000, 0, 0x10)]),
            Err(ExtentError::BadExtent {
                index: 0,
                reason: "null or wrapping source"
            })
        );
    }

    #[test]
    fn self_overlap_is_reported_against_itself() {
        let e = check(Op::Copy, &[ext(0x1000, 0x1800, 0x1000)]);
        assert_eq!(e, Err(ExtentError::Overlap { index: 0, with: 0 }));
    }

    /// The sweep against every pair: it must report the first extent that
    /// conflicts with itself or an earlier one.
    #[test]
    fn validation_agrees_with_brute_force() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n) as usize
        };
        for _ in 0..3000 {
            let n = 1 + rnd(8);
            let op = if rnd(2) == 0 { Op::Copy } else { Op::Clear };
            let v: Vec<Extent> = (0..n)
                .map(|_| ext(0x1000 + 16 * rnd(64), 0x1000 + 16 * rnd(64), 16 * rnd(6)))
                .collect();
            let spans = |e: &Extent| {
                let mut s = vec![(e.dst as usize, e.dst as usize + e.len, true)];
                if op == Op::Copy {
                    s.push((e.src as usize, e.src as usize + e.len, false));
                }
                s
            };
            let mut lowest: Option<usize> = None;
            for i in 0..n {
                for j in 0..n {
                    let conflict = spans(&v[i]).iter().any(|a| {
                        spans(&v[j]).iter().enumerate().any(|(k, b)| {
                            let same = i == j && ((a.2 && k == 0) || (!a.2 && k == 1));
                            !same
                                && v[i].len > 0
                                && v[j].len > 0
                                && (a.2 || b.2)
                                && a.0 < b.1
                                && b.0 < a.1
                        })
                    });
                    if conflict {
                        lowest = Some(lowest.map_or(i.max(j), |l| l.min(i.max(j))));
                    }
                }
            }
            match (check(op, &v), lowest) {
                (Ok(()), None) => {}
                (Err(ExtentError::Overlap { index, .. }), Some(l)) => {
                    assert_eq!(index, l, "{op} {v:?}")
                }
                (got, want) => panic!("{op} {v:?}: got {got:?}, brute force says {want:?}"),
            }
        }
    }
}
