//! Migration through `move_pages(2)`: the kernel unmaps, copies and remaps
//! each folio; this side chooses the batches, asks where pages are first
//! (so "already there" is told apart from "moved"), retries transient
//! failures and reports every page.

use crate::error::Error;

use super::sys::{self, MPOL_MF_MOVE, MPOL_MF_MOVE_ALL};
use super::Nodes;

const PAGE: usize = 4096;

/// Pages per `move_pages` call. The kernel walks the array page by page
/// and hands the isolated folios to `migrate_pages`, which (6.2+) copies
/// them in batches of up to 512; smaller user batches only add system
/// calls, far larger ones hold more folios isolated from the LRU at once.
/// Measured in the two-node guest (TCG, 64 MiB of 4 KiB pages): 16 pages
/// per call 0.250 s, 64: 0.233 s, 512, 4096 and 16384: 0.226-0.227 s.
pub(crate) const DEFAULT_BATCH: usize = 512;

/// What happened to one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageStatus {
    /// Now on the target node, and was not before.
    Moved,
    /// Was on the target node already.
    AlreadyThere,
    /// No page there (never touched, or swapped out): nothing to move.
    NotPresent,
    /// Not moved after the retries; the kernel's errno (EBUSY for a page
    /// pinned or locked, EFAULT outside any mapping, EACCES for a page
    /// shared with another process without MPOL_MF_MOVE_ALL, ENOMEM).
    Failed(i32),
}

/// Options of [`migrate`].
///
/// Start from [`MigrateOptions::default`] (the caller's pages,
/// 512 pages per call, 8 retries, MPOL_MF_MOVE_ALL asked for)
/// and set what you need with the methods of the same names:
/// `MigrateOptions::default().pid(pid)`.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct MigrateOptions {
    /// Process whose pages to move; 0 is the caller.
    pub pid: i32,
    /// Pages per system call (default 512, as the kernel batches them).
    pub batch_pages: usize,
    /// Extra attempts for pages the kernel reports busy (EBUSY, EAGAIN).
    pub retries: usize,
    /// Also move pages shared with other processes (MPOL_MF_MOVE_ALL),
    /// when the caller has CAP_SYS_NICE; without it the flag is dropped
    /// and the report says so.
    pub move_all: bool,
}

impl MigrateOptions {
    /// Moves the pages of process `pid` (0: the caller).
    #[must_use]
    pub fn pid(mut self, pid: i32) -> MigrateOptions {
        self.pid = pid;
        self
    }

    /// Asks about and moves `n` pages per system call; [`migrate`] refuses
    /// 0 with [`Error::OutOfRange`].
    #[must_use]
    pub fn batch_pages(mut self, n: usize) -> MigrateOptions {
        self.batch_pages = n;
        self
    }

    /// Retries busy pages `n` more times.
    #[must_use]
    pub fn retries(mut self, n: usize) -> MigrateOptions {
        self.retries = n;
        self
    }

    /// Asks for MPOL_MF_MOVE_ALL (see [`move_all`](MigrateOptions::move_all)).
    #[must_use]
    pub fn move_all(mut self, on: bool) -> MigrateOptions {
        self.move_all = on;
        self
    }
}

impl Default for MigrateOptions {
    fn default() -> Self {
        MigrateOptions {
            pid: 0,
            batch_pages: DEFAULT_BATCH,
            retries: 8,
            move_all: true,
        }
    }
}

/// Per-page outcome of [`migrate`], and totals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrateReport {
    /// The target node.
    pub to: usize,
    /// One entry per 4 KiB page of the range, in order.
    pub status: Vec<PageStatus>,
    /// Pages now on `to` that were elsewhere before ([`PageStatus::Moved`]).
    pub moved: usize,
    /// Pages that were on `to` already ([`PageStatus::AlreadyThere`]).
    pub already: usize,
    /// Pages with nothing to move ([`PageStatus::NotPresent`]).
    pub not_present: usize,
    /// Address and errno of every page that failed.
    pub failed: Vec<(usize, i32)>,
    /// `move_pages` calls made, queries included.
    pub syscalls: usize,
    /// Rounds of retrying busy pages (each one call for all of a batch's
    /// busy pages).
    pub retries: usize,
    /// Whether MPOL_MF_MOVE_ALL was in effect.
    pub move_all: bool,
}

impl MigrateReport {
    /// Every page that exists is on the target node.
    pub fn is_complete(&self) -> bool {
        self.failed.is_empty()
    }
}

pub(super) fn check_range(addr: usize, len: usize) -> Result<usize, Error> {
    let bad = |why: &str| Error::BadRange {
        addr,
        len,
        why: why.to_string(),
    };
    if len == 0 {
        return Err(bad("the range is empty"));
    }
    if !addr.is_multiple_of(PAGE) || !len.is_multiple_of(PAGE) {
        return Err(bad("address and length must be multiples of 4 KiB"));
    }
    let Some(end) = addr.checked_add(len) else {
        return Err(bad("the range wraps around the address space"));
    };
    if end > user_top() {
        return Err(bad(&format!(
            "the range ends beyond the highest user-space address ({:#x})",
            user_top()
        )));
    }
    Ok(len / PAGE)
}

