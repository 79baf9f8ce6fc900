//! Probes the build host for what some of this crate's tests need, so that
//! a test this host cannot run is compiled `#[ignore = "needs ..."]` and
//! `cargo test` lists it as ignored, with the reason, in its summary (a test
//! that returned early would report "ok" and hide that nothing ran).
//!
//! Emits `bulkmem_host = "NAME"` for each of: `avx2`, `avx512` (avx512f and
//! avx512bw, with the OS saving their state), `clzero`, `uffd-move`
//! (userfaultfd with UFFD_FEATURE_MOVE, opened as the tests open it) and
//! `uffd-poison` (that and UFFD_FEATURE_POISON). The library itself never
//! reads these cfgs: they describe the build host, not the machine the
//! library will run on.
//!
//! The limitation: the tests run where they were built (as in CI and with
//! `cargo test`). A test binary carried to another machine, or a target
//! directory reused after a kernel upgrade, keeps the first host's answers;
//! the tests check again at run time and fail, naming the capability,
//! where the build host had something this host lacks (never a silent
//! pass). `BULKMEM_DISABLE`, a run-time setting, is not read here: it would
//! rebuild the library each time it changed (see tests/common/require.rs
//! for what the tests do when it hides a feature the build host has).

const NAMES: &[&str] = &["avx2", "avx512", "clzero", "uffd-move", "uffd-poison"];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let values: Vec<String> = NAMES.iter().map(|n| format!("\"{n}\"")).collect();
    println!(
        "cargo::rustc-check-cfg=cfg(bulkmem_host, values({}))",
        values.join(", ")
    );
    // A cross build cannot ask the machine its tests will run on: every
    // such test is then ignored, saying so.
    if std::env::var("HOST").ok() != std::env::var("TARGET").ok() {
        return;
    }
    for name in probe() {
        println!("cargo::rustc-cfg=bulkmem_host=\"{name}\"");
    }
}

fn probe() -> Vec<&'static str> {
    let mut have = cpu();
    have.extend(uffd());
    have
}

#[cfg(target_arch = "x86_64")]
fn cpu() -> Vec<&'static str> {
    use std::arch::x86_64::__cpuid;

    let mut have = Vec::new();
    if std::arch::is_x86_feature_detected!("avx2") {
        have.push("avx2");
    }
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
    {
        have.push("avx512");
    }
    // std does not detect CLZERO: CPUID 0x8000_0008 EBX bit 0, where the
    // extended leaf exists.
    if __cpuid(0x8000_0000).eax >= 0x8000_0008 && __cpuid(0x8000_0008).ebx & 1 != 0 {
        have.push("clzero");
    }
    have
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu() -> Vec<&'static str> {
    Vec::new()
}

/// As `bulkmem::uffd::Mover::new` asks: user-mode faults only, then
/// without that flag for kernels before 5.11; UFFDIO_API with no features
/// answers with every feature the kernel offers.
#[cfg(target_os = "linux")]
fn uffd() -> Vec<&'static str> {
    const UFFD_USER_MODE_ONLY: libc::c_long = 1;
    const UFFD_API: u64 = 0xAA;
    // _IOWR(0xAA, 0x3F, struct uffdio_api), 24 bytes.
    const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
    const UFFD_FEATURE_POISON: u64 = 1 << 14;
    const UFFD_FEATURE_MOVE: u64 = 1 << 16;

    let flags = (libc::O_CLOEXEC | libc::O_NONBLOCK) as libc::c_long;
    // SAFETY: userfaultfd(2) takes flags only and returns a new descriptor
    // (or -1), which is closed below.
    let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | UFFD_USER_MODE_ONLY) };
    if fd < 0 {
        // SAFETY: as above.
        fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
    }
    if fd < 0 {
        return Vec::new();
    }
    let fd = fd as libc::c_int;
    let mut api = [UFFD_API, 0, 0];
    // SAFETY: UFFDIO_API on the descriptor just opened, with the 24-byte
    // struct uffdio_api the request number encodes.
    let rc = unsafe { libc::ioctl(fd, UFFDIO_API, api.as_mut_ptr()) };
    // SAFETY: fd was opened above and nothing else owns it.
    unsafe { libc::close(fd) };
    let mut have = Vec::new();
    if rc == 0 && api[1] & UFFD_FEATURE_MOVE != 0 {
        have.push("uffd-move");
        if api[1] & UFFD_FEATURE_POISON != 0 {
            have.push("uffd-poison");
        }
    }
    have
}

#[cfg(not(target_os = "linux"))]
fn uffd() -> Vec<&'static str> {
    Vec::new()
}
