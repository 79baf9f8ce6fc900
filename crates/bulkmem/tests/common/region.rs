//! A private anonymous region for the NUMA tests: 2 MiB-aligned, with or
//! without transparent huge pages, filled with `src_byte` (first touch).

use bulkmem::mapping::Mapping;

use super::poison::src_byte;

pub const PAGE: usize = 4096;

pub struct Region {
    pub ptr: *mut u8,
    pub len: usize,
    _map: Mapping,
}

impl Region {
    pub fn new(len: usize, huge: bool) -> Region {
        let map = Mapping::options()
            .align(2 << 20)
            .huge_pages(huge)
            .map(len)
            .unwrap();
        let r = Region {
            ptr: map.as_mut_ptr(),
            len,
            _map: map,
        };
        r.bytes()
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = src_byte(i));
        r
    }

    #[allow(clippy::mut_from_ref)]
    pub fn bytes(&self) -> &mut [u8] {
        // SAFETY: our mapping; tests use it from one thread at a time.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    pub fn intact(&self) -> bool {
        self.bytes()
            .iter()
            .enumerate()
            .all(|(i, &b)| b == src_byte(i))
    }

    /// AnonHugePages (kB) of the mappings overlapping the region.
    pub fn anon_huge_kb(&self) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let (lo, hi) = (self.ptr as usize, self.ptr as usize + self.len);
        let mut inside = false;
        let mut kb = 0;
        for l in smaps.lines() {
            let head = l.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = head.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = a < hi && b > lo;
                    continue;
                }
            }
            if let (true, Some(v)) = (inside, l.strip_prefix("AnonHugePages:")) {
                kb += v.split_whitespace().next().unwrap().parse::<u64>().unwrap();
            }
        }
        kb
    }

    /// How many pages are on `node` (move_pages status).
    pub fn pages_on(&self, node: i32) -> usize {
        bulkmem::numa::node_of_pages(0, self.ptr as usize, self.len)
            .unwrap()
            .iter()
            .filter(|&&n| n == node)
            .count()
    }
}
