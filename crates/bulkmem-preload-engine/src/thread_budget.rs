//! Whether a call may start helper threads at all, by what the program
//! keeps for itself: threads it counts, address space it counts, the CPU
//! time of a real-time thread.
//!
//! * **A thread budget**: `RLIMIT_NPROC` of [`TIGHT`] or less, or a cgroup
//!   `pids.max` of [`TIGHT`] or less on the way from the process's cgroup
//!   to the root (v2, and v1's pids controller): the program's own
//!   `pthread_create` must not meet ours.
//! * **An address-space or data limit** (`RLIMIT_AS`, `RLIMIT_DATA`): each
//!   helper's stack is a mapping the program's `malloc` may need the room
//!   of.
//! * **A real-time caller** (`SCHED_FIFO`, `SCHED_RR`, `SCHED_DEADLINE`):
//!   helpers would inherit its priority and hold other CPUs from the
//!   program's threads of the same priority for the length of the copy.
//!
//! The limits and policy are read at every call that would start helpers
//! (a few system calls beside a copy of 16 MiB or more); the cgroups once
//! ([`init`]), by the helpers' set-up at the first call that may start
//! them.

use std::sync::atomic::{AtomicBool, Ordering};

/// A budget of this many threads or fewer is the program's to keep
/// (distributions default `RLIMIT_NPROC` to half of `threads-max`: 96365 on
/// a 24 GiB VM; systemd's default `TasksMax` is 15% of the kernel's
/// `pid_max`).
pub const TIGHT: u64 = 4096;

/// A cgroup on the process's way to the root limits it to [`TIGHT`] tasks
/// or fewer.
static PIDS_TIGHT: AtomicBool = AtomicBool::new(false);

/// Reads the process's cgroups' `pids.max` (the helpers' one-time set-up).
pub fn init() {
    let Ok(cgroups) = std::fs::read_to_string("/proc/self/cgroup") else {
        return;
    };
    let tight = cgroups
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            match controllers {
                // v2, pure (/sys/fs/cgroup) or beside v1 (unified).
                "" => Some(vec![
                    format!("/sys/fs/cgroup{path}"),
                    format!("/sys/fs/cgroup/unified{path}"),
                ]),
                c if c.split(',').any(|c| c == "pids") => {
                    Some(vec![format!("/sys/fs/cgroup/pids{path}")])
                }
                _ => None,
            }
        })
        .flatten()
        .any(|dir| smallest_pids_max(&dir).is_some_and(|m| m <= TIGHT));
    PIDS_TIGHT.store(tight, Ordering::Relaxed);
}

/// The smallest `pids.max` from `dir` up to its hierarchy's root (`max`
/// and missing files are no limit).
fn smallest_pids_max(dir: &str) -> Option<u64> {
    let mut d = std::path::Path::new(dir);
    let mut smallest: Option<u64> = None;
    loop {
        if let Some(m) = std::fs::read_to_string(d.join("pids.max"))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        {
            smallest = Some(smallest.map_or(m, |s| s.min(m)));
        }
        match d.parent() {
            Some(p) if p.starts_with("/sys/fs/cgroup") && p != d => d = p,
            _ => return smallest,
        }
    }
}

fn limit(resource: libc::__rlimit_resource_t) -> libc::rlim_t {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct.
    if unsafe { libc::getrlimit(resource, &mut r) } != 0 {
        return 0;
    }
    r.rlim_cur
}

/// Whether the program keeps a budget helpers would take from, or runs
/// this thread in real time: then the call copies on its own thread.
pub fn programs_own() -> bool {
    if PIDS_TIGHT.load(Ordering::Relaxed) || limit(libc::RLIMIT_NPROC) <= TIGHT {
        return true;
    }
    if limit(libc::RLIMIT_AS) != libc::RLIM_INFINITY
        || limit(libc::RLIMIT_DATA) != libc::RLIM_INFINITY
    {
        return true;
    }
    // SAFETY: no memory arguments.
    let policy = unsafe { libc::sched_getscheduler(0) } & !libc::SCHED_RESET_ON_FORK;
    const SCHED_DEADLINE: libc::c_int = 6;
    matches!(policy, libc::SCHED_FIFO | libc::SCHED_RR | SCHED_DEADLINE) || policy < 0
}
