//! The profile is loaded once per process, however many threads race the
//! first call, and `auto` then follows it. Its own test binary: the profile
//! and `BULKMEM_PROFILE` are process-wide. The loads are counted from
//! outside, by strace (the library keeps no count for tests).

use std::process::Command;

use bulkmem::{Hint, Op, Options, Strategy};
use bulkmem_policy::auto::{self, Cell, Identity, Profile, ProfileStatus, Shape, FORMAT};

/// Set in the copy of this binary that races the first calls.
const CHILD: &str = "BULKMEM_TEST_PROFILE_LOAD_CHILD";
const NAME: &str = "racing_threads_load_the_profile_once_and_follow_it";

/// A profile for this machine that picks `portable` for every copy and
/// `per-page` for every clear: choices the built-in rules never make on
/// x86, so following them is visible.
fn profile() -> Profile {
    let cell = |op, shape, size, s: Strategy| Cell {
        op,
        shape,
        size,
        winner: s,
        runner_up: None,
        margin: 1.0,
        choice: s,
        gbps: vec![(s, 10.0)],
    };
    let mut cells = Vec::new();
    for shape in Shape::ALL {
        for size in [64, 1 << 20, 1 << 30] {
            cells.push(cell(Op::Copy, shape, size, Strategy::Portable));
            cells.push(cell(Op::Clear, shape, size, Strategy::PerPage));
        }
    }
    cells.sort_by_key(|c| ((c.op == Op::Clear) as u8, c.shape, c.size));
    Profile {
        format: FORMAT,
        bulkmem: env!("CARGO_PKG_VERSION").into(),
        created: 0,
        quick: true,
        cpu: Identity::this(),
        cells,
        nt_copy_shape: None,
    }
}

#[test]
fn racing_threads_load_the_profile_once_and_follow_it() {
    if std::env::var_os(CHILD).is_some() {
        return race_and_follow(std::path::Path::new(
            &std::env::var_os("BULKMEM_PROFILE").unwrap(),
        ));
    }
    let dir = std::env::temp_dir().join(format!("bulkmem-profile-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("profile.toml");
    std::fs::write(&path, profile().to_toml()).unwrap();
    let log = dir.join("opens.log");
    let child = |traced: bool| {
        let mut c = if traced {
            let mut c = Command::new("strace");
            c.args(["-f", "-e", "trace=openat,open", "-o"]).arg(&log);
            c.arg(std::env::current_exe().unwrap());
            c
        } else {
            Command::new(std::env::current_exe().unwrap())
        };
        c.args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env("BULKMEM_PROFILE", &path)
            .output()
    };
    let traced = child(true).map(|o| {
        let opens = std::fs::read_to_string(&log).unwrap_or_default();
        (o, opens)
    });
    let (o, opens) = match traced {
        // strace ran, and traced (a child that fails is the test's failure).
        Ok((o, opens)) if o.status.success() || !opens.is_empty() => (o, Some(opens)),
        other => {
            let why = other.map(|(o, _)| String::from_utf8_lossy(&o.stderr).into_owned());
            eprintln!("SKIPPED counting the loads: strace cannot trace here ({why:?})");
            (child(false).unwrap(), None)
        }
    };
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && out.contains("1 passed"),
        "the child: {out}"
    );
    if let Some(opens) = opens {
        let name = path.to_string_lossy();
        let loads: Vec<&str> = opens
            .lines()
            .filter(|l| l.contains(&*name) && !l.contains("= -1"))
            .collect();
        assert_eq!(
            loads.len(),
            1,
            "the profile was opened {} times:\n{opens}",
            loads.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// In the child: sixteen threads race the process's first calls, and all
/// follow the profile at `path`.
fn race_and_follow(path: &std::path::Path) {
    let barrier = std::sync::Barrier::new(16);
    let picks: Vec<(Strategy, Strategy)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let barrier = &barrier;
                s.spawn(move || {
                    let src = vec![i as u8; 4096 + i];
                    let mut dst = vec![0u8; 4096 + i];
                    barrier.wait();
                    let c = bulkmem::copy_opts(&mut dst, &src, Options::default()).unwrap();
                    assert_eq!(dst, src);
                    let z = bulkmem::clear_opts(&mut dst, Options::hint(Hint::Auto)).unwrap();
                    assert!(dst.iter().all(|&b| b == 0));
                    (c, z)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        picks
            .iter()
            .all(|&p| p == (Strategy::Portable, Strategy::PerPage)),
        "{picks:?}"
    );
    match auto::profile_status() {
        ProfileStatus::Tuned { path: p, .. } => assert_eq!(p, path),
        other => panic!("not tuned: {other}"),
    }
    assert!(auto::profile().is_some());
    // Batches follow it too (through resolve); the parent sees that they
    // load nothing more.
    let src = vec![1u8; 8192];
    let mut a = vec![0u8; 4096];
    let mut b = vec![0u8; 4096];
    let chose = bulkmem::copy_batch(&mut [(&mut a, &src[..4096]), (&mut b, &src[4096..])])
        .unwrap()
        .strategy;
    assert_eq!(chose, Strategy::Portable);
}
