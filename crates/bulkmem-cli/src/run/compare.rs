//! `bulkmem run --compare N -- PROGRAM ARGS`: does bulkmem speed up this
//! program? The program runs N times without the preload and N times
//! with it, in pairs whose order alternates (after one untimed run of
//! each, the preloaded one reporting its calls), its output discarded;
//! each run's wall-clock time is taken from spawn to exit. The answer is the geometric mean of the pairs' ratios
//! (with / without) and its 95% interval (Student's t on the logarithms of
//! the paired ratios: pairs share whatever the machine was doing), and a
//! verdict that says so when the interval holds 1: on a shared machine a
//! one-line "saved" that flips sign from run to run is worse than none.
//! Every run must end as the first did: a program whose exit status
//! changes under the preload is reported, not timed. So is a program that
//! fails (exits non-zero or dies of a signal) unless `--allow-failure`
//! asks for its times anyway: they would measure how fast it fails, and
//! the verdict would read as an answer about its work.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Instant;

use serde::Serialize;

use super::ending::{last_lines, not_started, unnamed_file, Ending};
use super::records::{self, Counts, KINDS};
use super::RecordDir;
use bulkmem_bench::cli::Failure;
use bulkmem_bench::failure::runtime;
use bulkmem_bench::preload_cmd::ld_preload;
use bulkmem_machine::units::format_bytes;
use bulkmem_report::stats::{t_two_sided, Stats};

/// What `--compare` found, as `--json` writes it.
#[derive(Serialize)]
pub struct Comparison {
    pub program: Vec<String>,
    /// Timed runs of each side (untimed warm-ups aside).
    pub runs: usize,
    /// How every run ended (they all end alike, or nothing is timed).
    pub ended: Ending,
    /// Runs that failed, the two untimed ones included: 0, or all
    /// `2 * runs + 2` (timed only under `--allow-failure`).
    pub failed_runs: usize,
    /// Wall-clock seconds of each run without and with the preload, in
    /// run order.
    pub without_s: Stats,
    pub with_s: Stats,
    /// With / without: the geometric mean of the pairs' ratios and its
    /// 95% interval (`None` with fewer than two pairs).
    pub ratio: f64,
    pub interval: Option<(f64, f64)>,
    /// "faster", "slower" or "no difference resolved".
    pub verdict: &'static str,
    /// Calls of the threshold and more through bulkmem in the untimed
    /// preloaded run (which alone reports them), and their bytes: copies,
    /// then sets.
    pub calls_per_run: [f64; 2],
    pub bytes_per_run: [f64; 2],
}

/// The 97.5th percentile of Student's t with `df` degrees of freedom, by
/// bisection on the two-sided tail.
fn t975(df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 100.0);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if t_two_sided(mid, df) > 0.05 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// The geometric mean of `ratios` and its 95% interval (none for fewer
/// than two).
pub fn paired(ratios: &[f64]) -> (f64, Option<(f64, f64)>) {
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    if logs.len() < 2 {
        return (mean.exp(), None);
    }
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let half = t975(n - 1.0) * (var / n).sqrt();
    (mean.exp(), Some(((mean - half).exp(), (mean + half).exp())))
}

/// The verdict on an interval of with / without ratios.
pub fn verdict(interval: Option<(f64, f64)>) -> &'static str {
    match interval {
        Some((_, hi)) if hi < 1.0 => "faster",
        Some((lo, _)) if lo > 1.0 => "slower",
        _ => "no difference resolved",
    }
}

/// One run of the program, its output discarded (its stderr kept in
/// `stderr` when given): wall seconds and how it ended.
fn once(
    cmd: &[OsString],
    preload: Option<&OsString>,
    report: Option<&Path>,
    stderr: Option<&std::fs::File>,
) -> Result<(f64, ExitStatus), Failure> {
    let mut c = Command::new(&cmd[0]);
    let err = match stderr {
        Some(f) => Stdio::from(
            f.try_clone()
                .map_err(|e| runtime(format!("run --compare: {e}")))?,
        ),
        None => Stdio::null(),
    };
    c.args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err);
    if let Some(lib) = preload {
        c.env("LD_PRELOAD", lib);
    }
    if let Some(dir) = report {
        c.env("BULKMEM_PRELOAD_REPORT", dir);
    }
    let t = Instant::now();
    let status = c.status().map_err(|e| not_started(&cmd[0], &e))?;
    Ok((t.elapsed().as_secs_f64(), status))
}

/// Why a failing program is not timed, with its last words on stderr.
fn failed(name: &str, ended: &Ending, said: &str) -> Failure {
    let said = if said.is_empty() {
        "It wrote nothing on stderr.\n".to_string()
    } else {
        format!("The end of its stderr:\n{said}")
    };
    runtime(format!(
        "run --compare: {name} failed ({}) in its first run, without bulkmem, so nothing was \
         timed: the times of a failing program measure how fast it fails.\n{said}\
         Run it alone to see why, or pass --allow-failure to time it as it is.",
        ended.describe()
    ))
}

