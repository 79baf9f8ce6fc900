//! The kernel's CPU (and node) list format, `0-3,8,10-11`: what sysfs
//! writes and what users type (`taskset -c`, `numactl`, the CLI's
//! `--cpus`), so parse errors name the part that is wrong.

/// Parses a kernel CPU (or node) list such as `0-3,8,10-11`, the form
/// sysfs, `taskset -c` and `numactl` use: numbers in the order given,
/// each once (a repeat keeps its first place, so a caller's order, e.g.
/// which CPU a first worker gets, survives). The error names the part
/// that is wrong.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |t: &str| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| format!("'{}' in '{s}' is not a number", t.trim()))
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if lo > hi {
            return Err(format!("'{part}' in '{s}': the range runs backwards"));
        }
        if hi - lo >= 1 << 20 {
            return Err(format!("'{part}' in '{s}': the range is implausibly long"));
        }
        for c in lo..=hi {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// A CPU list in the kernel's compressed form (`0-3,8,10-11`): the
/// inverse of [`parse_cpu_list`] for ascending lists.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_compress_ranges() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[]), "");
        assert_eq!(format_cpu_list(&[5]), "5");
        let l = [0, 2, 3, 4, 9];
        assert_eq!(parse_cpu_list(&format_cpu_list(&l)), Ok(l.to_vec()));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Ok(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("5"), Ok(vec![5]));
        assert_eq!(parse_cpu_list(""), Ok(vec![]));
        // The caller's order stands; repeats keep their first place.
        assert_eq!(parse_cpu_list("3,1,3,0-1"), Ok(vec![3, 1, 0]));
        assert!(parse_cpu_list("3-1").unwrap_err().contains("backwards"));
        assert!(parse_cpu_list("0,a").unwrap_err().contains("'a'"));
        assert!(parse_cpu_list("0-99999999999")
            .unwrap_err()
            .contains("implausibly"));
    }
}
