//! What can be said of a program before it runs: whether the dynamic
//! loader will load the preload into it at all.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why the preload cannot enter `prog`, when that is known before it
/// runs: a statically linked executable has no dynamic loader to read
/// `LD_PRELOAD`; a set-user-ID or set-group-ID one runs with it ignored.
pub fn why_not_preloaded(prog: &OsStr) -> Option<String> {
    let path = resolve(prog)?;
    let meta = std::fs::metadata(&path).ok()?;
    if meta.permissions().mode() & 0o6000 != 0 {
        return Some(format!(
            "{} is set-user-ID or set-group-ID: the loader ignores LD_PRELOAD there",
            path.display()
        ));
    }
    let mut head = vec![0u8; 4096];
    let n = std::fs::File::open(&path).ok()?.read(&mut head).ok()?;
    head.truncate(n);
    if head.starts_with(b"#!") {
        // A script: what counts is its interpreter.
        let line = head[2..].split(|&b| b == b'\n').next()?;
        let interp = line
            .split(|b| b.is_ascii_whitespace())
            .find(|w| !w.is_empty())?;
        return why_not_preloaded(OsStr::from_bytes(interp))
            .map(|w| format!("{} runs under {w}", path.display()));
    }
    match has_interpreter(&head) {
        Some(false) => Some(format!(
            "{} is statically linked: no dynamic loader reads LD_PRELOAD in it",
            path.display()
        )),
        _ => None,
    }
}

/// `prog` as execvp finds it: a path if it has a slash, else the first
/// executable file of that name on PATH.
fn resolve(prog: &OsStr) -> Option<PathBuf> {
    if prog.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(prog));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(prog))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether the 64-bit little-endian ELF image starting with `head` names a
/// program interpreter (`PT_INTERP`: the dynamic loader); `None` when
/// `head` is no such ELF or its program headers lie beyond it.
fn has_interpreter(head: &[u8]) -> Option<bool> {
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(head.get(o..o + 2)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(head.get(o..o + 8)?.try_into().ok()?));
    let phoff = usize::try_from(u64_at(32)?).ok()?;
    let (phentsize, phnum) = (u16_at(54)? as usize, u16_at(56)? as usize);
    const PT_INTERP: u32 = 3;
    let mut found = false;
    for i in 0..phnum {
        let at = phoff.checked_add(i.checked_mul(phentsize)?)?;
        let ty = u32::from_le_bytes(head.get(at..at + 4)?.try_into().ok()?);
        found |= ty == PT_INTERP;
    }
    Some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_programs_pass_and_static_ones_are_named() {
        // This test binary is dynamically linked (cargo's default target).
        let me = std::env::current_exe().unwrap();
        assert_eq!(why_not_preloaded(me.as_os_str()), None);
        // A program found on PATH, as execvp finds it.
        assert_eq!(why_not_preloaded(OsStr::new("sh")), None);
        // The same image with its PT_INTERP header renamed (PT_NULL).
        let mut img = std::fs::read(&me).unwrap();
        let phoff = u64::from_le_bytes(img[32..40].try_into().unwrap()) as usize;
        let (size, n) = (
            u16::from_le_bytes(img[54..56].try_into().unwrap()) as usize,
            u16::from_le_bytes(img[56..58].try_into().unwrap()) as usize,
        );
        for i in 0..n {
            let at = phoff + i * size;
            if img[at..at + 4] == 3u32.to_le_bytes() {
                img[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
            }
        }
        let dir = std::env::temp_dir().join(format!("bulkmem-prog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stat = dir.join("static-prog");
        std::fs::write(&stat, &img[..4096]).unwrap();
        std::fs::set_permissions(&stat, std::fs::Permissions::from_mode(0o755)).unwrap();
        let why = why_not_preloaded(stat.as_os_str()).expect("named");
        assert!(why.contains("statically linked"), "{why}");
        // A script run by it says so too.
        let script = dir.join("script");
        std::fs::write(&script, format!("#!{} -x\n", stat.display())).unwrap();
        let why = why_not_preloaded(script.as_os_str()).expect("named");
        assert!(
            why.contains("runs under") && why.contains("static"),
            "{why}"
        );
        // Set-user-ID.
        std::fs::set_permissions(&stat, std::fs::Permissions::from_mode(0o4755)).unwrap();
        assert!(why_not_preloaded(stat.as_os_str())
            .unwrap()
            .contains("set-user-ID"));
        let _ = std::fs::remove_dir_all(&dir);
        // Not an ELF, not found: nothing known.
        assert_eq!(has_interpreter(b"hello"), None);
        assert_eq!(why_not_preloaded(OsStr::new("no-such-program-here")), None);
    }
}
