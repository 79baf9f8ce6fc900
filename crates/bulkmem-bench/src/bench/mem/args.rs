//! What `bench copy|clear|fault` take from their flags: the regimes
//! `--regime` names, and the memory a plan will hold (checked before
//! anything is mapped).

use super::{After, Regime};
use crate::preflight::{self, eviction_bytes, times, Need};
use bulkmem_machine::units::format_bytes;

/// The regimes `--regime` names.
#[derive(Clone, Debug)]
pub struct Regimes(pub Vec<Regime>);

/// `hot`, `cold`, `consume`, `pipe`, comma-separated, or `both` (hot and
/// cold) or `all`; measured in the order given.
pub fn parse_regimes(s: &str) -> Result<Regimes, String> {
    let mut out: Vec<Regime> = Vec::new();
    for word in s.split(',') {
        let add: &[Regime] = match word.trim() {
            "both" => &[Regime::Hot, Regime::Cold],
            "all" => &Regime::ALL,
            w => match Regime::ALL.iter().find(|r| r.name() == w) {
                Some(r) => std::slice::from_ref(r),
                None => {
                    return Err(format!(
                        "'{w}': expected hot, cold, consume, pipe, both or all (comma-separated)"
                    ))
                }
            },
        };
        for r in add {
            if !out.contains(r) {
                out.push(*r);
            }
        }
    }
    Ok(Regimes(out))
}

/// What `bench copy|clear|fault` hold at once: hot, a source and a
/// destination of the largest size per thread; cold, two arenas of
/// `--total` (at least the largest size) and the eviction buffer.
pub fn needs(sizes: &[usize], regimes: &[Regime], threads: usize, total: usize) -> Vec<Need> {
    let max = sizes.iter().copied().max().unwrap_or(0);
    let mut needs = Vec::new();
    if regimes
        .iter()
        .any(|r| r.after() != After::Nothing || *r == Regime::Hot)
    {
        needs.push(Need {
            bytes: times(times(2, max), threads),
            flags: if threads > 1 {
                format!("--sizes {} --threads {threads}", format_bytes(max))
            } else {
                format!("--sizes {}", format_bytes(max))
            },
            what: format!(
                "hot: a source and a destination of {} per thread",
                format_bytes(max)
            ),
        });
    }
    if regimes.contains(&Regime::Cold) {
        let arena = max.max(total);
        needs.push(Need {
            bytes: times(2, arena).saturating_add(eviction_bytes()),
            flags: if total >= max {
                format!("--total {}", format_bytes(total))
            } else {
                format!("--sizes {}", format_bytes(max))
            },
            what: format!(
                "cold: two arenas of {} and the {} eviction buffer",
                format_bytes(arena),
                preflight::approx(eviction_bytes())
            ),
        });
    }
    needs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regimes_parse_as_lists() {
        let names = |s: &str| -> Vec<&str> {
            parse_regimes(s)
                .unwrap()
                .0
                .iter()
                .map(|r| r.name())
                .collect()
        };
        assert_eq!(names("both"), ["hot", "cold"]);
        assert_eq!(names("consume,hot,consume"), ["consume", "hot"]);
        assert_eq!(names("all"), ["hot", "cold", "consume", "pipe"]);
        let e = parse_regimes("hot,warm").unwrap_err();
        assert!(e.contains("'warm'") && e.contains("consume"), "{e}");
        // Consume and pipe hold what hot holds.
        let hot = needs(&[1 << 20], &[Regime::Hot], 1, 0);
        assert_eq!(
            needs(&[1 << 20], &[Regime::Pipe], 1, 0)[0].bytes,
            hot[0].bytes
        );
    }
}
