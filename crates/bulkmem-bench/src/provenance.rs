//! Where a JSON document came from: enough to tell, months later, whether
//! two documents can be compared at all (same build, same CPU, same kernel
//! settings) and how to reproduce one.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

pub use bulkmem_report::document::SCHEMA;

#[derive(Clone, Debug, Serialize)]
pub struct Provenance {
    pub bulkmem: &'static str,
    /// `git rev-parse --short=12 HEAD`, `-dirty` when tracked files had
    /// uncommitted changes (the build is then not that commit).
    pub commit: &'static str,
    /// `rustc --version` of the compiler that built the command.
    pub rustc: &'static str,
    /// `CARGO_CFG_TARGET_FEATURE` at build time: kernels outside it are
    /// still chosen at run time, but the compiler's own code is not.
    pub target_features: Vec<&'static str>,
    /// `uname -r`; page migration and THP behaviour change with it.
    pub kernel: Option<String>,
    pub cpu: String,
    /// `None` where cpufreq is not exposed (most VMs).
    pub governor: Option<String>,
    pub thp: Option<String>,
    /// UTC, second resolution.
    pub date: String,
    pub command: Vec<String>,
}

impl Provenance {
    pub fn this() -> Provenance {
        let i = bulkmem::cpu::info();
        Provenance {
            bulkmem: env!("CARGO_PKG_VERSION"),
            commit: env!("BULKMEM_COMMIT"),
            rustc: env!("BULKMEM_RUSTC"),
            target_features: split_features(env!("BULKMEM_TARGET_FEATURES")),
            kernel: read_line("/proc/sys/kernel/osrelease"),
            cpu: i.brand.clone(),
            governor: read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            thp: i.topology.thp_mode.clone(),
            date: iso8601(SystemTime::now()),
            command: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        }
    }
}

fn split_features(s: &'static str) -> Vec<&'static str> {
    s.split(',').filter(|f| !f.is_empty()).collect()
}

/// The first line of a sysfs/procfs file; `None` when absent or empty, so
/// a missing file reads as JSON `null` rather than a misleading `""`.
fn read_line(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let line = s.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_string())
}

/// `YYYY-MM-DDThh:mm:ssZ`; times before 1970 (a broken clock) read as the
/// epoch rather than failing the whole document.
pub fn iso8601(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Howard Hinnant's `civil_from_days`: proleptic Gregorian date of a day
/// count since 1970-01-01, exact for every day without a date crate.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    // Eras of 400 years start on 0000-03-01, so leap days fall at year end.
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> String {
        iso8601(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn dates_match_known_instants() {
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        // `date -ud @951782400`: the 2000 leap day (a 400-year leap year).
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(951_868_800), "2000-03-01T00:00:00Z");
        assert_eq!(at(1_709_164_800), "2024-02-29T00:00:00Z");
        assert_eq!(at(1_795_431_265), "2026-11-23T10:54:25Z");
        // 2100 is not a leap year.
        assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(at(1_735_689_599), "2024-12-31T23:59:59Z");
    }

    #[test]
    fn provenance_names_this_build_and_process() {
        let p = Provenance::this();
        assert_eq!(p.bulkmem, env!("CARGO_PKG_VERSION"));
        assert!(!p.commit.is_empty());
        // The build script ran the compiler that built this test.
        assert!(
            p.rustc.starts_with("rustc ") || p.rustc == "unknown",
            "{}",
            p.rustc
        );
        assert!(!p.command.is_empty());
        assert!(p
            .target_features
            .iter()
            .all(|f| !f.is_empty() && !f.contains(',')));
        assert_eq!(p.date.len(), "2026-11-23T10:54:25Z".len());
        if std::path::Path::new("/proc/sys/kernel/osrelease").exists() {
            assert!(p.kernel.is_some());
        }
    }
}
