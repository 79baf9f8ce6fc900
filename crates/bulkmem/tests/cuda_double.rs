//! The CUDA backend end to end, on any machine: each test runs again in a
//! child process whose `dlopen("libcuda.so.1")` finds the test double
//! (tests/cuda_double/libcuda.c, built by scripts/cuda-double), configured
//! by `CUDA_DOUBLE` for that test: devices, copy engines, a failure
//! injected into the Nth call of a driver function, a sticky error, slow
//! streams. The double counts what the backend left behind (streams,
//! events, allocations, pinned ranges, retained contexts, copies still
//! queued) and what it was never promised (copies of unregistered host
//! memory, calls in a fork's child); the tests read that back.
//!
//! `the_double_answers_as_a_real_driver_did` keeps the double honest: the
//! probe's answers from it must equal a real driver's (fixtures/).

mod common;

use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use bulkmem::offload::{GpuOptions, Offload};
use bulkmem::{CancelToken, Control, Engine, Error, Extent, Progress, Report};

const MIB: usize = 1 << 20;
/// Set in the child that runs a test's body against the double.
const CHILD: &str = "BULKMEM_CUDA_DOUBLE_CHILD";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The double and the probe, built once per test binary.
fn double_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let out = tmp.join("cuda-double");
        let include = tmp.parent().expect("target dir").join("cuda-include");
        let o = Command::new(root().join("scripts/cuda-double"))
            .arg(&out)
            .arg(&include)
            .output()
            .expect("run scripts/cuda-double");
        let said = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success(),
            "scripts/cuda-double failed (scripts/c-deps installs a C compiler):\n{said}"
        );
        if said.contains("no cuda.h") {
            common::require::skip("cuda.h not fetched (scripts/cuda-header): the double is checked against cuda_api.h only");
        }
        out
    })
}

/// Runs the test `name` again in a child whose libcuda.so.1 is the double,
/// configured with `config`; in that child, runs `body`.
fn scenario(name: &str, config: &str, body: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    let o = Command::new(std::env::current_exe().expect("test binary"))
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("LD_LIBRARY_PATH", double_dir())
        .env("CUDA_DOUBLE", config)
        .output()
        .expect("run the child");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.status.success(),
        "{name} against the double ({config}):\n{text}"
    );
    assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
}

/// The double's counters (`cuda_double_report`).
fn report() -> HashMap<String, i64> {
    // SAFETY: a C string literal; the library stays loaded, as the backend
    // keeps it.
    let h = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW) };
    assert!(!h.is_null(), "no libcuda.so.1 in the child");
    // SAFETY: `h` is open; the name is a C string.
    let f = unsafe { libc::dlsym(h, c"cuda_double_report".as_ptr()) };
    assert!(!f.is_null(), "libcuda.so.1 here is not the test double");
    // SAFETY: the double defines `const char *cuda_double_report(void)`.
    let f: extern "C" fn() -> *const c_char = unsafe { std::mem::transmute(f) };
    // SAFETY: it returns a NUL-terminated static buffer, copied at once.
    let line = unsafe { CStr::from_ptr(f()) }
        .to_string_lossy()
        .into_owned();
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().expect("a number")))
        .collect()
}

/// Nothing the backend promises against: no copy still queued, none of
/// unregistered host memory, no buffer freed or stream destroyed busy.
fn assert_clean(r: &HashMap<String, i64>) {
    for k in [
        "pending",
        "unregistered_copies",
        "freed_busy",
        "destroyed_busy",
    ] {
        assert_eq!(r[k], 0, "{k}: {r:?}");
    }
}

