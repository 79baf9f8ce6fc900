//! `bulkmem tune`: calibrate this machine (`bulkmem_calibrate`,
//! docs/design.md "Calibration") and write the profile `auto` follows.
//! The measuring and choosing live in bulkmem-calibrate; this command picks the
//! path, shows progress and prints what was chosen.

use std::path::{Path, PathBuf};

use bulkmem_calibrate::{self as calibrate, CalibrateOptions};
use bulkmem_policy::auto::{self, Identity, ProfileSetting};
use clap::Args;

use bulkmem_bench::cli::{progress_bar, runtime, usage, Failure};

#[derive(Args)]
pub struct TuneArgs {
    /// Where to write the profile [default: $BULKMEM_PROFILE, else
    /// $XDG_CACHE_HOME/bulkmem/profile-<cpu-id>.toml, else
    /// ~/.cache/bulkmem/profile-<cpu-id>.toml]. An existing target must be
    /// a regular file; it is replaced atomically.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Write the system-wide profile (/var/cache/bulkmem/profile-<cpu-id>.toml,
    /// root only), which every user without a profile of their own, daemons
    /// without a HOME and setuid programs follow.
    #[arg(long, conflicts_with = "out")]
    system: bool,
    /// Fewer sizes and runs (3 per cell); the profile says so.
    #[arg(long)]
    quick: bool,
    /// Runs per cell, scored by their lower quartile [default: 7, or 3 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: Option<u32>,
    /// Also write every pass of every cell to FILE, a line each: seconds
    /// since the start, the pass (first, re-check, decide, tie-break) and
    /// cell, then each strategy's GB/s (a tie-break's: its speed over the
    /// cell's choice), so a choice can be read back to the passes that
    /// made it (the profile keeps only the first pass's).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

/// `BULKMEM_PROFILE` as this process sees it.
fn setting() -> Option<ProfileSetting> {
    std::env::var_os("BULKMEM_PROFILE").and_then(|v| auto::profile_setting(&v))
}

/// `bulkmem tune`: checks the output path first (exit 2 at once if it
/// cannot be written), measures, then writes the profile atomically.
pub fn cmd(a: TuneArgs, quiet: bool) -> Result<(), Failure> {
    let id = Identity::this();
    let from_env = match setting() {
        Some(ProfileSetting::File(p)) => Some(p),
        _ => None,
    };
    if a.system {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(usage(
                "--system writes a root-owned profile every process may follow: run it as root",
            ));
        }
    }
    // Where the path came from, for the error that names it.
    let (path, origin) = if a.system {
        (id.system_profile_path(), "--system")
    } else if let Some(p) = a.out {
        (p, "--out")
    } else if let Some(p) = from_env {
        (p, "BULKMEM_PROFILE")
    } else {
        let p = id
            .profile_path()
            .ok_or_else(|| usage("no place for the profile: give --out FILE (HOME is not set)"))?;
        (p, "the default profile path")
    };
    if let Some(t) = &a.trace {
        bulkmem_bench::preflight::writable("--trace", t).map_err(usage)?;
    }
    calibrate::check_writable(&path).map_err(|e| {
        usage(format!(
            "{origin}: cannot write the profile {}: {e}",
            path.display()
        ))
    })?;
    let mut opts = if a.quick {
        CalibrateOptions::quick()
    } else {
        CalibrateOptions::full()
    }
    .cpu(bulkmem_machine::machine::placement::current_cpu());
    if let Some(r) = a.runs {
        opts = opts.runs(r as usize);
    }
    let started = std::time::Instant::now();
    let ladder = calibrate::ladder_here(&opts).map_err(|e| runtime(e.to_string()))?;
    let pb = progress_bar(quiet, ladder.units());
    let mut trace = String::new();
    let profile = calibrate::measure_ladder(&ladder, &mut |s| {
        if let Some(m) = s.measured {
            trace += &trace_line(started.elapsed(), s.label, m);
            return;
        }
        pb.set_length(s.of as u64);
        pb.set_position(s.done as u64);
        pb.set_message(match s.left {
            Some(left) if s.done < s.of => {
                format!("{} (about {} s left)", s.label, left.as_secs_f64().ceil())
            }
            _ => s.label.to_string(),
        });
    });
    pb.finish_and_clear();
    if let Some(t) = &a.trace {
        // Written whether or not the calibration finished: a trace is
        // what explains a failed or odd one.
        bulkmem_report::write_file::write_file(t, trace.as_bytes())
            .map_err(|e| runtime(format!("cannot write --trace {}: {e}", t.display())))?;
    }
    let profile = profile.map_err(|e| runtime(e.to_string()))?;
    calibrate::write_profile(&path, &profile)
        .map_err(|e| runtime(format!("cannot write the profile {}: {e}", path.display())))?;
    let mut text = format!(
        "bulkmem tune: {} cells in {:.0} s ({} runs each{}, up to {}) on {}\n",
        profile.cells.len(),
        started.elapsed().as_secs_f64(),
        ladder.runs,
        if a.quick { ", --quick" } else { "" },
        bulkmem_machine::units::format_bytes(*ladder.singles.last().unwrap_or(&0)),
        bulkmem::cpu::info().brand
    );
    text.push_str("auto's choices, from each size up (margin over the runner-up):\n");
    for line in calibrate::summary(&profile) {
        text.push_str(&format!("  {line}\n"));
    }
    text.push_str(&format!(
        "wrote {}\n{}\n",
        path.display(),
        follow_note(&path, &id)
    ));
    bulkmem_bench::out::print(&text)
}

