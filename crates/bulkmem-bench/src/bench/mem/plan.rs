//! What `bench copy|clear` measures: the plan, and the regimes it runs.
//! Separate from `mem.rs`, which runs it, so that `exec.rs` (how a cell
//! runs a call) reads the plan without reaching the code that calls it.

use bulkmem::{Hint, Op, Strategy};

use super::super::against::Foreign;
use crate::harness::Rounds;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Regime {
    Hot,
    Cold,
    Consume,
    Pipe,
}

impl Regime {
    pub const ALL: [Regime; 4] = [Regime::Hot, Regime::Cold, Regime::Consume, Regime::Pipe];

    pub fn name(self) -> &'static str {
        match self {
            Regime::Hot => "hot",
            Regime::Cold => "cold",
            Regime::Consume => "consume",
            Regime::Pipe => "pipe",
        }
    }

    /// What follows each call in a hot-buffer regime, timed with it.
    pub(super) fn after(self) -> After {
        match self {
            Regime::Consume => After::Read,
            Regime::Pipe => After::Pipe,
            Regime::Hot | Regime::Cold => After::Nothing,
        }
    }
}

/// The destination's next user, in the regimes that reuse one buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum After {
    Nothing,
    Read,
    Pipe,
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct Plan {
    pub op: Op,
    pub sizes: Vec<usize>,
    pub regimes: Vec<Regime>,
    /// Concrete strategies and/or `Auto`; all available and supporting `op`.
    pub strategies: Vec<Strategy>,
    pub hint: Hint,
    pub threads: usize,
    pub rounds: Rounds,
    /// Bytes per cold batch.
    pub total: usize,
    /// NUMA nodes to place the sources and destinations on (DRAM0 ->
    /// DRAM1 or CXL rows); `None` leaves them where they faulted in.
    pub src_node: Option<usize>,
    pub dst_node: Option<usize>,
    /// CPUs to pin worker i to (`cpus[i % len]`); worker 0 is the caller.
    pub cpus: Vec<usize>,
    pub thp: bool,
    /// Also measure `checked` (`bulkmem::fault::copy_checked`, the fault-surviving
    /// routine standing in for what auto picks; `bench fault`).
    pub checked: bool,
    /// Cold cells call named strategies through the library's batch call
    /// (one kernel for the batch, one drain at its end), as `auto` runs,
    /// so like is compared with like; otherwise extent by extent, as the
    /// kernel's per-folio loops do (`--cold-calls each`).
    pub named_batches: bool,
    /// Bytes a hot, consume or pipe run moves at least, by repeating the
    /// call ([`HOT_BYTES`] unless a quicker report asks for less).
    pub hot_bytes: usize,
    /// Runs of the hot regimes are lengthened (by whole factors) to last
    /// at least this (`toolkit::MIN_RUN`; zero: `hot_bytes` alone, for
    /// the quick report).
    pub min_run: std::time::Duration,
    /// Other libraries' routines, each one more row (`--against`).
    pub foreign: Vec<(String, Foreign)>,
    /// Bytes the hot regimes' sources start past a page boundary (the
    /// destinations stay page-aligned), for copies between buffers that
    /// are not mutually aligned (`--src-offset`); cold extents stay
    /// page-aligned.
    pub src_offset: usize,
    /// The same for the hot regimes' destinations (`--dst-offset`).
    pub dst_offset: usize,
}

impl Plan {
    /// A plan of `op` on `cpus` with what every bench but the option-rich
    /// `bench copy|clear` keeps: `auto` told `Auto`, one thread, memory
    /// where it faulted in, huge pages advised, named strategies' cold
    /// runs one batch call, hot runs of `HOT_BYTES` and `MIN_RUN`, no
    /// other library, page-aligned buffers. The caller names its sizes,
    /// regimes, strategies, rounds and cold total.
    pub fn new(op: Op, cpus: Vec<usize>) -> Plan {
        Plan {
            op,
            sizes: Vec::new(),
            regimes: Vec::new(),
            strategies: Vec::new(),
            hint: Hint::Auto,
            threads: 1,
            rounds: Rounds { runs: 7, warmup: 1 },
            total: 256 << 20,
            src_node: None,
            dst_node: None,
            cpus,
            thp: true,
            checked: false,
            named_batches: true,
            hot_bytes: super::HOT_BYTES,
            min_run: bulkmem_calibrate::toolkit::MIN_RUN,
            foreign: Vec::new(),
            src_offset: 0,
            dst_offset: 0,
        }
    }
}