/// Everything the backend made is gone.
fn assert_released(r: &HashMap<String, i64>) {
    assert_clean(r);
    for k in ["streams", "events", "allocs", "registered", "retained"] {
        assert_eq!(r[k], 0, "{k} left: {r:?}");
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

fn engine(o: &Offload, threads: usize, only: bool) -> Engine {
    Engine::builder()
        .threads(threads)
        .chunk(MIB)
        .inline_max(0)
        .pin(false)
        .offload(o.clone())
        .offload_only(only)
        .build()
        .expect("engine")
}

/// Source and destination of `n` extents of 1 MiB + 4 KiB (chunks cut
/// extents), both registered with the engine's offload.
struct Buffers {
    src: Vec<u8>,
    dst: Vec<u8>,
    n: usize,
}

impl Buffers {
    fn new(e: &Engine, n: usize, seed: u8) -> Buffers {
        let len = n * (MIB + 4096);
        let b = Buffers {
            src: pattern(len, seed),
            dst: vec![0u8; len],
            n,
        };
        // SAFETY: both vectors outlive the engine's offload use: they are
        // unregistered by `Drop` first.
        unsafe {
            e.register(b.src.as_ptr(), len).expect("register src");
            e.register(b.dst.as_ptr(), len).expect("register dst");
        }
        b
    }

    fn extents(&mut self) -> Vec<Extent> {
        let n = MIB + 4096;
        self.dst
            .chunks_exact_mut(n)
            .zip(self.src.chunks_exact(n))
            .take(self.n)
            .map(|(d, s)| Extent {
                dst: d.as_mut_ptr(),
                src: s.as_ptr(),
                len: n,
            })
            .collect()
    }

    fn copy(&mut self, e: &Engine, ctl: Control<'_>) -> Report {
        let ext = self.extents();
        // SAFETY: the extents name the two live vectors, disjoint.
        unsafe { e.copy_extents(&ext, ctl) }.expect("batch")
    }

    fn unregister(&self, e: &Engine) {
        e.unregister(self.src.as_ptr(), self.src.len()).unwrap();
        e.unregister(self.dst.as_ptr(), self.dst.len()).unwrap();
    }
}

fn gpu(opts: GpuOptions) -> Offload {
    Offload::gpu(opts).expect("the double opens")
}

fn gpu_error(opts: GpuOptions) -> String {
    match Offload::gpu(opts) {
        Err(Error::NotSupportedHere { what }) => what,
        other => panic!("expected NotSupportedHere, got {other:?}"),
    }
}

#[test]
fn the_double_is_seen_as_gpus() {
    scenario(
        "the_double_is_seen_as_gpus",
        "devices=2;engines=3;name=Two-engine double, not a GPU",
        || {
            let g = bulkmem::offload::gpus().expect("gpus");
            assert_eq!(g.len(), 2, "{g:?}");
            for (i, d) in g.iter().enumerate() {
                assert_eq!(d.ordinal, i);
                assert_eq!(d.name, "Two-engine double, not a GPU");
                assert_eq!(d.copy_engines, 3);
                assert_eq!(d.memory, 16 << 30);
                assert_eq!(d.pci, format!("0000:{:02x}:00", 0x40 + i));
            }
            let e = gpu_error(GpuOptions::default().device(2));
            assert!(
                e.contains("there is no GPU 2: the CUDA driver sees 2"),
                "{e}"
            );
            let o = gpu(GpuOptions::default()
                .device(1)
                .channels(3)
                .depth(2)
                .staging(MIB));
            assert_eq!(
                o.describe(),
                "gpu 1 (Two-engine double, not a GPU), 3 channels x 2 x 1 MiB staging"
            );
            let r = report();
            assert_eq!(
                (r["streams"], r["events"], r["allocs"], r["retained"]),
                (6, 15, 6, 1),
                "per channel two streams, a buffer and two events per depth, one more event: {r:?}"
            );
            drop(o);
            assert_released(&report());
        },
    );
}

#[test]
fn a_driver_without_devices_is_said_plainly() {
    scenario(
        "a_driver_without_devices_is_said_plainly",
        "devices=0",
        || {
            let e = bulkmem::offload::gpus().unwrap_err();
            assert!(e.contains("the CUDA driver sees no GPU"), "{e}");
            let e = gpu_error(GpuOptions::default());
            assert!(
                e.contains("GPU offload: the CUDA driver sees no GPU"),
                "{e}"
            );
        },
    );
}

#[test]
fn a_failing_init_is_a_clear_error_every_time() {
    scenario(
        "a_failing_init_is_a_clear_error_every_time",
        "fail=cuInit:1:999",
        || {
            for _ in 0..2 {
                let e = gpu_error(GpuOptions::default());
                assert!(
                    e.contains("cuInit failed: CUDA_ERROR_UNKNOWN (999): unknown error"),
                    "{e}"
                );
            }
            assert_eq!(report()["calls"], 1, "cuInit is tried once per process");
        },
    );
}

#[test]
fn a_failing_allocation_releases_what_was_made() {
    scenario(
        "a_failing_allocation_releases_what_was_made",
        "fail=cuMemAlloc_v2:3:2;fail=cuStreamCreate:5:2;fail=cuEventCreate:9:999",
        || {
            let opts = GpuOptions::default().channels(2).depth(2).staging(MIB);
            // A channel makes two streams and an event, then per buffer an
            // allocation and two events. The first open fails at its 3rd
            // allocation (the second channel's first buffer), the second
            // at its first stream (the 5th), the third at its third event
            // (the 9th).
            for want in [
                "cuMemAlloc_v2(1048576) failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory",
                "cuStreamCreate failed: CUDA_ERROR_OUT_OF_MEMORY (2)",
                "cuEventCreate failed: CUDA_ERROR_UNKNOWN (999)",
            ] {
                let e = gpu_error(opts.clone());
                assert!(e.contains(want), "{e}");
                assert_released(&report());
            }
            let o = gpu(opts);
            let e = engine(&o, 1, true);
            let mut b = Buffers::new(&e, 3, 1);
            let r = b.copy(&e, Control::default());
            assert!(b.dst == b.src && r.offloaded == r.total, "{r:?}");
            b.unregister(&e);
            drop((e, o));
            assert_released(&report());
        },
    );
}

#[test]
fn registration_pins_and_unpins_and_says_why_not() {
    scenario(
        "registration_pins_and_unpins_and_says_why_not",
        "fail=cuMemHostRegister_v2:2:2;fail=cuMemHostUnregister:2:999",
        || {
            let o = gpu(GpuOptions::default().channels(1));
            // Page-aligned: the driver pins whole pages.
            let buf = bulkmem::mapping::Mapping::anonymous(8 * 4096).unwrap();
            let p = buf.as_ptr();
            // SAFETY: `buf` outlives every registration (all undone below).
            unsafe { o.register(p, 4 * 4096) }.unwrap();
            assert_eq!(report()["registered"], 1);
            // SAFETY: as above.
            let e = unsafe { o.register(p.wrapping_add(4096), 4096) }.unwrap_err();
            assert!(e.to_string().contains("overlaps"), "{e}");
            // SAFETY: as above; the driver's 2nd registration fails.
            let e = unsafe { o.register(p.wrapping_add(4 * 4096), 4096) }.unwrap_err();
            let e = e.to_string();
            assert!(
                e.contains("cannot register: cuMemHostRegister_v2(")
                    && e.contains("CUDA_ERROR_OUT_OF_MEMORY (2)"),
                "{e}"
            );
            // Not kept: the same range registers now.
            // SAFETY: as above.
            unsafe { o.register(p.wrapping_add(4 * 4096), 4096) }.unwrap();
            assert_eq!(report()["registered"], 2);
            o.unregister(p, 4 * 4096).unwrap();
            let e = o.unregister(p.wrapping_add(4 * 4096), 4096).unwrap_err();
            assert!(
                e.to_string()
                    .contains("cannot unregister: cuMemHostUnregister(")
                    && e.to_string().contains("CUDA_ERROR_UNKNOWN (999)"),
                "{e}"
            );
            drop(o);
            let r = report();
            assert_eq!(r["registered"], 1, "the refused unregister: {r:?}");
            assert_eq!(
                (r["streams"], r["allocs"], r["retained"]),
                (0, 0, 0),
                "{r:?}"
            );
        },
    );
}

#[test]
fn batches_split_between_workers_and_one_to_four_channels() {
    scenario(
        "batches_split_between_workers_and_one_to_four_channels",
        "engines=2",
        || {
            for channels in 1..=4 {
                let o = gpu(GpuOptions::default().channels(channels).staging(256 << 10));
                for only in [false, true] {
                    let before = report()["copy_bytes"];
                    let e = engine(&o, 2, only);
                    let mut b = Buffers::new(&e, 40, channels as u8);
                    let r = b.copy(&e, Control::default());
                    assert!(b.dst == b.src, "{channels} channels: not byte-exact");
                    assert!(r.is_complete() && r.offload_redone == 0, "{r:?}");
                    if only {
                        assert_eq!(r.offloaded, r.total, "{r:?}");
                    }
                    let moved = report()["copy_bytes"] - before;
                    assert_eq!(
                        moved as usize,
                        2 * r.offloaded,
                        "every offloaded byte goes up and down once: {r:?}"
                    );
                    assert_clean(&report());
                    b.unregister(&e);
                }
                drop(o);
                assert_released(&report());
            }
        },
    );
}

#[test]
fn a_copy_failing_mid_batch_is_redone_on_the_cpu() {
    // Slices of 256 KiB, four or five to a chunk, on slow streams. The 7th
    // upload (in chunk 2) is refused with earlier slices of its chunk
    // queued; the wait for the last chunk (13: 48 KiB; the 12th wait, as
    // the failed chunk never got to one) fails with its copies
    // still running. Both chunks are redone on the CPU, and the batch
    // returns only once the streams are idle: no copy of a failed chunk
    // may land after the CPU's.
    scenario(
        "a_copy_failing_mid_batch_is_redone_on_the_cpu",
        "slow=1000;fail=cuMemcpyHtoDAsync_v2:7:1;fail=cuEventSynchronize:12:999",
        || {
            let o = gpu(GpuOptions::default().channels(1).staging(256 << 10));
            let e = engine(&o, 1, true);
            let mut b = Buffers::new(&e, 12, 3);
            let r = b.copy(&e, Control::default());
            assert_clean(&report());
            assert!(b.dst == b.src, "the CPU's redo is the last write");
            assert!(r.is_complete(), "{r:?}");
            assert_eq!(r.offload_redone, 2, "{r:?}");
            let last = r.total % MIB;
            assert_eq!(r.offloaded, r.total - MIB - last, "{r:?}");
            assert_eq!(report()["injected"], 2);
            b.unregister(&e);
            drop((e, o));
            assert_released(&report());
        },
    );
}

#[test]
fn a_sticky_error_poisons_the_context_and_the_rest_is_redone() {
    scenario(
        "a_sticky_error_poisons_the_context_and_the_rest_is_redone",
        "sticky=cuMemcpyDtoHAsync_v2:2:214",
        || {
            let o = gpu(GpuOptions::default().channels(1));
            let e = engine(&o, 1, true);
            let mut b = Buffers::new(&e, 8, 4);
            let chunks = r_chunks(b.n);
            let r = b.copy(&e, Control::default());
            assert!(b.dst == b.src && r.is_complete(), "{r:?}");
            // The first chunk (one piece) went through; the second's first
            // download faulted on the device; every later chunk is refused
            // by the poisoned context.
            assert_eq!(r.offload_redone, chunks - 1, "{r:?}");
            assert_eq!(r.offloaded, MIB, "{r:?}");
            let rep = report();
            assert_eq!(rep["faults"], 1, "{rep:?}");
            assert_clean(&rep);
            drop(b);
            drop((e, o));
            let rep = report();
            assert_eq!(
                (rep["retained"], rep["streams"], rep["allocs"]),
                (0, 0, 0),
                "{rep:?}"
            );
        },
    );
}

/// Chunks of a batch of `n` extents of 1 MiB + 4 KiB at 1 MiB a chunk.
fn r_chunks(n: usize) -> usize {
    (n * (MIB + 4096)).div_ceil(MIB)
}

#[test]
fn cancel_leaves_an_exact_prefix_with_channels_busy() {
    scenario(
        "cancel_leaves_an_exact_prefix_with_channels_busy",
        "slow=2000",
        || {
            let o = gpu(GpuOptions::default().channels(2).staging(256 << 10));
            let e = engine(&o, 2, false);
            let mut b = Buffers::new(&e, 24, 5);
            let token = CancelToken::new();
            let seen = AtomicUsize::new(0);
            let last = AtomicUsize::new(0);
            let progress = |p: Progress| {
                assert!(p.done <= p.total);
                assert!(
                    p.done >= last.swap(p.done, Ordering::Relaxed),
                    "progress went back"
                );
                if seen.fetch_add(1, Ordering::Relaxed) == 3 {
                    token.cancel();
                }
            };
            let ctl = Control {
                cancel: Some(&token),
                progress: Some(&progress),
            };
            let r = b.copy(&e, ctl);
            assert_clean(&report());
            assert!(r.cancelled && !r.is_complete(), "{r:?}");
            assert_eq!(b.dst[..r.bytes_done], b.src[..r.bytes_done], "the prefix");
            assert!(
                b.dst[r.bytes_done..].iter().all(|&x| x == 0),
                "nothing after the prefix was written"
            );
            b.unregister(&e);
        },
    );
}

#[test]
fn a_dropped_ticket_stops_the_channels_before_it_returns() {
    scenario(
        "a_dropped_ticket_stops_the_channels_before_it_returns",
        "slow=3000",
        || {
            let o = gpu(GpuOptions::default().channels(2).staging(256 << 10));
            let e = engine(&o, 1, true);
            let mut b = Buffers::new(&e, 24, 6);
            let ext = b.extents();
            // SAFETY: the extents name the two live vectors, disjoint; the
            // ticket is dropped, not leaked, before they go.
            let t = unsafe { e.submit_copy(&ext, None) }.expect("submit");
            while t.progress().done == 0 && t.wait_timeout(Duration::from_millis(1)).is_none() {}
            assert!(report()["copies"] > 0, "channels were busy");
            drop(t);
            assert_clean(&report());
            b.unregister(&e);
            drop(e);
            drop(o);
            // Only now may the memory go: nothing can write it after this.
            drop(b);
            assert_released(&report());
        },
    );
}

#[test]
fn a_fork_child_copies_on_the_cpu_without_the_driver() {
    scenario(
        "a_fork_child_copies_on_the_cpu_without_the_driver",
        "",
        || {
            let o = gpu(GpuOptions::default().channels(2));
            let e = engine(&o, 1, true);
            let mut b = Buffers::new(&e, 6, 7);
            let r = b.copy(&e, Control::default());
            assert!(b.dst == b.src && r.offloaded == r.total, "{r:?}");
            // SAFETY: the child only runs the checks below and leaves with
            // _exit; the engine and the double are fork-aware.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork");
            if pid == 0 {
                let checks = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    b.dst.fill(0);
                    b.src = pattern(b.src.len(), 8);
                    let r = b.copy(&e, Control::default());
                    assert!(b.dst == b.src && r.is_complete(), "{r:?}");
                    assert_eq!((r.offloaded, r.offload_redone), (0, 0), "{r:?}");
                    // SAFETY: refused before anything is pinned.
                    let err = unsafe { o.register(b.dst.as_ptr(), 4096) }.unwrap_err();
                    assert!(err.to_string().contains("fork()"), "{err}");
                }));
                let verdict = checks.and_then(|()| {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                        drop((e, o));
                        assert_eq!(report()["child_calls"], 0, "the child called the driver");
                    }))
                });
                // SAFETY: leaves the child at once, running nothing of the
                // parent's (no atexit, no test harness).
                unsafe { libc::_exit(i32::from(verdict.is_err())) };
            }
            let mut status = 0;
            // SAFETY: waits for the child just made.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            assert!(
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                "the child failed: {status:#x}"
            );
            let r = b.copy(&e, Control::default());
            assert!(
                b.dst == b.src && r.offloaded == r.total,
                "parent after: {r:?}"
            );
            b.unregister(&e);
            drop((e, o));
            assert_released(&report());
        },
    );
}

/// The probe (tests/cuda_double/probe.c) against the double prints what it
/// printed against a real driver, line for line; `#` lines describe the
/// machine (names, engine counts) and are left out.
#[test]
fn the_double_answers_as_a_real_driver_did() {
    let dir = double_dir();
    let o = Command::new(dir.join("probe"))
        .env("LD_LIBRARY_PATH", dir)
        .env_remove("CUDA_DOUBLE")
        .output()
        .expect("run the probe");
    assert!(o.status.success(), "probe: {o:?}");
    let semantic = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| !l.starts_with('#'))
            .map(String::from)
            .collect()
    };
    let got = semantic(&String::from_utf8_lossy(&o.stdout));
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut checked = 0;
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("cuda-probe-") && name.ends_with(".txt")) {
            continue;
        }
        let want = semantic(&std::fs::read_to_string(&path).unwrap());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{name}, line {}: the double differs", i + 1);
        }
        assert_eq!(got.len(), want.len(), "{name}: line count");
        checked += 1;
    }
    assert!(checked > 0, "no cuda-probe-*.txt in {}", fixtures.display());
}
