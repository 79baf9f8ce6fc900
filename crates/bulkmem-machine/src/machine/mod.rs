//! Machine facts: what the hardware and the process environment are,
//! read once and never decided here.
//!
//! * [`cpu`]: instruction-set features and the cache sizes the rules need,
//!   from CPUID, with `BULKMEM_DISABLE` hiding features.
//! * [`cpuid_cache`]: those cache sizes from CPUID rather than a sysfs walk,
//!   because every process under the preload pays for them.
//! * [`topology`]: the CPU, cache and NUMA layout, read from sysfs.
//! * [`placement`]: which CPUs a set of workers runs on, given the layout,
//!   and pinning a thread there.
//! * [`environment`]: the `BULKMEM_*` variables as a library inside other
//!   programs may read them (ignored under `AT_SECURE`), and warnings that
//!   cannot fail.
//!
//! Everything that decides (the rules, calibration, the engine) reads these
//! and nothing here reads them back: the facts sit below the decisions, so
//! a fixture machine (a sysfs copy, a `Features` value) can stand in for
//! the real one in every test of a decision.
//!
//! The crate root re-exports `cpu`, `placement` and `topology`: `bulkmem::cpu::info()` and the like are the stable public
//! paths, and this grouping is free to change beneath them.

pub mod cpu;
pub mod cpuid_cache;
pub mod environment;
pub mod placement;
pub mod topology;