/// Runs the comparison; `progress(done, of)` after each timed pair. A
/// program that fails is refused before it is timed unless
/// `allow_failure`.
pub fn compare(
    cmd: &[OsString],
    n: usize,
    lib: &Path,
    allow_failure: bool,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Comparison, Failure> {
    let dir = RecordDir::new()?;
    let lib = ld_preload(lib);
    let name = cmd[0].to_string_lossy().into_owned();
    // Untimed: the first of each fixes the exit status every run must
    // repeat, and the preloaded one alone reports its calls (writing the
    // report at exit is `run`'s cost, not bulkmem's: the timed runs skip
    // it).
    let said = unnamed_file(&dir.0)?;
    let (_, first) = once(cmd, None, None, Some(&said))?;
    let ended = Ending::of(first);
    if !ended.success && !allow_failure {
        return Err(failed(&name, &ended, &last_lines(&said, 5)));
    }
    let (_, with) = once(cmd, Some(&lib), Some(&dir.0), None)?;
    let differs = |which: &str, s: ExitStatus| {
        runtime(format!(
            "run --compare: {name} ended with {} in {which}, but with {} in the first run \
             without bulkmem; a program that does not end the same way every time is not \
             timed (run it with `bulkmem run` to see why)",
            Ending::of(s).describe(),
            ended.describe()
        ))
    };
    if with != first {
        return Err(differs("the first run with bulkmem", with));
    }
    let (mut off, mut on) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        // Alternate which goes first, so neither always follows the other.
        for preloaded in [i % 2 == 1, i % 2 == 0] {
            let (t, s) = once(cmd, preloaded.then_some(&lib), None, None)?;
            if s != first {
                let side = if preloaded { "with" } else { "without" };
                return Err(differs(
                    &format!("timed run {} of {n} {side} bulkmem", i + 1),
                    s,
                ));
            }
            if preloaded { &mut on } else { &mut off }.push(t);
        }
        progress(i + 1, n);
    }
    let ratios: Vec<f64> = on.iter().zip(&off).map(|(a, b)| a / b).collect();
    let (ratio, interval) = paired(&ratios);
    let (counts, _) = records::collect(&dir.0);
    let mut total = Counts::default();
    counts.iter().for_each(|c| total.add(c));
    let per = |k: usize| {
        let (c, b) = total.through_bulkmem(k);
        (c as f64, b as f64)
    };
    Ok(Comparison {
        program: cmd
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        runs: n,
        ended,
        failed_runs: if ended.success { 0 } else { 2 * n + 2 },
        without_s: Stats::or_zero(&off),
        with_s: Stats::or_zero(&on),
        ratio,
        interval,
        verdict: verdict(interval),
        calls_per_run: [per(0).0, per(1).0],
        bytes_per_run: [per(0).1, per(1).1],
    })
}

fn secs(x: f64) -> String {
    if x >= 1.0 {
        format!("{x:.2} s")
    } else {
        format!("{:.1} ms", x * 1e3)
    }
}

