//! `bulkmem bench ...`: one module per experiment, each owning its flags
//! (`Args`) and handler (`cmd`). They share the measurement loop
//! (`crate::harness`), the copy/clear cell runner (`mem`), the table
//! builder (`bulkmem_report::table`) and publishing (`crate::cli::publish`), never
//! each other.

pub mod against;
pub mod batch;
pub mod compact;
pub mod copy;
pub mod dispatch;
pub mod fault;
pub mod fill;
pub mod limits;
pub mod mem;
pub mod migrate;
pub mod moves;
pub mod overlap;
mod pipe_sink;
pub mod preload;

use clap::Subcommand;

use crate::cli::Failure;

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Unmodified workloads (a 1 GiB copy, a fresh 1 GiB copy, small
    /// copies, python3's bytes(bytearray)) without and with the preload.
    Preload(preload::PreloadArgs),
    /// Copy throughput per strategy and size, cache-hot and cold (as the batched folio-copy patches measured).
    Copy(copy::MemArgs),
    /// Clear throughput per strategy and size, cache-hot and cold (as the extent-clearing patches measured).
    Clear(copy::MemArgs),
    /// The multi-threaded batch engine: folio size x threads, folio count,
    /// placement (as the batched-migration patches measured).
    Batch(batch::BatchArgs),
    /// Template fill with a per-element patch, temporal and non-temporal
    /// (the memcpy_nt + drain pattern).
    Fill(fill::FillArgs),
    /// Batched page moves with userfaultfd UFFDIO_MOVE against per-page
    /// ioctls and plain copying.
    Move(moves::MoveArgs),
    /// A garbage collector's heap compacted while its mutators run
    /// (userfaultfd SIGBUS mode) against stop-the-world compaction.
    Compact(compact::CompactArgs),
    /// What surviving a bad page costs: copy_checked against auto, then a
    /// copy over a poisoned page (as folio_mc_copy does in the kernel).
    Fault(fault::FaultArgs),
    /// What reaching a kernel costs: auto over the kernel it runs, the
    /// checked call over its twin and over auto, the C interface over the
    /// Rust calls, at small sizes, hot.
    Dispatch(dispatch::DispatchArgs),
    /// NUMA migration: move_pages(2) against copy-and-remap with 1..N
    /// threads, both directions.
    Migrate(migrate::BenchMigrateArgs),
    /// This machine's memory limits per thread count: read, non-temporal
    /// and temporal write bandwidth, and the copy bound they imply.
    Limits(limits::LimitsArgs),
    /// Compute on the caller overlapped with an asynchronous batch copy
    /// (`Engine::submit_copy`) against the two one after the other.
    Overlap(overlap::OverlapArgs),
}

pub fn cmd(what: BenchCmd, quiet: bool) -> Result<(), Failure> {
    match what {
        BenchCmd::Copy(a) => copy::cmd(bulkmem::Op::Copy, a, quiet),
        BenchCmd::Clear(a) => copy::cmd(bulkmem::Op::Clear, a, quiet),
        BenchCmd::Batch(a) => batch::cmd(a, quiet),
        BenchCmd::Fill(a) => fill::cmd(a, quiet),
        BenchCmd::Move(a) => moves::cmd(a, quiet),
        BenchCmd::Compact(a) => compact::cmd(a, quiet),
        BenchCmd::Fault(a) => fault::cmd(a, quiet),
        BenchCmd::Dispatch(a) => dispatch::cmd(a, quiet),
        BenchCmd::Migrate(a) => migrate::cmd(a, quiet),
        BenchCmd::Preload(a) => preload::cmd(a, quiet),
        BenchCmd::Overlap(a) => overlap::cmd(a, quiet),
        BenchCmd::Limits(a) => limits::cmd(a, quiet),
    }
}
