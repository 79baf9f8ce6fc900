//! The engine's offload scheduling, with emulated channels (CPU threads
//! that copy after a delay and fail on request) everywhere, and with a GPU
//! where the CUDA driver sees one (skipped with a message elsewhere).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bulkmem::offload::{EmulatedOptions, GpuOptions, Offload};
use bulkmem::{CancelToken, Control, Engine, Extent, Progress};
use common::require;

const MIB: usize = 1 << 20;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn engine(o: Offload, threads: usize, only: bool) -> Engine {
    Engine::builder()
        .threads(threads)
        .chunk(MIB)
        .inline_max(0)
        .pin(false)
        .offload(o)
        .offload_only(only)
        .build()
        .expect("engine")
}

/// 24 extents of 1 MiB + 4 KiB (so chunks cut extents), source `src`,
/// destinations in `dst`.
fn extents(dst: &mut [u8], src: &[u8]) -> Vec<Extent> {
    let n = MIB + 4096;
    dst.chunks_exact_mut(n)
        .zip(src.chunks_exact(n))
        .map(|(d, s)| Extent {
            dst: d.as_mut_ptr(),
            src: s.as_ptr(),
            len: n,
        })
        .collect()
}

const LEN: usize = 24 * (MIB + 4096);

fn registered_batch(
    o: Offload,
    threads: usize,
    only: bool,
    register: (bool, bool),
) -> (bulkmem::Report, bool) {
    let e = engine(o, threads, only);
    let src = pattern(LEN, 7);
    let mut dst = vec![0u8; LEN];
    // SAFETY: both buffers live, unmoved, until after the engine is dropped.
    unsafe {
        if register.0 {
            e.register(src.as_ptr(), src.len()).unwrap();
        }
        if register.1 {
            e.register(dst.as_ptr(), dst.len()).unwrap();
        }
    }
    let ext = extents(&mut dst, &src);
    // SAFETY: the extents name the two live vectors, disjoint.
    let r = unsafe { e.copy_extents(&ext, Control::default()) }.unwrap();
    drop(e);
    (r, dst == src)
}

#[test]
fn registered_chunks_go_to_the_channels_and_arrive_intact() {
    let o = Offload::emulated(EmulatedOptions::default().channels(2));
    let (r, exact) = registered_batch(o, 2, false, (true, true));
    assert!(exact, "byte-exact");
    assert!(r.is_complete(), "{r:?}");
    assert!(
        r.offloaded > 0 && r.offloaded < r.total,
        "CPU and channels share: {r:?}"
    );
    assert_eq!(r.offload_redone, 0);
}

#[test]
fn offload_only_moves_everything_through_the_channels() {
    let o = Offload::emulated(EmulatedOptions::default().channels(2));
    let (r, exact) = registered_batch(o, 1, true, (true, true));
    assert!(exact && r.is_complete(), "{r:?}");
    assert_eq!(r.offloaded, r.total, "{r:?}");
}

#[test]
fn unregistered_memory_never_reaches_a_channel() {
    for register in [(false, false), (true, false), (false, true)] {
        let o = Offload::emulated(EmulatedOptions::default());
        let (r, exact) = registered_batch(o, 1, true, register);
        assert!(exact && r.is_complete(), "{register:?}: {r:?}");
        assert_eq!(r.offloaded, 0, "{register:?}: {r:?}");
    }
}

#[test]
fn a_failing_channel_has_its_chunk_redone_on_the_cpu() {
    let o = Offload::emulated(EmulatedOptions::default().fail_every(2));
    let (r, exact) = registered_batch(o, 1, true, (true, true));
    assert!(exact, "the CPU redo overwrote the channel's partial write");
    assert!(r.is_complete(), "{r:?}");
    assert!(r.offload_redone > 0, "{r:?}");
    assert_eq!(r.offloaded + r.offload_redone * MIB, r.total, "{r:?}");
}

#[test]
fn cancel_leaves_an_exact_prefix_with_channels_in_flight() {
    let o = Offload::emulated(
        EmulatedOptions::default()
            .channels(2)
            .delay_per_mib(Duration::from_millis(2)),
    );
    let e = engine(o, 2, false);
    let src = pattern(LEN, 9);
    let mut dst = vec![0u8; LEN];
    // SAFETY: both buffers outlive the engine.
    unsafe {
        e.register(src.as_ptr(), LEN).unwrap();
        e.register(dst.as_ptr(), LEN).unwrap();
    }
    let ext = extents(&mut dst, &src);
    let token = CancelToken::new();
    let seen = AtomicUsize::new(0);
    let progress = |p: Progress| {
        assert!(p.done <= p.total);
        if seen.fetch_add(1, Ordering::Relaxed) == 3 {
            token.cancel();
        }
    };
    let ctl = Control {
        cancel: Some(&token),
        progress: Some(&progress),
    };
    // SAFETY: the extents name the two live vectors, disjoint.
    let r = unsafe { e.copy_extents(&ext, ctl) }.unwrap();
    drop(e);
    assert!(r.cancelled && !r.is_complete(), "{r:?}");
    assert_eq!(
        dst[..r.bytes_done],
        src[..r.bytes_done],
        "the prefix is done"
    );
    assert!(
        dst[r.bytes_done..].iter().all(|&b| b == 0),
        "nothing after it was written"
    );
}

