//! A mark-compact garbage collector whose mutators keep running, and
//! allocating, while the heap is compacted (`bulkmem::compact`), collection
//! after collection on one heap.
//!
//! The heap holds 32-byte objects: `next` (a real pointer to another
//! object, or 0), `id`, `value`, and the chain the object belongs to. Roots
//! point at the heads of linked chains; dead objects lie between the live
//! ones. Mutators walk chains, adding to each object's `value`, and
//! allocate: they bump-allocate objects from 64 KiB allocation buffers
//! (TLABs) cut from the free space above the heap's top, and push each at
//! the head of a chain. A collection:
//!
//! 1. Pause: the mutators stop at a safepoint; the collector drops the
//!    head of every eighth chain (garbage), marks what the roots reach,
//!    gives every live object its new address (sliding: the k-th live
//!    object goes to `heap + 32 k`), points the roots there, resets the
//!    allocation top to the end of the live objects, and calls
//!    `Compaction::prepare`. The heap's pages are now the from-space.
//! 2. The mutators resume at once. A page they touch that nobody has built
//!    yet faults; bulkmem calls `produce` for it (copy the page's objects,
//!    rewriting each `next` to its new address) and maps it. A TLAB they
//!    take is made present with one `ensure` call (free space: zero pages,
//!    mapped writable), so filling it takes no fault per page.
//! 3. A collector thread builds the rest; `finish` waits for the last page.
//!
//! After the last collection the whole graph is checked: every chain holds
//! only its own objects, inside the compacted heap, and the values of what
//! is reachable plus what was dropped add up to the mutators' visits.
//!
//!     cargo run --release -p bulkmem --example concurrent_gc [heap MiB] [mutators] [collections]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bulkmem::compact::{Compaction, Fill, Options, Producer, PAGE};
use bulkmem::mapping::Mapping;

const OBJ: usize = 32;
const PER_PAGE: usize = PAGE / OBJ;
const CHAINS: usize = 1024;
/// An allocation buffer.
const TLAB: usize = 64 << 10;

/// An object's words; `next` is an address, as in any real heap.
#[repr(C)]
struct Object {
    next: AtomicU64,
    id: u64,
    value: AtomicU64,
    chain: u64,
}

fn object<'a>(addr: u64) -> &'a Object {
    // SAFETY: every address the program follows is an object of the heap,
    // which outlives the program's threads.
    unsafe { &*(addr as *const Object) }
}

/// What the collector computed in the pause, read by `produce` in signal
/// handlers: plain tables, not changed during the session.
struct Plan {
    base: u64,
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
                self.forward[((next - self.base) / OBJ as u64) as usize]
            };
            let words = [next, src.id, src.value.load(Ordering::Relaxed), src.chain];
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

    /// Nor above the last live object of the pages up to this one.
    fn last_source(&self, page: usize) -> usize {
        let last = (page * PER_PAGE + PER_PAGE - 1).min(self.live.len().saturating_sub(1));
        self.live
            .get(last)
            .map_or(0, |&o| (o as usize * OBJ + OBJ - 1) / PAGE + 1)
    }
}

type Ensure = Arc<dyn Fn(*const u8, usize) -> Result<(), bulkmem::PagesError> + Send + Sync>;

/// The heap and what mutators and collector share about it.
struct Heap {
    map: Mapping,
    roots: Vec<AtomicU64>,
    /// The allocation top: TLABs are cut from here up.
    top: AtomicU64,
    /// Collections so far: a TLAB from before the last one is abandoned.
    epoch: AtomicU64,
    /// While a session runs, how a mutator makes a TLAB present.
    ensure: Mutex<Option<Ensure>>,
    /// Mutators hold it for reading between safepoints.
    safepoint: RwLock<()>,
    /// Values of the objects the collector dropped.
    dropped: AtomicU64,
    ids: AtomicU64,
}

