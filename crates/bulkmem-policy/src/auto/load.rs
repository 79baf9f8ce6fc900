//! Finding and loading this machine's profile, once per process.
//!
//! The default path is `$XDG_CACHE_HOME/bulkmem/profile-<key>.toml`, else
//! `$HOME/.cache/bulkmem/profile-<key>.toml`, where `<key>` is
//! [`Identity::key`] (vendor, family, model, stepping, and a hash of
//! features, caches and CPUs). `BULKMEM_PROFILE=FILE` reads `FILE` instead;
//! `BULKMEM_PROFILE=off` uses the built-in rules. Where the user has no
//! profile (or no `HOME`: a daemon), the system-wide
//! `/var/cache/bulkmem/profile-<key>.toml` that `bulkmem tune --system`
//! writes is read, if root owns it and only root can write it; setuid
//! programs read only that one. Nothing here is ever
//! fatal: whatever goes wrong, `auto` uses the built-in rules and
//! [`profile_status`] says why.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::profile::{Identity, Profile, FORMAT};
use crate::machine::cpu;
use crate::machine::environment;

/// Why `auto` follows a profile or the built-in rules.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProfileStatus {
    /// A profile measured on this CPU by this bulkmem is in use.
    Tuned {
        /// The profile file.
        path: PathBuf,
        /// Time since it was measured (its `created`), 0 if that lies in
        /// the future.
        age: Duration,
    },
    /// `BULKMEM_PROFILE=off` (or `OFF`, `0`, `none`: any case).
    Off,
    /// The process is `AT_SECURE` (setuid, setgid, file capabilities):
    /// `BULKMEM_*`, `HOME` and `XDG_CACHE_HOME` belong to the user who
    /// started it, so only the root-owned system-wide profile could be
    /// read, and there is none usable: the built-in rules apply.
    Secure,
    /// No profile at the path: `bulkmem tune` writes one.
    Missing {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// Neither `BULKMEM_PROFILE`, `XDG_CACHE_HOME` nor `HOME` gives a path,
    /// and there is no usable system-wide profile.
    NoPath,
    /// The file could not be read or parsed (corrupt, truncated, garbage).
    Invalid {
        /// The profile file.
        path: PathBuf,
        /// What is wrong with it, in words.
        why: String,
    },
    /// Measured on another CPU (or with other features disabled).
    Foreign {
        /// The profile file.
        path: PathBuf,
        /// The first difference from this CPU, or the strategy it names
        /// that this CPU cannot run.
        why: String,
    },
    /// Written by another bulkmem version or profile format.
    Outdated {
        /// The profile file.
        path: PathBuf,
        /// Which version or format wrote it, and which this one reads.
        why: String,
    },
}

impl ProfileStatus {
    /// Whether a profile is in use ([`ProfileStatus::Tuned`]).
    pub fn is_tuned(&self) -> bool {
        matches!(self, ProfileStatus::Tuned { .. })
    }

    /// The profile file concerned, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ProfileStatus::Tuned { path, .. }
            | ProfileStatus::Missing { path }
            | ProfileStatus::Invalid { path, .. }
            | ProfileStatus::Foreign { path, .. }
            | ProfileStatus::Outdated { path, .. } => Some(path),
            ProfileStatus::Off | ProfileStatus::Secure | ProfileStatus::NoPath => None,
        }
    }
}

impl fmt::Display for ProfileStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rules = "using the built-in rules";
        match self {
            ProfileStatus::Tuned { path, age } => {
                write!(
                    f,
                    "tuned: {} (measured {} ago)",
                    path.display(),
                    fmt_age(*age)
                )
            }
            ProfileStatus::Off => write!(f, "BULKMEM_PROFILE=off: {rules}"),
            ProfileStatus::Secure => write!(
                f,
                "AT_SECURE process (setuid/setgid): BULKMEM_* and user profiles ignored; {rules}"
            ),
            ProfileStatus::Missing { path } => write!(
                f,
                "no profile at {}: {rules} (`bulkmem tune` measures one)",
                path.display()
            ),
            ProfileStatus::NoPath => write!(
                f,
                "no profile path (set BULKMEM_PROFILE, XDG_CACHE_HOME or HOME) and no system-wide profile: {rules}"
            ),
            ProfileStatus::Invalid { path, why } => {
                write!(f, "unreadable profile {}: {why}; {rules}", path.display())
            }
            ProfileStatus::Foreign { path, why } => write!(
                f,
                "profile {} is for another CPU ({why}); {rules}",
                path.display()
            ),
            ProfileStatus::Outdated { path, why } => write!(
                f,
                "profile {} is outdated ({why}; re-run `bulkmem tune`); {rules}",
                path.display()
            ),
        }
    }
}

