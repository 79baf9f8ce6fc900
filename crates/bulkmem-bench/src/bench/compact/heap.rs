//! The bench's heap: 64-byte objects (an id and a counter each), a given
//! share of them live, compacted by sliding: the `k`-th live object moves
//! to offset `64 * k`. Mutators pick live objects at random, check the id
//! and count.

use std::sync::atomic::{AtomicU64, Ordering};

use bulkmem::compact::{Fill, Producer, PAGE};
use bulkmem::mapping::Mapping;

pub const OBJ: usize = 64;
const PER_PAGE: usize = PAGE / OBJ;

pub struct Heap {
    pub map: Mapping,
    /// From-space object index of each live object, in address order.
    pub live: Vec<u32>,
    pages: usize,
}

/// A fixed permutation of object indices, so liveness looks random.
fn hash(i: u64) -> u64 {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x.wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 17
}

impl Heap {
    pub fn new(bytes: usize, live_pct: u32, thp: bool) -> Result<Heap, String> {
        // Aligned to 1 GiB, as a collector reserves its heap: the pause's
        // mremap then moves whole page-table pages (docs/design.md,
        // "Concurrent compaction").
        let map = Mapping::options()
            .align(1 << 30)
            .huge_pages(thp)
            .map(bytes)
            .map_err(|e| format!("cannot map a {bytes}-byte heap: {e}"))?;
        let objects = bytes / OBJ;
        if objects > u32::MAX as usize {
            return Err("heaps above 256 GiB are not supported".into());
        }
        let live = (0..objects)
            .filter(|&i| hash(i as u64) % 100 < u64::from(live_pct))
            .map(|i| i as u32)
            .collect();
        let heap = Heap {
            map,
            live,
            pages: bytes / PAGE,
        };
        heap.refill();
        Ok(heap)
    }

    /// Writes every object (live or not) as before compaction: its id and
    /// a zero counter. For the next session on the same heap.
    pub fn refill(&self) {
        let base = self.map.as_mut_ptr();
        for i in 0..self.pages * PER_PAGE {
            // SAFETY: object i lies inside the mapping.
            unsafe {
                let o = base.add(i * OBJ).cast::<u64>();
                o.write(i as u64 + 1);
                o.add(1).write(0);
            }
        }
    }

    /// Where live object `k` is: before compaction (`compacted` false) or
    /// after.
    pub fn addr(&self, k: usize, compacted: bool) -> usize {
        let slot = if compacted { k } else { self.live[k] as usize };
        self.map.as_ptr() as usize + slot * OBJ
    }

    /// One mutator operation on live object `k`: checks its id, counts.
    /// False if the id is wrong.
    pub fn touch(&self, k: usize, compacted: bool) -> bool {
        let a = self.addr(k, compacted);
        // SAFETY: an object of the heap: aligned u64s that every thread
        // accesses atomically.
        let (id, counter) = unsafe { (&*(a as *const AtomicU64), &*((a + 8) as *const AtomicU64)) };
        counter.fetch_add(1, Ordering::Relaxed);
        id.load(Ordering::Relaxed) == u64::from(self.live[k]) + 1
    }

    /// Checks every live object after compaction: its id, and that the
    /// counters add up to `ops`.
    pub fn verify(&self, ops: u64) -> Result<(), String> {
        let mut sum = 0u64;
        for (k, &o) in self.live.iter().enumerate() {
            let a = self.addr(k, true) as *const u64;
            // SAFETY: object k of the compacted heap.
            let (id, c) = unsafe { (a.read_volatile(), a.add(1).read_volatile()) };
            if id != u64::from(o) + 1 {
                return Err(format!("live object {k} has id {id}, want {}", o + 1));
            }
            sum += c;
        }
        if sum != ops {
            return Err(format!(
                "the counters add up to {sum}, the mutators made {ops} increments"
            ));
        }
        Ok(())
    }
}

impl Producer for Heap {
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
            let src = unsafe { &*(from.add(o as usize * OBJ) as *const [u8; OBJ]) };
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
