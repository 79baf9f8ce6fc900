//! Output files written whole or not at all: a failure part-way (a full
//! disk, a quota, a signal) leaves what the path held before, or nothing,
//! never the first half of a new document that a script then reads.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path`: into a new file beside it, renamed over it
/// once complete. A path that is not a regular file (a FIFO,
/// `/dev/stdout`, a symbolic link the caller chose) is written in place,
/// as a program writing to it would: renaming would replace the node.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => return fs::write(path, bytes),
        _ => {}
    }
    let tmp = temporary(path)?;
    let written = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        if let Ok(old) = fs::metadata(path) {
            // The document replaces the file, not its permissions.
            f.set_permissions(old.permissions())?;
        }
        f.write_all(bytes)?;
        f.flush()
    })();
    let done = written.and_then(|()| fs::rename(&tmp, path));
    if done.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    done
}

/// A name for the new file: beside `path` (the same file system, so the
/// rename is atomic), hidden, and this process's own.
fn temporary(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )
    })?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Ok(dir.join(format!(
        ".{}.{}.partial",
        name.to_string_lossy(),
        std::process::id()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bulkmem-wf-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_file_is_replaced_whole_keeping_its_mode_and_nothing_is_left_beside_it() {
        let d = scratch("whole");
        let p = d.join("out.json");
        write_file(&p, b"first").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"first");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640)).unwrap();
        write_file(&p, b"second, longer").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"second, longer");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let names: Vec<_> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["out.json"], "no partial file left");
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_failed_write_leaves_the_old_document() {
        let d = scratch("fail");
        let p = d.join("out.json");
        fs::write(&p, b"old").unwrap();
        // The partial file's name taken by a directory: the new document
        // cannot be written, and the old one must stay whole.
        fs::create_dir(temporary(&p).unwrap()).unwrap();
        assert!(write_file(&p, b"new").is_err());
        assert_eq!(fs::read(&p).unwrap(), b"old");
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn devices_and_links_are_written_in_place() {
        write_file(Path::new("/dev/null"), b"x").unwrap();
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let d = scratch("link");
        let target = d.join("target");
        let link = d.join("link");
        fs::write(&target, b"old").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_file(&link, b"new").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"new");
        let _ = fs::remove_dir_all(&d);
    }
}
