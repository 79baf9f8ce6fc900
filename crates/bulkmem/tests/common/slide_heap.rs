//! A heap of 64-byte objects for the compaction tests: object `i` holds
//! its id and a counter; some are dead; a sliding compactor packs the live
//! ones, so the `k`-th live object lands at offset `64 * k`. The pages
//! before the first dead object come back unchanged (`Fill::Same`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bulkmem::compact::{Fill, Producer, PAGE};
use bulkmem::mapping::Mapping;

pub const OBJ: usize = 64;
pub const PER_PAGE: usize = PAGE / OBJ;

pub struct SlideHeap {
    /// From-space object index of each live object, in address order.
    pub live: Vec<u32>,
    pub pages: usize,
}

impl SlideHeap {
    /// Objects `0..dense_pages * PER_PAGE` all live, then one in `every`.
    pub fn new(pages: usize, dense_pages: usize, every: usize) -> SlideHeap {
        let objects = pages * PER_PAGE;
        let live = (0..objects)
            .filter(|&i| i < dense_pages * PER_PAGE || (i * 7919) % every == 0)
            .map(|i| i as u32)
            .collect();
        SlideHeap { live, pages }
    }

    /// Every object live but one in `every`: a heap mostly live, where a
    /// to-space page reads a little more than one from-space page.
    pub fn mostly_live(pages: usize, every: usize) -> SlideHeap {
        let live = (0..pages * PER_PAGE)
            .filter(|&i| (i * 7919) % every != 0)
            .map(|i| i as u32)
            .collect();
        SlideHeap { live, pages }
    }

    /// Writes every object's id (live or not) and a zero counter.
    pub fn fill(&self, heap: *mut u8) {
        for i in 0..self.pages * PER_PAGE {
            // SAFETY: object i lies inside the caller's heap of `pages`.
            unsafe {
                let o = heap.add(i * OBJ).cast::<u64>();
                o.write(i as u64 + 1);
                o.add(1).write(0);
            }
        }
    }

    /// The counter of live object `k` at its new address.
    pub fn counter(&self, heap: *mut u8, k: usize) -> &AtomicU64 {
        // SAFETY: object k of the to-space; an aligned u64 accessed
        // atomically by everyone.
        unsafe { &*heap.add(k * OBJ + 8).cast::<AtomicU64>() }
    }

    pub fn id(&self, heap: *const u8, k: usize) -> u64 {
        // SAFETY: object k of the to-space.
        unsafe {
            (heap.add(k * OBJ) as *const AtomicU64)
                .as_ref()
                .unwrap()
                .load(Ordering::Relaxed)
        }
    }

    /// Checks every live object's id and counter (`expect[k]`), and that
    /// the rest of the heap reads as zeros.
    pub fn verify(&self, heap: *const u8, expect: &[u64]) -> Result<(), String> {
        for (k, &want) in expect.iter().enumerate().take(self.live.len()) {
            let id = self.id(heap, k);
            // SAFETY: object k's counter.
            let c = unsafe { (heap.add(k * OBJ + 8) as *const u64).read_volatile() };
            if id != self.live[k] as u64 + 1 || c != want {
                return Err(format!(
                    "object {k}: id {id} counter {c}, want id {} counter {}",
                    self.live[k] + 1,
                    want
                ));
            }
        }
        for off in (self.live.len() * OBJ..self.pages * PAGE).step_by(8) {
            // SAFETY: inside the heap.
            if unsafe { (heap.add(off) as *const u64).read_volatile() } != 0 {
                return Err(format!("free space at {off:#x} is not zero"));
            }
        }
        Ok(())
    }
}

impl Producer for SlideHeap {
    fn produce(&self, page: usize, from: *const u8, out: &mut [u8; PAGE]) -> Fill {
        let first = page * PER_PAGE;
        if first >= self.live.len() {
            return Fill::Zero;
        }
        let objs = &self.live[first..(first + PER_PAGE).min(self.live.len())];
        if objs.len() == PER_PAGE
            && objs[0] as usize == first
            && objs[PER_PAGE - 1] as usize == first + PER_PAGE - 1
        {
            return Fill::Same;
        }
        for (j, &o) in objs.iter().enumerate() {
            // SAFETY: from-space object o, inside the heap.
            let src = unsafe { std::slice::from_raw_parts(from.add(o as usize * OBJ), OBJ) };
            out[j * OBJ..(j + 1) * OBJ].copy_from_slice(src);
        }
        out[objs.len() * OBJ..].fill(0);
        Fill::Built
    }

