//! What `/proc/self/smaps` says about a range: which mappings cover it,
//! with what protection, whether they are private anonymous memory,
//! whether they use transparent huge pages, and their other VmFlags
//! (mlock, MADV_DONTFORK, ...). `migrate_by_copy` refuses anything else
//! before touching the range, gives the new mapping the old one's flags,
//! and restores each mapping's protection afterwards.

use std::fs;

/// One mapping (VMA), clipped to the range asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vma {
    pub start: usize,
    pub end: usize,
    /// PROT_* bits.
    pub prot: i32,
    /// Private (copy-on-write) rather than shared.
    pub private: bool,
    /// The pathname column: empty, or `[heap]`, `[stack]`, `[anon:...]`
    /// for anonymous memory; a file path otherwise.
    pub path: String,
    /// `hg` in VmFlags (MADV_HUGEPAGE) or AnonHugePages above zero.
    pub huge: bool,
    /// The VmFlags line's two-letter flags (`rd`, `lo`, `dc`, ...), in
    /// the kernel's order; empty where smaps has no such line.
    pub flags: Vec<String>,
}

impl Vma {
    pub fn anonymous(&self) -> bool {
        self.path.is_empty() || self.path.starts_with("[heap]") || self.path.starts_with("[anon")
    }

    /// Whether VmFlags has `flag` (two letters, as smaps spells it).
    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

/// The mappings covering `[addr, addr + len)`, clipped to it, in order;
/// `Err` names the first gap.
pub fn covering(smaps: &str, addr: usize, len: usize) -> Result<Vec<Vma>, usize> {
    let end = addr + len;
    let mut out: Vec<Vma> = Vec::new();
    let mut cur: Option<Vma> = None;
    for line in smaps.lines() {
        if let Some(v) = parse_header(line) {
            if let Some(c) = cur.take() {
                out.push(c);
            }
            cur = Some(v);
            continue;
        }
        let Some(c) = cur.as_mut() else { continue };
        if let Some(rest) = line.strip_prefix("VmFlags:") {
            c.flags = rest.split_whitespace().map(str::to_string).collect();
            if c.has("hg") {
                c.huge = true;
            }
        } else if let Some(rest) = line.strip_prefix("AnonHugePages:") {
            if rest
                .split_whitespace()
                .next()
                .and_then(|k| k.parse::<u64>().ok())
                > Some(0)
            {
                c.huge = true;
            }
        }
    }
    out.extend(cur);
    let mut covered = Vec::new();
    let mut at = addr;
    for mut v in out.into_iter().filter(|v| v.end > addr && v.start < end) {
        if v.start > at {
            return Err(at);
        }
        v.start = v.start.max(addr);
        v.end = v.end.min(end);
        at = v.end;
        covered.push(v);
    }
    if at < end {
        return Err(at);
    }
    Ok(covered)
}

fn parse_header(line: &str) -> Option<Vma> {
    let mut f = line.split_whitespace();
    let range = f.next()?;
    let perms = f.next()?;
    let (a, b) = range.split_once('-')?;
    let start = usize::from_str_radix(a, 16).ok()?;
    let end = usize::from_str_radix(b, 16).ok()?;
    let p = perms.as_bytes();
    if p.len() != 4 {
        return None;
    }
    let (_offset, _dev, _inode) = (f.next()?, f.next()?, f.next()?);
    let path = f.collect::<Vec<_>>().join(" ");
    let mut prot = 0;
    if p[0] == b'r' {
        prot |= libc::PROT_READ;
    }
    if p[1] == b'w' {
        prot |= libc::PROT_WRITE;
    }
    if p[2] == b'x' {
        prot |= libc::PROT_EXEC;
    }
    Some(Vma {
        start,
        end,
        prot,
        private: p[3] == b'p',
        path,
        huge: false,
        flags: Vec::new(),
    })
}

/// Every mapping's `[start, end)` in a maps or smaps text, in order.
pub fn mapped(text: &str) -> Vec<(usize, usize)> {
    text.lines()
        .filter_map(parse_header)
        .map(|v| (v.start, v.end))
        .collect()
}

pub fn read_self() -> String {
    fs::read_to_string("/proc/self/smaps").unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
7f0000000000-7f0000200000 rw-p 00000000 00:00 0 
Size:               2048 kB
AnonHugePages:      2048 kB
VmFlags: rd wr mr mw me ac sd hg
7f0000200000-7f0000400000 r--p 00000000 00:00 0                          [anon:heap]
AnonHugePages:         0 kB
VmFlags: rd mr mw me ac sd
7f0000400000-7f0000500000 rw-s 00000000 00:05 1234                       /dev/shm/x y
VmFlags: rd wr sh mr mw me ms sd
7f0000600000-7f0000700000 rw-p 00000000 00:00 0 
VmFlags: rd wr mr mw me lo dc ac wf dd sd
";

    #[test]
    fn covering_clips_and_reads_protection_sharing_and_thp() {
        let v = covering(SMAPS, 0x7f0000100000, 0x200000).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].start, v[0].end), (0x7f0000100000, 0x7f0000200000));
        assert!(v[0].huge && v[0].private && v[0].anonymous());
        assert_eq!(v[0].prot, libc::PROT_READ | libc::PROT_WRITE);
        assert_eq!((v[1].prot, v[1].huge), (libc::PROT_READ, false));
        assert!(v[1].anonymous());
        let shared = covering(SMAPS, 0x7f0000400000, 0x1000).unwrap();
        assert!(!shared[0].private && !shared[0].anonymous());
        assert_eq!(shared[0].path, "/dev/shm/x y");
    }

    #[test]
    fn vm_flags_are_kept_per_mapping() {
        let v = covering(SMAPS, 0x7f0000600000, 0x1000).unwrap();
        assert_eq!(
            v[0].flags,
            ["rd", "wr", "mr", "mw", "me", "lo", "dc", "ac", "wf", "dd", "sd"]
        );
        assert!(v[0].has("lo") && v[0].has("dd") && !v[0].has("nr") && !v[0].huge);
        let v = covering(SMAPS, 0x7f0000000000, 0x1000).unwrap();
        assert!(v[0].has("hg") && !v[0].has("lo"));
    }

    #[test]
    fn mapped_lists_every_mapping() {
        let m = mapped(SMAPS);
        assert_eq!(m.len(), 4);
        assert_eq!(m[2], (0x7f0000400000, 0x7f0000500000));
    }

    #[test]
    fn gaps_are_named() {
        assert_eq!(
            covering(SMAPS, 0x7f0000400000, 0x200000),
            Err(0x7f0000500000)
        );
        assert_eq!(covering(SMAPS, 0x100000, 0x1000), Err(0x100000));
    }
}
