//! Checks made before anything is measured, so that a run that cannot
//! succeed says so at once (exit 2) instead of after minutes of work, or
//! instead of being killed by the OOM killer half-way through:
//!
//! * [`check_outputs`]: `--json` and `--plot` can be written (and `--plot`
//!   names a format the chart writer knows);
//! * [`check_inputs`]: files named on the command line can be read;
//! * [`check_memory`]: the memory a run touches fits in what the kernel
//!   says is available.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::Path;

/// Checks every output file of a subcommand before it measures: `--json`
/// (`-` is stdout and always fine) and `--plot` (.svg or .png) must be
/// writable: an existing file is opened for appending and written zero
/// bytes (nothing is changed, nothing truncated), a new one is created
/// and removed again, so a missing or read-only directory is caught,
/// whoever runs it. Files of the kernel's pseudo-filesystems (/proc, /sys,
/// ...) are refused: root may open them for writing, and a write then
/// fails, or worse, sets a kernel knob, only after the measuring.
pub fn check_outputs(json: Option<&Path>, plot: Option<&Path>) -> Result<(), String> {
    if let Some(path) = json.filter(|p| *p != Path::new("-")) {
        writable("--json", path)?;
    }
    if let Some(path) = plot {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        if !matches!(ext.as_deref(), Some("svg" | "png")) {
            return Err(format!(
                "--plot {}: the file name must end in .svg or .png",
                path.display()
            ));
        }
        writable("--plot", path)?;
    }
    Ok(())
}

/// One output file of `flag`, checked as [`check_outputs`] checks them.
pub fn writable(flag: &str, path: &Path) -> Result<(), String> {
    let fail = |why: String| Err(format!("{flag} {}: {why}", path.display()));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return fail(if dir.exists() {
            format!("{} is not a directory", dir.display())
        } else {
            format!("the directory {} does not exist", dir.display())
        });
    }
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.is_dir() {
            return fail("is a directory".into());
        }
        if !meta.is_file() {
            // A device or a pipe (`/dev/stdout`, `>(jq .)`): opening it
            // now could block, or end a reader's input early.
            return Ok(());
        }
        if let Some(fs) = pseudo_filesystem(path) {
            return fail(format!("is a file of {fs}, not a place for results"));
        }
        // Appending nothing changes nothing; the run truncates it later.
        // The empty write is what fails where only writing does (a /proc
        // file root may open).
        return match OpenOptions::new()
            .append(true)
            .open(path)
            .and_then(|mut f| f.write(&[]))
        {
            Ok(_) => Ok(()),
            Err(e) => fail(format!("cannot write it: {e}")),
        };
    }
    if let Some(fs) = pseudo_filesystem(dir) {
        return fail(format!(
            "{} is in {fs}, not a place for results",
            dir.display()
        ));
    }
    match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(_) => {
            let _ = std::fs::remove_file(path);
            Ok(())
        }
        Err(e) => fail(format!("cannot create it: {e}")),
    }
}

/// The kernel pseudo-filesystem `path` is on, by name, if it is on one.
fn pseudo_filesystem(path: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs writes only into `st`, which is large enough; `c` is
    // NUL-terminated.
    let st = unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        (libc::statfs(c.as_ptr(), &mut st) == 0).then_some(st)
    }?;
    // The magic numbers of linux/magic.h; f_type's width differs by
    // architecture, the magics all fit in 32 bits.
    let kinds: [(u32, &str); 11] = [
        (0x9fa0, "procfs (/proc)"),
        (0x6265_6572, "sysfs (/sys)"),
        (0x6462_6720, "debugfs"),
        (0x7472_6163, "tracefs"),
        (0x0027_e0eb, "cgroupfs"),
        (0x6367_7270, "cgroup2fs"),
        (0x7363_6673, "securityfs"),
        (0x6265_6570, "configfs"),
        (0xcafe_4a11, "bpffs"),
        (0xde5e_81e4, "efivarfs"),
        (0x6165_676c, "pstore"),
    ];
    #[allow(clippy::unnecessary_cast)]
    let kind = st.f_type as u32;
    kinds.iter().find(|(m, _)| *m == kind).map(|(_, n)| *n)
}

