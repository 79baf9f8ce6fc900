//! What the running kernel can be trusted with.
//!
//! `UFFDIO_MOVE` (Linux 6.8) raced with the swap cache until two fixes of
//! 2025: "mm: userfaultfd: fix race of userfaultfd_move and swap cache"
//! (CVE-2025-38242, in 6.16, backported to 6.15.5 and 6.12.37), which could
//! move the wrong page when the source was swapped out, and its companion
//! (CVE-2025-21984, in 6.14, 6.13.8 and 6.12.20). A from-space can only be
//! swapped out where the machine has swap, so a session moves pages on an
//! older kernel only without swap, and copies them otherwise.

/// Whether `UFFDIO_MOVE` may take the from-space's pages on this machine
/// now: a kernel with both fixes, or no swap to be swapped out to.
pub(crate) fn moves_are_safe() -> bool {
    release().is_some_and(|(a, b, c)| fixed(a, b, c)) || !has_swap()
}

/// Whether kernel `major.minor.patch` has both swap-cache fixes.
pub(crate) fn fixed(major: u32, minor: u32, patch: u32) -> bool {
    match (major, minor) {
        (m, _) if m > 6 => true,
        (6, m) if m >= 16 => true,
        (6, 15) => patch >= 5,
        (6, 12) => patch >= 37,
        _ => false,
    }
}

/// The running kernel's version, from `uname(2)`'s release string
/// ("6.18.44-fc-v1045": 6, 18, 44).
fn release() -> Option<(u32, u32, u32)> {
    // SAFETY: a zeroed utsname is valid; uname fills it.
    let mut u: libc::utsname = unsafe { core::mem::zeroed() };
    // SAFETY: uname writes `u` only.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let bytes: Vec<u8> = u
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    parse(&String::from_utf8_lossy(&bytes))
}

/// "6.12.37-amd64" -> (6, 12, 37); a missing patch level reads as 0.
pub(crate) fn parse(release: &str) -> Option<(u32, u32, u32)> {
    let mut nums = release.split(|c: char| !c.is_ascii_digit());
    let major = nums.next()?.parse().ok()?;
    let minor = nums.next()?.parse().ok()?;
    let patch = nums.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    Some((major, minor, patch))
}

/// Whether any swap is configured (`sysinfo(2)`: one system call).
fn has_swap() -> bool {
    // SAFETY: a zeroed sysinfo is valid; sysinfo fills it.
    let mut s: libc::sysinfo = unsafe { core::mem::zeroed() };
    // SAFETY: sysinfo writes `s` only.
    let rc = unsafe { libc::sysinfo(&mut s) };
    rc != 0 || s.totalswap != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_wait_for_both_swap_cache_fixes() {
        for (r, ok) in [
            ("6.8.0-31-generic", false),
            ("6.11.11", false),
            ("6.12.36", false),
            ("6.12.37-amd64", true),
            ("6.13.8", false),
            ("6.14.3", false),
            ("6.15.4", false),
            ("6.15.5", true),
            ("6.16", true),
            ("6.18.44-fc-v1045", true),
            ("7.0.1", true),
        ] {
            let (a, b, c) = parse(r).unwrap();
            assert_eq!(fixed(a, b, c), ok, "{r}");
        }
        assert_eq!(parse("6.16"), Some((6, 16, 0)));
        assert_eq!(parse("garbage"), None);
    }
}
