//! `bulkmem bench move`: seed 003's UFFDIO_MOVE batching, from user space.
//! For 4 KiB pages and transparent huge pages, each size is moved:
//!
//! * `per-page-ioctl`: one UFFDIO_MOVE per 4 KiB page (no batching);
//! * `one-ioctl`: a single raw UFFDIO_MOVE of the whole range;
//! * `move-range`: bulkmem's `Mover::move_range` (one ioctl, continuing
//!   after partial progress);
//! * `copy-auto`: `bulkmem::copy` into a fresh destination (what a
//!   compactor without MOVE does: the destination pages fault in, and the
//!   source pages stay until released).
//!
//! Each run maps and populates a fresh source and maps a fresh destination
//! (untimed); only the move or copy is timed. The first run of every cell is
//! checked page by page.

use std::time::Instant;

use bulkmem::mapping::Mapping;
use bulkmem::uffd::{MoveOptions, Mover};

use crate::report::{MoveCell, Row};
use crate::stats::Stats;

pub const STRATEGIES: &[&str] = &["per-page-ioctl", "one-ioctl", "move-range", "copy-auto"];

const PAGE: usize = 4096;
const HUGE: usize = 2 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
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

#[derive(Clone, Debug)]
pub struct Plan {
    pub sizes: Vec<usize>,
    pub pages: Vec<PageKind>,
    pub runs: usize,
}