/// One line of `--trace`: when (seconds since the start), which pass of
/// which cell (`first`, `re-check`, `decide`, `tie-break`), and each
/// strategy's figure as the profile writes them (`name=GB/s`; a
/// tie-break's over the choice), tab-separated.
fn trace_line(
    at: std::time::Duration,
    label: &str,
    figures: &[(bulkmem::Strategy, f64)],
) -> String {
    let pass = ["re-check ", "decide ", "tie-break "]
        .iter()
        .find(|p| label.starts_with(*p))
        .map_or("first", |p| p.trim_end());
    let cell = label.strip_prefix(pass).unwrap_or(label).trim_start();
    let figures: Vec<String> = figures
        .iter()
        .map(|(s, g)| format!("{}={g:.2}", s.name()))
        .collect();
    format!(
        "{:.3}\t{pass}\t{cell}\t{}\n",
        at.as_secs_f64(),
        figures.join(" ")
    )
}

/// Whether `auto` will read what was written, and if not, why.
fn follow_note(path: &Path, id: &Identity) -> String {
    if path == id.system_profile_path() {
        return "every process whose user has no profile of their own follows it from the next process on (`bulkmem info` shows which one it reads)".into();
    }
    match setting() {
        Some(ProfileSetting::Off) => {
            "note: BULKMEM_PROFILE=off: auto ignores profiles until it is unset".into()
        }
        Some(ProfileSetting::File(p)) if p != path => format!(
            "note: BULKMEM_PROFILE={} points elsewhere: auto reads that file",
            p.display()
        ),
        None if id.profile_path().as_deref() != Some(path) => format!(
            "note: auto reads this file only with BULKMEM_PROFILE={}",
            path.display()
        ),
        _ => "auto follows it from the next process on (`bulkmem info` shows it)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkmem::Strategy;

    #[test]
    fn a_trace_line_names_the_pass_the_cell_and_each_figure() {
        let at = std::time::Duration::from_millis(1500);
        let f = [(Strategy::Libc, 12.345), (Strategy::Avx2, 3.0)];
        assert_eq!(
            trace_line(at, "copy single 4K", &f),
            "1.500\tfirst\tcopy single 4K\tlibc=12.35 avx2=3.00\n"
        );
        assert_eq!(
            trace_line(at, "re-check clear batch-2M 64M", &f[..1]),
            "1.500\tre-check\tclear batch-2M 64M\tlibc=12.35\n"
        );
        assert!(trace_line(at, "tie-break copy single 64", &f)
            .contains("\ttie-break\tcopy single 64\t"));
        assert!(
            trace_line(at, "decide copy single 32M", &f).contains("\tdecide\tcopy single 32M\t")
        );
    }
}
