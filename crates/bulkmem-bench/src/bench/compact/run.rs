//! One compaction of one heap, with mutators running: what a row is made
//! of.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bulkmem::compact::{self, Compaction, Mode, Options};
use bulkmem::uffd::{MoveOptions, Mover};

use super::heap::Heap;

/// How long mutators run without a collection, for the baseline rate.
const BASELINE: Duration = Duration::from_millis(150);

/// What one run measured.
pub struct Sample {
    pub pause: Duration,
    pub total: Duration,
    /// Faulting accesses' latencies, nanoseconds.
    pub stalls: Vec<u64>,
    /// The library's own figure: time inside the handler, p50 and p99.
    pub handler: (Duration, Duration),
    pub faults_per_mutator: f64,
    pub share: f64,
    pub rss_extra: f64,
}

fn now_ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

/// What the mutators did: operations, the seconds they ran, their stalls.
struct Mutated {
    ops: u64,
    secs: f64,
    stalls: Vec<u64>,
}

/// Runs `threads` mutators on live objects of `heap` from now until `stop`
/// is set, timing every access; an access during which `faults` moved is a
/// stall (exact with one mutator; with two, the other's fault can mark a
/// fast access, which only lowers the figures).
fn mutate(
    heap: &Arc<Heap>,
    threads: usize,
    compacted: bool,
    check: bool,
    faults: Arc<dyn Fn() -> u64 + Send + Sync>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<Result<Mutated, String>>> {
    (0..threads)
        .map(|t| {
            let (heap, stop, faults) = (Arc::clone(heap), Arc::clone(stop), Arc::clone(&faults));
            std::thread::spawn(move || {
                let t0 = Instant::now();
                let mut x = 0x2545_F491_4F6C_DD1Du64 ^ (t as u64 + 1);
                let (mut ops, mut stalls) = (0u64, Vec::with_capacity(1 << 20));
                let n = heap.live.len() as u64;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let before = faults();
                    let a = now_ns(t0);
                    let ok = heap.touch((x % n) as usize, compacted);
                    let b = now_ns(t0);
                    if faults() != before {
                        stalls.push(b - a);
                    }
                    if check && !ok {
                        return Err(format!("a mutator read a wrong id at object {}", x % n));
                    }
                    ops += 1;
                }
                Ok(Mutated {
                    ops,
                    secs: t0.elapsed().as_secs_f64(),
                    stalls,
                })
            })
        })
        .collect()
}

fn join(
    handles: Vec<std::thread::JoinHandle<Result<Mutated, String>>>,
) -> Result<Vec<Mutated>, String> {
    handles
        .into_iter()
        .map(|h| h.join().map_err(|_| "a mutator panicked".to_string())?)
        .collect()
}

/// Mutator operations per second on the uncompacted heap, no collection.
fn baseline(heap: &Arc<Heap>, threads: usize) -> Result<(f64, u64), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let hs = mutate(heap, threads, false, true, Arc::new(|| 0), &stop);
    std::thread::sleep(BASELINE);
    stop.store(true, Ordering::Relaxed);
    let m = join(hs)?;
    let ops: u64 = m.iter().map(|m| m.ops).sum();
    Ok((m.iter().map(|m| m.ops as f64 / m.secs).sum(), ops))
}

/// `VmRSS` or `VmHWM` of this process, bytes.
fn status_kib(field: &str) -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0.0, |k| k * 1024.0)
}

