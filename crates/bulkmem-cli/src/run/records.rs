//! The records the preload leaves in `bulkmem run`'s directory, one per
//! process that exited through its exit handlers
//! (`BULKMEM_PRELOAD_REPORT`), and their sum over the process tree.

use std::path::Path;

/// What a call asked for, as the preload counts it.
pub const KINDS: [&str; 2] = ["copy", "set"];
/// Where a call went: below the threshold to the C library, bulkmem on the
/// calling thread, bulkmem with helper threads, above the threshold but to
/// the C library (overlapping memmove, non-zero memset, re-entered).
pub const PATHS: [&str; 4] = ["small", "cpu", "threads", "passed"];

/// One process's counts (or a tree's, summed).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    pub pid: u32,
    pub comm: String,
    /// `[kind][path]`.
    pub calls: [[u64; 4]; 2],
    pub bytes: [[u64; 4]; 2],
    /// Nanoseconds the calls bulkmem took took, by kind.
    pub nanos: [u64; 2],
    pub streamed: u64,
    /// Whether calls below the threshold were counted (`--stats`).
    pub small_counted: bool,
    /// The tool that kept the preload out of the way, if any.
    pub inert: Option<String>,
}

impl Counts {
    /// Parses a record line; `None` for a malformed (e.g. cut short) one.
    pub fn parse(line: &str) -> Option<Counts> {
        let mut c = Counts::default();
        let mut fields = 0;
        for field in line.split_whitespace() {
            let (k, v) = field.split_once('=')?;
            let num = || v.parse::<u64>().ok();
            match k {
                "pid" => c.pid = v.parse().ok()?,
                "comm" => c.comm = v.to_string(),
                "inert" => c.inert = Some(v.to_string()),
                "streamed_bytes" => c.streamed = num()?,
                "small_counted" => c.small_counted = num()? == 1,
                _ => {
                    let (kind, rest) = k.split_once('_')?;
                    let ki = KINDS.iter().position(|&x| x == kind)?;
                    if rest == "ns" {
                        c.nanos[ki] = num()?;
                    } else {
                        let (path, what) = rest.rsplit_once('_')?;
                        let pi = PATHS.iter().position(|&x| x == path)?;
                        match what {
                            "calls" => c.calls[ki][pi] = num()?,
                            "bytes" => c.bytes[ki][pi] = num()?,
                            _ => return None,
                        }
                    }
                    fields += 1;
                }
            }
        }
        // Every kind: 4 paths x 2 + its time. A record cut short is not
        // half counted.
        (fields == KINDS.len() * 9 && line.contains(" comm=")).then_some(c)
    }

    /// Adds `o` into this total.
    pub fn add(&mut self, o: &Counts) {
        for k in 0..2 {
            for p in 0..4 {
                self.calls[k][p] += o.calls[k][p];
                self.bytes[k][p] += o.bytes[k][p];
            }
            self.nanos[k] += o.nanos[k];
        }
        self.streamed += o.streamed;
        self.small_counted |= o.small_counted;
        if self.inert.is_none() {
            self.inert.clone_from(&o.inert);
        }
    }

    /// Calls and bytes of `kind` bulkmem did (its two paths).
    pub fn through_bulkmem(&self, kind: usize) -> (u64, u64) {
        (
            self.calls[kind][1] + self.calls[kind][2],
            self.bytes[kind][1] + self.bytes[kind][2],
        )
    }
}

/// Every record in `dir`, and how many files could not be read as one.
pub fn collect(dir: &Path) -> (Vec<Counts>, usize) {
    let mut out = Vec::new();
    let mut bad = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (out, 0);
    };
    for e in entries.flatten() {
        match std::fs::read_to_string(e.path())
            .ok()
            .and_then(|t| Counts::parse(t.trim_end()))
        {
            Some(c) => out.push(c),
            None => bad += 1,
        }
    }
    out.sort_by_key(|c| c.pid);
    (out, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "pid=42 copy_small_calls=5 copy_small_bytes=500 copy_cpu_calls=1 \
        copy_cpu_bytes=2097152 copy_threads_calls=2 copy_threads_bytes=67108864 \
        copy_passed_calls=1 copy_passed_bytes=1048576 copy_ns=9000000 set_small_calls=0 \
        set_small_bytes=0 set_cpu_calls=0 set_cpu_bytes=0 set_threads_calls=1 \
        set_threads_bytes=33554432 set_passed_calls=0 set_passed_bytes=0 set_ns=1000000 \
        streamed_bytes=67108864 small_counted=1 comm=python3";

    #[test]
    fn records_parse_and_add_up() {
        let c = Counts::parse(LINE).expect("a whole record");
        assert_eq!((c.pid, c.comm.as_str()), (42, "python3"));
        assert_eq!(c.through_bulkmem(0), (3, 2097152 + 67108864));
        assert_eq!(c.through_bulkmem(1), (1, 33554432));
        assert_eq!((c.calls[0][3], c.nanos), (1, [9_000_000, 1_000_000]));
        assert!(c.small_counted && c.inert.is_none());
        let mut sum = Counts::default();
        sum.add(&c);
        sum.add(&c);
        assert_eq!(sum.through_bulkmem(0), (6, 2 * (2097152 + 67108864)));
        assert_eq!(sum.streamed, 2 * 67108864);
    }

    #[test]
    fn cut_or_foreign_records_are_refused() {
        let cut = &LINE[..LINE.len() / 2];
        assert_eq!(Counts::parse(cut), None);
        assert_eq!(Counts::parse(&LINE.replace(" comm=python3", "")), None);
        assert_eq!(Counts::parse(&LINE.replace("copy_ns=", "copy_ns=x")), None);
        assert_eq!(Counts::parse(&LINE.replace("copy_cpu", "move_cpu")), None);
        assert_eq!(Counts::parse("hello"), None);
        let inert = format!("{} inert=valgrind", LINE.replace(" comm=python3", "")) + " comm=a";
        assert_eq!(
            Counts::parse(&inert).unwrap().inert.as_deref(),
            Some("valgrind")
        );
    }
}
