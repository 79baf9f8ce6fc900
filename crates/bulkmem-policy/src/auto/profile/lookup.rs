//! How `auto` finds the cell that covers a request, and what the profile
//! picks there for each hint.

use super::super::{rules::NT_MIN_RUN, Choice, Request};
use super::cover::edge;
use super::{Cell, Profile, Shape};
use crate::strategy::{Hint, Op};

impl Profile {
    /// The cells of one operation and shape, ascending by size.
    pub fn cells_of(&self, op: Op, shape: Shape) -> &[Cell] {
        let start = self
            .cells
            .partition_point(|c| key(c) < (op_ix(op), shape, 0));
        let end = self
            .cells
            .partition_point(|c| key(c) < (op_ix(op), shape, usize::MAX));
        &self.cells[start..end.max(start)]
    }

    /// The cell that covers `size`: cells cover the sizes nearest them on a
    /// log scale (boundaries at the power of two at or above the geometric
    /// mean of neighbours), except that a non-temporal choice above a
    /// cache-allocating one covers only its own size and up: guessing wrong at
    /// the cache's edge costs far more by streaming (`cover::edge`).
    pub fn cell_for(&self, op: Op, shape: Shape, size: usize) -> Option<&Cell> {
        let cells = self.cells_of(op, shape);
        // Boundaries ascend with the cells (sizes are distinct and sorted,
        // each boundary lies in (a, b]), so a binary search finds the
        // first one above `size`: bands over N cells build in N log N.
        let (mut lo, mut hi) = (0, cells.len().saturating_sub(1));
        while lo < hi {
            let mid = (lo + hi) / 2;
            if size < edge(&cells[mid], &cells[mid + 1]) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        cells.get(lo)
    }

    /// What the profile picks for `req`, or `None` when it measured nothing
    /// of that operation and shape.
    pub fn decide(&self, req: &Request) -> Option<Choice> {
        let cell = self.cell_for(req.op, Shape::of(req), req.total)?;
        let c = |strategy, reason| Some(Choice { strategy, reason });
        // `Hint` is non-exhaustive (bulkmem-machine defines it): a hint
        // this match does not name decides as `Auto`.
        match req.hint {
            Hint::Reuse => c(
                cell.best_temporal().unwrap_or(cell.choice),
                "tuned: fastest cache-allocating strategy measured here (hint reuse)",
            ),
            Hint::Stream if req.mean_run() >= NT_MIN_RUN => match cell.best_non_temporal() {
                Some(s) => c(
                    s,
                    "tuned: fastest non-temporal strategy measured here (hint stream)",
                ),
                None => c(
                    cell.choice,
                    "tuned: no non-temporal strategy measured; fastest",
                ),
            },
            Hint::Stream => c(
                cell.best_temporal().unwrap_or(cell.choice),
                "tuned: runs too short to stream; fastest cache-allocating",
            ),
            _ => c(cell.choice, "tuned: fastest measured here at this size"),
        }
    }

    /// The lengths at which single-call decisions may change.
    pub fn single_edges(&self, op: Op) -> Vec<usize> {
        self.cells_of(op, Shape::Single)
            .windows(2)
            .map(|w| edge(&w[0], &w[1]))
            .collect()
    }
}

fn op_ix(op: Op) -> u8 {
    (op == Op::Clear) as u8
}

/// The order cells are kept in: the lookups above search by it, so
/// validation sorts a parsed profile by it and refuses two cells with one
/// key.
pub(super) fn key(c: &Cell) -> (u8, Shape, usize) {
    (op_ix(c.op), c.shape, c.size)
}