/// The comparison as lines for a terminal (each under 100 columns once
/// wrapped).
pub fn text(c: &Comparison, min: usize) -> String {
    let side = |s: &Stats| {
        format!(
            "{} median ({} to {})",
            secs(s.median),
            secs(s.min),
            secs(s.max)
        )
    };
    let mut out = format!(
        "bulkmem run --compare {n}: {} ({n} runs each, alternating; output discarded)\n",
        c.program[0],
        n = c.runs
    );
    if !c.ended.success {
        out += &format!(
            "  the program FAILED in every run ({}; {} of {} runs): timed as asked \
             (--allow-failure), so these are the times of its failure\n",
            c.ended.describe(),
            c.failed_runs,
            2 * c.runs + 2
        );
    }
    out += &format!("  without bulkmem  {}\n", side(&c.without_s));
    out += &format!("  with bulkmem     {}\n", side(&c.with_s));
    let by = |x: f64| format!("{:.1}%", x.abs() * 100.0);
    let change = c.with_s.median - c.without_s.median;
    let sign = if change < 0.0 { "-" } else { "+" };
    out += &format!(
        "  with / without   {:.3}x ({sign}{} a run, medians)\n",
        c.ratio,
        secs(change.abs())
    );
    out += &match c.interval {
        Some((lo, hi)) => {
            let what = match c.verdict {
                "faster" => format!(
                    "faster: the time falls by {} to {}",
                    by(1.0 - hi),
                    by(1.0 - lo)
                ),
                "slower" => format!(
                    "slower: the time grows by {} to {}",
                    by(lo - 1.0),
                    by(hi - 1.0)
                ),
                _ => format!(
                    "no difference this run could resolve ({:.3}x to {:.3}x)",
                    lo, hi
                ),
            };
            format!(
                "                   95% interval {lo:.3}x to {hi:.3}x over {} pairs\n  verdict          {what}\n",
                c.runs
            )
        }
        None => "  verdict          one pair gives no interval (--compare 5 or more)\n".to_string(),
    };
    let through: Vec<String> = (0..2)
        .filter(|&k| c.calls_per_run[k] > 0.0)
        .map(|k| {
            format!(
                "{} {} calls ({})",
                KINDS[k],
                c.calls_per_run[k],
                format_bytes(c.bytes_per_run[k] as usize)
            )
        })
        .collect();
    out += &if through.is_empty() {
        format!(
            "  no call of {} or more reached bulkmem: whatever moved, bulkmem did not move it\n",
            format_bytes(min)
        )
    } else {
        format!(
            "  through bulkmem in one run: {}, calls of {} and more\n",
            through.join(", "),
            format_bytes(min)
        )
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_are_students() {
        // Tables: t(0.975; 1) = 12.706, 9: 2.262, 30: 2.042, large: 1.960.
        for (df, want) in [(1.0, 12.706), (9.0, 2.262), (30.0, 2.042), (1e6, 1.960)] {
            assert!((t975(df) - want).abs() < 2e-3, "{df}: {}", t975(df));
        }
    }

    #[test]
    fn intervals_and_verdicts() {
        // Identical pairs: the ratio, a zero-width interval.
        let (r, i) = paired(&[0.8; 5]);
        assert!((r - 0.8).abs() < 1e-12);
        let (lo, hi) = i.unwrap();
        assert!((lo - 0.8).abs() < 1e-9 && (hi - 0.8).abs() < 1e-9);
        assert_eq!(verdict(i), "faster");
        // Ratios around 1 either way: nothing resolved.
        let (r, i) = paired(&[0.9, 1.1, 0.95, 1.05, 1.0, 0.98, 1.02]);
        assert!((r - 1.0).abs() < 0.01, "{r}");
        let (lo, hi) = i.unwrap();
        assert!(lo < 1.0 && hi > 1.0);
        assert_eq!(verdict(i), "no difference resolved");
        // Consistently slower.
        assert_eq!(verdict(paired(&[1.2, 1.25, 1.18, 1.22]).1), "slower");
        // One pair: no interval, no verdict.
        assert_eq!(paired(&[0.5]).1, None);
        assert_eq!(verdict(None), "no difference resolved");
    }

    #[test]
    fn the_text_says_what_the_interval_says() {
        let c = |ratio, interval, v| Comparison {
            program: vec!["prog".into()],
            runs: 10,
            ended: Ending {
                success: true,
                exit_code: Some(0),
                signal: None,
            },
            failed_runs: 0,
            without_s: Stats::or_zero(&[2.0, 2.1]),
            with_s: Stats::or_zero(&[1.8, 1.9]),
            ratio,
            interval,
            verdict: v,
            calls_per_run: [3.0, 0.0],
            bytes_per_run: [3.0 * 268435456.0, 0.0],
        };
        let t = super::super::summary::wrap(&text(&c(0.9, Some((0.85, 0.95)), "faster"), 1 << 20));
        assert!(t.contains("faster: the time falls by 5.0% to 15.0%"), "{t}");
        assert!(t.contains("0.900x (-200.0 ms a run, medians)"), "{t}");
        assert!(t.lines().all(|l| l.chars().count() <= 100), "{t}");
        assert!(t.contains("copy 3 calls (768M)"), "{t}");
        let t = text(
            &c(1.0, Some((0.97, 1.04)), "no difference resolved"),
            1 << 20,
        );
        assert!(t.contains("no difference this run could resolve"), "{t}");
        assert!(!t.contains("FAILED"), "{t}");
        // A failing program timed on request says so before any figure.
        let mut failing = c(1.0, Some((0.97, 1.04)), "no difference resolved");
        (failing.ended, failing.failed_runs) = (
            Ending {
                success: false,
                exit_code: Some(1),
                signal: None,
            },
            22,
        );
        let t = super::super::summary::wrap(&text(&failing, 1 << 20));
        let first = t.lines().nth(1).unwrap();
        assert!(
            first.contains("FAILED in every run (exit status 1; 22 of 22 runs)"),
            "{t}"
        );
        assert!(t.lines().all(|l| l.chars().count() <= 100), "{t}");
        let mut none = c(1.0, None, "no difference resolved");
        none.calls_per_run = [0.0, 0.0];
        let t = text(&none, 1 << 20);
        assert!(
            t.contains("no interval") && t.contains("no call of 1M"),
            "{t}"
        );
    }
}
