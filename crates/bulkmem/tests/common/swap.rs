//! Swap for one test: a swap file in cargo's temporary directory, turned
//! on for as long as the guard lives, so that a test can push its own
//! pages out (`MADV_PAGEOUT`) on a machine that has no swap. Needs root
//! (`CAP_SYS_ADMIN`) and a file system that takes swap files (ext4, xfs,
//! btrfs; not tmpfs or overlayfs); [`Swap::on`] says why not.

use std::ffi::CString;
use std::io::Write;
use std::path::PathBuf;

pub struct Swap {
    path: PathBuf,
    c_path: CString,
}

const PAGE: usize = 4096;

impl Swap {
    /// A swap file of `bytes`, turned on.
    pub fn on(bytes: usize) -> Result<Swap, String> {
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("bulkmem-swap-{}", std::process::id()));
        let c_path = CString::new(path.clone().into_os_string().into_encoded_bytes()).unwrap();
        // The file exists before the guard, which removes it, is made.
        std::fs::write(&path, header(bytes / PAGE))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let swap = Swap { path, c_path };
        let f = std::fs::OpenOptions::new()
            .append(true)
            .open(&swap.path)
            .map_err(|e| e.to_string())?;
        // Real blocks, not a sparse file: the kernel refuses holes.
        let zeros = vec![0u8; 1 << 20];
        let mut f = std::io::BufWriter::new(f);
        for _ in 0..(bytes - PAGE).div_ceil(zeros.len()) {
            f.write_all(&zeros).map_err(|e| e.to_string())?;
        }
        f.into_inner()
            .map_err(|e| e.to_string())?
            .sync_all()
            .map_err(|e| e.to_string())?;
        // SAFETY: a NUL-terminated path; no flags.
        if unsafe { libc::swapon(swap.c_path.as_ptr(), 0) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!("swapon {}: {e}", swap.path.display()));
        }
        Ok(swap)
    }
}

/// Page 0 of a swap area (`mkswap`'s layout, version 1): the number of
/// its last page at byte 1028 and the magic at the end of the page.
fn header(pages: usize) -> Vec<u8> {
    let mut h = vec![0u8; PAGE];
    h[1024..1028].copy_from_slice(&1u32.to_ne_bytes());
    h[1028..1032].copy_from_slice(&(pages as u32 - 1).to_ne_bytes());
    h[PAGE - 10..].copy_from_slice(b"SWAPSPACE2");
    h
}

impl Drop for Swap {
    fn drop(&mut self) {
        // SAFETY: a NUL-terminated path.
        unsafe { libc::swapoff(self.c_path.as_ptr()) };
        let _ = std::fs::remove_file(&self.path);
    }
}

/// How many of the `pages` pages from `addr` are swapped out now
/// (`/proc/self/pagemap`, bit 62).
pub fn swapped(addr: *const u8, pages: usize) -> usize {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open("/proc/self/pagemap").unwrap();
    let mut buf = vec![0u8; pages * 8];
    f.read_exact_at(&mut buf, (addr as u64 / PAGE as u64) * 8)
        .unwrap();
    buf.chunks_exact(8)
        .filter(|e| u64::from_ne_bytes((*e).try_into().unwrap()) & (1 << 62) != 0)
        .count()
}