/// One past the highest address user space can have: ranges beyond it
/// cannot be mapped, and would only size a per-page allocation that
/// aborts.
fn user_top() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        // 57-bit addresses (5-level paging) only where the CPU has LA57.
        static TOP: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *TOP.get_or_init(|| {
            let la57 = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|t| {
                t.lines()
                    .find(|l| l.starts_with("flags"))
                    .is_some_and(|l| l.split_whitespace().any(|f| f == "la57"))
            });
            if la57 {
                1 << 56
            } else {
                1 << 47
            }
        })
    }
    #[cfg(target_arch = "aarch64")]
    {
        1 << 52
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        usize::MAX
    }
}

/// `n` copies of `v`, or [`Error::Syscall`] with `ENOMEM` where the memory
/// cannot be had (instead of aborting the process).
fn filled<T: Clone>(n: usize, v: T) -> Result<Vec<T>, Error> {
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| no_memory())?;
    out.resize(n, v);
    Ok(out)
}

fn no_memory() -> Error {
    Error::Syscall {
        call: "allocating one status per page",
        errno: libc::ENOMEM,
    }
}

/// The node of each 4 KiB page of `[addr, addr + len)` in process `pid`
/// (0: this one): a node id, or a negative errno as the kernel reports it
/// (`-ENOENT`: no page there; `-EFAULT`: not mapped, or on older kernels
/// such as Debian's 6.1 also an unpopulated anonymous page). On some
/// kernels pages that automatic NUMA balancing has just marked for a
/// hinting fault also read as `-ENOENT` and are skipped by `migrate`.
pub fn node_of_pages(pid: i32, addr: usize, len: usize) -> Result<Vec<i32>, Error> {
    let pages = check_range(addr, len)?;
    let mut out = filled(pages, 0i32)?;
    for (k, chunk) in out.chunks_mut(DEFAULT_BATCH).enumerate() {
        let first = addr + k * DEFAULT_BATCH * PAGE;
        let addrs: Vec<*mut libc::c_void> = (0..chunk.len())
            .map(|i| (first + i * PAGE) as *mut libc::c_void)
            .collect();
        // SAFETY: the arrays have equal lengths; with no nodes the kernel
        // only reports where the pages are.
        unsafe { sys::move_pages(pid, &addrs, None, chunk, 0) }.map_err(|e| Error::Syscall {
            call: "move_pages (query)",
            errno: e.raw_os_error().unwrap_or(0),
        })?;
    }
    Ok(out)
}

