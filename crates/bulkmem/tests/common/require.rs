//! What the tests need of the host, checked at run time, and skips that
//! show.
//!
//! A test that needs a capability the build host lacks is compiled ignored
//! (build.rs emits `bulkmem_host`), so libtest names it, with the reason,
//! among the ignored. This is the run-time side:
//!
//! * [`Capability`]: the names `BULKMEM_REQUIRE` takes, each checked as the
//!   library sees this host (CPU features after `BULKMEM_DISABLE`).
//! * [`strategy`]: a test compiled to run a strategy that this host cannot
//!   run fails, naming the feature, unless `BULKMEM_DISABLE` hid it: then
//!   the run asked to go without it, and the test skips, visibly.
//! * [`skip`]: libtest hides a passing test's stderr, and stable libtest
//!   cannot mark a test ignored once it runs, so a skip decided at run time
//!   is written past the capture, and listed again after the summary.

use bulkmem::offload::{GpuOptions, Offload};
use bulkmem::uffd::Mover;
use bulkmem::{cpu, Strategy};

// Run-time skips that show, written without the library (the page moves'
// own unit tests compile them too).
pub use super::skip::skip;

/// Something a test needs that a host may lack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    Avx2,
    /// avx512f and avx512bw: what the `avx512` strategies need.
    Avx512,
    Clzero,
    /// userfaultfd with UFFDIO_MOVE (Linux 6.8+), as `Mover::new` opens it.
    UffdMove,
    /// That and UFFDIO_POISON (Linux 6.6+): the fault tests' poisoned pages.
    UffdPoison,
    /// A GPU the offload can drive.
    Gpu,
}

impl Capability {
    pub const ALL: &'static [Capability] = &[
        Capability::Avx2,
        Capability::Avx512,
        Capability::Clzero,
        Capability::UffdMove,
        Capability::UffdPoison,
        Capability::Gpu,
    ];

    /// Its name in `BULKMEM_REQUIRE` (and, where build.rs probes it, in the
    /// `bulkmem_host` cfg).
    pub fn name(self) -> &'static str {
        match self {
            Capability::Avx2 => "avx2",
            Capability::Avx512 => "avx512",
            Capability::Clzero => "clzero",
            Capability::UffdMove => "uffd-move",
            Capability::UffdPoison => "uffd-poison",
            Capability::Gpu => "gpu",
        }
    }

    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.iter().copied().find(|c| c.name() == name)
    }

    /// Whether the build host had it, so that the tests needing it were
    /// compiled to run; `None` where build.rs does not probe it.
    pub fn built_for(self) -> Option<bool> {
        match self {
            Capability::Avx2 => Some(cfg!(bulkmem_host = "avx2")),
            Capability::Avx512 => Some(cfg!(bulkmem_host = "avx512")),
            Capability::Clzero => Some(cfg!(bulkmem_host = "clzero")),
            Capability::UffdMove => Some(cfg!(bulkmem_host = "uffd-move")),
            Capability::UffdPoison => Some(cfg!(bulkmem_host = "uffd-poison")),
            Capability::Gpu => None,
        }
    }

    /// Present on this host, as the library sees it; `Err` says why not.
    pub fn check(self) -> Result<(), String> {
        match self {
            Capability::Avx2 => strategy_check(Strategy::Avx2),
            Capability::Avx512 => strategy_check(Strategy::Avx512),
            Capability::Clzero => strategy_check(Strategy::Clzero),
            Capability::UffdMove => Mover::new().map(drop).map_err(|e| e.to_string()),
            Capability::UffdPoison => match Mover::new() {
                Ok(m) if m.supports_poison() => Ok(()),
                Ok(_) => Err("this kernel has no UFFDIO_POISON (Linux 6.6+)".into()),
                Err(e) => Err(e.to_string()),
            },
            Capability::Gpu => Offload::gpu(GpuOptions::default())
                .map(drop)
                .map_err(|e| e.to_string()),
        }
    }

    /// The capability a strategy needs, if it needs one.
    pub fn of(s: Strategy) -> Option<Capability> {
        match s.missing_feature(&cpu::Features::default())? {
            "avx2" => Some(Capability::Avx2),
            "avx512f" | "avx512bw" => Some(Capability::Avx512),
            "clzero" => Some(Capability::Clzero),
            other => panic!("{s} needs {other}, which no Capability stands for"),
        }
    }
}

/// Whether `BULKMEM_DISABLE` hid `feature` on a CPU that has it.
pub fn hidden(feature: &str) -> bool {
    cpu::info().disabled.iter().any(|d| d == feature)
}

fn strategy_check(s: Strategy) -> Result<(), String> {
    match s.missing_feature(&cpu::info().features) {
        None => Ok(()),
        Some(f) if hidden(f) => Err(format!("{f} is hidden by BULKMEM_DISABLE")),
        Some(f) => Err(format!("this CPU lacks {f}")),
    }
}

/// `BULKMEM_REQUIRE`'s comma list checked: `Err` names each capability that
/// is absent (and why) and each name that is not a capability.
pub fn check_required(list: &str) -> Result<(), String> {
    let mut wrong = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match Capability::from_name(name) {
            Some(c) => {
                if let Err(why) = c.check() {
                    wrong.push(format!("{name}: {why}"));
                }
            }
            None => {
                let known: Vec<&str> = Capability::ALL.iter().map(|c| c.name()).collect();
                wrong.push(format!(
                    "{name}: not a capability (known: {})",
                    known.join(", ")
                ));
            }
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    }
}

/// `s` if this CPU can run it. `None`, after a visible [`skip`], where
/// `BULKMEM_DISABLE` hid a feature it needs. Otherwise panics, naming the
/// feature: the calling test was compiled to run `s` (the build host could)
/// or was run with `--ignored`, and this host cannot.
pub fn strategy(s: Strategy) -> Option<Strategy> {
    match s.missing_feature(&cpu::info().features) {
        None => Some(s),
        Some(f) if hidden(f) => {
            skip(&format!("{s}: {f} is hidden by BULKMEM_DISABLE"));
            None
        }
        Some(f) => panic!(
            "{s} needs {f}, which this CPU lacks: this test was run with --ignored, or \
             built where {f} was present (another host, or a stale build: cargo clean \
             -p bulkmem re-probes)"
        ),
    }
}

/// The strategies of `list` a test loops over: `Auto`, then each one whose
/// capability the build host had (the tests that need the others are
/// compiled ignored and say so), through [`strategy`].
pub fn runnable(list: &[Strategy]) -> Vec<Strategy> {
    let mut v = vec![Strategy::Auto];
    v.extend(
        list.iter()
            .copied()
            .filter(|&s| Capability::of(s).is_none_or(|c| c.built_for() == Some(true)))
            .filter_map(strategy),
    );
    v
}

/// Runs `test` of this test binary in a child process with `env` added
/// (and `--ignored`, so a test marked as another's child half runs):
/// whether it passed, and its output. The caller's `BULKMEM_STRATEGY` and
/// `BULKMEM_REQUIRE` are not passed on, so only `env` steers the child.
pub fn rerun(test: &str, env: &[(&str, &str)]) -> (bool, String) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["--exact", test, "--include-ignored", "--test-threads=1"])
        .env_remove("BULKMEM_STRATEGY")
        .env_remove("BULKMEM_REQUIRE")
        .envs(env.iter().copied());
    let out = cmd.output().expect("re-running the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A filter that matched nothing would pass too.
    assert!(
        text.contains("running 1 test"),
        "{test} did not run:\n{text}"
    );
    (out.status.success(), text)
}
