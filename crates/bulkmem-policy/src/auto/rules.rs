//! The built-in rules: what `auto` does on a machine that was never tuned
//! (no profile, or `BULKMEM_PROFILE=off`). They are deliberately few and
//! each one names the measurement behind it; a profile measured by
//! `bulkmem tune` replaces them on the machine it was measured on.
//!
//! 1. **Stream or not.** Non-temporal stores (no read-for-ownership, no cache
//!    pollution) win when the destination will not be read soon. That is the
//!    case when the caller says [`Hint::Stream`], or, with [`Hint::Auto`],
//!    when the batch total is at least [`STREAM_FACTOR`] x *one thread's share*
//!    of the LLC (LLC bytes / CPUs sharing it, as glibc sizes its
//!    non-temporal threshold). The whole LLC was the wrong yardstick: on a
//!    16-CPU Intel Xeon with a 300 MiB L3 it kept 256 MiB copies temporal
//!    at 0.61x of the streaming kernels. The threshold is at most
//!    [`STREAM_CAP`]: a VM's topology can give an L3 to two vCPUs when the
//!    host's socket shares it with dozens of cores (a 2-vCPU Emerald Rapids
//!    VM reports 260 MiB for its two CPUs; its hot 256 MiB clear ran at
//!    9.4 GB/s temporal against 23 non-temporal, and from 64 MiB up the
//!    non-temporal clear won 2.5x in its tune). [`Hint::Reuse`] never streams. Runs
//!    shorter than [`NT_MIN_RUN`] on average never stream either: partial
//!    lines and the closing fence would cost more than the saved reads.
//!    A single call (one run: every preloaded `memcpy`) is judged with the
//!    read that follows it (docs/design.md, "The whole use"): a streamed
//!    destination is read back from DRAM. Past the threshold the stream
//!    still wins that whole use, except for copies on AMD CPUs with FSRM
//!    and AVX-512 (Zen 4 on), which never stream with hint `Auto`: there
//!    `rep movsb` writes whole lines without reading them first, as
//!    non-temporal stores do, yet leaves them in the cache. On a Zen 4 VM
//!    a copy read once after ran 1.04-1.15x faster with `rep movsb` than
//!    with `avx2-nt` at 32-256 MiB, and the copy alone 1.04-1.28x at
//!    256 MiB.
//!    Zen 3 is left out: glibc measured its vector loops ahead of
//!    `rep movsb` past L2, and its non-temporal stores ahead of both.
//! 2. **Intel server batches leave L2 early.** On Intel CPUs with AVX-512
//!    (the server parts, whose L3 is a slow mesh), a batch of several runs
//!    whose bytes (a copy's sources and destinations, a clear's
//!    destinations) exceed the L2 streams: measured on Emerald Rapids, a
//!    2 MiB copy ran at 14.4 GB/s non-temporal against 10.3 with `rep
//!    movsb`; on a 2-vCPU Xeon (CPUID model 0xa7) cold batch clears of 4
//!    and 16 MiB ran 2.2-2.9x faster non-temporal than with `rep stosb` or
//!    `avx512` (`bench clear --regime cold --total 4M|16M`, 4 KiB-2 MiB
//!    extents), which auto had kept at 0.38-0.44x. Only batches: a single
//!    call (every preloaded `memcpy`) is judged with the read that follows
//!    it, and a streamed destination is read back from DRAM (redis GETs of
//!    8 MB values ran 0.72-0.80x with this rule applied to single calls;
//!    docs/measurements.md, "The whole use"). On AMD the same copy measured 0.6x
//!    non-temporal even alone, so the rule is Intel's only.
//! 3. **Streaming primitive.** Clear: `clzero` where present (AMD). Intel with
//!    AVX-512: `avx512-nt` (one 64-byte store fills a write-combining line;
//!    it won 5 of the 8 streaming cells measured on Emerald Rapids). Else
//!    `avx2-nt`: on AMD the 512-bit forms measured no faster.
//! 4. **Small temporal runs: vector loops.** `rep movsb`/`stosb` pay a
//!    start-up cost even with FSRM (Zen 5: 80 GB/s at 1 KiB where AVX-512
//!    does 187). Copies whose source and destination fit in L1d together,
//!    and clears that fit in half the L2, use `avx512` where 512-bit stores
//!    cost no frequency (AMD; Intel from Ice Lake on, told by FSRM: 141 vs
//!    98 GB/s for `avx2` at 4 KiB on Emerald Rapids), else `avx2`.
//! 5. **Larger temporal runs.** Copy: `rep movsb` with FSRM (the kernel's batched folio-copy patches'
//!    Zen 5), or with ERMS for runs of at least [`ERMS_MIN_RUN`]; otherwise
//!    `avx2`; otherwise the per-page loop itself. On AMD a single copy from
//!    the L2's size up to the stream threshold takes the `avx2` loop, as
//!    glibc's `memcpy` takes a vector loop there: `rep movsb` keeps its
//!    fast path only for mutually aligned buffers, which a program's often
//!    are not (a preloaded sqlite3 read of 8 MiB blobs into Python, source
//!    24 bytes into a line, ran 0.93x glibc with `rep movsb` and 0.99x
//!    with the `avx2` loop on a Zen 4 VM). Not `avx512`: read back once,
//!    it trailed `avx2` by 1-17% from 1 to 32 MiB there. From Zen 4 on
//!    (FSRM and AVX-512) `rep-movsb-or-avx2`: `rep movsb` where the two
//!    buffers share their offset in a line (Zen 5 VM, 1-4 MiB hot:
//!    1.20-1.29x `avx2`), the loop otherwise. Zen 5 (family 0x1a) and
//!    later take `rep movsb` at every offset: on the Zen 5 VM at 1-4 MiB
//!    hot (`bench copy --src-offset S --dst-offset D`), with the source
//!    1, 17, 33, 48 or 2049 bytes past a page it ran 1.04-1.23x `avx2`
//!    (also with the destination 100 bytes in), and 0.97-1.00x where the
//!    destination alone is misaligned, or both but not alike, or the
//!    destination is a byte ahead (its 16-byte path). The page-aligned
//!    extents of batches keep `rep movsb`, and past the threshold its
//!    whole-line stores win (rule 1). Never `rep movsb`/`rep movsq`
//!    over long runs without ERMS: that is the 0.6-0.9x regression the kernel's batched folio-copy patches
//!    measured on Zen 3. Clear: `rep stosb` with ERMS/FZRM/FSRS; without
//!    them the `avx2` store loop (a 2-vCPU Zen 2 VM, family 0x17 model
//!    0x31, cleared hot 2 MiB at 46.5 GB/s with `rep stosq` against 58.4
//!    with AVX2 stores, AOCL-LibMem's choice there, and 57.9 for glibc);
//!    otherwise `rep stosq` (the per-page primitive minus the per-page
//!    calls, which the kernel's extent-clearing patches found faster on
//!    Milan).
//!
//! See docs/measurements.md ("Choosing a primitive") for the measurements.

