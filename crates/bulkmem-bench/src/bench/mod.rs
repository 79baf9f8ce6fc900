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
pub mod peers;
mod pipe_sink;
pub mod preload;

use clap::Subcommand;

use crate::cli::Failure;

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Unmodified workloads (a 1 GiB copy, a fresh 1 GiB copy, small
    /// copies, python3's bytes(bytearray)) without and with the preload.
    Preload(preload::PreloadArgs),
    /// Copy throughput per strategy and size, cache-hot and cold.
    Copy(copy::MemArgs),
    /// Clear (zeroing) throughput per strategy and size, cache-hot and
    /// cold.
    Clear(copy::MemArgs),
    /// bulkmem against the C library and other libraries (--against):
    /// copies and clears at 4K and 2M hot, 256M cold, 128 x 2M cold.
    Peers(peers::PeersArgs),
    /// The multi-threaded batch engine copying a batch of blocks ("folios",
    /// 4K to 2M each, as a kernel migrating pages would): block size x
    /// threads, block count, placement.
    Batch(batch::BatchArgs),
    /// Filling a region with copies of a template, each copy then
    /// patched (an id, a checksum), with ordinary and with non-temporal
    /// stores.
    Fill(fill::FillArgs),
    /// Batched page moves with userfaultfd UFFDIO_MOVE against per-page
    /// ioctls and plain copying.
    Move(moves::MoveArgs),
    /// A garbage collector's heap compacted while its mutators run
    /// (userfaultfd SIGBUS mode) against stop-the-world compaction.
    Compact(compact::CompactArgs),
    /// What surviving a bad page costs: checked copies against plain
    /// ones, then a copy over a poisoned page, which reports an error
    /// instead of crashing.
    Fault(fault::FaultArgs),
    /// The cost of the call around the copy at small sizes, hot: `auto`
    /// over the routine it picks, a checked call over its plain twin and
    /// over `auto`, the C interface over the Rust calls.
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
        BenchCmd::Peers(a) => peers::cmd(a, quiet),
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