/// Moves the pages of `[addr, addr + len)` (page-aligned) of process
/// `opts.pid` to node `to` with `move_pages(2)`. Pages already there are
/// left alone; busy pages are retried; every page gets a status. Errors
/// (bad node or range, no such process, no permission) come before any
/// page moved.
///
/// Needs a machine with a NUMA node 1, hence `no_run`:
///
/// ```no_run
/// use bulkmem::mapping::Mapping;
/// use bulkmem::numa::{self, MigrateOptions};
///
/// let mut buf = Mapping::anonymous(64 << 20)?;
/// buf.as_mut_slice().fill(1); // touched pages: something to move
/// let r = numa::migrate(buf.as_ptr() as usize, buf.len(), 1, MigrateOptions::default())?;
/// println!("{} pages moved, {} were on node 1 already", r.moved, r.already);
/// for (addr, errno) in &r.failed {
///     eprintln!("page {addr:#x} stayed: errno {errno}");
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn migrate(
    addr: usize,
    len: usize,
    to: usize,
    opts: MigrateOptions,
) -> Result<MigrateReport, Error> {
    let pages = check_range(addr, len)?;
    super::target(&Nodes::detect(), to)?;
    if opts.batch_pages == 0 {
        return Err(Error::OutOfRange {
            what: "migrate batch_pages",
            value: 0,
            min: 1,
            max: usize::MAX,
        });
    }
    let mut r = MigrateReport {
        to,
        status: filled(pages, PageStatus::NotPresent)?,
        moved: 0,
        already: 0,
        not_present: 0,
        failed: Vec::new(),
        syscalls: 0,
        retries: 0,
        move_all: opts.move_all,
    };
    let syscall_err = |call, e: std::io::Error| Error::Syscall {
        call,
        errno: e.raw_os_error().unwrap_or(0),
    };
    let mut flags = MPOL_MF_MOVE | if opts.move_all { MPOL_MF_MOVE_ALL } else { 0 };
    for start in (0..pages).step_by(opts.batch_pages) {
        let n = opts.batch_pages.min(pages - start);
        let addrs: Vec<*mut libc::c_void> = (start..start + n)
            .map(|i| (addr + i * PAGE) as *mut libc::c_void)
            .collect();
        let mut now = vec![0i32; n];
        // SAFETY: equal-length arrays; a query moves nothing.
        unsafe { sys::move_pages(opts.pid, &addrs, None, &mut now, 0) }
            .map_err(|e| syscall_err("move_pages (query)", e))?;
        r.syscalls += 1;
        let mut todo: Vec<usize> = Vec::new();
        for (i, &s) in now.iter().enumerate() {
            r.status[start + i] = match s {
                s if s == to as i32 => PageStatus::AlreadyThere,
                s if s >= 0 => {
                    todo.push(i);
                    continue;
                }
                s if s == -libc::ENOENT => PageStatus::NotPresent,
                s => PageStatus::Failed(-s),
            };
        }
        let mut attempt = 0;
        while !todo.is_empty() {
            let batch: Vec<*mut libc::c_void> = todo.iter().map(|&i| addrs[i]).collect();
            let nodes = vec![to as i32; todo.len()];
            let mut st = vec![0i32; todo.len()];
            // SAFETY: equal-length arrays; moving pages changes where
            // their memory lives, never their contents or addresses.
            let rc = unsafe { sys::move_pages(opts.pid, &batch, Some(&nodes), &mut st, flags) };
            r.syscalls += 1;
            match rc {
                Err(e)
                    if e.raw_os_error() == Some(libc::EPERM) && flags & MPOL_MF_MOVE_ALL != 0 =>
                {
                    // MOVE_ALL needs CAP_SYS_NICE: carry on without it.
                    flags &= !MPOL_MF_MOVE_ALL;
                    r.move_all = false;
                    continue;
                }
                Err(e) => return Err(syscall_err("move_pages", e)),
                Ok(_) => {}
            }
            // The move's status is not to be trusted for every page: after
            // a page that failed, Debian's 6.1 reports later pages of the
            // batch as not moved although they were. Ask again.
            let mut now = vec![0i32; todo.len()];
            // SAFETY: equal-length arrays; a query moves nothing.
            unsafe { sys::move_pages(opts.pid, &batch, None, &mut now, 0) }
                .map_err(|e| syscall_err("move_pages (query)", e))?;
            r.syscalls += 1;
            let mut again = Vec::new();
            for (k, &i) in todo.iter().enumerate() {
                let (q, s) = (now[k], st[k]);
                let transient = s >= 0 || s == -libc::EBUSY || s == -libc::EAGAIN;
                r.status[start + i] = if q == to as i32 {
                    PageStatus::Moved
                } else if q == -libc::ENOENT {
                    PageStatus::NotPresent
                } else if q < 0 {
                    PageStatus::Failed(-q)
                } else if !transient {
                    PageStatus::Failed(-s)
                } else if attempt < opts.retries {
                    again.push(i);
                    continue;
                } else if s < 0 {
                    PageStatus::Failed(-s)
                } else {
                    PageStatus::Failed(libc::EBUSY)
                };
            }
            if !again.is_empty() {
                attempt += 1;
                r.retries += 1;
                std::thread::yield_now();
            }
            todo = again;
        }
    }
    reclassify_efault(&mut r.status, opts.pid, addr);
    for (i, s) in r.status.iter().enumerate() {
        match s {
            PageStatus::Moved => r.moved += 1,
            PageStatus::AlreadyThere => r.already += 1,
            PageStatus::NotPresent => r.not_present += 1,
            PageStatus::Failed(e) => {
                r.failed.try_reserve(1).map_err(|_| no_memory())?;
                r.failed.push((addr + i * PAGE, *e))
            }
        }
    }
    Ok(r)
}

/// Older kernels (Debian's 6.1) report an unpopulated page of an
/// anonymous mapping as EFAULT (newer ones say ENOENT); EFAULT should mean
/// "not mapped". Pages inside a mapping of the process are not present, not
/// failed.
fn reclassify_efault(status: &mut [PageStatus], pid: i32, addr: usize) {
    if !status.contains(&PageStatus::Failed(libc::EFAULT)) {
        return;
    }
    let path = if pid == 0 {
        "/proc/self/maps".to_string()
    } else {
        format!("/proc/{pid}/maps")
    };
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let vmas = super::maps::mapped(&text);
    for (i, s) in status.iter_mut().enumerate() {
        let a = addr + i * PAGE;
        if *s == PageStatus::Failed(libc::EFAULT) && vmas.iter().any(|&(lo, hi)| lo <= a && a < hi)
        {
            *s = PageStatus::NotPresent;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked_before_anything_happens() {
        for (a, l, why) in [
            (0x1000usize, 0usize, "empty"),
            (0x1001, 0x1000, "multiples"),
            (0x1000, 0x1001, "multiples"),
            (usize::MAX - 0xfff, 0x2000, "wraps"),
        ] {
            let e = check_range(a, l).unwrap_err();
            assert!(e.to_string().contains(why), "{e}");
        }
        assert_eq!(check_range(0x2000, 0x3000).unwrap(), 3);
    }
}
