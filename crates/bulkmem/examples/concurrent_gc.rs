//! A mark-compact garbage collector whose mutators keep running while the
//! heap is compacted (`bulkmem::compact`), in one sitting.
//!
//! The heap holds 32-byte objects: `next` (a real pointer to another
//! object, or 0), `id`, `value`, and a spare word. Roots point at the heads
//! of linked chains; dead objects lie between the live ones. A collection:
//!
//! 1. Pause: the mutators stop at a safepoint; the collector marks what the
//!    roots reach, gives every live object its new address (sliding: the
//!    k-th live object goes to `heap + 32 k`), points the roots there, and
//!    calls `Compaction::prepare`. The heap's pages are now the from-space.
//! 2. The mutators resume at once, walking chains from the new roots and
//!    adding to each object's `value`. A page they touch that nobody has
//!    built yet faults; bulkmem calls `produce` for it (copy the page's
//!    objects, rewriting each `next` to its new address) and maps it.
//! 3. A collector thread builds the rest; `finish` waits for the last page.
//!
//! The whole graph is checked afterwards: every chain intact, and the
//! values adding up to the mutators' increments.
//!
//!     cargo run --release -p bulkmem --example concurrent_gc [heap MiB] [mutators]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use bulkmem::compact::{Compaction, Fill, Options, Producer, PAGE};
use bulkmem::mapping::Mapping;

const OBJ: usize = 32;
const PER_PAGE: usize = PAGE / OBJ;
const CHAINS: usize = 1024;

/// An object's words; `next` is an address, as in any real heap.
#[repr(C)]
struct Object {
    next: AtomicU64,
    id: u64,
    value: AtomicU64,
    spare: u64,
}

fn object<'a>(addr: u64) -> &'a Object {
    // SAFETY: every address the program follows is an object of the heap,
    // which outlives the program's threads.
    unsafe { &*(addr as *const Object) }
}

/// What the collector computed in the pause, read by `produce` in signal
/// handlers: plain tables, not changed during the session.
struct Plan {
    old_base: u64,
    new_base: u64,
    /// Old index of the k-th live object.
    live: Vec<u32>,
    /// New address of each old object (0: dead).
    forward: Vec<u64>,
}

impl Producer for Plan {
    fn produce(&self, page: usize, from: *const u8, out: &mut [u8; PAGE]) -> Fill {
        let first = page * PER_PAGE;
        if first >= self.live.len() {
            return Fill::Zero; // the free space after the compacted objects
        }
        out.fill(0);
        for (j, &old) in self.live[first..].iter().take(PER_PAGE).enumerate() {
            // The object as it was in the pause: the from-space holds it.
            // SAFETY: object `old` lies inside the from-space.
            let src = unsafe { &*(from.add(old as usize * OBJ) as *const Object) };
            let next = src.next.load(Ordering::Relaxed);
            let next = if next == 0 {
                0
            } else {
                self.forward[((next - self.old_base) / OBJ as u64) as usize]
            };
            let words = [next, src.id, src.value.load(Ordering::Relaxed), src.spare];
            for (w, v) in words.iter().enumerate() {
                let at = j * OBJ + w * 8;
                out[at..at + 8].copy_from_slice(&v.to_ne_bytes());
            }
        }
        Fill::Built
    }

    /// Sliding never reads below the first live object of a page.
    fn first_source(&self, page: usize) -> usize {
        self.live
            .get(page * PER_PAGE)
            .map_or(usize::MAX, |&o| o as usize * OBJ / PAGE)
    }
}

/// Allocates the heap: `CHAINS` chains whose objects are interleaved with
/// garbage (two dead objects for every live one). Returns the roots.
fn build(heap: &Mapping) -> Vec<AtomicU64> {
    let base = heap.as_ptr() as u64;
    let objects = heap.len() / OBJ;
    let mut tails = vec![0u64; CHAINS];
    let roots: Vec<AtomicU64> = (0..CHAINS).map(|_| AtomicU64::new(0)).collect();
    for i in 0..objects {
        let addr = base + (i * OBJ) as u64;
        // SAFETY: object i of our fresh heap, not yet shared.
        let o = unsafe { &mut *(addr as *mut Object) };
        o.id = i as u64;
        if i % 3 != 0 {
            continue; // garbage: reachable from nothing
        }
        let c = (i / 3) % CHAINS;
        if tails[c] == 0 {
            roots[c].store(addr, Ordering::Relaxed);
        } else {
            object(tails[c]).next.store(addr, Ordering::Relaxed);
        }
        tails[c] = addr;
    }
    roots
}

