//! Sizes in tables and labels.

use bulkmem_machine::units::format_bytes;

/// A size's exact form with its unit: [`format_bytes`]'s, with `B` after a
/// plain byte count (`17B`; `--sizes` reads both back). Table columns
/// and the cells the summaries name.
pub fn size_label(n: usize) -> String {
    let exact = format_bytes(n);
    if exact.ends_with(|c: char| c.is_ascii_digit()) {
        exact + "B"
    } else {
        exact
    }
}

/// A size for a reader, always with its unit: the exact form where there
/// is one (`4K`, `2M`), else bytes with a `B` (`17B`, as `--sizes` reads
/// it back), and above 1 KiB the bytes rounded to three figures
/// (`~256M` for 268435440, the largest multiple of 17 in 256M), so a byte
/// count never reads as a count of something else.
pub fn human_size(n: usize) -> String {
    if n < 1 << 10 || !format_bytes(n).ends_with(|c: char| c.is_ascii_digit()) {
        return size_label(n);
    }
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        let v = n as f64 / (1u64 << shift) as f64;
        // 1048560 is ~1M, not ~1024K.
        if v >= 0.9995 {
            let digits = if v >= 100.0 {
                0
            } else if v >= 10.0 {
                1
            } else {
                2
            };
            let s = format!("{v:.digits$}");
            // 255.99998 rounds to 256; 1.50 stays 1.5.
            let s = if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.')
            } else {
                &s
            };
            return format!("~{s}{unit}");
        }
    }
    size_label(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_always_carry_a_unit() {
        assert_eq!(human_size(4096), "4K");
        assert_eq!(human_size(256 << 20), "256M");
        assert_eq!(human_size(17), "17B");
        assert_eq!(human_size(1000), "1000B");
        assert_eq!(human_size(268435440), "~256M");
        assert_eq!(human_size(1048560), "~1M");
        assert_eq!(human_size(1536 + 1), "~1.5K");
        assert_eq!(human_size(12_900_000), "~12.3M");
        assert_eq!(human_size(0), "0B");
        assert_eq!(size_label(1536), "1536B");
        assert_eq!(size_label(2 << 20), "2M");
    }
}
