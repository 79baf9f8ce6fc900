//! Where the built-in rules start streaming (non-temporal stores), per
//! kind of call: found by bisection over the rules themselves, so what
//! `info` says is what `auto` does.

use serde::Serialize;

use bulkmem::{Hint, Op};
use bulkmem_policy::auto;

use bulkmem_policy::auto::Machine;

use bulkmem_policy::auto::Request;

/// The smallest size from which the built-in rules choose non-temporal
/// stores (hint auto), per kind of call; `null`: never (up to 1 TiB).
#[derive(Serialize)]
pub(super) struct StreamsFrom {
    /// A single copy of this many bytes.
    pub(super) copy_single: Option<usize>,
    pub(super) clear_single: Option<usize>,
    /// A batch of scattered 2 MiB extents this large in all (Intel
    /// servers stream a batch's copies well before a single call's).
    pub(super) copy_batch_2m: Option<usize>,
    pub(super) clear_batch_2m: Option<usize>,
}

/// Extent of the batches `info` describes (its table's last column too).
pub(super) const BATCH_EXTENT: usize = 2 << 20;

/// The smallest `n` units for which the built-in rules stream
/// `request(n * unit)`, in bytes, or `None` up to 1 TiB. The rules stream
/// from a threshold on (larger never streams less), so a bisection finds it.
fn first_streaming(unit: usize, request: impl Fn(usize) -> Request) -> Option<usize> {
    let streams = |n: usize| {
        auto::Policy::rules(Machine::this())
            .decide(&request(n * unit))
            .strategy
            .is_non_temporal()
    };
    let (mut lo, mut hi) = (0usize, (1usize << 40) / unit);
    if !streams(hi) {
        return None;
    }
    // Invariant: streams(hi), and lo == 0 or !streams(lo).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if streams(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi * unit)
}

pub(super) fn streams_from() -> StreamsFrom {
    let single = |op| first_streaming(1, |n| Request::single(op, n, Hint::Auto));
    let batch = |op| {
        first_streaming(BATCH_EXTENT, |n| Request {
            op,
            total: n,
            runs: n / BATCH_EXTENT,
            hint: Hint::Auto,
        })
    };
    StreamsFrom {
        copy_single: single(Op::Copy),
        clear_single: single(Op::Clear),
        copy_batch_2m: batch(Op::Copy),
        clear_batch_2m: batch(Op::Clear),
    }
}
