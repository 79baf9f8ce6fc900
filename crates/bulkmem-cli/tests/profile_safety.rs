//! Hostile and wrong profiles, run out of process: whatever `BULKMEM_PROFILE`
//! names, a program copies correctly, never executes an instruction the CPU
//! lacks, never hangs, and says why it fell back without quoting the file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use bulkmem::{Op, Strategy};
use bulkmem_policy::auto::{Cell, Identity, Profile, Shape, FORMAT};

/// Runs bulkmem with `env`, killing it after 60 s: a hang fails the test
/// instead of hanging the suite.
fn run(args: &[&str], env: &[(&str, &Path)], extra: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bulkmem"));
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    for (k, v) in extra {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("run bulkmem");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("collect output");
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("bulkmem {args:?} hung (killed after 60 s)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("bulkmem-profile-safety-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// This machine's identity as a child run with `BULKMEM_DISABLE=avx512f,
/// avx512bw` sees it: on any CPU the profile then names a strategy the
/// child cannot run.
fn identity_without_avx512() -> Identity {
    let mut id = Identity::this();
    id.features = id
        .features
        .split_whitespace()
        .filter(|f| !f.starts_with("avx512"))
        .collect::<Vec<_>>()
        .join(" ");
    id
}

const NO_AVX512: (&str, &str) = ("BULKMEM_DISABLE", "avx512f,avx512bw");

fn profile_with(cells: Vec<Cell>) -> Profile {
    Profile {
        format: FORMAT,
        bulkmem: env!("CARGO_PKG_VERSION").to_string(),
        created: 1_795_000_000,
        quick: true,
        cpu: identity_without_avx512(),
        cells,
        nt_copy_shape: None,
    }
}

fn copy_cell(size: usize, gbps: Vec<(Strategy, f64)>) -> Cell {
    Cell {
        op: Op::Copy,
        shape: Shape::Single,
        size,
        winner: Strategy::PerPage,
        runner_up: None,
        margin: 1.0,
        choice: Strategy::PerPage,
        gbps,
    }
}

/// `bench copy --hint HINT` of 64 KiB through `auto` (verified by the
/// bench): the strategies `auto` chose, from the JSON.
fn auto_chose(hint: &str, env: &[(&str, &Path)]) -> Vec<String> {
    let args = [
        "bench",
        "copy",
        "--hint",
        hint,
        "--sizes",
        "64K",
        "--regime",
        "hot",
        "--strategies",
        "auto",
        "--runs",
        "1",
        "--json",
        "-",
    ];
    let o = run(&args, env, &[NO_AVX512]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("panicked"), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["chose"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_profile_naming_a_strategy_the_cpu_lacks_is_refused_not_executed() {
    // Regression: this profile's `gbps` lists avx512-nt; hint stream picks
    // a cell's fastest non-temporal strategy, so the bench ran avx512-nt
    // with AVX-512 disabled, and died with SIGILL (exit 132) on a CPU
    // without it.
    let p = profile_with(vec![copy_cell(
        64 << 10,
        vec![(Strategy::PerPage, 1.0), (Strategy::Avx512Nt, 2.0)],
    )]);
    let path = dir().join("avx512.toml");
    std::fs::write(&path, p.to_toml()).unwrap();
    let env = [("BULKMEM_PROFILE", path.as_path())];
    let chose = auto_chose("stream", &env);
    assert!(
        !chose.is_empty() && chose.iter().all(|c| !c.starts_with("avx512")),
        "{chose:?}"
    );
    let o = run(&["info"], &env, &[NO_AVX512]);
    let t = text(&o);
    assert!(
        t.contains("cell copy single 65536: avx512-nt needs avx512f, which this CPU lacks"),
        "{t}"
    );
    assert!(t.contains("built-in rules"), "{t}");
}

#[test]
fn a_clear_strategy_in_a_copy_cell_is_refused_not_reached() {
    // Regression: rep-stosb in a copy cell is the fastest cache-allocating
    // entry, so hint reuse reached `unreachable!` on every such copy
    // (-ENOTRECOVERABLE in the C ABI, a panic under the preload).
    let p = profile_with(vec![copy_cell(
        64 << 10,
        vec![(Strategy::PerPage, 1.0), (Strategy::RepStosb, 2.0)],
    )]);
    let path = dir().join("stosb.toml");
    std::fs::write(&path, p.to_toml()).unwrap();
    let env = [("BULKMEM_PROFILE", path.as_path())];
    let chose = auto_chose("reuse", &env);
    assert!(
        !chose.is_empty() && !chose.contains(&"rep-stosb".to_string()),
        "{chose:?}"
    );
    let t = text(&run(&["info"], &env, &[NO_AVX512]));
    assert!(t.contains("rep-stosb is not a copy strategy"), "{t}");
}

#[test]
fn fifos_devices_and_huge_files_are_refused_at_once() {
    let d = dir();
    let fifo = d.join("profile.fifo");
    let _ = std::fs::remove_file(&fifo);
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let big = d.join("big.toml");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(1 << 30).unwrap(); // sparse: 1 GiB claimed, nothing stored
    for (path, why) in [
        (fifo.as_path(), "not a regular file"),
        (Path::new("/dev/zero"), "not a regular file"),
        (big.as_path(), "larger than 1024 KiB"),
    ] {
        let o = run(&["info"], &[("BULKMEM_PROFILE", path)], &[]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(text(&o).contains(why), "{path:?}: {}", text(&o));
    }
}

#[test]
fn statuses_never_quote_the_file() {
    let secret = "root:$6$s3cr3tHash$abcdefghijklmnop:19000:0:99999:7:::";
    let path = dir().join("secret.toml");
    for body in [
        secret.to_string(),
        format!("format = {FORMAT}\ncells = 0\n[cpu]\nvendor = \"{secret}\"\n"),
        format!("format = \"{secret}\"\n"),
        format!("[{secret}]\n"),
    ] {
        std::fs::write(&path, &body).unwrap();
        let t = text(&run(&["info"], &[("BULKMEM_PROFILE", path.as_path())], &[]));
        assert!(t.contains("built-in rules"), "{t}");
        assert!(!t.contains("s3cr3t"), "quoted the file: {t}");
        assert!(
            t.contains(&path.display().to_string()),
            "names the file: {t}"
        );
    }
}

#[test]
fn off_in_any_case_and_out_of_range_integers() {
    for off in ["off", "Off", "OFF", "0", "none"] {
        let t = text(&run(&["info"], &[], &[("BULKMEM_PROFILE", off)]));
        assert!(t.contains("BULKMEM_PROFILE=off"), "{off}: {t}");
    }
    let mut p = profile_with(vec![]);
    p.cpu = Identity::this();
    let path = dir().join("format.toml");
    std::fs::write(
        &path,
        p.to_toml()
            .replacen(&format!("format = {FORMAT}"), "format = 4294967297", 1),
    )
    .unwrap();
    let t = text(&run(&["info"], &[("BULKMEM_PROFILE", path.as_path())], &[]));
    assert!(t.contains("'format' is out of range"), "{t}");
}

#[test]
fn a_profile_with_too_many_cells_is_refused_whole() {
    // 5,000 cells took 0.56 s to compile into bands (quadratic); the cap
    // refuses such a file before any band is built.
    let cells = (0..5000)
        .map(|i| copy_cell(64 + i, vec![(Strategy::PerPage, 1.0)]))
        .collect();
    let mut p = profile_with(cells);
    p.cpu = Identity::this();
    let path = dir().join("many.toml");
    std::fs::write(&path, p.to_toml()).unwrap();
    let t = text(&run(&["info"], &[("BULKMEM_PROFILE", path.as_path())], &[]));
    assert!(t.contains("more than 4096 cells"), "{t}");
}

#[test]
fn tune_refuses_to_replace_what_is_not_a_regular_file() {
    // Regression: `tune --out X` renamed over whatever X was (a device node
    // became a regular file). Refused before anything is measured.
    let o = run(&["tune", "--quick", "--out", "/dev/null"], &[], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not a regular file"), "{}", text(&o));
    assert!(!text(&o).contains("cells in"), "it measured: {}", text(&o));
}

#[test]
fn tune_system_is_for_root_and_excludes_out() {
    use std::os::unix::process::CommandExt;
    let o = run(
        &["tune", "--quick", "--system", "--out", "x.toml"],
        &[],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--out"), "{}", text(&o));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let o = Command::new(env!("CARGO_BIN_EXE_bulkmem"))
            .args(["tune", "--quick", "--system"])
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("as root"), "{}", text(&o));
        assert!(!text(&o).contains("cells in"), "it measured: {}", text(&o));
    }
}

#[test]
fn warnings_to_a_full_stderr_are_dropped_not_fatal() {
    // Regression: a library warning was eprintln!, which panics on a full
    // stderr; in the C ABI every bm_copy then failed for the life of the
    // process. `info` makes the same decisions a copy does.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_bulkmem"))
        .args(["info"])
        .env("BULKMEM_STRATEGY", "bogus")
        .env("BULKMEM_NT_THRESHOLD", "lots")
        .stderr(full)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("auto would choose"));
}

/// Whether `dir` is on a filesystem that honours set-user-ID bits.
fn suid_allowed(dir: &Path) -> bool {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid path and a zeroed statvfs for the call to fill.
    unsafe {
        let mut v: libc::statvfs = std::mem::zeroed();
        libc::statvfs(c.as_ptr(), &mut v) == 0 && v.f_flag & libc::ST_NOSUID == 0
    }
}

#[test]
fn a_setuid_program_ignores_every_bulkmem_variable() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip("needs root to make a set-user-ID copy of bulkmem");
        return;
    }
    let d = std::env::temp_dir().join(format!("bulkmem-setuid-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    if !suid_allowed(&d) {
        skip(&format!("{} is mounted nosuid", d.display()));
        return;
    }
    let bin = d.join("bulkmem");
    std::fs::copy(env!("CARGO_BIN_EXE_bulkmem"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o4755)).unwrap();
    // A root-only "secret" the user points the profile at, and a readable
    // valid profile that would otherwise be followed.
    let secret = d.join("secret");
    std::fs::write(&secret, "root:$6$s3cr3tHash$:19000:0:99999:7:::\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let run_as_nobody = |env: &[(&str, &str)]| {
        let mut c = Command::new(&bin);
        c.arg("info").uid(65534).gid(65534).env_clear();
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        (o.status.code(), text(&o))
    };
    let (code, t) = run_as_nobody(&[
        ("BULKMEM_PROFILE", secret.to_str().unwrap()),
        ("BULKMEM_STRATEGY", "copy:libc"),
        ("BULKMEM_DISABLE", "avx2,erms"),
        ("BULKMEM_NT_THRESHOLD", "1"),
    ]);
    assert_eq!(code, Some(0), "{t}");
    // Only a root-owned system-wide profile could be followed.
    assert!(
        t.contains("AT_SECURE") || t.contains(bulkmem_policy::auto::SYSTEM_PROFILE_DIR),
        "{t}"
    );
    assert!(!t.contains("s3cr3t") && !t.contains("secret"), "{t}");
    assert!(!t.contains("BULKMEM_STRATEGY"), "override honoured: {t}");
    assert!(!t.contains("hidden by BULKMEM_DISABLE"), "{t}");
    // The same program without set-user-ID honours them (the test is not
    // passing for want of a working environment).
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (_, t) = run_as_nobody(&[("BULKMEM_STRATEGY", "copy:libc")]);
    assert!(t.contains("BULKMEM_STRATEGY"), "{t}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A skip libtest shows: written to stderr directly (libtest captures only
/// `print!`/`eprint!` of a passing test).
fn skip(why: &str) {
    use std::io::Write as _;
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let _ = writeln!(std::io::stderr(), "\nSKIPPED {test}: {why}");
}