/// One run of `strategy` on a fresh heap.
pub fn one(
    strategy: &str,
    bytes: usize,
    live: u32,
    mutators: usize,
    thp: bool,
) -> Result<Sample, String> {
    let heap = Arc::new(Heap::new(bytes, live, thp)?);
    let (base_rate, base_ops) = baseline(&heap, mutators)?;
    let rss_before = status_kib("VmRSS:");
    // Resets VmHWM to the current RSS (proc(5), clear_refs "5").
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let (ptr, len) = (heap.map.as_mut_ptr(), heap.map.len());
    let opts = Options::default().huge_pages(thp);
    let (sample, ops) = match strategy {
        "stop-the-world-mover" | "stop-the-world" => {
            let t0 = Instant::now();
            if strategy == "stop-the-world" {
                // SAFETY: no mutator runs; nothing references the heap.
                unsafe { compact::stop_the_world(ptr, len, &*heap, opts) }
                    .map_err(|e| e.to_string())?;
            } else {
                stw_mover(&heap, thp)?;
            }
            let pause = t0.elapsed();
            let stalls = vec![pause.as_nanos() as u64];
            (
                Sample {
                    pause,
                    total: pause,
                    stalls,
                    handler: (Duration::ZERO, Duration::ZERO),
                    faults_per_mutator: 0.0,
                    share: 0.0,
                    rss_extra: 0.0,
                },
                0,
            )
        }
        _ => {
            // The floor: every page is zeros, so a fault costs the kernel's
            // round trip, one copy ioctl and the handler, nothing to build.
            let producer: Arc<dyn compact::Producer> = if strategy == "floor" {
                Arc::new(Zeros)
            } else {
                heap.clone()
            };
            let mode = match strategy {
                "concurrent-copy" => Mode::Copy,
                "concurrent-move" => Mode::Move,
                _ => Mode::Auto,
            };
            let t0 = Instant::now();
            // SAFETY: the mutators are stopped (joined) and hold no
            // reference into the heap.
            let mut s = unsafe { Compaction::prepare(ptr, len, producer, opts.mode(mode)) }
                .map_err(|e| e.to_string())?;
            let pause = t0.elapsed();
            let stop = Arc::new(AtomicBool::new(false));
            let faults = s.fault_counter();
            let check = strategy != "floor";
            let hs = mutate(&heap, mutators, true, check, Arc::new(faults), &stop);
            if check {
                s.start().map_err(|e| e.to_string())?;
            } else {
                // The floor: the mutators alone fault pages in for a while.
                std::thread::sleep(BASELINE);
            }
            let stats = s.finish().map_err(|e| e.to_string())?;
            let total = t0.elapsed();
            stop.store(true, Ordering::Relaxed);
            let m = join(hs)?;
            let rate: f64 = m.iter().map(|m| m.ops as f64 / m.secs).sum();
            let ops: u64 = m.iter().map(|m| m.ops).sum();
            let mut stalls: Vec<u64> = m.into_iter().flat_map(|m| m.stalls).collect();
            stalls.sort_unstable();
            (
                Sample {
                    pause,
                    total,
                    stalls,
                    handler: (stats.stall.quantile(0.5), stats.stall.quantile(0.99)),
                    faults_per_mutator: stats.faults as f64 / mutators.max(1) as f64,
                    share: rate / base_rate,
                    rss_extra: 0.0,
                },
                ops,
            )
        }
    };
    let rss_extra = status_kib("VmHWM:") - rss_before;
    if strategy != "floor" {
        heap.verify(base_ops + ops)?;
    }
    Ok(Sample {
        rss_extra,
        ..sample
    })
}

/// The stop-the-world compaction the Mover offers: in the pause, the heap
/// moves aside, every page is built into a staging area, and the staging
/// area is moved into the emptied heap with batched UFFDIO_MOVE.
fn stw_mover(heap: &Heap, thp: bool) -> Result<(), String> {
    use bulkmem::compact::{Fill, Producer, PAGE};
    let mut mover = Mover::new().map_err(|e| e.to_string())?;
    let (base, len) = (heap.map.as_mut_ptr(), heap.map.len());
    // SAFETY: the heap's mapping moves to an address the kernel picks, and
    // a fresh one takes its place; nothing references either.
    let from = unsafe {
        // Same-size mremap without a target stays put: reserve one.
        let at = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if at == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        let from = libc::mremap(
            base.cast(),
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            at,
        );
        if from == libc::MAP_FAILED {
            return Err(format!("mremap: {}", std::io::Error::last_os_error()));
        }
        let to = libc::mmap(
            base.cast(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        );
        if to == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        let advice = if thp {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        libc::madvise(base.cast(), len, advice);
        from as *const u8
    };
    mover.register(base, len).map_err(|e| e.to_string())?;
    let staging = bulkmem::mapping::Mapping::options()
        .align(2 << 20)
        .huge_pages(thp)
        .map(len)
        .map_err(|e| e.to_string())?;
    for p in 0..len / PAGE {
        let out_ptr = staging.as_mut_ptr().wrapping_add(p * PAGE);
        // SAFETY: page p of our staging area.
        let out = unsafe { &mut *(out_ptr as *mut [u8; PAGE]) };
        if heap.produce(p, from, out) == Fill::Same {
            // SAFETY: from-space page p.
            out.copy_from_slice(unsafe { &*(from.add(p * PAGE) as *const [u8; PAGE]) });
        }
    }
    // SAFETY: the from-space is ours and read no more.
    unsafe { libc::munmap(from as *mut libc::c_void, len) };
    let opts = MoveOptions::default()
        .allow_src_holes(true)
        .fallback_copy(true);
    // SAFETY: private anonymous mappings of ours; the heap is registered
    // and empty.
    let r = unsafe { mover.move_range(base, staging.as_mut_ptr(), len, opts) }
        .map_err(|e| e.to_string())?;
    if !r.is_complete() {
        return Err(format!("the Mover left {} pages unmoved", r.failures.len()));
    }
    mover.unregister(base, len).map_err(|e| e.to_string())
}

/// A producer whose every page is zeros: the floor row's.
struct Zeros;

impl compact::Producer for Zeros {
    fn produce(&self, _: usize, _: *const u8, _: &mut [u8; compact::PAGE]) -> compact::Fill {
        compact::Fill::Zero
    }
}
