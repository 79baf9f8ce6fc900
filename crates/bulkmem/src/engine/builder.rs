//! How an engine is configured and started: [`EngineBuilder`], within the
//! CPUs this thread may run on ([`allowed_cpus`]). Separate from the
//! engine's batch paths, which never look at configuration once it is
//! built.

use std::sync::Mutex;

use super::pool::Pool;
use super::serial::Serial;
use super::{Engine, DEFAULT_CHUNK, INLINE_MAX, SPLIT_ALIGN};
use crate::error::Error;
use crate::machine::cpu;
use crate::machine::placement::max_threads;
use crate::machine::placement::{self, allowed_cpus, Placement};
use crate::machine::topology::Topology;
use crate::offload::Offload;
use crate::strategy::Options;
use crate::strategy::{Hint, Strategy};

/// Builds an [`Engine`].
#[derive(Clone, Debug)]
pub struct EngineBuilder {
    threads: Option<usize>,
    placement: Placement,
    cpus: Vec<usize>,
    chunk: usize,
    inline_max: usize,
    opts: Options,
    pin: bool,
    topology: Option<Topology>,
    offload: Option<Offload>,
    offload_only: bool,
    gangs: bool,
}

impl Default for EngineBuilder {
    fn default() -> Self {
        EngineBuilder {
            threads: None,
            placement: Placement::Spread,
            cpus: Vec::new(),
            chunk: DEFAULT_CHUNK,
            inline_max: INLINE_MAX,
            opts: Options::default(),
            pin: true,
            topology: None,
            offload: None,
            offload_only: false,
            gangs: true,
        }
    }
}

