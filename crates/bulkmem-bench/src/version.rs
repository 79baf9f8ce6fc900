//! `bulkmem version [--verbose]`: `-V`/`--version` stay one line (what
//! scripts and bug reports grep for); the build's details, which are
//! several lines, live here as `cargo version --verbose` keeps them.

use clap::Args;

use crate::failure::Failure;

/// The one line `-V`, `--version` and `bulkmem version` print (after the
/// program name).
pub const SHORT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("BULKMEM_COMMIT"),
    ")"
);

#[derive(Args)]
pub struct VersionArgs {
    /// Also the compiler and the CPU features the build could assume.
    #[arg(short, long)]
    verbose: bool,
}

/// What `bulkmem version` prints.
pub fn text(verbose: bool) -> String {
    let mut s = format!("bulkmem {SHORT}\n");
    if verbose {
        let features = env!("BULKMEM_TARGET_FEATURES").replace(',', " ");
        s.push_str(&format!(
            "commit: {}\nrustc: {}\ntarget features: {features}\n",
            env!("BULKMEM_COMMIT"),
            env!("BULKMEM_RUSTC"),
        ));
    }
    s
}

pub fn cmd(a: VersionArgs) -> Result<(), Failure> {
    crate::out::print(&text(a.verbose))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_is_one_line_and_verbose_adds_the_build() {
        assert!(!SHORT.contains('\n'));
        assert_eq!(text(false), format!("bulkmem {SHORT}\n"));
        let v = text(true);
        assert!(v.starts_with(&text(false)), "{v}");
        for field in ["commit: ", "rustc: ", "target features: "] {
            assert_eq!(v.lines().filter(|l| l.starts_with(field)).count(), 1, "{v}");
        }
    }
}
