//! The records the preload leaves in `bulkmem run`'s directory
//! (`BULKMEM_PRELOAD_REPORT`), one per process image that made a large
//! call, and their sum over the process tree. A record is a live one
//! (`PID.live`: the counters themselves, mapped shared by the process, so
//! it is whole however the process ended: a Go program's exit, `_exit`, a
//! crash, an `exec`) or, where the preload could not make that file, a
//! line written by its exit handler.

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

/// The live record's magic (crates/bulkmem-preload-engine/src/stats.rs,
/// `Counters`): its layout's version.
const LIVE_MAGIC: &[u8; 8] = b"BMLIVE01";
/// A live record's size: the magic, then little-endian u64s (pid, calls
/// and bytes by kind and path, nanoseconds by kind, streamed bytes,
/// small_counted), then the command name, 16 bytes NUL-padded.
const LIVE_LEN: usize = 8 + 8 * (1 + 8 + 8 + 2 + 1 + 1) + 16;

impl Counts {
    /// Reads a live record; `None` for a file of another size or magic
    /// (one being set up, or not a record).
    pub fn from_live(b: &[u8]) -> Option<Counts> {
        if b.len() != LIVE_LEN || &b[..8] != LIVE_MAGIC {
            return None;
        }
        let mut words = b[8..LIVE_LEN - 16]
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")));
        let mut next = || words.next().expect("the layout's words");
        let mut c = Counts {
            pid: u32::try_from(next()).ok()?,
            ..Counts::default()
        };
        for k in 0..2 {
            for p in 0..4 {
                c.calls[k][p] = next();
            }
        }
        for k in 0..2 {
            for p in 0..4 {
                c.bytes[k][p] = next();
            }
        }
        c.nanos = [next(), next()];
        c.streamed = next();
        c.small_counted = next() == 1;
        let comm = &b[LIVE_LEN - 16..];
        let end = comm.iter().position(|&x| x == 0).unwrap_or(16);
        c.comm = String::from_utf8_lossy(&comm[..end])
            .chars()
            .map(|ch| if ch.is_ascii_graphic() { ch } else { '_' })
            .collect();
        Some(c)
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
        let live = e.file_name().to_string_lossy().contains(".live");
        let record = std::fs::read(e.path()).ok().and_then(|b| {
            if live {
                Counts::from_live(&b)
            } else {
                Counts::parse(String::from_utf8_lossy(&b).trim_end())
            }
        });
        match record {
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

    #[test]
    fn a_live_record_reads_as_its_counters() {
        let mut b = LIVE_MAGIC.to_vec();
        let words: Vec<u64> = (0..21)
            .map(|i| if i == 0 { 4242 } else { i * 10 })
            .collect();
        for w in &words {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b.extend_from_slice(b"java\0\0\0\0\0\0\0\0\0\0\0\0");
        let c = Counts::from_live(&b).expect("a whole live record");
        assert_eq!((c.pid, c.comm.as_str()), (4242, "java"));
        assert_eq!(c.calls[0], [10, 20, 30, 40]);
        assert_eq!(c.calls[1], [50, 60, 70, 80]);
        assert_eq!(c.bytes[1][3], 160);
        assert_eq!(
            (c.nanos, c.streamed, c.small_counted),
            ([170, 180], 190, false)
        );
        assert_eq!(Counts::from_live(&b[..b.len() - 1]), None);
        let mut bad = b.clone();
        bad[0] = b'X';
        assert_eq!(Counts::from_live(&bad), None);
    }

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
