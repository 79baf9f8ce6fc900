//! Benchmark memory: the library's pre-faulted buffers and eviction pass
//! (`bulkmem_calibrate::toolkit`, as `bulkmem tune` measures), and the
//! regions the move and migrate benches populate and check.

use bulkmem::mapping::Mapping;

pub use bulkmem_calibrate::toolkit::{evict as evict_through, eviction_buffer, prefaulted};

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