impl Heap {
    /// A heap whose lower half holds `CHAINS` chains interleaved with
    /// garbage (two dead objects for every live one).
    fn new(mib: usize) -> Heap {
        let map = Mapping::options()
            .align(1 << 30)
            .map(mib << 20)
            .expect("map the heap");
        let base = map.as_ptr() as u64;
        let objects = map.len() / 2 / OBJ;
        let mut tails = vec![0u64; CHAINS];
        let roots: Vec<AtomicU64> = (0..CHAINS).map(|_| AtomicU64::new(0)).collect();
        for i in 0..objects {
            let addr = base + (i * OBJ) as u64;
            let c = (i / 3) % CHAINS;
            // SAFETY: object i of our fresh heap, not yet shared.
            let o = unsafe { &mut *(addr as *mut Object) };
            (o.id, o.chain) = (i as u64, c as u64);
            if i % 3 != 0 {
                continue; // garbage: reachable from nothing
            }
            if tails[c] == 0 {
                roots[c].store(addr, Ordering::Relaxed);
            } else {
                object(tails[c]).next.store(addr, Ordering::Relaxed);
            }
            tails[c] = addr;
        }
        Heap {
            top: AtomicU64::new(base + (objects * OBJ) as u64),
            epoch: AtomicU64::new(0),
            map,
            roots,
            ensure: Mutex::new(None),
            safepoint: RwLock::new(()),
            dropped: AtomicU64::new(0),
            ids: AtomicU64::new(objects as u64),
        }
    }

    fn base(&self) -> u64 {
        self.map.as_ptr() as u64
    }

    /// A fresh TLAB, present and writable; None when the heap is full.
    fn tlab(&self) -> Option<u64> {
        let at = self.top.fetch_add(TLAB as u64, Ordering::Relaxed);
        if at + TLAB as u64 > self.base() + self.map.len() as u64 {
            return None;
        }
        if let Some(ensure) = self.ensure.lock().unwrap().as_ref() {
            ensure(at as *const u8, TLAB).expect("make an allocation buffer present");
        }
        Some(at)
    }

    /// In the pause: drops the head of every eighth chain, marks what the
    /// roots reach, plans the slide, points the roots at the new
    /// addresses and resets the top.
    fn plan(&self, collection: usize) -> Plan {
        let base = self.base();
        for c in (collection % 8..CHAINS).step_by(8) {
            let head = self.roots[c].load(Ordering::Relaxed);
            if head != 0 {
                let o = object(head);
                self.dropped
                    .fetch_add(o.value.load(Ordering::Relaxed), Ordering::Relaxed);
                self.roots[c].store(o.next.load(Ordering::Relaxed), Ordering::Relaxed);
            }
        }
        let mut marked = vec![false; self.map.len() / OBJ];
        for r in &self.roots {
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
        for r in &self.roots {
            let old = r.load(Ordering::Relaxed);
            if old != 0 {
                r.store(
                    forward[((old - base) / OBJ as u64) as usize],
                    Ordering::Relaxed,
                );
            }
        }
        let top = base + (live.len() * OBJ) as u64;
        self.top
            .store(top.next_multiple_of(TLAB as u64), Ordering::Relaxed);
        self.epoch.fetch_add(1, Ordering::Relaxed);
        Plan {
            base,
            live,
            forward,
        }
    }
}

/// Walks chains from the roots, adding 1 to every object it visits, and
/// pushes a new object at a chain's head every 16 walks, until told to
/// stop; returns how many objects it visited.
fn mutate(heap: &Heap, stop: &AtomicBool, seed: usize) -> u64 {
    let (mut visits, mut c, mut walks) = (0, seed, 0u64);
    let (mut tlab, mut used, mut epoch) = (0u64, TLAB, u64::MAX);
    while !stop.load(Ordering::Relaxed) {
        let _running = heap.safepoint.read().unwrap();
        let mut at = heap.roots[c % CHAINS].load(Ordering::Relaxed);
        for _ in 0..64 {
            if at == 0 {
                break;
            }
            let o = object(at);
            o.value.fetch_add(1, Ordering::Relaxed);
            visits += 1;
            at = o.next.load(Ordering::Relaxed);
        }
        walks += 1;
        if walks % 16 == 0 {
            let now = heap.epoch.load(Ordering::Relaxed);
            if used == TLAB || epoch != now {
                // A new buffer: the old one is full, or a collection
                // moved the top below it and may hand it out again.
                (used, epoch) = (TLAB, now);
                if let Some(t) = heap.tlab() {
                    (tlab, used) = (t, 0);
                }
            }
            if used < TLAB {
                let addr = tlab + used as u64;
                used += OBJ;
                let chain = (c % CHAINS) as u64;
                // SAFETY: a fresh object of this thread's allocation
                // buffer, present (ensured), not yet reachable.
                let o = unsafe { &mut *(addr as *mut Object) };
                o.id = heap.ids.fetch_add(1, Ordering::Relaxed);
                o.chain = chain;
                o.value.store(0, Ordering::Relaxed);
                let root = &heap.roots[chain as usize];
                let mut head = root.load(Ordering::Relaxed);
                loop {
                    o.next.store(head, Ordering::Relaxed);
                    match root.compare_exchange(head, addr, Ordering::Release, Ordering::Relaxed) {
                        Ok(_) => break,
                        Err(h) => head = h,
                    }
                }
            }
        }
        c = c.wrapping_mul(31).wrapping_add(7);
    }
    visits
}

#[allow(dead_code)] // tests/compact.rs runs `collect` itself
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (mib, threads, collections) = (arg(1, 256), arg(2, 2), arg(3, 10));
    if let Err(e) = bulkmem::compact::support() {
        eprintln!("concurrent_gc: concurrent compaction is not available here: {e}");
        std::process::exit(1);
    }
    println!("{}", collect(mib, threads, collections));
}

