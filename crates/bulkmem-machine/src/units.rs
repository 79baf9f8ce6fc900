//! Byte counts as people write them, parsed once for the whole project:
//! the environment (`BULKMEM_NT_THRESHOLD`, the preload's thresholds) and
//! the command line (`--sizes 4K,2M`) accept the same forms.

/// Parses `4096`, `512K`, `64m`, `1G`, `2T`, `4KiB`, `4KB`: suffixes are
/// powers of 1024, case-insensitive. `0` is a byte count like any other
/// (callers that need more say so). The error names the text and what is
/// wrong with it.
pub fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits_end);
    if num.is_empty() {
        return Err(format!(
            "size '{s}' does not start with a number (e.g. 4096, 4K, 2M, 1G)"
        ));
    }
    let shift = match suffix.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => {
            return Err(format!(
                "size '{s}' has unknown suffix '{}' (use K, M, G or T)",
                suffix.trim()
            ))
        }
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1usize << shift))
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// The shortest exact form [`parse_bytes`] reads back: `4K`, `2M`, `1G`,
/// `2T`, or the byte count.
pub fn format_bytes(n: usize) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_powers_of_1024() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("4K"), Ok(4096));
        assert_eq!(parse_bytes("512k"), Ok(512 << 10));
        assert_eq!(parse_bytes("64m"), Ok(64 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes(" 2 T "), Ok(2 << 40));
        assert_eq!(parse_bytes("4KB"), Ok(4096));
        assert_eq!(parse_bytes("0"), Ok(0));
    }

    #[test]
    fn formatted_sizes_read_back_exactly() {
        for (n, text) in [
            (0, "0"),
            (4095, "4095"),
            (4096, "4K"),
            (3 << 19, "1536K"),
            (2 << 30, "2G"),
            (1 << 40, "1T"),
        ] {
            assert_eq!(format_bytes(n), text);
            assert_eq!(parse_bytes(text), Ok(n));
        }
    }

    #[test]
    fn bad_sizes_say_what_is_wrong() {
        assert!(parse_bytes("12Q")
            .unwrap_err()
            .contains("unknown suffix 'Q'"));
        assert!(parse_bytes("K").unwrap_err().contains("number"));
        assert!(parse_bytes("").unwrap_err().contains("number"));
        assert!(parse_bytes("-1").unwrap_err().contains("number"));
        assert!(parse_bytes("99999999999999999999")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_bytes("99999999999T")
            .unwrap_err()
            .contains("too large"));
    }
}
