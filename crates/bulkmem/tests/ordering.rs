//! Non-temporal stores are weakly ordered: without the closing store fence a
//! reader that sees the "done" flag could still read stale data. Each round a
//! writer copies fresh data with a non-temporal strategy and releases a flag;
//! the reader acquires it and must see every byte.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bulkmem::Strategy;
use common::require;

const LEN: usize = 64 * 1024;
const ROUNDS: usize = 300;

struct Shared {
    buf: std::cell::UnsafeCell<Vec<u8>>,
    round: AtomicUsize,
    acked: AtomicUsize,
}

// SAFETY: the buffer is written only by the writer between the reader's ack
// of round r-1 and the release of round r, and read only by the reader after
// acquiring round r: the flag protocol makes the accesses exclusive.
unsafe impl Sync for Shared {}

fn visibility(s: Strategy, clear: bool) {
    let Some(s) = require::strategy(s) else {
        return;
    };
    rounds(clear, |buf, src| {
        if clear {
            bulkmem::clear_opts(buf, bulkmem::Options::strategy(s)).unwrap();
        } else {
            bulkmem::copy_opts(buf, src, bulkmem::Options::strategy(s)).unwrap();
        }
    });
}

/// Each round: `write(buf, src)` fills `buf` (from `src`, or with zeros),
/// then a flag is released; a reader thread acquires it and checks.
fn rounds(clear: bool, write: impl Fn(&mut [u8], &[u8])) {
    let shared = Arc::new(Shared {
        buf: std::cell::UnsafeCell::new(vec![0u8; LEN]),
        round: AtomicUsize::new(0),
        acked: AtomicUsize::new(0),
    });
    let reader = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            for r in 1..=ROUNDS {
                while shared.round.load(Ordering::Acquire) != r {
                    std::hint::spin_loop();
                }
                // SAFETY: see `Shared`: round r was released by the writer.
                let buf = unsafe { &*shared.buf.get() };
                let want = if clear { 0 } else { r as u8 };
                // The last lines written are the likeliest still to sit in a
                // write-combining buffer: look at them first.
                if let Some(i) = buf.iter().rposition(|&b| b != want) {
                    return Err(format!("round {r}: byte {i} is {} not {want}", buf[i]));
                }
                shared.acked.store(r, Ordering::Release);
            }
            Ok(())
        })
    };
    let mut src = vec![0u8; LEN];
    for r in 1..=ROUNDS {
        while shared.acked.load(Ordering::Acquire) != r - 1 {
            if reader.is_finished() {
                // The reader stopped early: it found stale data.
                reader.join().unwrap().unwrap();
                unreachable!("reader finished without reaching round {r}");
            }
            std::hint::spin_loop();
        }
        // SAFETY: see `Shared`: the reader acknowledged round r - 1.
        let buf = unsafe { &mut *shared.buf.get() };
        if clear {
            buf.fill(0xFF);
        } else {
            src.fill(r as u8);
        }
        write(buf, &src);
        shared.round.store(r, Ordering::Release);
    }
    reader.join().unwrap().unwrap();
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "avx2"),
    ignore = "needs AVX2, which the build host lacks"
)]
fn avx2_nt_copy_is_visible_after_return() {
    visibility(Strategy::Avx2Nt, false)
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "avx512"),
    ignore = "needs AVX-512 (avx512f and avx512bw), which the build host lacks"
)]
fn avx512_nt_copy_is_visible_after_return() {
    visibility(Strategy::Avx512Nt, false)
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "avx2"),
    ignore = "needs AVX2, which the build host lacks"
)]
fn avx2_nt_clear_is_visible_after_return() {
    visibility(Strategy::Avx2Nt, true);
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "avx512"),
    ignore = "needs AVX-512 (avx512f and avx512bw), which the build host lacks"
)]
fn avx512_nt_clear_is_visible_after_return() {
    visibility(Strategy::Avx512Nt, true);
}

#[test]
#[cfg_attr(
    not(bulkmem_host = "clzero"),
    ignore = "needs CLZERO (AMD), which the build host lacks"
)]
fn clzero_clear_is_visible_after_return() {
    visibility(Strategy::Clzero, true);
}

/// Batches run unfenced kernels over every extent and fence once at the
/// end; the data must still be visible once the batch returns.
#[test]
fn streamed_batches_are_visible_after_return() {
    let opts = bulkmem::Options::hint(bulkmem::Hint::Stream);
    rounds(false, |buf, src| {
        let mut ops: Vec<(&mut [u8], &[u8])> = buf.chunks_mut(4096).zip(src.chunks(4096)).collect();
        bulkmem::copy_batch_opts(&mut ops, opts).unwrap();
    });
    rounds(true, |buf, _| {
        let mut ops: Vec<&mut [u8]> = buf.chunks_mut(4096).collect();
        bulkmem::clear_batch_opts(&mut ops, opts).unwrap();
    });
}

/// Streamed fills return after their fence; NtWriter's drain is the fence.
#[test]
fn streamed_fills_are_visible_after_return_or_drain() {
    rounds(false, |buf, src| {
        bulkmem::fill_hint(buf, &src[..64], bulkmem::Hint::Stream).unwrap();
    });
    rounds(false, |buf, src| {
        let mut w = bulkmem::NtWriter::new();
        let (a, b) = buf.split_at_mut(4096);
        w.fill(b, &src[..64]).unwrap();
        w.copy(a, &src[..4096]);
        w.drain();
    });
}
