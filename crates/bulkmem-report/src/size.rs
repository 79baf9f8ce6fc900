//! Sizes in tables and labels.

/// The shortest exact form: `4K`, `2M`, `1G`, or the byte count (the form
/// `bulkmem::parse_bytes` reads back; the command checks the two agree).
pub fn fmt_size(n: usize) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}
