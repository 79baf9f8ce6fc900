//! What a session counts, from the collector, from mutators' signal
//! handlers and from `ensure`: plain relaxed atomics (a handler may not
//! lock), read once into a [`Stats`] at the end.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Sub-buckets per power of two: a stall is bucketed to within 1/8.
const SUB: usize = 8;
const BUCKETS: usize = 64 * SUB;

/// The index of the bucket holding `ns`.
fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros() as usize; // >= 3
    let sub = ((ns >> (e - 3)) & 7) as usize;
    (e - 2) * SUB + sub
}

/// The smallest value bucket `i` holds.
fn lower(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let (e, sub) = (i / SUB + 2, (i % SUB) as u128);
    ((8 + sub) << (e - 3)).min(u64::MAX as u128) as u64
}

/// A counter on a cache line of its own.
#[repr(align(128))]
pub(crate) struct Counter(AtomicU64);

impl core::ops::Deref for Counter {
    type Target = AtomicU64;
    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

const fn counter() -> Counter {
    Counter(AtomicU64::new(0))
}

/// What one side (the collector's threads, or the mutators) counts, on
/// cache lines of its own: the two count at the same time on different
/// CPUs, and shared lines would bounce between them on every fault.
#[repr(align(128))]
pub(crate) struct Side {
    pub pages: AtomicU64,
    pub ioctls: AtomicU64,
    pub moved: AtomicU64,
    pub copied: AtomicU64,
    pub zeroed: AtomicU64,
    pub move_fallbacks: AtomicU64,
    pub eexist: AtomicU64,
    pub memory_waits: AtomicU64,
}

impl Side {
    const fn new() -> Side {
        Side {
            pages: AtomicU64::new(0),
            ioctls: AtomicU64::new(0),
            moved: AtomicU64::new(0),
            copied: AtomicU64::new(0),
            zeroed: AtomicU64::new(0),
            move_fallbacks: AtomicU64::new(0),
            eexist: AtomicU64::new(0),
            memory_waits: AtomicU64::new(0),
        }
    }
}

/// The live counters of one session.
pub(crate) struct Counters {
    pub collector: Side,
    pub mutators: Side,
    pub faults: Counter,
    pub waits: Counter,
    pub refaults: Counter,
    pub released: Counter,
    /// Pages of free space mapped writable (copies of zeros).
    pub writable_zeros: Counter,
    pub failed: Counter,
    stall: [AtomicU64; BUCKETS],
    stall_max: Counter,
}

impl Counters {
    pub fn new() -> Counters {
        Counters {
            collector: Side::new(),
            mutators: Side::new(),
            faults: counter(),
            waits: counter(),
            refaults: counter(),
            released: counter(),
            writable_zeros: counter(),
            failed: counter(),
            stall: [const { AtomicU64::new(0) }; BUCKETS],
            stall_max: counter(),
        }
    }

    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// Records one fault's stall. Async-signal-safe.
    pub fn stall(&self, ns: u64) {
        self.stall[bucket(ns)].fetch_add(1, Relaxed);
        self.stall_max.fetch_max(ns, Relaxed);
    }

    pub fn snapshot(&self, pages: usize, pause: Duration) -> Stats {
        let get = |c: &AtomicU64| c.load(Relaxed);
        let both = |f: fn(&Side) -> &AtomicU64| get(f(&self.collector)) + get(f(&self.mutators));
        Stats {
            pages,
            by_collector: get(&self.collector.pages),
            by_mutators: get(&self.mutators.pages),
            faults: get(&self.faults),
            waits: get(&self.waits),
            refaults: get(&self.refaults),
            ioctls: both(|s| &s.ioctls),
            moved: both(|s| &s.moved),
            copied: both(|s| &s.copied),
            zeroed: both(|s| &s.zeroed),
            move_fallbacks: both(|s| &s.move_fallbacks),
            eexist: both(|s| &s.eexist),
            memory_waits: both(|s| &s.memory_waits),
            released: get(&self.released),
            failed: get(&self.failed),
            pause,
            stall: Histogram {
                counts: self.stall.iter().map(get).collect(),
                max_ns: get(&self.stall_max),
            },
        }
    }
}

/// Per-fault stalls: log-linear buckets (8 per power of two, so a
/// percentile is exact to within 12.5%), and the exact maximum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    max_ns: u64,
}

