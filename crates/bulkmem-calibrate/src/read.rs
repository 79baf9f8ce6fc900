//! The read half of a machine's memory limits (`bulkmem bench limits`):
//! how fast a core can only read, with the widest loads it has, so that a
//! copy's figure can be set against what reading alone reaches. Nothing is
//! written, so no write bandwidth mixes into the figure.
//!
//! Unlike [`read_once`](super::toolkit::read_once), which stands for a
//! program using what it copied and so reads the way ordinary code does,
//! this one is a ceiling: four independent vector sums per step keep
//! enough loads in flight that the figure is the memory's, not the
//! core's. Every width returns the same checksum (see [`portable`]), so
//! which one ran never shows in a result.

/// Reads all of `buf` with the widest vector loads this CPU has (AVX-512F,
/// AVX2, or plain 64-bit loads elsewhere) and returns its checksum, so the
/// loads cannot be optimised away. The checksum is the same whichever width
/// ran: the wrapping sum of `buf`'s native-endian 64-bit words, plus each
/// byte past the last whole word.
pub fn read_bandwidth(buf: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let f = &bulkmem::cpu::facts().features;
        if f.avx512f {
            // SAFETY: the CPU has AVX-512F (checked above).
            return unsafe { vector::sum_avx512(buf) };
        }
        if f.avx2 {
            // SAFETY: the CPU has AVX2 (checked above).
            return unsafe { vector::sum_avx2(buf) };
        }
    }
    portable(buf)
}

/// The checksum [`read_bandwidth`] returns, with 64-bit loads: what every
/// vector width must agree with. The vector loops sum whole blocks of
/// words and leave the rest (a multiple of 8 bytes in, so the words line
/// up) to this.
fn portable(buf: &[u8]) -> u64 {
    let words = buf.chunks_exact(8);
    let rest = words.remainder();
    let sum = words
        .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
        .fold(0u64, u64::wrapping_add);
    rest.iter().fold(sum, |s, &b| s.wrapping_add(u64::from(b)))
}

#[cfg(target_arch = "x86_64")]
mod vector {
    use core::arch::x86_64::*;

    use super::portable;

    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn sum_avx512(buf: &[u8]) -> u64 {
        let mut acc = [_mm512_setzero_si512(); 4];
        let body = buf.len() / 256 * 256;
        let p = buf.as_ptr();
        let mut k = 0;
        while k < body {
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: k + 64 * i + 64 <= body <= buf.len(); unaligned
                // loads have no alignment requirement.
                *a = _mm512_add_epi64(*a, unsafe { _mm512_loadu_si512(p.add(k + 64 * i).cast()) });
            }
            k += 256;
        }
        let mut lanes = [0u64; 8];
        let all = _mm512_add_epi64(
            _mm512_add_epi64(acc[0], acc[1]),
            _mm512_add_epi64(acc[2], acc[3]),
        );
        // SAFETY: lanes is 64 writable bytes; the store is unaligned.
        unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), all) };
        lanes
            .iter()
            .fold(portable(&buf[body..]), |s, &x| s.wrapping_add(x))
    }

    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn sum_avx2(buf: &[u8]) -> u64 {
        let mut acc = [_mm256_setzero_si256(); 4];
        let body = buf.len() / 128 * 128;
        let p = buf.as_ptr();
        let mut k = 0;
        while k < body {
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: k + 32 * i + 32 <= body <= buf.len(); unaligned
                // loads have no alignment requirement.
                *a = _mm256_add_epi64(*a, unsafe { _mm256_loadu_si256(p.add(k + 32 * i).cast()) });
            }
            k += 128;
        }
        let mut lanes = [0u64; 4];
        let all = _mm256_add_epi64(
            _mm256_add_epi64(acc[0], acc[1]),
            _mm256_add_epi64(acc[2], acc[3]),
        );
        // SAFETY: lanes is 32 writable bytes; the store is unaligned.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), all) };
        lanes
            .iter()
            .fold(portable(&buf[body..]), |s, &x| s.wrapping_add(x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes whose words all differ, so a word summed twice or skipped
    /// changes the checksum.
    fn bytes(n: usize) -> Vec<u8> {
        (0..n as u32).map(|i| (i * 7 + 3) as u8).collect()
    }

    #[test]
    fn the_checksum_is_the_words_plus_the_tail_bytes() {
        let mut b = [0u8; 19];
        b[..8].copy_from_slice(&5u64.to_ne_bytes());
        b[8..16].copy_from_slice(&u64::MAX.to_ne_bytes());
        b[16..].copy_from_slice(&[1, 2, 250]);
        // 5 + (2^64 - 1) wraps to 4; then the three tail bytes.
        assert_eq!(portable(&b), 4 + 1 + 2 + 250);
        assert_eq!(read_bandwidth(&b), portable(&b));
        assert_eq!(read_bandwidth(&[]), 0);
    }

    #[test]
    fn every_width_agrees_at_odd_lengths_and_alignments() {
        let buf = bytes(5000);
        #[cfg(target_arch = "x86_64")]
        let f = &bulkmem::cpu::facts().features;
        let lengths = [0, 1, 7, 8, 9, 127, 128, 129, 255, 256, 257, 1000, 4093];
        for start in [0, 1, 3, 8, 13, 64, 65] {
            for len in lengths {
                let b = &buf[start..start + len];
                let want = portable(b);
                assert_eq!(read_bandwidth(b), want, "{start}+{len}");
                #[cfg(target_arch = "x86_64")]
                {
                    if f.avx512f {
                        // SAFETY: the CPU has AVX-512F.
                        assert_eq!(unsafe { vector::sum_avx512(b) }, want, "{start}+{len}");
                    }
                    if f.avx2 {
                        // SAFETY: the CPU has AVX2.
                        assert_eq!(unsafe { vector::sum_avx2(b) }, want, "{start}+{len}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_changed_byte_changes_the_checksum() {
        let mut buf = bytes(777);
        let before = read_bandwidth(&buf[3..]);
        for i in [3, 4, 258, 259, 515, 700, 776] {
            buf[i] ^= 0x40;
            assert_ne!(read_bandwidth(&buf[3..]), before, "byte {i}");
            buf[i] ^= 0x40;
        }
    }
}
