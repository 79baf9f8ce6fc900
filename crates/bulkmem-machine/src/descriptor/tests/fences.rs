//! The store fence, checked in the machine code of the descriptor table's
//! kernels and the checked routines (the analysis and why:
//! `machine_code.rs`). The fills are checked where they live, in the
//! `bulkmem` crate, with the same analysis.

mod machine_code;

use std::collections::BTreeSet;

use machine_code::{bit, image, lines, Register, CALLER_SAVED};

use crate::descriptor::row;
use crate::strategy::Strategy;

/// `(name, fenced, unfenced)` for every kernel of the rows marked
/// `non_temporal` or not, as `Kernel::new` hands them out.
fn kernels(non_temporal: bool) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    for &s in Strategy::ALL {
        let d = row(s);
        if d.non_temporal != non_temporal {
            continue;
        }
        if let Some(k) = &d.copy {
            out.push((format!("{s} copy"), k.fenced as usize, k.unfenced as usize));
        }
        if let Some(k) = &d.clear {
            out.push((format!("{s} clear"), k.fenced as usize, k.unfenced as usize));
        }
    }
    out
}

#[test]
fn every_path_from_a_streaming_store_to_a_return_fences() {
    let nt = kernels(true);
    for want in [
        "avx2-nt copy",
        "avx2-nt clear",
        "avx512-nt copy",
        "avx512-nt clear",
        "clzero clear",
    ] {
        assert!(nt.iter().any(|k| k.0 == want), "{want} is not checked");
    }
    for (name, fenced, _) in nt {
        let r = image().check(fenced, false);
        assert!(
            !r.weak_stores.is_empty(),
            "{name} ({}): no non-temporal store found, so no fence was checked",
            r.entry
        );
        assert!(
            r.unfenced_exits.is_empty(),
            "{name} ({}) returns with non-temporal stores not fenced:\n{}",
            r.entry,
            lines(&r.unfenced_exits)
        );
        assert!(r.clean_exit, "{name} ({}): no path returns", r.entry);
    }
}

/// The analysis itself: the kernels without their fence must be seen
/// to return unfenced, or a deleted fence would pass unseen.
#[test]
fn the_unfenced_kernels_are_seen_to_return_unfenced() {
    for (name, _, unfenced) in kernels(true) {
        let r = image().check(unfenced, false);
        assert!(!r.weak_stores.is_empty(), "{name} ({})", r.entry);
        assert!(
            !r.unfenced_exits.is_empty(),
            "{name} ({}): no unfenced return found in a kernel without a fence",
            r.entry
        );
    }
}

/// A row marked temporal needs no fence only if it streams nothing.
#[test]
fn temporal_kernels_issue_no_streaming_stores() {
    for (name, k, _) in kernels(false) {
        let r = image().check(k, false);
        assert!(r.weak_stores.is_empty(), "{name}: {:?}", r.weak_stores);
    }
}

/// `(name, fenced, unfenced)` for every checked twin of the rows
/// marked `non_temporal` or not.
fn checked(non_temporal: bool) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    for &s in Strategy::ALL {
        let d = row(s);
        if d.non_temporal != non_temporal {
            continue;
        }
        if let Some((f, u)) = d.copy.as_ref().and_then(|k| k.checked.own) {
            out.push((format!("{s} checked copy"), f as usize, u as usize));
        }
        if let Some((f, u)) = d.clear.as_ref().and_then(|k| k.checked.own) {
            out.push((format!("{s} checked clear"), f as usize, u as usize));
        }
    }
    out
}

/// The checked twins as the kernels: the fenced form fences on every
/// path to its return, the unfenced one is seen not to.
#[test]
fn the_checked_streaming_twins_fence_and_their_unfenced_forms_do_not() {
    let nt = checked(true);
    for want in [
        "avx2-nt checked copy",
        "avx2-nt checked clear",
        "avx512-nt checked copy",
        "avx512-nt checked clear",
        "clzero checked clear",
    ] {
        assert!(nt.iter().any(|k| k.0 == want), "{want} is not checked");
    }
    for (name, fenced, unfenced) in nt {
        let r = image().check(fenced, false);
        assert!(!r.weak_stores.is_empty(), "{name} ({})", r.entry);
        assert!(
            r.unfenced_exits.is_empty(),
            "{name} ({}) returns with non-temporal stores not fenced:\n{}",
            r.entry,
            lines(&r.unfenced_exits)
        );
        assert!(r.clean_exit, "{name} ({}): no path returns", r.entry);
        let r = image().check(unfenced, false);
        assert!(
            !r.unfenced_exits.is_empty(),
            "{name} ({}): no unfenced return found in a routine without a fence",
            r.entry
        );
    }
    for (name, k, _) in checked(false) {
        let r = image().check(k, false);
        assert!(r.weak_stores.is_empty(), "{name}: {:?}", r.weak_stores);
    }
}

/// A fault ends a non-temporal routine through its fixup, which the
/// signal handler jumps to (no control-flow edge leads there): each
/// such fixup, entered with streaming stores pending, fences before it
/// returns, in the fenced and the unfenced forms alike.
#[test]
fn every_fixup_of_a_streaming_twin_fences() {
    let entries = crate::checked::mc::entries();
    let mut seen = 0;
    for (name, fenced, unfenced) in checked(true) {
        for f in [fenced, unfenced] {
            let fixups: BTreeSet<usize> = entries
                .iter()
                .map(|e| e[2])
                .filter(|&fix| image().in_function(f, fix))
                .collect();
            assert!(!fixups.is_empty(), "{name}: no fixups found");
            for fix in fixups {
                seen += 1;
                let r = image().check(fix, true);
                assert!(
                    r.unfenced_exits.is_empty(),
                    "{name}: the fixup at {fix:#x} returns unfenced:\n{}",
                    lines(&r.unfenced_exits)
                );
            }
        }
    }
    assert!(seen >= 10, "only {seen} fixups checked");
}

#[test]
fn caller_saved_names_the_clobbered_registers() {
    use Register::*;
    let regs = [RAX, RCX, RDX, RSI, RDI, R8, R9, R10, R11];
    assert_eq!(CALLER_SAVED, regs.map(bit).iter().fold(0, |m, b| m | b));
}
