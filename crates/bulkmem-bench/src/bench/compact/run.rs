//! One compaction of one heap, with mutators running: what a row is made
//! of.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bulkmem::compact::{self, Compaction, Mode, Options};
use bulkmem::uffd::{MoveOptions, Mover};

use super::heap::{Heap, OBJ};

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
    /// `allocate`: faults per MiB the mutators allocated.
    pub faults_per_mib: f64,
}

/// What the mutators do during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Read and count random live objects (at their new addresses).
    Random,
    /// Fill fresh 2 MiB buffers in the free space past the live objects,
    /// each made present with one `ensure` first, as a runtime's
    /// allocation buffers.
    Allocate,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Random => "random",
            Workload::Allocate => "allocate",
        }
    }
}

/// An allocation buffer: 2 MiB.
const BUFFER: usize = 2 << 20;

fn now_ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

/// What the mutators did: operations, the seconds they ran, their stalls.
pub(super) struct Mutated {
    pub ops: u64,
    pub secs: f64,
    pub stalls: Vec<u64>,
    /// Bytes allocated (`allocate`).
    bytes: u64,
}

/// Runs `threads` mutators on live objects of `heap` from now until `stop`
/// is set, timing every access; an access during which `faults` moved is a
/// stall (exact with one mutator; with two, the other's fault can mark a
/// fast access, which only lowers the figures).
pub(super) fn mutate(
    heap: &Arc<Heap>,
    threads: usize,
    compacted: bool,
    check: bool,
    faults: Arc<dyn Fn() -> u64 + Send + Sync>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<Result<Mutated, String>>> {
    let started = Arc::new(AtomicUsize::new(0));
    let hs = (0..threads)
        .map(|t| {
            let (heap, stop, faults) = (Arc::clone(heap), Arc::clone(stop), Arc::clone(&faults));
            let started = Arc::clone(&started);
            std::thread::spawn(move || {
                started.fetch_add(1, Ordering::Release);
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
                    bytes: 0,
                })
            })
        })
        .collect();
    all_started(&started, threads);
    hs
}

/// Waits until `threads` mutators have started: a collector started
/// before them could build a small heap before any ran (on a loaded
/// 2-vCPU machine, a whole 8 MiB heap), and the cell would time no
/// mutator at all.
fn all_started(started: &AtomicUsize, threads: usize) {
    while started.load(Ordering::Acquire) < threads {
        std::thread::yield_now();
    }
}

/// Where allocating mutators take their next buffer: 2 MiB steps through
/// the heap's free space (past the live objects once compacted).
pub struct Bump {
    next: std::sync::atomic::AtomicUsize,
    end: usize,
}

impl Bump {
    pub fn new(heap: &Heap) -> Bump {
        let base = heap.map.as_ptr() as usize;
        let live_end = heap.addr(heap.live.len().saturating_sub(1), true) + OBJ;
        Bump {
            next: std::sync::atomic::AtomicUsize::new(live_end.next_multiple_of(BUFFER)),
            end: base + heap.map.len(),
        }
    }

    fn take(&self) -> Option<usize> {
        let b = self.next.fetch_add(BUFFER, Ordering::Relaxed);
        (b + BUFFER <= self.end).then_some(b)
    }
}

type Ensure = Arc<dyn Fn(*const u8, usize) -> Result<(), String> + Send + Sync>;