impl Histogram {
    /// How many stalls were recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The stall at quantile `q` (0.5 for the median, 0.999 for p99.9):
    /// the upper end of the bucket holding it, never above the maximum.
    /// Zero when nothing was recorded.
    pub fn quantile(&self, q: f64) -> Duration {
        let n = self.count();
        if n == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let upper = lower(i + 1).saturating_sub(1);
                return Duration::from_nanos(upper.min(self.max_ns));
            }
        }
        self.max()
    }

    /// The longest stall.
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }
}

/// What a compaction session did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Pages in the heap.
    pub pages: usize,
    /// Pages the collector's threads produced.
    pub by_collector: u64,
    /// Pages mutators produced, in their fault handlers or with `ensure`.
    pub by_mutators: u64,
    /// Faults served (a mutator touched a page not yet mapped).
    pub faults: u64,
    /// Of those, the faults that waited for a page another thread held.
    pub waits: u64,
    /// Faults on a page already mapped: raced with its mapping, or the
    /// program dropped it since (`MADV_DONTNEED`) and it was refilled with
    /// zeros, as anonymous memory would have been.
    pub refaults: u64,
    /// Mapping ioctls issued (`UFFDIO_COPY`, `UFFDIO_MOVE`,
    /// `UFFDIO_ZEROPAGE`).
    pub ioctls: u64,
    /// Pages mapped by moving them (`UFFDIO_MOVE`, no copy).
    pub moved: u64,
    /// Pages mapped by copying them (`UFFDIO_COPY`).
    pub copied: u64,
    /// Pages mapped as zero pages (`UFFDIO_ZEROPAGE`).
    pub zeroed: u64,
    /// Moves the kernel refused, copied instead: `EBUSY` (a pinned page,
    /// one shared after `fork`), `EINVAL` (the two mappings cannot trade
    /// pages: one locked, the heap made read-only), a persisting
    /// `EAGAIN`.
    pub move_fallbacks: u64,
    /// Pages found populated behind the session's back when mapping them
    /// (`EEXIST` for a page nobody in the session had mapped: a thread
    /// that touched the heap in the pause): dropped, and the built page
    /// mapped in their place.
    pub eexist: u64,
    /// Mapping ioctls the kernel refused for want of memory (`ENOMEM`:
    /// the heap's memory cgroup at its limit, the machine out of memory),
    /// each waited out and retried, as the kernel's own page fault is.
    pub memory_waits: u64,
    /// Bytes of from-space released before the end of the session.
    pub released: u64,
    /// Pages the kernel refused to map for a reason no retry mends (none
    /// is known: out of memory waits, see `memory_waits`): a mutator that
    /// touched one got the SIGBUS; `finish` built them in place after
    /// unregistering.
    pub failed: u64,
    /// How long `prepare` took (the part of the collector's pause that is
    /// bulkmem's).
    pub pause: Duration,
    /// Each fault's stall, from the handler's start to its return (the
    /// kernel's fault entry and signal delivery, about 1-2 µs, come on
    /// top).
    pub stall: Histogram,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_monotonic() {
        let mut last = 0;
        for ns in (0..5000u64).chain([1 << 20, (1 << 20) + 1, u64::MAX / 2, u64::MAX]) {
            let b = bucket(ns);
            assert!(b >= last || ns >= 1 << 20, "{ns}");
            assert!(lower(b) <= ns, "{ns}: bucket {b} starts at {}", lower(b));
            assert!(lower(b + 1) > ns || lower(b + 1) == u64::MAX, "{ns}");
            last = b;
        }
    }

    #[test]
    fn quantiles_come_from_the_recorded_stalls() {
        let c = Counters::new();
        for ns in 1..=1000u64 {
            c.stall(ns * 1000);
        }
        let s = c.snapshot(1, Duration::ZERO).stall;
        assert_eq!(s.count(), 1000);
        let p50 = s.quantile(0.5).as_nanos() as f64;
        assert!((500_000.0..=500_000.0 * 1.125).contains(&p50), "{p50}");
        assert_eq!(s.quantile(1.0), Duration::from_micros(1000));
        assert_eq!(s.max(), Duration::from_micros(1000));
        assert!(s.quantile(0.001) <= Duration::from_nanos(1125));
        assert_eq!(Histogram::default().quantile(0.5), Duration::ZERO);
    }
}