/// Marks what the roots reach and plans the slide; points the roots at the
/// new addresses. Runs in the pause.
fn plan(heap: &Mapping, roots: &[AtomicU64]) -> Plan {
    let base = heap.as_ptr() as u64;
    let mut marked = vec![false; heap.len() / OBJ];
    for r in roots {
        let mut at = r.load(Ordering::Relaxed);
        while at != 0 {
            marked[((at - base) / OBJ as u64) as usize] = true;
            at = object(at).next.load(Ordering::Relaxed);
        }
    }
    let live: Vec<u32> = (0..marked.len() as u32)
        .filter(|&i| marked[i as usize])
        .collect();
    let mut forward = vec![0u64; marked.len()];
    for (k, &old) in live.iter().enumerate() {
        forward[old as usize] = base + (k * OBJ) as u64;
    }
    for r in roots {
        let old = r.load(Ordering::Relaxed);
        r.store(
            forward[((old - base) / OBJ as u64) as usize],
            Ordering::Relaxed,
        );
    }
    Plan {
        old_base: base,
        new_base: base,
        live,
        forward,
    }
}

/// Walks chains from the roots, adding 1 to every object it visits, until
/// told to stop; returns how many it visited. Holds the safepoint lock
/// while it runs, as a mutator between safepoints does.
fn mutate(roots: &[AtomicU64], safepoint: &RwLock<()>, stop: &AtomicBool, seed: usize) -> u64 {
    let (mut visits, mut c) = (0, seed);
    while !stop.load(Ordering::Relaxed) {
        let _running = safepoint.read().unwrap();
        let mut at = roots[c % CHAINS].load(Ordering::Relaxed);
        for _ in 0..64 {
            if at == 0 {
                break;
            }
            let o = object(at);
            o.value.fetch_add(1, Ordering::Relaxed);
            visits += 1;
            at = o.next.load(Ordering::Relaxed);
        }
        c = c.wrapping_mul(31).wrapping_add(7);
    }
    visits
}

#[allow(dead_code)] // tests/compact.rs runs `collect` itself
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(256);
    let threads: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2);
    if let Err(e) = bulkmem::compact::support() {
        eprintln!("concurrent_gc: concurrent compaction is not available here: {e}");
        std::process::exit(1);
    }
    println!("{}", collect(mib, threads));
}

/// Builds a heap of `mib` MiB, runs `threads` mutators, compacts it under
/// them once, and checks the graph; returns what happened, in words.
pub fn collect(mib: usize, threads: usize) -> String {
    let heap = Mapping::options()
        .align(1 << 30)
        .map(mib << 20)
        .expect("map the heap");
    let roots = Arc::new(build(&heap));
    let safepoint = Arc::new(RwLock::new(()));
    let stop = Arc::new(AtomicBool::new(false));
    let mutators: Vec<_> = (0..threads)
        .map(|t| {
            let (r, s, x) = (roots.clone(), safepoint.clone(), stop.clone());
            std::thread::spawn(move || mutate(&r, &s, &x, t * 1000))
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(100));

    // 1. The pause: mark, plan, prepare.
    let pause = std::time::Instant::now();
    let stopped = safepoint.write().unwrap();
    let plan = Arc::new(plan(&heap, &roots));
    let live = plan.live.len();
    // SAFETY: every mutator is stopped at the safepoint and holds no
    // reference into the heap; they resume with the new roots.
    let mut session = unsafe {
        Compaction::prepare(
            heap.as_mut_ptr(),
            heap.len(),
            plan.clone(),
            Options::default(),
        )
    }
    .expect("prepare the compaction");
    drop(stopped);
    let pause = pause.elapsed();
    let prepare = session.stats().pause;

    // 2 and 3: the mutators run on; the collector thread builds the rest.
    session.start().expect("start the collector");
    let stats = session.finish().expect("finish the compaction");
    std::thread::sleep(std::time::Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let visits: u64 = mutators.into_iter().map(|m| m.join().unwrap()).sum();

    // The check: every chain intact at its new addresses, values add up.
    let (mut seen, mut sum) = (0, 0);
    for (c, r) in roots.iter().enumerate() {
        let (mut at, mut id) = (r.load(Ordering::Relaxed), None::<u64>);
        while at != 0 {
            assert!(
                at >= plan.new_base && at < plan.new_base + (live * OBJ) as u64,
                "chain {c} leaves the compacted heap"
            );
            let o = object(at);
            assert!(
                id.is_none_or(|prev| o.id == prev + 3 * CHAINS as u64),
                "chain {c} is broken at id {}",
                o.id
            );
            id = Some(o.id);
            sum += o.value.load(Ordering::Relaxed);
            seen += 1;
            at = o.next.load(Ordering::Relaxed);
        }
    }
    assert_eq!(seen, live, "objects reachable after compaction");
    assert_eq!(sum, visits, "the values add up to the mutators' visits");
    format!(
        "{mib} MiB heap, {live} live objects of {}, {threads} mutators: pause {pause:?} \
         (marking and planning; bulkmem's prepare {prepare:?}); \
         {} pages built by the collector, {} by mutator faults (stall p50 {:?}, p99 {:?}); \
         {visits} visits counted exactly",
        heap.len() / OBJ,
        stats.by_collector,
        stats.by_mutators,
        stats.stall.quantile(0.5),
        stats.stall.quantile(0.99),
    )
}
