//! bulkmem's lowest floor: what the machine is and the primitives that run
//! on it. The CPU, its caches and its layout (`machine`), the strategies'
//! names (`strategy`), the kernels (`kernels`), their checked twins that
//! survive a fault, with their exception tables and signal handler
//! (`checked`), the descriptor table that ties each strategy to its kernels
//! (`descriptor`), and the small protocols the floors above share (`latch`,
//! `chunks`, `threads`, `plan`, `gangs`, `units`).
//!
//! Users name `bulkmem`, which re-exports what is theirs from here; the
//! workspace's other crates (the engine above, the preload, the C library,
//! the command) reach the rest directly. Nothing here knows the calls, the
//! engine or the page moves above it: Cargo keeps the edge one way.

#[cfg(target_arch = "x86_64")]
pub mod checked;
pub mod chunks;
pub mod descriptor;
pub mod extents;
pub mod gangs;
pub mod kernels;
pub mod latch;
pub mod machine;
pub mod plan;
pub mod strategy;
pub mod threads;
pub mod units;