/// Runs `threads` allocating mutators: each takes buffers from `bump`,
/// makes each present with `ensure`, and fills it, until `stop` or the
/// free space runs out. An op is a buffer; a stall one whose `ensure`
/// and fill saw a fault.
fn allocate(
    bump: &Arc<Bump>,
    threads: usize,
    ensure: Ensure,
    faults: Arc<dyn Fn() -> u64 + Send + Sync>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<Result<Mutated, String>>> {
    let started = Arc::new(AtomicUsize::new(0));
    let hs = (0..threads)
        .map(|_| {
            let (bump, stop, faults, ensure) = (
                Arc::clone(bump),
                Arc::clone(stop),
                Arc::clone(&faults),
                Arc::clone(&ensure),
            );
            let started = Arc::clone(&started);
            std::thread::spawn(move || {
                started.fetch_add(1, Ordering::Release);
                let t0 = Instant::now();
                let (mut ops, mut stalls, mut bytes) = (0u64, Vec::new(), 0u64);
                while !stop.load(Ordering::Relaxed) {
                    let Some(b) = bump.take() else { break };
                    let before = faults();
                    let a = now_ns(t0);
                    ensure(b as *const u8, BUFFER)?;
                    // SAFETY: a buffer of the heap's free space, this
                    // thread's alone, present now.
                    unsafe { std::ptr::write_bytes(b as *mut u8, 0x5A, BUFFER) };
                    let e = now_ns(t0);
                    if faults() != before {
                        stalls.push(e - a);
                    }
                    ops += 1;
                    bytes += BUFFER as u64;
                }
                Ok(Mutated {
                    ops,
                    secs: t0.elapsed().as_secs_f64(),
                    stalls,
                    bytes,
                })
            })
        })
        .collect();
    all_started(&started, threads);
    hs
}

pub(super) fn join(
    handles: Vec<std::thread::JoinHandle<Result<Mutated, String>>>,
) -> Result<Vec<Mutated>, String> {
    handles
        .into_iter()
        .map(|h| h.join().map_err(|_| "a mutator panicked".to_string())?)
        .collect()
}

/// Mutator operations per second on the uncompacted heap, no collection,
/// and the operations done.
fn baseline(heap: &Arc<Heap>, threads: usize, w: Workload) -> Result<(f64, u64), String> {
    let stop = Arc::new(AtomicBool::new(false));
    let hs = match w {
        Workload::Random => mutate(heap, threads, false, true, Arc::new(|| 0), &stop),
        // Buffers in the heap as it is (populated): the fill's own rate.
        Workload::Allocate => {
            let bump = Arc::new(Bump::new(heap));
            allocate(
                &bump,
                threads,
                Arc::new(|_, _| Ok(())),
                Arc::new(|| 0),
                &stop,
            )
        }
    };
    std::thread::sleep(BASELINE);
    stop.store(true, Ordering::Relaxed);
    let m = join(hs)?;
    let ops: u64 = m.iter().map(|m| m.ops).sum();
    let ops = if w == Workload::Random { ops } else { 0 };
    Ok((m.iter().map(|m| m.ops as f64 / m.secs).sum(), ops))
}

/// `VmRSS` or `VmHWM` of this process, bytes.
pub(super) fn status_kib(field: &str) -> f64 {
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
    w: Workload,
) -> Result<Sample, String> {
    let heap = Arc::new(Heap::new(bytes, live, thp)?);
    let (base_rate, base_ops) = baseline(&heap, mutators, w)?;
    if w == Workload::Allocate {
        // The baseline's fills overwrote objects: lay the heap out again.
        heap.refill();
    }
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
                    faults_per_mib: 0.0,
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
            let hs = match w {
                Workload::Random => mutate(&heap, mutators, true, check, Arc::new(faults), &stop),
                Workload::Allocate => {
                    let ensurer = s.ensurer();
                    let ensure: Ensure =
                        Arc::new(move |a, l| ensurer(a, l).map_err(|e| e.to_string()));
                    let bump = Arc::new(Bump::new(&heap));
                    allocate(&bump, mutators, ensure, Arc::new(faults), &stop)
                }
            };
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
            let allocated: u64 = m.iter().map(|m| m.bytes).sum();
            let ops: u64 = if w == Workload::Random {
                m.iter().map(|m| m.ops).sum()
            } else {
                0
            };
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
                    faults_per_mib: if allocated > 0 {
                        stats.faults as f64 / (allocated as f64 / (1 << 20) as f64)
                    } else {
                        0.0
                    },
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