use crate::machine::cpu::{Features, Vendor};
use crate::strategy::{Hint, Op, Strategy};

use super::{Choice, Machine, Request};

/// Stream when the batch total is at least this many per-thread LLC shares
/// (hint `Auto`).
pub const STREAM_FACTOR: usize = 2;
/// The stream threshold never exceeds this many bytes (see rule 1): on
/// real machines two shares stay below it (16-CPU Emerald Rapids: 37.5
/// MiB; Zen 3/5 CCDs: 4 MiB), so it binds only where a VM claims a cache
/// its host shares more widely.
pub const STREAM_CAP: usize = 64 << 20;
/// Mean contiguous run below which streaming is never chosen.
pub const NT_MIN_RUN: usize = 1024;
/// Shortest run for which `rep movsb` is chosen on ERMS CPUs without FSRM.
pub const ERMS_MIN_RUN: usize = 2048;

/// Whether the built-in rules stream `req` (before the primitive exists
/// check): rules 1 and 2.
pub fn streams(m: &Machine, req: &Request) -> bool {
    let by_size = || {
        let single = req.runs <= 1;
        if single && req.op == Op::Copy && string_copy_keeps_up(m) {
            return false;
        }
        let touched = match req.op {
            Op::Copy => req.total.saturating_mul(2),
            _ => req.total,
        };
        req.total >= m.stream_from() || (intel_server(m) && req.runs > 1 && touched > m.l2_bytes)
    };
    // A hint not named here (`Hint` is non-exhaustive) decides as `Auto`.
    let wanted = match req.hint {
        Hint::Reuse => false,
        Hint::Stream => true,
        _ => by_size(),
    };
    wanted && req.mean_run() >= NT_MIN_RUN
}

/// AMD from Zen 4 on (FSRM and AVX-512): `rep movsb` keeps up with
/// non-temporal stores at every size and leaves the destination cached
/// (rule 1).
fn string_copy_keeps_up(m: &Machine) -> bool {
    let f = &m.features;
    m.vendor == Vendor::Amd && m.x86 && f.fsrm && f.avx512f
}

/// AMD from Zen 5 on (family 0x1a), where `rep movsb` leads the vector
/// loop past L2 whatever the two buffers' offsets (rule 5).
fn string_copy_at_any_offset(m: &Machine) -> bool {
    string_copy_keeps_up(m) && m.family >= 0x1a
}

/// A single copy on AMD from the L2's size up to the stream threshold
/// (rule 5): the vector loop, not `rep movsb`; from Zen 4 on, `rep movsb`
/// where the two buffers share their offset in a line (`movsb_or_avx2`).
fn amd_single_past_l2(m: &Machine, req: &Request) -> bool {
    m.vendor == Vendor::Amd
        && req.runs <= 1
        && req.total >= m.l2_bytes
        && req.total < m.stream_from()
}