/// Builds a heap of `mib` MiB, runs `threads` mutators, compacts it under
/// them `collections` times, and checks the graph; returns what happened,
/// in words.
pub fn collect(mib: usize, threads: usize, collections: usize) -> String {
    let heap = Arc::new(Heap::new(mib));
    let stop = Arc::new(AtomicBool::new(false));
    let mutators: Vec<_> = (0..threads)
        .map(|t| {
            let (h, x) = (heap.clone(), stop.clone());
            std::thread::spawn(move || mutate(&h, &x, t * 1000))
        })
        .collect();
    let mut said = Vec::new();
    for n in 0..collections {
        std::thread::sleep(Duration::from_millis(20));
        // 1. The pause: mark, plan, prepare.
        let pause = Instant::now();
        let stopped = heap.safepoint.write().unwrap();
        let plan = Arc::new(heap.plan(n));
        let live = plan.live.len();
        // SAFETY: every mutator is stopped at the safepoint and holds no
        // reference into the heap; they resume with the new roots.
        let mut session = unsafe {
            Compaction::prepare(
                heap.map.as_mut_ptr(),
                heap.map.len(),
                plan.clone(),
                Options::default(),
            )
        }
        .expect("prepare the compaction");
        let ensurer = session.ensurer();
        *heap.ensure.lock().unwrap() = Some(Arc::new(ensurer));
        drop(stopped);
        let pause = pause.elapsed();

        // 2 and 3: the mutators run on; the collector thread builds the rest.
        session.start().expect("start the collector");
        let stats = session.finish().expect("finish the compaction");
        *heap.ensure.lock().unwrap() = None;
        said.push(format!(
            "collection {n}: {live} live objects, pause {pause:?} (bulkmem's prepare {:?}); \
             {} pages built by the collector, {} by mutators ({} faults, stall p99 {:?})",
            stats.pause,
            stats.by_collector,
            stats.by_mutators,
            stats.faults,
            stats.stall.quantile(0.99),
        ));
    }
    std::thread::sleep(Duration::from_millis(20));
    stop.store(true, Ordering::Relaxed);
    let visits: u64 = mutators.into_iter().map(|m| m.join().unwrap()).sum();

    // The check: every chain holds its own objects inside the heap, and
    // the values add up.
    let base = heap.base();
    let end = heap
        .top
        .load(Ordering::Relaxed)
        .min(base + heap.map.len() as u64);
    let (mut seen, mut sum) = (0u64, heap.dropped.load(Ordering::Relaxed));
    for (c, r) in heap.roots.iter().enumerate() {
        let mut at = r.load(Ordering::Relaxed);
        while at != 0 {
            assert!(
                at >= base && at < end,
                "chain {c} leaves the heap at {at:#x}"
            );
            let o = object(at);
            assert_eq!(
                o.chain, c as u64,
                "chain {c} holds object {} of another",
                o.id
            );
            sum += o.value.load(Ordering::Relaxed);
            seen += 1;
            at = o.next.load(Ordering::Relaxed);
        }
    }
    assert_eq!(sum, visits, "the values add up to the mutators' visits");
    said.push(format!(
        "{mib} MiB heap, {threads} mutators, {collections} collections: {seen} objects \
         reachable, {} allocated in all, {visits} visits counted exactly",
        heap.ids.load(Ordering::Relaxed)
    ));
    said.join("\n")
}
