//! Writing a profile file where other people's files may be: never
//! through a link, never over a special file, never half written.

use std::io::Write as _;
use std::path::Path;

use bulkmem_policy::auto::Profile;

/// Writes `p` to `path` atomically and without harm to what is there:
///
/// * a target that exists and is not a regular file (a device node, a
///   FIFO, a directory) is refused: `BULKMEM_PROFILE=/dev/null bulkmem
///   tune` as root must not replace `/dev/null`;
/// * the temporary is created beside the target with `O_CREAT | O_EXCL |
///   O_NOFOLLOW` under a name no other process chose (so a planted symlink
///   or file is never written through), synced, then renamed over the
///   target; on any failure it is removed.
pub fn write_profile(path: &Path, p: &Profile) -> std::io::Result<()> {
    check_target(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the profile path names no file"))?;
    let (tmp, mut f) = create_temporary(dir, &name.to_string_lossy())?;
    let written = f
        .write_all(p.to_toml().as_bytes())
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Checks up front that [`write_profile`] can write `path` (the target is
/// a regular file or absent, its directory exists or can be made, and a
/// temporary can be created there), so a long calibration does not end in
/// a failed write.
pub fn check_writable(path: &Path) -> std::io::Result<()> {
    check_target(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let (tmp, _) = create_temporary(dir, "check")?;
    std::fs::remove_file(tmp)
}

/// Refuses a target that exists and is not a regular file (symlinks are
/// judged by what they point to: the rename replaces the link itself).
pub fn check_target(path: &Path) -> std::io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it exists and is not a regular file (refusing to replace it)",
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// A new file in `dir` named after `base`, created exclusively.
fn create_temporary(
    dir: &Path,
    base: &str,
) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    use std::os::unix::fs::OpenOptionsExt;
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut last = None;
    for i in 0..64u32 {
        let tmp = dir.join(format!(
            ".{base}.{}.{:08x}.tmp",
            std::process::id(),
            seed.wrapping_add(i.wrapping_mul(0x9E37_79B9))
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no temporary name was free")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bulkmem_policy::auto::{Identity, FORMAT};

    fn tiny_profile() -> Profile {
        Profile {
            format: FORMAT,
            bulkmem: env!("CARGO_PKG_VERSION").into(),
            created: 1,
            quick: true,
            cpu: Identity::this(),
            cells: Vec::new(),
            nt_copy_shape: None,
        }
    }

    /// A folder of this process's own for one test's files.
    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("bulkmem-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn writing_never_goes_through_a_link_or_over_a_special_file() {
        let d = scratch("write");
        // A link at the target: the rename replaces the link, and the file
        // it pointed at keeps its contents.
        let victim = d.join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let target = d.join("profile.toml");
        let _ = std::fs::remove_file(&target);
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        write_profile(&target, &tiny_profile()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        let meta = std::fs::symlink_metadata(&target).unwrap();
        assert!(meta.is_file(), "the link was replaced by the profile");
        assert_eq!(
            Profile::parse(&std::fs::read_to_string(&target).unwrap())
                .unwrap()
                .cells
                .len(),
            0
        );
        // No temporary is left behind, and none has a predictable name.
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        // Special files are refused before anything is written.
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for special in [fifo.as_path(), Path::new("/dev/null"), d.as_path()] {
            let e = write_profile(special, &tiny_profile()).unwrap_err();
            assert!(
                e.to_string().contains("not a regular file"),
                "{special:?}: {e}"
            );
            assert!(check_writable(special).is_err());
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