impl EngineBuilder {
    /// Worker threads. Default: one per physical core, at most two per LLC
    /// domain ([`placement::default_threads`]). At most [`max_threads`]:
    /// [`build`](EngineBuilder::build) refuses more.
    ///
    /// Workers run on the CPUs the *building* thread may use
    /// ([`planned_cpus`](EngineBuilder::planned_cpus)): an engine built on
    /// a thread pinned to one CPU puts all its workers there, however many
    /// are asked for. Build it before pinning the caller (a benchmark that
    /// pinned first measured two workers as one).
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = Some(n);
        self
    }

    /// How workers are assigned to CPUs (default [`Placement::Spread`]).
    pub fn placement(mut self, p: Placement) -> Self {
        self.placement = p;
        self
    }

    /// Restrict workers to these CPUs (e.g. a NUMA node's); default: the
    /// online CPUs the building thread may run on.
    pub fn cpus(mut self, cpus: &[usize]) -> Self {
        self.cpus = cpus.to_vec();
        self
    }

    /// Whether copies take four extents of one length at once where the
    /// kernel has a four-extent form (default on: 1.5-1.7x for scattered
    /// 4 KiB folios on a Zen 4 VM, docs/measurements.md "Where the 4 KiB
    /// time went"). Off, every extent is copied on its own, as before them:
    /// for measuring what they give (`bulkmem bench batch --single`).
    pub fn gangs(mut self, on: bool) -> Self {
        self.gangs = on;
        self
    }

    /// Largest chunk in bytes (rounded up to 4 KiB).
    pub fn chunk(mut self, bytes: usize) -> Self {
        self.chunk = bytes;
        self
    }

    /// Batches of at most this many bytes run on the calling thread
    /// (default 4 MiB); 0 sends every batch to the workers.
    pub fn inline_max(mut self, bytes: usize) -> Self {
        self.inline_max = bytes;
        self
    }

    /// Copy channels beside the CPU workers ([`crate::offload`]): copy
    /// batches larger than [`inline_max`](EngineBuilder::inline_max) give
    /// each channel an offload thread taking chunks from the same counter.
    /// Only memory registered with [`Engine::register`] goes to a channel.
    pub fn offload(mut self, o: Offload) -> Self {
        self.offload = Some(o);
        self
    }

    /// Copy batches run on the offload threads alone (no CPU workers):
    /// what the channels do by themselves. Needs [`offload`](Self::offload).
    pub fn offload_only(mut self, only: bool) -> Self {
        self.offload_only = only;
        self
    }

    /// The primitive every batch uses (default `Auto`: chosen per batch
    /// from its total size). A concrete one this CPU cannot run makes
    /// [`build`](EngineBuilder::build) fail with [`Error::Unavailable`].
    pub fn strategy(mut self, s: Strategy) -> Self {
        self.opts.strategy = s;
        self
    }

    /// What happens to the destinations next, for `Auto`'s choice
    /// (default [`Hint::Auto`]).
    pub fn hint(mut self, h: Hint) -> Self {
        self.opts.hint = h;
        self
    }

    /// Pin workers to their CPUs (default true).
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Place workers on this topology instead of the running machine's
    /// (the CPUs must still exist here if pinning).
    pub fn topology(mut self, t: Topology) -> Self {
        self.topology = Some(t);
        self
    }

    /// The CPUs the workers would get, without starting them.
    /// On the running machine (no [`EngineBuilder::topology`]) only CPUs
    /// this thread may run on count (`sched_getaffinity`: taskset, numactl,
    /// cpusets), unless CPUs were named ([`EngineBuilder::cpus`]) and none
    /// of them is: then the named ones are used as given.
    pub fn planned_cpus(&self) -> Vec<usize> {
        let (t, cpus) = match &self.topology {
            Some(t) => (t, self.cpus.clone()),
            None => {
                let t = &cpu::info().topology;
                let from = if self.cpus.is_empty() {
                    &t.online_cpus
                } else {
                    &self.cpus
                };
                let within: Vec<usize> = match allowed_cpus() {
                    Some(allowed) => from
                        .iter()
                        .copied()
                        .filter(|c| allowed.contains(c))
                        .collect(),
                    None => from.clone(),
                };
                // CPUs asked for by name that this thread may not use (it
                // pinned itself elsewhere, say, to first-touch memory on a
                // node) are the caller's choice: used as given.
                let cpus = if within.is_empty() && !self.cpus.is_empty() {
                    self.cpus.clone()
                } else {
                    within
                };
                if cpus.is_empty() {
                    return Vec::new();
                }
                (t, cpus)
            }
        };
        // More than the limit is refused by `build`; here it is capped so
        // that an absurd count cannot size an allocation.
        let n = self
            .threads
            .unwrap_or_else(|| placement::default_threads(t, &cpus))
            .min(max_threads());
        placement::place(t, &cpus, n, self.placement)
    }

    /// Checks the configuration and starts the workers.
    ///
    /// Fails with [`Error::Unavailable`] for a strategy this CPU lacks, and
    /// with [`Error::OutOfRange`] for zero threads, more threads or offload
    /// channels than [`max_threads`], or a zero or oversized chunk,
    /// [`Error::NoUsableCpu`], [`Error::NoOffload`] for `offload_only`
    /// without an offload, and [`Error::CannotPin`] for a worker that cannot
    /// be pinned. A worker that cannot be
    /// started at all (`RLIMIT_NPROC`, memory) gives [`Error::Syscall`] with
    /// `call: "pthread_create"` and its errno (usually `EAGAIN`). Either
    /// way the workers already started are stopped and joined first.
    pub fn build(self) -> Result<Engine, Error> {
        let max = max_threads();
        let range = |what, value, min, max| {
            Err(Error::OutOfRange {
                what,
                value,
                min,
                max,
            })
        };
        if let Some(n) = self.threads.filter(|&n| n == 0 || n > max) {
            return range("engine threads", n, 1, max);
        }
        if let Some(n) = self
            .offload
            .as_ref()
            .map(Offload::channels)
            .filter(|&n| n > max)
        {
            return range("offload channels", n, 1, max);
        }
        // The largest chunk whose round-up to SPLIT_ALIGN still fits an isize.
        let most = (isize::MAX as usize) & !(SPLIT_ALIGN - 1);
        let Some(chunk) = self
            .chunk
            .checked_next_multiple_of(SPLIT_ALIGN)
            .filter(|&c| self.chunk > 0 && c <= most)
        else {
            return range("engine chunk bytes", self.chunk, 1, most);
        };
        if self.opts.strategy != Strategy::Auto {
            if let Some(needs) = self.opts.strategy.missing_feature(&cpu::info().features) {
                return Err(Error::Unavailable {
                    strategy: self.opts.strategy,
                    needs,
                });
            }
        }
        if self.offload_only && self.offload.is_none() {
            return Err(Error::NoOffload);
        }
        let cpus = self.planned_cpus();
        if cpus.is_empty() {
            return Err(Error::NoUsableCpu {
                asked: self.cpus.clone(),
                allowed: allowed_cpus().unwrap_or_default(),
            });
        }
        let pool = Pool::start(&cpus, self.pin)?;
        Ok(Engine {
            pool: Mutex::new(pool),
            cpus,
            pin: self.pin,
            chunk,
            inline_max: self.inline_max,
            opts: self.opts,
            placement: self.placement,
            serial: Serial::new(),
            offload: self.offload,
            offload_only: self.offload_only,
            gangs: self.gangs,
            submitter: Mutex::new(None),
        })
    }
}