#[test]
fn registration_errors_say_what_was_wrong() {
    let plain = Engine::builder().threads(1).pin(false).build().unwrap();
    let buf = vec![0u8; 4096];
    // SAFETY: buf outlives the call (which fails anyway).
    let e = unsafe { plain.register(buf.as_ptr(), buf.len()) }.unwrap_err();
    assert!(e.to_string().contains("no offload"), "{e}");
    let o = engine(Offload::emulated(EmulatedOptions::default()), 1, false);
    // SAFETY: buf outlives the engine.
    unsafe { o.register(buf.as_ptr(), 4096) }.unwrap();
    // SAFETY: as above.
    let twice = unsafe { o.register(buf.as_ptr().wrapping_add(100), 10) }.unwrap_err();
    assert!(twice.to_string().contains("overlaps"), "{twice}");
    assert!(o.unregister(buf.as_ptr(), 100).is_err());
    o.unregister(buf.as_ptr(), 4096).unwrap();
    assert!(Engine::builder().offload_only(true).build().is_err());
}

#[test]
fn a_gpu_offload_copies_exactly_or_says_why_it_cannot() {
    let gpu = match Offload::gpu(GpuOptions::default()) {
        Ok(g) => g,
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("GPU offload"), "{msg}");
            // No cfg: build.rs does not look for GPUs. BULKMEM_REQUIRE=gpu
            // makes this absence a failure.
            require::skip(&format!("no GPU: {msg}"));
            return;
        }
    };
    // Shared with CPU workers, the channels may get no chunk at all where
    // the CPUs are fast (16 AVX-512 cores beat an H200's channels to all
    // 25): what they take is the scheduler's business, checked with the
    // emulated channels above. Here: exact, then all through the GPU.
    let (r, exact) = registered_batch(gpu, 2, false, (true, true));
    assert!(exact && r.is_complete(), "{r:?}");
    let gpu = Offload::gpu(GpuOptions::default()).unwrap();
    let (r, exact) = registered_batch(gpu, 1, true, (true, true));
    assert!(exact && r.is_complete() && r.offloaded == r.total, "{r:?}");
    let gpu = Offload::gpu(GpuOptions::default()).unwrap();
    let (r, exact) = registered_batch(gpu, 1, true, (true, false));
    assert!(exact && r.is_complete() && r.offloaded == 0, "{r:?}");
}

/// A child made by fork() has the parent's channel handles but not its
/// device state (a real driver crashed when one was destroyed there): its
/// batches run on the CPU, and nothing in it calls the driver.
#[test]
fn a_gpu_offload_in_a_fork_child_copies_on_the_cpu() {
    let gpu = match Offload::gpu(GpuOptions::default()) {
        Ok(g) => g,
        Err(e) => {
            require::skip(&format!("no GPU: {e}"));
            return;
        }
    };
    let e = engine(gpu, 1, true);
    let src = pattern(LEN, 11);
    let mut dst = vec![0u8; LEN];
    // SAFETY: both buffers outlive the engine and its offload (dropped
    // first, below), which unregister them.
    unsafe {
        e.register(src.as_ptr(), LEN).unwrap();
        e.register(dst.as_ptr(), LEN).unwrap();
    }
    let batch = |dst: &mut Vec<u8>| {
        dst.fill(0);
        let ext = extents(dst, &src);
        // SAFETY: the extents name the two live vectors, disjoint.
        let r = unsafe { e.copy_extents(&ext, Control::default()) }.unwrap();
        (r, *dst == src)
    };
    let (r, exact) = batch(&mut dst);
    assert!(exact && r.offloaded == r.total, "{r:?}");
    // SAFETY: the child runs one batch and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let (r, exact) = batch(&mut dst);
            assert!(exact && r.is_complete() && r.offloaded == 0, "{r:?}");
        }));
        // SAFETY: leaves the child at once (no atexit, no harness).
        unsafe { libc::_exit(i32::from(ok.is_err())) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just made.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child: {status:#x}"
    );
    let (r, exact) = batch(&mut dst);
    assert!(
        exact && r.offloaded == r.total,
        "parent after the fork: {r:?}"
    );
    drop(e);
}
