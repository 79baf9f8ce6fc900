//! Compaction tests run one per process: sessions take SIGBUS, fork,
//! install handlers, lock memory and count the process's mappings, which
//! must not meet another test's threads.

use std::process::Command;

use bulkmem::compact;

use super::skip::skip;

const CHILD: &str = "BULKMEM_COMPACT_CHILD";

/// In the test process: runs test `name` alone in a child and checks it
/// passed, then returns false. In that child: returns true (run the body).
/// A host without userfaultfd's SIGBUS mode skips, visibly.
pub fn alone(name: &str) -> bool {
    if std::env::var(CHILD).as_deref() == Ok(name) {
        // A fault served wrongly loops for ever: fail instead.
        // SAFETY: alarm(2) has no memory effects.
        unsafe { libc::alarm(120) };
        return true;
    }
    if let Err(e) = compact::support() {
        skip(&format!("concurrent compaction: {e}"));
        return false;
    }
    let o = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && out.contains("1 passed"),
        "{name} in a child ({}): {out}",
        o.status
    );
    false
}