fn fmt_age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h", s / 3600),
        _ => format!("{} days", s / 86400),
    }
}

impl Identity {
    /// Where `bulkmem tune` writes, and `auto` looks for, this CPU's
    /// profile under the environment's `XDG_CACHE_HOME`/`HOME` (ignoring
    /// `BULKMEM_PROFILE`); `None` under AT_SECURE or with neither set.
    pub fn profile_path(&self) -> Option<PathBuf> {
        if environment::is_secure() {
            return None;
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            })?;
        Some(
            base.join("bulkmem")
                .join(format!("profile-{}.toml", self.key())),
        )
    }

    /// Where `bulkmem tune --system` writes, and `auto` looks after the
    /// user's, the profile of this CPU that every user and daemon of the
    /// machine shares: under [`SYSTEM_PROFILE_DIR`].
    pub fn system_profile_path(&self) -> PathBuf {
        Path::new(SYSTEM_PROFILE_DIR).join(format!("profile-{}.toml", self.key()))
    }
}

/// The directory of the system-wide profiles (`bulkmem tune --system`).
pub const SYSTEM_PROFILE_DIR: &str = "/var/cache/bulkmem";

impl Profile {
    /// Reads the profile at `path` and checks it against the CPU `id` and
    /// this bulkmem: the profile, or why not.
    ///
    /// Only a regular file of at most 1 MiB is read, opened without
    /// blocking (a FIFO, a device or `/dev/zero` is refused after one
    /// `fstat`, before any read), and no message quotes its text: the
    /// status names the file, the line or cell, and what is wrong.
    pub fn load(path: &Path, id: &Identity) -> Result<Profile, ProfileStatus> {
        load_checked(path, id, Trust::Anyone)
    }

    /// The system-wide profile at `path`: as [`Profile::load`], and only if
    /// root owns it and neither its group nor others may write it (any
    /// user could otherwise choose every process's kernels, setuid ones
    /// included).
    pub fn load_system(path: &Path, id: &Identity) -> Result<Profile, ProfileStatus> {
        load_checked(path, id, Trust::RootOnly)
    }
}

/// Who may own a profile file that is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Trust {
    /// The user's own path: anyone.
    Anyone,
    /// The system path: root, not group- or world-writable.
    RootOnly,
}

fn load_checked(path: &Path, id: &Identity, trust: Trust) -> Result<Profile, ProfileStatus> {
    let path_buf = || path.to_path_buf();
    let invalid = |why: String| ProfileStatus::Invalid {
        path: path_buf(),
        why,
    };
    let text = match read_small_regular(path, trust) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| invalid("not UTF-8 text".into()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProfileStatus::Missing { path: path_buf() })
        }
        Err(e) => return Err(invalid(e.to_string())),
    };
    let p = Profile::parse(&text).map_err(|why| {
        if why.starts_with("format ") {
            ProfileStatus::Outdated {
                path: path_buf(),
                why,
            }
        } else {
            ProfileStatus::Invalid {
                path: path_buf(),
                why,
            }
        }
    })?;
    let version = env!("CARGO_PKG_VERSION");
    if p.bulkmem != version {
        return Err(ProfileStatus::Outdated {
            path: path_buf(),
            why: format!("measured by bulkmem {}, this is {version}", p.bulkmem),
        });
    }
    debug_assert_eq!(p.format, FORMAT);
    if let Some(d) = p.cpu.difference(id) {
        return Err(ProfileStatus::Foreign {
            path: path_buf(),
            why: format!("profile vs this CPU, {d}"),
        });
    }
    p.check_runs_on(cpu::features())
        .map_err(|why| ProfileStatus::Foreign {
            path: path_buf(),
            why,
        })?;
    Ok(p)
}

/// The largest profile read: `bulkmem tune` writes about 20 KiB.
pub const MAX_BYTES: u64 = 1 << 20;

