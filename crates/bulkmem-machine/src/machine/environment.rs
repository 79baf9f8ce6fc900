//! The process environment as bulkmem may use it, in a library loaded into
//! programs it does not control (through the C ABI and the preload):
//!
//! * `BULKMEM_*` variables are ignored when the kernel marked the process
//!   `AT_SECURE` (setuid or setgid, file capabilities, an LSM transition),
//!   as glibc ignores its tunables there: the user who started such a
//!   program must not steer it. The built-in rules apply instead.
//! * Warnings are written best-effort with one `write(2)` to stderr: a
//!   closed, full or broken stderr loses the warning and nothing else
//!   (`eprintln!` would panic, and a panic inside memcpy aborts the host).

/// Whether the kernel started this process `AT_SECURE`.
pub fn is_secure() -> bool {
    // SAFETY: getauxval reads the auxiliary vector the kernel passed; it
    // has no preconditions and returns 0 for an absent entry.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// The value of `name` (a `BULKMEM_*` variable), or `None` when it is
/// unset, not UTF-8, or the process is `AT_SECURE`.
pub fn var(name: &str) -> Option<String> {
    if is_secure() {
        return None;
    }
    std::env::var(name).ok()
}

/// As [`var`], keeping non-UTF-8 values (paths).
pub fn var_os(name: &str) -> Option<std::ffi::OsString> {
    if is_secure() {
        return None;
    }
    std::env::var_os(name)
}

/// Writes `bulkmem: warning: {msg}` and a newline on stderr in one write,
/// ignoring every failure (closed, full, a broken pipe with SIGPIPE
/// ignored).
pub fn warn(msg: &str) {
    let line = format!("bulkmem: warning: {msg}\n");
    // SAFETY: writes from a valid buffer of `line.len()` bytes to fd 2; a
    // failed or short write is the best effort this promises.
    let _ = unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ordinary_test_process_is_not_secure_and_sees_its_variables() {
        // Test binaries are not setuid; the AT_SECURE case runs out of
        // process (tests/secure.rs).
        assert!(!is_secure());
        std::env::set_var("BULKMEM_ENVIRONMENT_TEST", "x");
        assert_eq!(var("BULKMEM_ENVIRONMENT_TEST").as_deref(), Some("x"));
    }
}
