//! The old mappings' VmFlags carried over to the new region of a
//! migration by copy: a fresh mapping has none of them, and memory that
//! was locked, kept from children or out of core dumps must not silently
//! lose that by moving. Flags are given with `madvise` and `mlock2`, then
//! compared with what the kernel reports, and any the new region still
//! lacks are refused by name before anything the caller sees changes.

use std::io;

use crate::error::Error;
use crate::mapping::Mapping;

use super::maps::{self, Vma};

/// VmFlags (as /proc/self/smaps spells them) that the new region is given
/// with `madvise` where the old mapping had them.
const ADVISED: &[(&str, i32)] = &[
    ("dc", libc::MADV_DONTFORK),
    ("wf", libc::MADV_WIPEONFORK),
    ("dd", libc::MADV_DONTDUMP),
    ("mg", libc::MADV_MERGEABLE),
];

/// VmFlags the comparison of old and new mappings leaves out: `rd wr ex`
/// (the protection, restored after the move), `hg nh` (THP advice, as
/// [`CopyOptions::hugepage`](super::CopyOptions::hugepage) says), `ac nr` (overcommit accounting: the new
/// region is MAP_NORESERVE exactly where the old one was `nr`, but the
/// kernel may ignore that, as it does in overcommit mode 2), `lo lf`
/// (mlock: applied after the check, and a failure is an error of its own).
const NOT_COMPARED: &[&str] = &["rd", "wr", "ex", "hg", "nh", "ac", "nr", "lo", "lf"];

/// What a VmFlag means, for error messages.
pub(super) fn flag_meaning(flag: &str) -> &'static str {
    match flag {
        "lo" => "mlock",
        "lf" => "mlock on fault",
        "dc" => "MADV_DONTFORK",
        "wf" => "MADV_WIPEONFORK",
        "dd" => "MADV_DONTDUMP",
        "mg" => "MADV_MERGEABLE",
        "um" => "registered with userfaultfd for missing pages",
        "uw" => "registered with userfaultfd for write protection",
        "ui" => "registered with userfaultfd for minor faults",
        "sl" => "sealed with mseal",
        "mt" => "memory tagging",
        "sd" => "soft-dirty",
        _ => "a VmFlag",
    }
}

/// Gives each part of `fresh` the madvise-made VmFlags of the old mapping
/// it replaces ([`ADVISED`]; `nh` too unless the whole region is `huge`).
/// The first failure names its flag.
pub(super) fn advise_like(
    fresh: &Mapping,
    addr: usize,
    vmas: &[Vma],
    huge: bool,
) -> Result<(), (&'static str, io::Error)> {
    for v in vmas {
        let nh = (!huge).then_some(("nh", libc::MADV_NOHUGEPAGE));
        for &(flag, advice) in ADVISED.iter().chain(nh.iter()) {
            if !v.has(flag) {
                continue;
            }
            // SAFETY: advice on part of our own fresh mapping.
            let rc = unsafe {
                libc::madvise(
                    fresh.as_mut_ptr().add(v.start - addr).cast(),
                    v.end - v.start,
                    advice,
                )
            };
            if rc != 0 {
                return Err((flag, io::Error::last_os_error()));
            }
        }
    }
    Ok(())
}

/// Locks each part of `fresh` whose old mapping was locked (`lo`), on
/// fault where it was so (`lf`).
pub(super) fn lock_like(
    fresh: &Mapping,
    addr: usize,
    vmas: &[Vma],
) -> Result<(), (&'static str, io::Error)> {
    for v in vmas.iter().filter(|v| v.has("lo")) {
        let (flag, how) = if v.has("lf") {
            ("lf", libc::MLOCK_ONFAULT)
        } else {
            ("lo", 0)
        };
        // SAFETY: locking part of our own fresh mapping.
        let rc = unsafe {
            libc::mlock2(
                fresh.as_ptr().add(v.start - addr).cast(),
                v.end - v.start,
                how,
            )
        };
        if rc != 0 {
            return Err((flag, io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Checks that each part of `fresh` has every VmFlag of the old mapping it
/// replaces (but [`NOT_COMPARED`]): anything else a new mapping cannot be
/// given, which the move would silently drop, is refused by name.
pub(super) fn compare_flags(
    fresh: &Mapping,
    addr: usize,
    len: usize,
    vmas: &[Vma],
) -> Result<(), Error> {
    let smaps = maps::read_self();
    for v in vmas {
        let at = fresh.as_ptr() as usize + (v.start - addr);
        let new =
            maps::covering(&smaps, at, v.end - v.start).map_err(|_| Error::MigrationFailed {
                stage: "reading the new region's flags (/proc/self/smaps)".to_string(),
                errno: libc::EIO,
                intact: true,
            })?;
        let missing: Vec<&str> = v
            .flags
            .iter()
            .map(String::as_str)
            .filter(|f| !NOT_COMPARED.contains(f))
            .filter(|f| new.iter().any(|n| !n.has(f)))
            .collect();
        if !missing.is_empty() {
            let named: Vec<String> = missing
                .iter()
                .map(|f| format!("`{f}` ({})", flag_meaning(f)))
                .collect();
            return Err(Error::BadRange {
                addr,
                len,
                why: format!(
                    "{:#x}-{:#x} has VmFlags {} that a new mapping cannot be given; migrate_by_copy would drop them (use migrate())",
                    v.start,
                    v.end,
                    named.join(", ")
                ),
            });
        }
    }
    Ok(())
}
