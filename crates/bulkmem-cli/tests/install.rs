//! scripts/install as a user runs it: a build staged with DESTDIR
//! into a prefix that does not exist, then used from a directory outside
//! the checkout, with nothing from the build tree in reach: `bulkmem run`
//! finds its preload library beside it, a C program builds with
//! pkg-config and runs, the man pages render and the completions load.
//! What is installed carries no debug info, the JSON schema is where
//! `--help` says, and the script says what to add to PATH and how C
//! programs find the library.
//! Needs cc, pkg-config, readelf, strip, man and nroff (`scripts/c-deps`). It
//! installs the debug profile (`--debug`), which `cargo test` has built:
//! the release build is the same script with one flag less, and would
//! cost a fresh checkout's test run minutes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `c`, which must succeed; its stdout and stderr.
fn ok(c: &mut Command) -> (String, String) {
    let o = c.output().unwrap_or_else(|e| {
        panic!("cannot run {c:?}: {e} (scripts/c-deps installs what the tests need)")
    });
    assert!(
        o.status.success(),
        "{c:?} failed ({}):\n{}",
        o.status,
        text(&o)
    );
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A scratch directory under /tmp (outside the checkout), removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let p = std::env::temp_dir().join(format!("bulkmem-install-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create the scratch directory");
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A prefix that exists nowhere but in the stage: DESTDIR must be honoured.
const PREFIX: &str = "/bulkmem-install-test/usr";

fn install(stage: &Path, extra: &[&str]) -> String {
    let (out, err) = ok(Command::new(root().join("scripts/install"))
        // The debug profile: `cargo test` has built it already, so a fresh
        // checkout's test run needs no release build for this test.
        .args(["--prefix", PREFIX, "--debug"])
        .args(extra)
        .env("DESTDIR", stage)
        .env("CARGO", env!("CARGO")));
    out + &err
}

/// The debug-info sections of an ELF file or archive (`readelf -S`).
/// `.debug_gdb_scripts` is not debug info: rustc's few bytes naming gdb's
/// pretty-printers, in a loaded section that `strip --strip-debug` keeps.
fn debug_sections(file: &Path) -> Vec<String> {
    let (sections, _) = ok(Command::new("readelf").arg("-SW").arg(file));
    let mut found: Vec<String> = sections
        .split_whitespace()
        .filter(|w| w.starts_with(".debug_") && *w != ".debug_gdb_scripts")
        .map(str::to_owned)
        .collect();
    found.sort();
    found.dedup();
    found
}

/// `bulkmem run` of `installed` (cwd `cwd`, no hint where the library is):
/// the LD_PRELOAD its child sees, and the child's stderr (where the
/// preload's exit statistics go).
fn run_preload(installed: &Path, cwd: &Path) -> (String, String) {
    let (out, err) = ok(Command::new(installed)
        .args(["run", "--stats", "--", "env"])
        .current_dir(cwd)
        .env_remove("BULKMEM_PRELOAD_LIB")
        .env_remove("LD_PRELOAD"));
    let preload = out
        .lines()
        .find_map(|l| l.strip_prefix("LD_PRELOAD="))
        .unwrap_or_else(|| panic!("no LD_PRELOAD in the child's environment:\n{out}"));
    (preload.to_string(), err)
}

#[test]
fn installed_tree_works_from_outside_the_checkout() {
    let scratch = Scratch::new();
    let (stage, away) = (scratch.0.join("stage"), scratch.0.join("elsewhere"));
    std::fs::create_dir_all(&away).unwrap();
    let log = install(&stage, &[]);
    assert!(
        !Path::new(PREFIX).exists(),
        "installed outside DESTDIR:\n{log}"
    );
    let p = stage.join(PREFIX.trim_start_matches('/'));
    let lib = p.join("lib");

    // Installed without debug info (the build tree keeps it); the check
    // does see it where it is: in the command cargo built for this test.
    let built = Path::new(env!("CARGO_BIN_EXE_bulkmem"));
    assert!(
        !debug_sections(built).is_empty(),
        "{built:?}: no debug info seen"
    );
    for f in [
        "bin/bulkmem",
        "lib/bulkmem/libbulkmem_preload.so",
        "lib/bulkmem/libbulkmem_preload_engine.so",
        "lib/libbulkmem.so.0",
        "lib/libbulkmem.a",
    ] {
        let found = debug_sections(&p.join(f));
        assert!(found.is_empty(), "{f} carries debug info: {found:?}\n{log}");
    }

    // The install's closing lines: a prefix that is not on PATH nor where
    // the loader looks gets the exact lines to add, with the real paths.
    for hint in [
        format!("export PATH=\"{PREFIX}/bin:$PATH\""),
        format!("export PKG_CONFIG_PATH=\"{PREFIX}/lib/pkgconfig"),
        format!("LD_LIBRARY_PATH={PREFIX}/lib"),
        format!("-Wl,-rpath,{PREFIX}/lib"),
    ] {
        assert!(
            log.contains(&hint),
            "no `{hint}` in the install's output:\n{log}"
        );
    }

    // `--help` says where the JSON schema is, in the source and installed,
    // and it is there in both.
    let (help, _) = ok(Command::new(p.join("bin/bulkmem")).args(["bench", "copy", "--help"]));
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let after = |key: &str| {
        let rest = &help[help
            .find(key)
            .unwrap_or_else(|| panic!("no `{key}` in: {help}"))..];
        rest[key.len()..]
            .split([' ', ')'])
            .next()
            .unwrap()
            .trim_end_matches(['.', ','])
            .to_owned()
    };
    let source = after("Schema: ");
    assert!(
        root().join(&source).is_file(),
        "--help names {source}, not in the source"
    );
    let dir = after("(installed: ");
    let dir = dir
        .strip_prefix("PREFIX/")
        .unwrap_or_else(|| panic!("{dir}: not under PREFIX"));
    let name = Path::new(&source).file_name().unwrap();
    let schema = p.join(dir).join(name);
    assert!(
        schema.is_file(),
        "--help says {schema:?}, not installed:\n{log}"
    );
    assert_eq!(
        std::fs::read(&schema).unwrap(),
        std::fs::read(root().join(&source)).unwrap(),
        "the installed schema is not the source's"
    );

    // `run` from elsewhere loads the staged preload, not the build tree's.
    let bin = p.join("bin/bulkmem");
    let (out, err) = run_preload(&bin, &away);
    let preload = lib.join("bulkmem/libbulkmem_preload.so");
    assert_eq!(out.trim(), preload.display().to_string());
    // (env makes no memcpy call of its own: its line says so.)
    assert!(
        err.contains("bulkmem preload [") && err.contains(" env]: "),
        "no statistics: {err}"
    );

    // The soname chain, and a C program built and run against it.
    let v = env!("CARGO_PKG_VERSION");
    let link = |n: &str| std::fs::read_link(lib.join(n)).unwrap();
    assert_eq!(link("libbulkmem.so"), Path::new("libbulkmem.so.0"));
    assert_eq!(
        link("libbulkmem.so.0"),
        PathBuf::from(format!("libbulkmem.so.{v}"))
    );
    assert!(lib.join("libbulkmem.a").is_file());
    let (dynamic, _) = ok(Command::new("readelf")
        .arg("-d")
        .arg(lib.join("libbulkmem.so")));
    assert!(
        dynamic.contains("Library soname: [libbulkmem.so.0]"),
        "{dynamic}"
    );
    let pc = std::fs::read_to_string(lib.join("pkgconfig/bulkmem.pc")).unwrap();
    assert!(pc.contains(&format!("prefix={PREFIX}\n")), "{pc}");
    assert!(pc.contains("libdir=${prefix}/lib\n"), "{pc}");
    let src = away.join("prog.c");
    std::fs::write(
        &src,
        "#include <bulkmem.h>\n#include <stdio.h>\n#include <string.h>\n\
         int main(void) {\n  static char a[1 << 20], b[1 << 20];\n  memset(a, 7, sizeof a);\n\
         int rc = bm_copy(b, a, sizeof a);\n  if (rc || memcmp(a, b, sizeof a)) return 1;\n\
         puts(\"copied\");\n  return 0;\n}\n",
    )
    .unwrap();
    let (flags, _) = ok(Command::new("pkg-config")
        .args(["--cflags", "--libs", "bulkmem"])
        .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
        .env("PKG_CONFIG_SYSROOT_DIR", &stage));
    assert!(flags.contains(&format!("-L{}", lib.display())), "{flags}");
    ok(Command::new("cc")
        .args(["-std=c99", "-Wall", "-Werror", "prog.c", "-o", "prog"])
        .args(flags.split_whitespace())
        .current_dir(&away));
    let (needed, _) = ok(Command::new("readelf").arg("-d").arg(away.join("prog")));
    assert!(
        needed.contains("Shared library: [libbulkmem.so.0]"),
        "{needed}"
    );
    let (out, _) = ok(Command::new(away.join("prog"))
        .current_dir(&away)
        .env("LD_LIBRARY_PATH", &lib));
    assert_eq!(out, "copied\n");
    assert!(p.join("include/bulkmem.h").is_file());

    // Every man page renders, and the main one names the command.
    let man1 = p.join("share/man/man1");
    let pages: Vec<PathBuf> = std::fs::read_dir(&man1)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| f.extension().is_some_and(|x| x == "1"))
        .collect();
    assert!(pages.contains(&man1.join("bulkmem.1")), "{pages:?}");
    let man3 = p.join("share/man/man3/bulkmem.3");
    assert!(man3.is_file(), "the C library's page bulkmem(3)");
    for page in pages.iter().chain([&man3]) {
        let (out, _) = ok(Command::new("man")
            .arg("-l")
            .arg(page)
            .current_dir(&away)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80"));
        assert!(
            out.contains("NAME") && out.contains("bulkmem"),
            "{page:?}: {out}"
        );
    }

    // Completions: bash's registers itself; the others are the shells' own.
    let share = p.join("share");
    let bash = share.join("bash-completion/completions/bulkmem");
    ok(Command::new("bash")
        .arg("-c")
        .arg("source \"$1\" && complete -p bulkmem")
        .arg("bash")
        .arg(&bash));
    let zsh = std::fs::read_to_string(share.join("zsh/site-functions/_bulkmem")).unwrap();
    assert!(zsh.starts_with("#compdef bulkmem"), "{zsh:.80}");
    let fish = share.join("fish/vendor_completions.d/bulkmem.fish");
    let fish = std::fs::read_to_string(fish).unwrap();
    assert!(fish.contains("complete -c bulkmem"), "{fish:.80}");

    // A distribution's layout: the preload under lib/<multiarch>/bulkmem.
    let multi = format!("lib/{}-linux-gnu", std::env::consts::ARCH);
    let stage2 = scratch.0.join("stage2");
    install(&stage2, &["--no-build", "--libdir", &multi]);
    let p2 = stage2.join(PREFIX.trim_start_matches('/'));
    let (out, _) = run_preload(&p2.join("bin/bulkmem"), &away);
    let preload2 = p2.join(&multi).join("bulkmem/libbulkmem_preload.so");
    assert_eq!(out.trim(), preload2.display().to_string());
    let pc = std::fs::read_to_string(p2.join(&multi).join("pkgconfig/bulkmem.pc")).unwrap();
    assert!(
        pc.contains(&format!("libdir=${{prefix}}/{multi}\n")),
        "{pc}"
    );

    // The command alone (as `cargo install` leaves it): `run` says where it
    // looked and how to get the library.
    let lone = scratch.0.join("lone/bin");
    std::fs::create_dir_all(&lone).unwrap();
    std::fs::copy(&bin, lone.join("bulkmem")).unwrap();
    let o = Command::new(lone.join("bulkmem"))
        .args(["run", "--", "true"])
        .current_dir(&away)
        .env_remove("BULKMEM_PRELOAD_LIB")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for place in [
        "lone/bin/libbulkmem_preload.so".to_string(),
        "lone/lib/bulkmem/libbulkmem_preload.so".to_string(),
        "lone/lib64/bulkmem/libbulkmem_preload.so".to_string(),
        format!("lone/{multi}/bulkmem/libbulkmem_preload.so"),
        "BULKMEM_PRELOAD_LIB".to_string(),
        "scripts/install".to_string(),
    ] {
        assert!(err.contains(&place), "no {place} in: {err}");
    }
}

#[test]
fn unknown_arguments_are_refused_before_anything_is_built() {
    let o = Command::new(root().join("scripts/install"))
        .arg("--frobnicate")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("unknown argument '--frobnicate'"));
}
