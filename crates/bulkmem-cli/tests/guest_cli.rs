//! The `bulkmem` command on a two-node machine, in the qemu guest
//! (scripts/guest/test puts a static `bulkmem` in the guest's /bin).

use std::process::{Command, Output};

fn bulkmem(args: &[&str]) -> Output {
    // In the guest the binary is /bin/bulkmem; on the host, cargo's.
    let bin = if std::env::var_os("BULKMEM_GUEST").is_some() {
        "/bin/bulkmem".to_string()
    } else {
        env!("CARGO_BIN_EXE_bulkmem").to_string()
    };
    Command::new(bin).args(args).output().expect("run bulkmem")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn bench_migrate_prints_the_table_and_json_rows() {
    let o = bulkmem(&[
        "bench",
        "migrate",
        "--sizes",
        "16M",
        "--runs",
        "1",
        "--threads",
        "1,2",
        "--json",
        "-",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("migrate: GB/s"),
        "{}",
        text(&o.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON only");
    let rows = doc["results"].as_array().unwrap();
    // 2 page kinds x 2 directions x (move_pages + copy-remap x 2 threads)
    assert_eq!(rows.len(), 2 * 2 * 3);
    for r in rows {
        assert_eq!(r["op"], "migrate");
        let s = r["strategy"].as_str().unwrap();
        assert!(s == "move_pages" || s == "copy-remap", "{r}");
        let (from, to) = (r["from"].as_u64().unwrap(), r["to"].as_u64().unwrap());
        assert!((from, to) == (0, 1) || (from, to) == (1, 0), "{r}");
        assert!(["4K", "thp"].contains(&r["page"].as_str().unwrap()), "{r}");
        assert!(r["gbps"]["median"].as_f64().unwrap() > 0.0);
        if s == "copy-remap" {
            assert!(
                r["speedup"].as_f64().unwrap() > 0.0,
                "ratio over move_pages: {r}"
            );
        }
    }
}

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn migrate_self_test_and_another_process() {
    let o = bulkmem(&["migrate", "--self-test", "--size", "8M", "--to", "1"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("copy-remap -> node 1: 2048/2048 pages there"),
        "{out}"
    );
    assert!(out.contains("self-test passed"), "{out}");

    // This test process's own pages, moved by the command from outside;
    // first touched from CPU 0, so they start on node 0.
    // SAFETY: a zeroed cpu_set_t is empty; we set CPU 0 for this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
    let len = 64 * 4096;
    let mut v = vec![0u8; len + 4096];
    let start = (v.as_mut_ptr() as usize).next_multiple_of(4096);
    for i in (0..len).step_by(4096) {
        // SAFETY: inside v.
        unsafe { ((start + i) as *mut u8).write_volatile(1) };
    }
    let range = format!("{start:x}-{:x}", start + len);
    let pid = std::process::id().to_string();
    let o = bulkmem(&["migrate", "--pid", &pid, "--range", &range, "--to", "1"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.contains("64 pages: 64 moved to node 1, 0 already there"),
        "{out}"
    );
    let on = bulkmem::numa::node_of_pages(0, start, len).unwrap();
    assert!(on.iter().all(|&n| n == 1), "{on:?}");

    let o = bulkmem(&["migrate", "--pid", &pid, "--range", &range, "--to", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("no NUMA node 2"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
#[ignore = "runs in the qemu guest: scripts/guest/test"]
fn bench_copy_reads_from_one_node_and_writes_to_the_other() {
    let o = bulkmem(&[
        "bench",
        "copy",
        "--sizes",
        "64K,2M",
        "--strategies",
        "per-page,auto",
        "--runs",
        "1",
        "--total",
        "16M",
        "--src-node",
        "0",
        "--dst-node",
        "1",
        "--json",
        "-",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let argv = v["provenance"]["command"].as_array().expect("argv");
    assert!(argv.iter().any(|a| a == "--dst-node"), "{argv:?}");
    assert!(v["results"].as_array().unwrap().len() >= 4);
}
