//! `bulkmem tune`: calibrate this machine (`bulkmem::calibrate`,
//! docs/design.md "Calibration") and write the profile `auto` follows.
//! The measuring and choosing live in the library; this command picks the
//! path, shows progress and prints what was chosen.

use std::path::{Path, PathBuf};

use bulkmem::auto::{self, Identity, ProfileSetting};
use bulkmem::calibrate::{self, CalibrateOptions};
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
        (auto::system_profile_path(&id), "--system")
    } else if let Some(p) = a.out {
        (p, "--out")
    } else if let Some(p) = from_env {
        (p, "BULKMEM_PROFILE")
    } else {
        let p = auto::default_profile_path(&id)
            .ok_or_else(|| usage("no place for the profile: give --out FILE (HOME is not set)"))?;
        (p, "the default profile path")
    };
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
    .cpu(bulkmem::placement::current_cpu());
    if let Some(r) = a.runs {
        opts = opts.runs(r as usize);
    }
    let started = std::time::Instant::now();
    let ladder = calibrate::ladder_here(&opts).map_err(|e| runtime(e.to_string()))?;
    let pb = progress_bar(quiet, ladder.units());
    let profile = calibrate::measure_ladder(&ladder, &mut |s| {
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
    let profile = profile.map_err(|e| runtime(e.to_string()))?;
    calibrate::write_profile(&path, &profile)
        .map_err(|e| runtime(format!("cannot write the profile {}: {e}", path.display())))?;
    let mut text = format!(
        "bulkmem tune: {} cells in {:.0} s ({} runs each{}, up to {}) on {}\n",
        profile.cells.len(),
        started.elapsed().as_secs_f64(),
        ladder.runs,
        if a.quick { ", --quick" } else { "" },
        bulkmem_bench::size::fmt_size(*ladder.singles.last().unwrap_or(&0)),
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

/// Whether `auto` will read what was written, and if not, why.
fn follow_note(path: &Path, id: &Identity) -> String {
    if path == auto::system_profile_path(id) {
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
        None if auto::default_profile_path(id).as_deref() != Some(path) => format!(
            "note: auto reads this file only with BULKMEM_PROFILE={}",
            path.display()
        ),
        _ => "auto follows it from the next process on (`bulkmem info` shows it)".into(),
    }
}