impl Plan {
    pub fn groups(&self) -> usize {
        self.sizes.len() * self.pages.len()
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

pub fn run(plan: &Plan, progress: &mut dyn FnMut(usize, usize, &str)) -> Result<Vec<Row>, String> {
    let mut mover = Mover::new().map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut n = 0;
    for &kind in &plan.pages {
        for &size in &plan.sizes {
            progress(
                n,
                plan.groups(),
                &format!("{} {}", kind.name(), crate::size::fmt_size(size)),
            );
            n += 1;
            if size % HUGE != 0 {
                return Err(format!(
                    "--sizes {} is not a multiple of 2M",
                    crate::size::fmt_size(size)
                ));
            }
            let mut secs = vec![Vec::new(); STRATEGIES.len()];
            for run in 0..plan.runs {
                for (k, &name) in STRATEGIES.iter().enumerate() {
                    let t = one(&mut mover, name, size, kind, run == 0)?;
                    secs[k].push(t);
                }
            }
            for (k, &name) in STRATEGIES.iter().enumerate() {
                let gbps: Vec<f64> = secs[k].iter().map(|s| size as f64 / s / 1e9).collect();
                let ms: Vec<f64> = secs[k].iter().map(|s| s * 1e3).collect();
                rows.push(Row {
                    op: "move",
                    strategy: name.to_string(),
                    chose: if name == "copy-auto" {
                        "auto".into()
                    } else {
                        "uffdio-move".into()
                    },
                    hint: None,
                    size,
                    total: size,
                    regime: "cold",
                    threads: 1,
                    runs: plan.runs,
                    gbps: Stats::or_zero(&gbps),
                    speedup: None,
                    batch: None,
                    fill: None,
                    moved: Some(MoveCell {
                        page: kind.name(),
                        ms: Stats::or_zero(&ms),
                    }),
                    migrated: None,
                });
            }
        }
    }
    progress(n, plan.groups(), "done");
    Ok(rows)
}

/// One timed move (or copy) of `size` bytes; seconds.
fn one(
    mover: &mut Mover,
    name: &str,
    size: usize,
    kind: PageKind,
    verify: bool,
) -> Result<f64, String> {
    let mut src = region(size, kind)?;
    populate(&mut src);
    let mut dst = region(size, kind)?;
    let moving = name != "copy-auto";
    if moving {
        mover
            .register(dst.as_mut_ptr(), size)
            .map_err(|e| e.to_string())?;
    }
    let t = Instant::now();
    match name {
        "per-page-ioctl" => {
            for off in (0..size).step_by(PAGE) {
                // SAFETY: one page of our fresh mappings; dst is registered.
                let (moved, err) = unsafe {
                    mover.move_once(
                        dst.as_mut_ptr().add(off),
                        src.as_mut_ptr().add(off),
                        PAGE,
                        0,
                    )
                };
                if moved != PAGE {
                    return Err(format!("UFFDIO_MOVE of one page failed: errno {err:?}"));
                }
            }
        }
        "one-ioctl" => {
            // SAFETY: our fresh mappings; dst is registered.
            let (moved, err) =
                unsafe { mover.move_once(dst.as_mut_ptr(), src.as_mut_ptr(), size, 0) };
            if moved != size {
                return Err(format!(
                    "one UFFDIO_MOVE moved {moved} of {size} bytes: errno {err:?}"
                ));
            }
        }
        "move-range" => {
            // SAFETY: as above.
            let r = unsafe {
                mover.move_range(
                    dst.as_mut_ptr(),
                    src.as_mut_ptr(),
                    size,
                    MoveOptions::default(),
                )
            }
            .map_err(|e| e.to_string())?;
            if !r.is_complete() {
                return Err(format!("move_range left failures: {:?}", r.failures));
            }
        }
        _ => bulkmem::copy(dst.as_mut_slice(), src.as_slice()),
    }
    let secs = t.elapsed().as_secs_f64();
    if moving {
        mover
            .unregister(dst.as_mut_ptr(), size)
            .map_err(|e| e.to_string())?;
    }
    if verify {
        check(&dst).map_err(|p| format!("verification failed: {name} left page {p} wrong"))?;
    }
    Ok(secs)
}

/// A row per strategy, a column per (page kind, size): GB/s, ms, and the
/// speed-up over `per-page-ioctl`.
pub fn table(rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut cols: Vec<(&str, usize)> = Vec::new();
    for r in rows {
        let c = (r.moved.as_ref().map_or("", |m| m.page), r.size);
        if !cols.contains(&c) {
            cols.push(c);
        }
    }
    let mut out = format!(
        "\nmove (fresh source and destination each run): GB/s | ms, median of {}; x = speed-up over per-page-ioctl\n",
        rows.first().map_or(0, |r| r.runs)
    );
    let _ = write!(out, "{:<16}", "strategy");
    for &(page, size) in &cols {
        let _ = write!(
            out,
            "{:>28}",
            format!("{page} {}", crate::size::fmt_size(size))
        );
    }
    out.push('\n');
    for &name in STRATEGIES {
        let _ = write!(out, "{name:<16}");
        for &(page, size) in &cols {
            let find = |s: &str| {
                rows.iter().find(|r| {
                    r.strategy == s
                        && r.size == size
                        && r.moved.as_ref().is_some_and(|m| m.page == page)
                })
            };
            let text = match (find(name), find("per-page-ioctl")) {
                (Some(r), Some(b)) => {
                    let ms = r.moved.as_ref().map_or(0.0, |m| m.ms.median);
                    let x = if b.gbps.median > 0.0 {
                        r.gbps.median / b.gbps.median
                    } else {
                        0.0
                    };
                    format!("{:.2} | {:.2} {:>6.1}x", r.gbps.median, ms, x)
                }
                _ => "-".into(),
            };
            let _ = write!(out, "{text:>28}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_moves_and_is_checked() {
        if let Err(e) = Mover::new() {
            eprintln!("skipping: {e}");
            return;
        }
        let plan = Plan {
            sizes: vec![HUGE],
            pages: vec![PageKind::Small, PageKind::Thp],
            runs: 1,
        };
        let rows = run(&plan, &mut |_, _, _| {}).unwrap();
        assert_eq!(rows.len(), 2 * STRATEGIES.len());
        for r in &rows {
            assert!(
                r.gbps.median > 0.0 && r.moved.as_ref().unwrap().ms.median > 0.0,
                "{r:?}"
            );
        }
        let t = table(&rows);
        assert!(
            t.contains("move-range") && t.contains("thp 2M") && t.contains("4K 2M"),
            "{t}"
        );
        let e = run(
            &Plan {
                sizes: vec![PAGE],
                pages: vec![PageKind::Small],
                runs: 1,
            },
            &mut |_, _, _| {},
        )
        .unwrap_err();
        assert!(e.contains("multiple of 2M"), "{e}");
    }
}