/// Reads `path` if it is a regular file of at most [`MAX_BYTES`]. The open
/// does not block (`O_NONBLOCK`: a FIFO with no writer would hang every
/// process at its first copy), the type and size come from `fstat` on the
/// opened file (so a symlink is judged by what it points to, with no race
/// between check and read), and the read stops past the cap whatever the
/// file claims.
fn read_small_regular(path: &Path, trust: Trust) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device or directory is never read)",
        ));
    }
    if trust == Trust::RootOnly {
        use std::os::unix::fs::MetadataExt;
        if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
            return Err(Error::new(
                ErrorKind::PermissionDenied,
                "a system-wide profile must be owned by root and writable by root only",
            ));
        }
    }
    let too_big = || {
        Error::new(
            ErrorKind::InvalidData,
            format!("larger than {} KiB", MAX_BYTES >> 10),
        )
    };
    if meta.len() > MAX_BYTES {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(too_big());
    }
    Ok(bytes)
}

/// What `BULKMEM_PROFILE`'s value means: `off` (also `OFF`, `Off`, `0`,
/// `none`: case is ignored) turns profiles off; empty is unset; anything
/// else is a file path.
pub fn profile_setting(v: &std::ffi::OsStr) -> Option<ProfileSetting> {
    if v.is_empty() {
        return None;
    }
    let off = v
        .to_str()
        .map(|s| ["off", "0", "none"].contains(&s.trim().to_ascii_lowercase().as_str()))
        .unwrap_or(false);
    Some(if off {
        ProfileSetting::Off
    } else {
        ProfileSetting::File(PathBuf::from(v))
    })
}

/// A `BULKMEM_PROFILE` value, read by [`profile_setting`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProfileSetting {
    /// Use no profile.
    Off,
    /// Read (and `bulkmem tune` writes) this file.
    File(PathBuf),
}

fn loaded() -> &'static (Option<Profile>, ProfileStatus) {
    static PROFILE: OnceLock<(Option<Profile>, ProfileStatus)> = OnceLock::new();
    PROFILE.get_or_init(|| {
        let id = Identity::this();
        let secure = environment::is_secure();
        let setting = if secure {
            None
        } else {
            environment::var_os("BULKMEM_PROFILE").and_then(|v| profile_setting(&v))
        };
        let user = if secure { None } else { id.profile_path() };
        resolve(secure, setting, user, &id.system_profile_path(), &id)
    })
}

/// Which profile a process follows: `BULKMEM_PROFILE`'s, else the user's,
/// else (none there, or no `HOME`) the system's; a user's profile that is
/// wrong is reported, not passed over. A `secure` process reads only the
/// root-owned system profile: its environment and home directory belong to
/// the user who started it.
fn resolve(
    secure: bool,
    setting: Option<ProfileSetting>,
    user: Option<PathBuf>,
    system: &Path,
    id: &Identity,
) -> (Option<Profile>, ProfileStatus) {
    let from_system = |otherwise: ProfileStatus| match Profile::load_system(system, id) {
        Ok(p) => tuned(p, system.to_path_buf()),
        Err(_) => (None, otherwise),
    };
    if secure {
        return from_system(ProfileStatus::Secure);
    }
    match setting {
        Some(ProfileSetting::Off) => return (None, ProfileStatus::Off),
        Some(ProfileSetting::File(p)) => return load_at(p, id),
        None => {}
    }
    match user.map(|p| load_at(p, id)) {
        Some((None, ProfileStatus::Missing { path })) => {
            from_system(ProfileStatus::Missing { path })
        }
        Some(done) => done,
        None => from_system(ProfileStatus::NoPath),
    }
}

fn load_at(path: PathBuf, id: &Identity) -> (Option<Profile>, ProfileStatus) {
    match Profile::load(&path, id) {
        Ok(p) => tuned(p, path),
        Err(status) => (None, status),
    }
}

fn tuned(p: Profile, path: PathBuf) -> (Option<Profile>, ProfileStatus) {
    if let Some(shape) = p.nt_copy_shape {
        crate::kernels::adopt_nt_copy_shape(shape);
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let age = Duration::from_secs(now.saturating_sub(p.created));
    (Some(p), ProfileStatus::Tuned { path, age })
}

/// This process's profile, loaded on first use; `None` means the built-in
/// rules (see [`profile_status`]).
pub fn profile() -> Option<&'static Profile> {
    loaded().0.as_ref()
}

/// Whether this process follows a profile, and if not, why.
pub fn profile_status() -> &'static ProfileStatus {
    &loaded().1
}

#[cfg(test)]
mod tests;