/// Checks the files a command reads, named on its command line (`what`
/// names each: `compare A`), before it starts: each exists, is not a
/// directory, and opens for reading. Pipes and devices are not opened (a
/// FIFO without a writer would block); reading them is left to the
/// command.
pub fn check_inputs(files: &[(&str, &Path)]) -> Result<(), String> {
    for (what, path) in files {
        let fail = |why: String| Err(format!("{what} {}: {why}", path.display()));
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return fail("no such file".into())
            }
            Err(e) => return fail(format!("cannot read it: {e}")),
        };
        if meta.is_dir() {
            return fail("is a directory, not a file".into());
        }
        if meta.is_file() {
            if let Err(e) = std::fs::File::open(path) {
                return fail(format!("cannot read it: {e}"));
            }
        }
    }
    Ok(())
}

/// One part of a run's memory: the bytes it touches at once, the flags
/// that make it that large, and what the bytes are.
pub struct Need {
    pub bytes: usize,
    pub flags: String,
    pub what: String,
}

/// Refuses a run whose largest part needs more memory than MemAvailable.
///
/// The benchmarks touch every page of their buffers (most of them before
/// timing anything, some as they go, on MAP_NORESERVE mappings), so the
/// memory a run needs is resident, not merely reserved; beyond
/// MemAvailable the kernel swaps (and the numbers mean nothing) or, with
/// no swap, the OOM killer ends the run. The parts of a run are measured
/// one after the other, so the need is that of the largest part. What each
/// subcommand holds at once, from its code (approximately: small tables,
/// engines and stacks are left out):
///
/// * `bench copy|clear`, hot: a source and a destination of the size, per
///   thread (`2 x size x --threads`, largest size);
/// * `bench copy|clear`, cold (and `bench fault`): two arenas of `--total`
///   (at least the largest size) and the eviction buffer (twice the LLC,
///   at least 64 MiB);
/// * `bench fault`'s demonstration: a `--demo` source and destination;
/// * `bench batch`: a source and a destination arena of the largest batch
///   (`--total`, or `--counts` x 2 MiB) and the eviction buffer;
/// * `bench fill`: one region of the largest size and the eviction buffer;
/// * `bench move`: a source and a destination of the size (`copy-auto`
///   faults the whole destination in while the source is still there);
/// * `bench migrate` and `migrate --self-test`: the region and its copy
///   (copy-and-remap copies into new pages before the old ones go);
/// * `bench preload`: each workload's source and destination (the
///   children run one at a time).
///
/// When /proc/meminfo cannot be read there is nothing to check against and
/// the run goes ahead.
pub fn check_memory(needs: &[Need]) -> Result<(), String> {
    let Some(available) = mem_available() else {
        return Ok(());
    };
    let Some(worst) = needs.iter().max_by_key(|n| n.bytes) else {
        return Ok(());
    };
    if worst.bytes <= available {
        return Ok(());
    }
    Err(format!(
        "{}: the run needs about {} of memory ({}), but only {} is available \
         (MemAvailable in /proc/meminfo); it would swap or be killed for memory: \
         make {} smaller",
        worst.flags,
        approx(worst.bytes),
        worst.what,
        approx(available),
        worst
            .flags
            .split_whitespace()
            .filter(|w| w.starts_with("--"))
            .collect::<Vec<_>>()
            .join(" or ")
    ))
}

/// MemAvailable from /proc/meminfo, in bytes.
pub fn mem_available() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

fn parse_mem_available(text: &str) -> Option<usize> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let n: usize = words.next()?.parse().ok()?;
    let unit = match words.next() {
        Some("kB") => 1024,
        None => 1,
        Some(_) => return None,
    };
    n.checked_mul(unit)
}

