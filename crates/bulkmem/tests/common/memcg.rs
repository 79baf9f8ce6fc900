//! A memory cgroup of its own for one test process, so that a test can
//! run a process out of memory without touching the machine's: cgroup v2
//! (`memory.max`) where it is mounted with the memory controller, else v1
//! (`memory.limit_in_bytes`). Its processes are never chosen by the OOM
//! killer: at the limit, a charge outside a page fault fails with `ENOMEM`
//! and a page fault waits for room. Needs root (and, on v2,
//! `CAP_SYS_RESOURCE`); [`MemCg::create`] says why not.

use std::fs;
use std::path::{Path, PathBuf};

/// A cgroup named after the test process that made it, removed when
/// dropped (after the processes in it have exited).
pub struct MemCg {
    dir: PathBuf,
    v2: bool,
    /// The file that counts charges refused at the limit, for `open`.
    failcnt: std::ffi::CString,
}

/// The cgroup a child of process `parent` joins.
fn name(parent: u32) -> String {
    format!("bulkmem-test-{parent}")
}

/// Where memory cgroups are made, and whether it is v2.
fn root() -> Option<(PathBuf, bool)> {
    let v2 = Path::new("/sys/fs/cgroup/cgroup.subtree_control");
    if fs::read_to_string(v2).is_ok_and(|c| c.split_whitespace().any(|w| w == "memory")) {
        return Some(("/sys/fs/cgroup".into(), true));
    }
    let v1 = Path::new("/sys/fs/cgroup/memory");
    v1.join("memory.limit_in_bytes")
        .exists()
        .then(|| (v1.into(), false))
}

impl MemCg {
    /// Makes this process's cgroup for its children to join.
    pub fn create() -> Result<MemCg, String> {
        let (root, v2) = root().ok_or("no memory cgroup controller is mounted")?;
        if v2 && !has_cap_sys_resource() {
            return Err("cgroup v2 has no oom_kill_disable, and without \
                        CAP_SYS_RESOURCE a child cannot opt out of the OOM killer"
                .into());
        }
        let dir = root.join(name(std::process::id()));
        fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let cg = MemCg::at(dir, v2);
        if !v2 {
            fs::write(cg.dir.join("memory.oom_control"), "1")
                .map_err(|e| format!("cannot disable the cgroup's OOM killer: {e}"))?;
            // No swapping at the limit either (v2 sets swap.max to 0): with
            // a swap device on (another test turns one on), the kernel
            // would make room by swapping the heap out, and the limit
            // would never refuse a charge.
            fs::write(cg.dir.join("memory.swappiness"), "0")
                .map_err(|e| format!("cannot turn the cgroup's swapping off: {e}"))?;
        }
        Ok(cg)
    }

    /// In a child: moves this process into the cgroup its parent made.
    /// Memory it touches from now on counts against the cgroup.
    pub fn join_parents() -> MemCg {
        let (root, v2) = root().expect("the parent found a memory cgroup");
        let dir = root.join(name(std::os::unix::process::parent_id()));
        let me = std::process::id().to_string();
        fs::write(dir.join("cgroup.procs"), me).expect("joining the parent's cgroup");
        if v2 {
            fs::write("/proc/self/oom_score_adj", "-1000").expect("leaving the OOM killer's list");
        }
        MemCg::at(dir, v2)
    }

    fn at(dir: PathBuf, v2: bool) -> MemCg {
        let f = dir.join(if v2 {
            "memory.events"
        } else {
            "memory.failcnt"
        });
        let failcnt = std::ffi::CString::new(f.into_os_string().into_encoded_bytes()).unwrap();
        MemCg { dir, v2, failcnt }
    }

    fn file(&self, v1: &str, v2: &str) -> PathBuf {
        self.dir.join(if self.v2 { v2 } else { v1 })
    }

    /// Bytes the cgroup's processes use now.
    pub fn usage(&self) -> u64 {
        let f = self.file("memory.usage_in_bytes", "memory.current");
        fs::read_to_string(&f).unwrap().trim().parse().unwrap()
    }

    /// Caps the cgroup's memory `slack` bytes above what it uses now
    /// (and, on v2, its swap at zero). The usage may grow between the
    /// read and the write, and v1 refuses a cap below it (`EBUSY`): then
    /// again, from the new usage.
    pub fn limit_above_usage(&self, slack: u64) {
        if self.v2 {
            let _ = fs::write(self.dir.join("memory.swap.max"), "0");
        }
        let f = self.file("memory.limit_in_bytes", "memory.max");
        let mut tries = 0;
        while let Err(e) = fs::write(&f, (self.usage() + slack).to_string()) {
            tries += 1;
            assert!(tries < 100, "cannot cap the cgroup: {e}");
        }
    }

    /// Lifts the cap: the processes waiting for room go on.
    pub fn unlimit(&self) {
        let f = self.file("memory.limit_in_bytes", "memory.max");
        fs::write(&f, if self.v2 { "max" } else { "-1" }).unwrap();
    }

    /// The file counting charges the limit refused, opened now: reading
    /// it later with [`Failures::count`] opens nothing, so a thread can
    /// watch it while the cgroup has no memory to spare.
    pub fn failures(&self) -> Failures {
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::open(self.failcnt.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        assert!(fd >= 0, "cannot open the cgroup's failure count");
        Failures { fd, v2: self.v2 }
    }
}

/// An open count of refused charges.
pub struct Failures {
    fd: i32,
    v2: bool,
}

impl Failures {
    /// How many charges the limit has refused; 0 if the kernel could not
    /// say (it reads into a buffer on the stack, allocating nothing, and
    /// never panics: a panic would need memory the cgroup may not have).
    pub fn count(&self) -> u64 {
        let mut buf = [0u8; 512];
        // SAFETY: our open fd, read into our stack buffer.
        let n = unsafe { libc::pread(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        let text = std::str::from_utf8(&buf[..n.max(0) as usize]).unwrap_or("");
        let field = if self.v2 {
            text.lines()
                .find_map(|l| l.strip_prefix("max "))
                .unwrap_or("0")
        } else {
            text
        };
        field.trim().parse().unwrap_or(0)
    }
}

impl Drop for Failures {
    fn drop(&mut self) {
        // SAFETY: our fd.
        unsafe { libc::close(self.fd) };
    }
}

/// Whether this process may lower its `oom_score_adj` below zero.
fn has_cap_sys_resource() -> bool {
    const CAP_SYS_RESOURCE: u32 = 24; // linux/capability.h
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_RESOURCE) != 0)
}

impl Drop for MemCg {
    fn drop(&mut self) {
        // Only the maker removes it; a joined child leaves it be.
        if self.dir.file_name() == Some(name(std::process::id()).as_ref()) {
            let _ = fs::remove_dir(&self.dir);
        }
    }
}
