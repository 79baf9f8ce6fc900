//! Sizes on the command line and in tables: `4K`, `2M`, `1G` (powers of
//! two), plain byte counts, and their short human form.

/// Parses one size such as `4K`, `2m`, `256M`, `1G`, `4KiB` or `4096`
/// (`bulkmem_machine::units::parse_bytes`, the project's one byte-count parser); sizes on
/// the command line must be greater than zero.
///
/// Every flag parsed with this one lets values start with `-`
/// (`allow_hyphen_values`): otherwise clap takes `--sizes -4K` for an
/// unknown flag `-4` and never says what was wrong with the size.
pub fn parse_size(s: &str) -> Result<usize, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!("{s}: sizes cannot be negative"));
    }
    match bulkmem_machine::units::parse_bytes(s)? {
        0 => Err(format!("size '{s}' must be greater than zero")),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkmem_machine::units::format_bytes;

    #[test]
    fn command_line_sizes_are_positive_byte_counts() {
        // The forms are bulkmem_machine::units::parse_bytes's (tested there); the command
        // line adds only that a size is more than zero.
        assert_eq!(parse_size("4K"), Ok(4096));
        assert!(parse_size("0").unwrap_err().contains("greater than zero"));
        assert!(parse_size("0K").unwrap_err().contains("greater than zero"));
        assert!(parse_size("-4K")
            .unwrap_err()
            .contains("cannot be negative"));
        assert!(parse_size("12Q")
            .unwrap_err()
            .contains("unknown suffix 'Q'"));
    }

    #[test]
    fn formatting_round_trips() {
        for n in [
            1,
            4095,
            4096,
            65536,
            2 << 20,
            256 << 20,
            1 << 30,
            3 << 30,
            6 << 9,
        ] {
            assert_eq!(parse_size(&format_bytes(n)), Ok(n), "{}", format_bytes(n));
        }
        assert_eq!(format_bytes(2 << 20), "2M");
        assert_eq!(format_bytes(1536), "1536");
    }
}