fn intel_server(m: &Machine) -> bool {
    m.vendor == Vendor::Intel && wide_vectors(m)
}

/// AVX-512 (with byte ops) is present and costs no frequency: AMD, or
/// Intel from Ice Lake on (which FSRM marks; Skylake-SP lacks it).
fn wide_vectors(m: &Machine) -> bool {
    let f = &m.features;
    f.avx512f && f.avx512bw && (m.vendor == Vendor::Amd || f.fsrm)
}

/// The built-in streaming primitive for `op`, if the CPU has one.
pub fn nt_strategy(m: &Machine, op: Op) -> Option<Strategy> {
    let f = &m.features;
    let avx512 = f.avx512f && f.avx512bw;
    match op {
        Op::Clear if f.clzero => Some(Strategy::Clzero),
        _ if avx512 && m.vendor == Vendor::Intel => Some(Strategy::Avx512Nt),
        _ if f.avx2 => Some(Strategy::Avx2Nt),
        _ if avx512 => Some(Strategy::Avx512Nt),
        _ => None,
    }
}

/// The built-in rules' decision for `req` on `m`.
#[inline]
pub fn decide(m: &Machine, req: &Request) -> Choice {
    if streams(m, req) {
        if let Some(strategy) = nt_strategy(m, req.op) {
            let reason = if req.hint == Hint::Stream {
                "hint stream: non-temporal stores"
            } else if req.total >= m.stream_from() {
                "batch total >= 2x the per-thread LLC share (at most 64 MiB): non-temporal stores"
            } else {
                "Intel server, a batch's bytes exceed L2: non-temporal stores"
            };
            return Choice { strategy, reason };
        }
    }
    temporal(m, req)
}

/// The built-in temporal (cache-allocating) choice for `req`.
#[inline]
pub fn temporal(m: &Machine, req: &Request) -> Choice {
    let f: &Features = &m.features;
    let c = |strategy, reason| Choice { strategy, reason };
    let run = req.mean_run();
    let vector = if wide_vectors(m) {
        Some(Strategy::Avx512)
    } else if f.avx2 {
        Some(Strategy::Avx2)
    } else {
        None
    };
    match (req.op, vector) {
        (Op::Copy, Some(v)) if run.saturating_mul(2) <= m.l1d_bytes => {
            return c(v, "source and destination fit in L1d: vector loop")
        }
        (Op::Clear, Some(v)) if run.saturating_mul(2) <= m.l2_bytes => {
            return c(v, "fits in half the L2: vector loop")
        }
        _ => {}
    }
    if req.op == Op::Copy && f.avx2 && amd_single_past_l2(m, req) {
        if string_copy_at_any_offset(m) {
            return c(
                Strategy::RepMovsb,
                "AMD Zen 5 on, one copy past L2: rep movsb at any offset",
            );
        }
        if string_copy_keeps_up(m) {
            return c(
                Strategy::RepMovsbOrAvx2,
                "AMD with FSRM, one copy past L2: rep movsb for line-paired buffers, else AVX2",
            );
        }
        return c(Strategy::Avx2, "AMD, one copy past L2: AVX2 loop, as glibc");
    }
    match req.op {
        Op::Copy if m.x86 && f.fsrm => c(Strategy::RepMovsb, "FSRM: rep movsb"),
        Op::Copy if m.x86 && f.erms && run >= ERMS_MIN_RUN => {
            c(Strategy::RepMovsb, "ERMS and long runs: rep movsb")
        }
        Op::Copy if f.avx2 => c(Strategy::Avx2, "no fast rep movsb: AVX2 loop"),
        Op::Copy => c(Strategy::PerPage, "no ERMS or AVX2: the per-page loop"),
        Op::Clear if m.x86 && (f.erms || f.fzrm || f.fsrs) => {
            c(Strategy::RepStosb, "ERMS: rep stosb")
        }
        Op::Clear if f.avx2 => c(Strategy::Avx2, "no ERMS: AVX2 stores"),
        Op::Clear if m.x86 => c(
            Strategy::RepStosq,
            "no ERMS or AVX2: rep stosq over the extent",
        ),
        Op::Clear => c(Strategy::PerPage, "portable: the per-page loop"),
    }
}

/// The lengths at which a single call's built-in decision may change, for
/// [`super::Bands`].
/// (The Intel L2 rule flips at `l2 / 2 + 1`, the clear rule's edge.)
pub fn edges(m: &Machine) -> [usize; 7] {
    [
        0,
        NT_MIN_RUN,
        ERMS_MIN_RUN,
        m.l1d_bytes / 2 + 1,
        m.l2_bytes / 2 + 1,
        m.l2_bytes,
        m.stream_from(),
    ]
}

#[cfg(test)]
mod tests;
