//! How fast this CPU reads pages scattered over memory: `bench limits`'
//! bound for batches of scattered folios. One stream reading one page
//! after another waits at every page for the hardware prefetcher to find
//! it again, so the reader takes the shape that read them fastest on the
//! machines measured: four pages at once, the next four requested into L2
//! meanwhile (the batch engine's copies of same-size extents do the same:
//! docs/design.md, "Where the 4 KiB time went").

use super::read::read_bandwidth;

/// Bytes of each next page requested while the first bytes of the current
/// four are read: the batch engine's copies request 4 KiB ahead (measured
/// against 2 and 8 KiB on the Zen 4 VM), and this reader keeps their pace.
#[cfg(target_arch = "x86_64")]
const PREFETCH: usize = 4096;

/// Reads page `order[j]` of `buf` (pages of `page` bytes) for every `j`,
/// four at a time where `page` is a multiple of 64 bytes, and returns the
/// wrapping sum of their [`read_bandwidth`] checksums, so that the loads
/// cannot be optimised away. Indices past the end of `buf` are skipped.
pub fn read_pages(buf: &[u8], page: usize, order: &[usize]) -> u64 {
    let at = |j: usize| buf.get(order[j] * page..order[j] * page + page);
    let mut sum = 0u64;
    let mut j = 0;
    #[cfg(target_arch = "x86_64")]
    let four_at_once = bulkmem::cpu::facts().features.avx2 && page.is_multiple_of(64);
    while j < order.len() {
        #[cfg(target_arch = "x86_64")]
        if four_at_once && j + 4 <= order.len() {
            if let [Some(a), Some(b), Some(c), Some(d)] = [at(j), at(j + 1), at(j + 2), at(j + 3)] {
                let four = [a, b, c, d];
                let next: [*const u8; 4] = core::array::from_fn(|k| {
                    (j + 4 + k < order.len())
                        .then(|| at(j + 4 + k))
                        .flatten()
                        .unwrap_or(four[k])
                        .as_ptr()
                });
                // SAFETY: the CPU has AVX2 (checked above); the four pages
                // have one length, a multiple of 64.
                sum = sum.wrapping_add(unsafe { sum4_avx2(four, next) });
                j += 4;
                continue;
            }
        }
        if let Some(p) = at(j) {
            sum = sum.wrapping_add(read_bandwidth(p));
        }
        j += 1;
    }
    sum
}

/// The four pages' checksums summed, one line of each per step, with the
/// same bytes of `next` requested into L2 over the first 4 KiB.
///
/// # Safety
/// The CPU has AVX2; the pages have one length, a multiple of 64.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum4_avx2(pages: [&[u8]; 4], next: [*const u8; 4]) -> u64 {
    use core::arch::x86_64::*;
    let len = pages[0].len();
    let mut acc = [_mm256_setzero_si256(); 8];
    let mut i = 0;
    while i < len {
        if i < PREFETCH {
            for n in next {
                // A prefetch neither faults nor changes memory.
                _mm_prefetch::<_MM_HINT_T1>(n.wrapping_add(i).cast());
            }
        }
        for (k, p) in pages.iter().enumerate() {
            // SAFETY: i + 64 <= len = p.len() (len a multiple of 64);
            // unaligned loads have no alignment requirement.
            unsafe {
                let a = _mm256_loadu_si256(p.as_ptr().add(i).cast());
                let b = _mm256_loadu_si256(p.as_ptr().add(i + 32).cast());
                acc[2 * k] = _mm256_add_epi64(acc[2 * k], a);
                acc[2 * k + 1] = _mm256_add_epi64(acc[2 * k + 1], b);
            }
        }
        i += 64;
    }
    let all = acc
        .iter()
        .fold(_mm256_setzero_si256(), |s, a| _mm256_add_epi64(s, *a));
    let mut lanes = [0u64; 4];
    // SAFETY: lanes is 32 writable bytes; the store is unaligned.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), all) };
    lanes.iter().fold(0, |s, &x| s.wrapping_add(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_at_once_sums_as_one_at_a_time() {
        let buf: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 13 + 5) as u8).collect();
        let one_by_one = |page: usize, order: &[usize]| {
            order.iter().fold(0u64, |s, &i| {
                s.wrapping_add(buf.get(i * page..i * page + page).map_or(0, read_bandwidth))
            })
        };
        // Whole groups and a short last one; pages that are not lines;
        // indices past the end; nothing.
        let orders: [(usize, Vec<usize>); 5] = [
            (4096, vec![3, 0, 15, 7, 9, 1, 2, 14, 5, 6, 4]),
            (64, vec![1023, 0, 512, 7]),
            (100, vec![5, 3, 600, 2, 1, 0]),
            (4096, vec![1, 16, 2, 3, 99, 4]),
            (4096, vec![]),
        ];
        for (page, order) in orders {
            assert_eq!(
                read_pages(&buf, page, &order),
                one_by_one(page, &order),
                "{page} {order:?}"
            );
        }
    }
}