    fn first_source(&self, page: usize) -> usize {
        self.live
            .get(page * PER_PAGE)
            .map_or(self.pages, |&o| o as usize * OBJ / PAGE)
    }

    fn last_source(&self, page: usize) -> usize {
        let last = (page * PER_PAGE + PER_PAGE - 1).min(self.live.len().saturating_sub(1));
        self.live
            .get(last)
            .map_or(0, |&o| (o as usize * OBJ + OBJ - 1) / PAGE + 1)
    }
}

impl SlideHeap {
    /// Checks the heap is as `fill` left it (nothing was compacted).
    pub fn verify_from(&self, heap: *const u8) -> Result<(), String> {
        for i in 0..self.pages * PER_PAGE {
            // SAFETY: object i of the heap.
            let id = unsafe { (heap.add(i * OBJ) as *const u64).read_volatile() };
            if id != i as u64 + 1 {
                return Err(format!("object {i} has id {id}"));
            }
        }
        Ok(())
    }
}

/// A heap of `pages` laid out by `h`, 2 MiB-aligned.
pub fn heap(pages: usize, h: &SlideHeap) -> Mapping {
    let m = Mapping::options().align(2 << 20).map(pages * PAGE).unwrap();
    h.fill(m.as_mut_ptr());
    m
}

/// Mutators doing `ops` increments each on random live objects, from the
/// moment they start; returns each object's expected counter.
pub fn mutate(
    h: &Arc<SlideHeap>,
    base: usize,
    threads: usize,
    ops: usize,
    run: impl FnOnce(),
) -> Vec<u64> {
    let go = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (h, go, ready) = (Arc::clone(h), Arc::clone(&go), Arc::clone(&ready));
            std::thread::spawn(move || {
                // Written now, not at its first use: once running, a
                // mutator touches no memory of its own, so every page it
                // needs is the session's (as a memory cgroup sees it).
                // That includes the stacks the kernel writes each SIGBUS's
                // frame on (several KiB with AVX-512 state), which it
                // cannot wait for at the limit (the contract's words).
                let mut tally = vec![0u64; h.live.len()];
                std::hint::black_box(&mut tally[..]).fill(0);
                touch_signal_stacks();
                ready.fetch_add(1, Ordering::Release);
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1);
                while !go.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                for _ in 0..ops {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k = (x % h.live.len() as u64) as usize;
                    let id = h.id(base as *const u8, k);
                    assert_eq!(id, h.live[k] as u64 + 1, "object {k} read wrong");
                    h.counter(base as *mut u8, k)
                        .fetch_add(1, Ordering::Relaxed);
                    tally[k] += 1;
                }
                tally
            })
        })
        .collect();
    // `run` may cap the process's memory: every mutator's own memory is
    // in place before it does.
    while ready.load(Ordering::Acquire) < threads {
        std::thread::yield_now();
    }
    go.store(true, Ordering::Release);
    run();
    let mut expect = vec![0u64; h.live.len()];
    for w in workers {
        for (e, t) in expect.iter_mut().zip(w.join().unwrap()) {
            *e += t;
        }
    }
    expect
}

/// Makes the pages a signal frame may be written on present: the next
/// 64 KiB of this thread's stack and all of its alternate signal stack
/// (std gives each thread one, mapped but never touched). The kernel
/// writes a frame from kernel mode, where a memory cgroup at its limit
/// with the OOM killer off refuses the page rather than waits: SIGSEGV.
#[inline(never)]
fn touch_signal_stacks() {
    let mut room = [0u8; 64 << 10];
    std::hint::black_box(&mut room[..]).fill(1);
    // SAFETY: a zeroed stack_t is a valid out-parameter for sigaltstack.
    let mut alt: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: a query (no new stack); fills `alt`.
    let rc = unsafe { libc::sigaltstack(std::ptr::null(), &mut alt) };
    assert_eq!(rc, 0, "sigaltstack: {}", std::io::Error::last_os_error());
    if alt.ss_flags & libc::SS_DISABLE != 0 {
        return;
    }
    // Not running on it (this is no handler), so nothing lives there.
    let bytes = alt.ss_sp.cast::<u8>();
    for off in (0..alt.ss_size).step_by(4096) {
        // SAFETY: inside the thread's own alternate stack, which is
        // readable and writable and unused outside a handler.
        unsafe { bytes.add(off).write_volatile(0) };
    }
}
