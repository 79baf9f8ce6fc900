//! The fills' store fences, checked in the machine code with the analysis
//! the kernels' fence tests use (bulkmem-machine's
//! `descriptor/tests/fences/machine_code.rs`, compiled here too, since it
//! reads the test binary it runs in).

#[allow(dead_code)] // the kernels' fence tests use the rest
#[path = "../../bulkmem-machine/src/descriptor/tests/fences/machine_code.rs"]
mod machine_code;

use machine_code::{image, lines};

use crate::error::Error;
use crate::fill::{self, NtWriter};
use crate::strategy::{FillMode, Hint};

type Fill = fn(&mut [u8], &[u8]) -> Result<FillMode, Error>;
type FillHint = fn(&mut [u8], &[u8], Hint) -> Result<FillMode, Error>;

/// `fill_patched` and `fill_patched_hint` as instantiated for a closure `P`
/// (a closure, not a fn pointer, so the analysis sees its code).
fn patched<P: FnMut(usize, &mut [u8])>(_: P) -> [(&'static str, usize); 2] {
    type With<P> = fn(&mut [u8], &[u8], P) -> Result<FillMode, Error>;
    type WithHint<P> = fn(&mut [u8], &[u8], Hint, P) -> Result<FillMode, Error>;
    [
        ("fill_patched", fill::fill_patched::<P> as With<P> as usize),
        (
            "fill_patched_hint",
            fill::fill_patched_hint::<P> as WithHint<P> as usize,
        ),
    ]
}

/// The fills stream through the kernel's pointer, which the analysis
/// takes for an unfenced kernel, and fence once in their shared body.
#[test]
fn fills_fence_after_their_streamed_windows() {
    for (name, f) in [
        ("fill", fill::fill as Fill as usize),
        ("fill_hint", fill::fill_hint as FillHint as usize),
    ] {
        let r = image().check(f, false);
        assert!(
            !r.pointer_calls.is_empty(),
            "{name} ({}): no kernel call found",
            r.entry
        );
        assert!(
            r.unfenced_exits.is_empty(),
            "{name} ({}) returns with its streamed stores not fenced:\n{}",
            r.entry,
            lines(&r.unfenced_exits)
        );
    }
    // The patched fills also assemble elements through a pointer, to
    // a temporal copy (`auto::element_copy`) the analysis cannot tell
    // from a streaming one, so their temporal path looks unfenced. Their
    // fence is the one body's checked above; here: it is there.
    for (name, f) in patched(|i, e: &mut [u8]| e[0] = i as u8) {
        let r = image().check(f, false);
        assert!(
            !r.pointer_calls.is_empty(),
            "{name} ({}): no kernel call found",
            r.entry
        );
        assert!(!r.fences.is_empty(), "{name} ({}): no fence", r.entry);
    }
}

#[test]
fn the_drains_fence() {
    // Entered dirty: the stores it must order were issued before.
    let r = image().check(crate::kernels::drain as fn() as usize, true);
    assert!(
        r.unfenced_exits.is_empty(),
        "kernels::drain (bm_nt_drain): {r:#?}"
    );
    // Its fence is conditional (on the writer having streamed): the
    // fence must be reachable and lead to a return.
    let r = image().check(NtWriter::drain as fn(&mut NtWriter) as usize, true);
    assert!(
        !r.fences.is_empty() && r.clean_exit,
        "NtWriter::drain: {r:#?}"
    );
}