/// `a x b`, saturating: a need that overflows is simply too large.
pub fn times(a: usize, b: usize) -> usize {
    a.saturating_mul(b)
}

/// Bytes with one decimal in the largest binary unit: `23.1 GiB`.
pub fn approx(n: usize) -> String {
    let units = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
    for (shift, unit) in units {
        if n >= 1 << shift {
            return format!("{:.1} {unit}", n as f64 / (1u64 << shift) as f64);
        }
    }
    format!("{n} bytes")
}

/// The eviction buffer of the cold benchmarks (see `bench_mem`).
pub fn eviction_bytes() -> usize {
    bulkmem_calibrate::toolkit::eviction_bytes(bulkmem::cpu::info().llc_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_is_parsed_in_bytes() {
        let text = "MemTotal:       24683656 kB\nMemFree:        23917384 kB\nMemAvailable:   24238428 kB\n";
        assert_eq!(parse_mem_available(text), Some(24238428 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(parse_mem_available("MemAvailable: lots kB\n"), None);
    }

    #[test]
    fn the_largest_part_decides() {
        let avail = mem_available().expect("Linux has /proc/meminfo");
        let small = Need {
            bytes: 4096,
            flags: "--sizes 4K".into(),
            what: "a page".into(),
        };
        assert!(check_memory(&[]).is_ok());
        let big = Need {
            bytes: times(avail, 4),
            flags: "--sizes 1T --threads 4".into(),
            what: "everything".into(),
        };
        let e = check_memory(&[small, big]).unwrap_err();
        assert!(
            e.starts_with("--sizes 1T --threads 4: ")
                && e.contains("available")
                && e.contains("make --sizes or --threads smaller"),
            "{e}"
        );
        assert_eq!(times(usize::MAX, 2), usize::MAX);
        assert_eq!(approx(3 << 29), "1.5 GiB");
        assert_eq!(approx(100), "100 bytes");
    }

    #[test]
    fn outputs_are_checked_without_leaving_files() {
        let dir = std::env::temp_dir().join(format!("bulkmem-preflight-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fresh = dir.join("x.json");
        assert!(check_outputs(Some(&fresh), Some(&dir.join("x.SVG"))).is_ok());
        assert!(!fresh.exists(), "the check left a file behind");
        assert!(check_outputs(Some(Path::new("-")), None).is_ok());
        assert!(check_outputs(Some(Path::new("/dev/null")), None).is_ok());
        let e = check_outputs(None, Some(&dir.join("x.jpg"))).unwrap_err();
        assert!(e.contains("--plot") && e.contains(".svg or .png"), "{e}");
        let e = check_outputs(Some(Path::new("/nonexistent/dir/x.json")), None).unwrap_err();
        assert!(e.contains("--json") && e.contains("does not exist"), "{e}");
        let e = check_outputs(Some(&dir), None).unwrap_err();
        assert!(e.contains("is a directory"), "{e}");
        std::fs::write(&fresh, "kept").unwrap();
        assert!(check_outputs(Some(&fresh), None).is_ok());
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "kept");
        // Root may open these for writing: the run would fail after it
        // measured, or write a kernel setting.
        for pseudo in ["/proc/version", "/proc/self/comm"] {
            let e = check_outputs(Some(Path::new(pseudo)), None).unwrap_err();
            assert!(e.starts_with(&format!("--json {pseudo}: ")), "{e}");
        }
        let e = check_outputs(Some(Path::new("/proc/bulkmem-x.json")), None).unwrap_err();
        assert!(e.contains("procfs"), "{e}");
        assert!(check_inputs(&[("A", &fresh)]).is_ok());
        let e = check_inputs(&[("A", &fresh), ("B", &dir)]).unwrap_err();
        assert!(e.starts_with("B ") && e.contains("is a directory"), "{e}");
        let e = check_inputs(&[("A", &dir.join("none.json"))]).unwrap_err();
        assert!(e.contains("no such file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
