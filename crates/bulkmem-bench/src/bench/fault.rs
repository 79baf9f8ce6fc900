//! `bulkmem bench fault`: what surviving a bad page costs. `checked`
//! (`bulkmem::fault::copy_checked` or `clear_checked`: the checked twin of what
//! auto picks) against the unchecked `auto`, hot and cold, through the
//! same cells as `bench copy`; then a demonstration: a page in the middle
//! of a source is poisoned and the checked copy reports where it stopped.

use std::time::Instant;

use bulkmem::fault::Outcome;
use bulkmem::mapping::Mapping;
use bulkmem::uffd::Mover;
use bulkmem::{Engine, Extent};

use crate::harness::fill_pattern;
use crate::out;
use bulkmem_machine::units::format_bytes;

use std::path::PathBuf;

use clap::Args;

use bulkmem::{Op, Strategy};

use super::mem::plan::Plan;
use super::mem::{self, Regimes};
use crate::results::{self, Row};
use crate::size;
use std::path::Path;

use crate::cli::{
    check_memory, check_outputs, measuring_cpus, publish, twice_the_largest, usage, with_progress,
    Failure, Measure, Output, Style,
};

const PAGE: usize = 4096;

/// A private anonymous region with one page poisoned, and the userfaultfd
/// that keeps the poison armed.
struct PoisonedSource {
    map: Mapping,
    /// Keeps the poison armed while the region lives.
    mover: Mover,
}

impl PoisonedSource {
    fn new(len: usize, page: usize) -> Result<PoisonedSource, String> {
        let mover = Mover::new().map_err(|e| e.to_string())?;
        if !mover.supports_poison() {
            return Err("this kernel has no UFFDIO_POISON (Linux 6.6 or later)".into());
        }
        let mut map = Mapping::anonymous(len)
            .map_err(|e| format!("cannot map {}: {e}", format_bytes(len)))?;
        fill_pattern(map.as_mut_slice());
        let mut region = PoisonedSource { map, mover };
        let bad = region.map.as_mut_ptr().wrapping_add(page * PAGE);
        // SAFETY: the page lies in our mapping and no slice of it is alive;
        // dropping it lets the poison (which needs an empty page) take its
        // place.
        unsafe { libc::madvise(bad.cast(), PAGE, libc::MADV_DONTNEED) };
        region
            .mover
            .register(bad, PAGE)
            .map_err(|e| e.to_string())?;
        // SAFETY: the page is only read through checked copies afterwards.
        unsafe { region.mover.poison(bad, PAGE) }.map_err(|e| e.to_string())?;
        Ok(region)
    }

    /// The whole region as a slice, poisoned page included: only checked
    /// copies, which survive its SIGBUS, may read it.
    fn bytes(&self) -> &[u8] {
        self.map.as_slice()
    }
}

/// Poisons the middle page of a `len`-byte source, copies it with
/// `copy_checked` and with a 2-thread checked engine batch of 16 extents,
/// and describes what happened. Every claim is checked before it is
/// printed.
pub fn demonstration(len: usize) -> Result<String, String> {
    let pages = len / PAGE;
    let bad_page = pages / 2;
    let src = PoisonedSource::new(pages * PAGE, bad_page)?;
    // Pre-faulted, so the time is the copy's and not the page faults'.
    let mut dst = vec![1u8; pages * PAGE];
    let t = Instant::now();
    let f = match bulkmem::fault::copy_checked(&mut dst, src.bytes()) {
        Ok(()) => return Err("the copy did not notice the poisoned page".into()),
        Err(f) => f,
    };
    let took = t.elapsed();
    let mut out = format!(
        "\ndemonstration: {} source, page {bad_page} poisoned (UFFDIO_POISON)\n  copy_checked stopped after {:.2} ms: {f}\n",
        format_bytes(pages * PAGE),
        took.as_secs_f64() * 1e3
    );
    if f.offset != bad_page * PAGE || f.addr != src.map.as_ptr() as usize + bad_page * PAGE {
        return Err(format!("the fault was reported at the wrong place: {f:?}"));
    }
    let mut reference = vec![0u8; f.offset];
    fill_pattern(&mut reference);
    if dst[..f.offset] != reference[..] {
        return Err("the bytes before the fault are not the copy".into());
    }
    out.push_str(&format!(
        "  bytes 0..{} verified equal to the source; the process lives on\n",
        f.offset
    ));

    let engine = Engine::builder()
        .threads(2)
        .inline_max(0)
        .build()
        .map_err(|e| e.to_string())?;
    let n = 16;
    let ext = pages * PAGE / n;
    let extents: Vec<Extent> = (0..n)
        .map(|i| Extent {
            dst: dst.as_mut_ptr().wrapping_add(i * ext),
            src: src.bytes().as_ptr().wrapping_add(i * ext),
            len: ext,
        })
        .collect();
    // SAFETY: the extents tile `dst` and the source region, both alive for
    // the call; the poisoned page raises SIGBUS, which checked batches
    // survive.
    let r = unsafe { engine.copy_extents_checked(&extents, Default::default()) }
        .map_err(|e| e.to_string())?;
    let faulted: Vec<(usize, usize)> = r.faults().map(|(i, f)| (i, f.offset)).collect();
    let done = r.extents.iter().filter(|o| **o == Outcome::Done).count();
    let want = (bad_page * PAGE / ext, bad_page * PAGE % ext);
    if faulted != [want] || done != n - 1 {
        return Err(format!(
            "engine batch reported {faulted:?} with {done} done"
        ));
    }
    out.push_str(&format!(
        "  checked engine batch ({n} x {}, {} workers): {done} extents done, extent {} faulted at offset {} ({})\n",
        format_bytes(ext),
        r.report.workers,
        want.0,
        want.1,
        r.report.strategy
    ));
    Ok(out)
}

