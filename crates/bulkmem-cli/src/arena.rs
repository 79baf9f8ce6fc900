//! Benchmark memory: anonymous mappings, pre-faulted before anything is
//! timed and optionally backed by transparent huge pages (as the kernel's
//! direct map is, so TLB misses do not dominate).

use std::io;

use bulkmem::mapping::Mapping;

/// Maps `len` bytes, advises huge pages if `thp`, and touches every page
/// with `fill` so no page fault lands inside a timed region.
pub fn prefaulted(len: usize, thp: bool, fill: u8) -> io::Result<Mapping> {
    let mut opts = Mapping::options();
    // Without `thp`, no advice: the system's THP default decides, as it
    // would for any allocation.
    if thp {
        opts = opts.huge_pages(true);
    }
    let mut m = opts.map(len.max(1))?;
    m.as_mut_slice().fill(fill);
    Ok(m)
}

/// Reads `buf` one cache line at a time so that, afterwards, the LLC holds
/// it instead of whatever was measured before (the seeds' eviction pass).
pub fn evict_through(buf: &Mapping) {
    let mut acc = 0u64;
    for line in buf.as_slice().chunks(64) {
        acc = acc.wrapping_add(line[0] as u64);
    }
    std::hint::black_box(acc);
}

const PAGE: usize = 4096;
const HUGE: usize = 2 << 20;

/// The page kind a region asks for: 4 KiB pages or transparent huge pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PageKind {
    #[value(name = "4K", alias = "4k")]
    Small,
    Thp,
}

impl PageKind {
    pub fn name(self) -> &'static str {
        match self {
            PageKind::Small => "4K",
            PageKind::Thp => "thp",
        }
    }
}

/// A 2 MiB-aligned anonymous mapping with `kind`'s THP advice, so both page
/// kinds move the same way whatever the system default.
pub fn region(len: usize, kind: PageKind) -> Result<Mapping, String> {
    Mapping::options()
        .align(HUGE)
        .noreserve(true)
        .huge_pages(kind == PageKind::Thp)
        .map(len)
        .map_err(|e| format!("cannot map {len} bytes: {e}"))
}

/// Writes each page's number into its first word (populating it).
pub fn populate(m: &mut Mapping) {
    for (p, page) in m.as_mut_slice().chunks_exact_mut(PAGE).enumerate() {
        page[..8].copy_from_slice(&(p as u64 ^ 0x5eed).to_ne_bytes());
    }
}

/// The first page whose first word is not its number.
pub fn check(m: &Mapping) -> Result<(), usize> {
    match m
        .as_slice()
        .chunks_exact(PAGE)
        .enumerate()
        .find(|(p, page)| page[..8] != (*p as u64 ^ 0x5eed).to_ne_bytes())
    {
        Some((p, _)) => Err(p),
        None => Ok(()),
    }
}