#[derive(Args)]
pub struct FaultArgs {
    /// copy (`copy_checked`) or clear (`clear_checked`).
    #[arg(long, default_value = "copy", value_parser = crate::cli::parse_op)]
    op: Op,
    /// Extent sizes (K, M, G are powers of two).
    #[arg(long, value_delimiter = ',', value_parser = size::parse_size, allow_hyphen_values = true, default_value = "4K,2M,256M")]
    sizes: Vec<usize>,
    /// hot: same buffers every call; cold: distinct extents over an arena
    /// much larger than the LLC, evicted before each run; or both.
    #[arg(long, default_value = "both", value_parser = mem::parse_regimes)]
    regime: Regimes,
    #[command(flatten)]
    measure: Measure,
    /// Bytes per cold batch (at least the largest size; a run times two).
    #[arg(long, value_parser = size::parse_size, allow_hyphen_values = true, default_value = "256M")]
    total: usize,
    /// Source size of the poisoned-page demonstration.
    #[arg(long, value_parser = size::parse_size, allow_hyphen_values = true, default_value = "64M")]
    demo: usize,
    /// CPU to pin the measuring thread to (default: where it starts).
    #[arg(long)]
    cpu: Option<usize>,
    /// Do not ask for transparent huge pages on the benchmark arenas.
    #[arg(long)]
    no_thp: bool,
    #[command(flatten)]
    out: Output,
    /// GB/s against size, auto and checked, a panel per regime (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

pub fn cmd(a: FaultArgs, quiet: bool) -> Result<(), Failure> {
    check_outputs(a.out.json.as_deref(), a.plot.as_deref())?;
    if a.demo < 64 << 10 {
        return Err(usage(
            "--demo must be at least 64K (16 extents of whole pages)",
        ));
    }
    let regimes = a.regime.0;
    let mut needs = mem::needs(&a.sizes, &regimes, 1, a.total);
    needs.push(twice_the_largest(
        "--demo",
        &[a.demo],
        "the demonstration's source and destination",
    ));
    check_memory(&needs)?;
    let plan = Plan {
        sizes: a.sizes,
        regimes,
        strategies: vec![Strategy::Auto],
        rounds: a.measure.rounds(),
        total: a.total,
        thp: !a.no_thp,
        checked: true,
        named_batches: false,
        ..Plan::new(a.op, measuring_cpus(a.cpu.map(|c| vec![c]).as_deref())?)
    };
    let mut rows = with_progress(quiet, mem::groups(&plan), |p| mem::run(&plan, p))?;
    results::add_speedups_over(&mut rows, "auto");
    let style = |r: &Row| {
        Some((
            r.strategy.clone(),
            usize::from(r.strategy == "checked"),
            false,
        ))
    };
    publish(
        &a.out,
        &results::tables_over(&rows, &[], "auto"),
        &rows,
        a.plot
            .as_deref()
            .map(|p| (p, "fault", "extent size", &style as Style)),
    )?;
    // The demonstration needs UFFDIO_POISON; its absence is not a failure
    // of the benchmark, only of the demonstration.
    match demonstration(a.demo / 65536 * 65536) {
        // Beside the table: stderr when stdout carries the JSON.
        Ok(text) if a.out.json.as_deref() == Some(Path::new("-")) => eprint!("{text}"),
        Ok(text) => out::print(&text)?,
        Err(e) => eprintln!("bulkmem: demonstration skipped: {e}"),
    }
    Ok(())
}
