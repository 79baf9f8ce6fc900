//! The summary `bulkmem run` prints when the program is done: what the
//! process tree sent through bulkmem, what stayed with the C library, and
//! an estimate of the time saved.
//!
//! The calls' own time includes what neither routine controls (page
//! faults of fresh memory: a 1 GiB copy into a new buffer is mostly that),
//! so the saving is estimated from the copying alone: the C library's and
//! bulkmem's routines timed here right after the run on warm buffers of the
//! calls' mean size, the difference applied to the bytes bulkmem took.

use std::fmt::Write as _;
use std::time::Instant;

use super::records::{Counts, KINDS};
use bulkmem_bench::size::fmt_size;

/// What the summary is built from.
pub struct Run<'a> {
    /// The program, as given.
    pub program: &'a str,
    /// Records read, and files that were not records.
    pub records: &'a [Counts],
    pub unreadable: usize,
    /// The preload's threshold (`BULKMEM_PRELOAD_MIN`, default 1 MiB).
    pub min: usize,
    /// Why the preload cannot enter the program, if known beforehand.
    pub not_preloaded: Option<String>,
}

/// Who a rate is of: the C library, or bulkmem on the calling thread
/// (`false`) or with helper threads (`true`), as the preload ran it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    Libc,
    Bulkmem { threads: bool },
}

/// `who`'s rate for `kind` (0 copy, 1 set) at `size` bytes a call (GB/s);
/// the summary asks only where bulkmem took calls.
pub type Rate<'a> = &'a dyn Fn(Who, usize, usize) -> f64;

fn gib(b: u64) -> String {
    fmt_size(b as usize)
}

/// The summary's lines.
pub fn text(run: &Run, rate: Rate) -> String {
    let mut s = String::new();
    let mut total = Counts::default();
    for c in run.records {
        total.add(c);
    }
    let n = run.records.len();
    let procs = if n == 1 {
        "1 process".to_string()
    } else {
        format!("{n} processes")
    };
    if n == 0 {
        let _ = writeln!(
            s,
            "bulkmem run: no process of {} reported to bulkmem.",
            run.program
        );
        let why = run.not_preloaded.clone().unwrap_or_else(|| {
            "it may be statically linked, set-user-ID, or have left by _exit or a signal, \
             which skip the exit handlers the report is written from"
                .to_string()
        });
        let _ = writeln!(s, "  {why}.");
        return s;
    }
    if let Some(tool) = &total.inert {
        let _ = writeln!(
            s,
            "bulkmem run: {procs}; under {tool} the preload hands every call to the C library"
        );
    }
    let large: Vec<(usize, u64, u64)> = (0..2)
        .map(|k| {
            let (c, b) = total.through_bulkmem(k);
            (k, c, b)
        })
        .collect();
    let passed_calls: u64 = (0..2).map(|k| total.calls[k][3]).sum();
    let passed_bytes: u64 = (0..2).map(|k| total.bytes[k][3]).sum();
    let bulk_calls: u64 = large.iter().map(|l| l.1).sum();
    let _ = write!(
        s,
        "bulkmem run: {procs} of {}; calls of {} and more: {bulk_calls} through bulkmem",
        run.program,
        fmt_size(run.min)
    );
    for &(k, c, b) in &large {
        if c > 0 {
            let _ = write!(s, ", {} {c} ({})", KINDS[k], gib(b));
        }
    }
    let _ = writeln!(
        s,
        "; {passed_calls} ({}) left to the C library (overlapping memmove, non-zero memset)",
        gib(passed_bytes)
    );
    if total.small_counted {
        let (c, b): (u64, u64) = (0..2)
            .map(|k| (total.calls[k][0], total.bytes[k][0]))
            .fold((0, 0), |a, x| (a.0 + x.0, a.1 + x.1));
        let _ = writeln!(s, "  smaller calls, to the C library: {c} ({})", gib(b));
    }
    if bulk_calls == 0 {
        let _ = writeln!(
            s,
            "  nothing reached {}, so bulkmem changed nothing (BULKMEM_PRELOAD_MIN sets the \
             threshold). Programs that copy files with copy_file_range, sendfile or splice \
             (cp, cat, rsync) move the data in the kernel, not through memcpy.",
            fmt_size(run.min)
        );
    } else {
        let took: f64 = total.nanos.iter().map(|&n| n as f64 * 1e-9).sum();
        let (mut libc, mut ours) = (0.0, 0.0);
        let mut rates = Vec::new();
        for (k, kind) in KINDS.iter().enumerate() {
            for (p, threads) in [(1, false), (2, true)] {
                let (c, b) = (total.calls[k][p], total.bytes[k][p]);
                if c == 0 {
                    continue;
                }
                let mean = (b / c) as usize;
                let l = rate(Who::Libc, k, mean);
                let o = rate(Who::Bulkmem { threads }, k, mean);
                libc += b as f64 / (l * 1e9);
                ours += b as f64 / (o * 1e9);
                rates.push(format!(
                    "{kind} at {}: C library {l:.1} GB/s, bulkmem {o:.1}{}",
                    fmt_size(mean),
                    if threads { " with helper threads" } else { "" }
                ));
            }
        }
        let saved = libc - ours;
        let verdict = if saved >= 0.0 {
            format!("about {} saved", secs(saved))
        } else {
            format!("about {} lost", secs(-saved))
        };
        let _ = writeln!(
            s,
            "  those calls took {} (page faults of fresh memory included); the copying alone, \
             timed here just now on warm buffers ({}), takes the C library {} and bulkmem {}: \
             {verdict}",
            secs(took),
            rates.join("; "),
            secs(libc),
            secs(ours),
        );
        if total.streamed > 0 {
            let _ = writeln!(
                s,
                "  {} written with non-temporal stores (straight to memory: a program that \
                 reads it next reads it from there)",
                gib(total.streamed)
            );
        }
    }
    if run.unreadable > 0 {
        let _ = writeln!(
            s,
            "  {} record(s) cut short or unreadable, not counted",
            run.unreadable
        );
    }
    s
}

fn secs(x: f64) -> String {
    if x >= 1.0 {
        format!("{x:.2} s")
    } else {
        format!("{:.1} ms", x * 1e3)
    }
}

/// `who`'s rate (GB/s) for `kind` (0 copy, 1 set) at `size` bytes a
/// call, here and now: the median of five calls on prefaulted buffers of
/// that size (at most 256 MiB; at least 1 MiB), after one untimed. This
/// process is not preloaded: its memcpy and memset are the C library's.
pub fn measured_rate(who: Who, kind: usize, size: usize) -> f64 {
    let size = size.clamp(1 << 20, 256 << 20);
    let map = |fill| bulkmem::calibrate::toolkit::prefaulted(size, false, fill);
    let (Ok(src), Ok(mut dst)) = (map(1), map(0)) else {
        return f64::NAN;
    };
    let engine = match who {
        Who::Bulkmem { threads: true } => bulkmem::Engine::new().ok(),
        _ => None,
    };
    let once = |dst: &mut [u8]| match (who, kind, &engine) {
        (Who::Libc, 0, _) => dst.copy_from_slice(src.as_slice()),
        (Who::Libc, _, _) => dst.fill(0),
        (_, 0, Some(e)) => {
            let _ = e.copy_batch(&mut [(dst, src.as_slice())]);
        }
        (_, _, Some(e)) => {
            let _ = e.clear_batch(&mut [dst]);
        }
        (_, 0, None) => bulkmem::copy(dst, src.as_slice()),
        (_, _, None) => bulkmem::clear(dst),
    };
    let mut times: Vec<f64> = (0..6)
        .map(|_| {
            let t = Instant::now();
            once(std::hint::black_box(dst.as_mut_slice()));
            t.elapsed().as_secs_f64()
        })
        .skip(1)
        .collect();
    times.sort_by(f64::total_cmp);
    size as f64 / times[times.len() / 2] / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pid: u32, copy_threads: (u64, u64), ns: u64) -> Counts {
        let mut c = Counts {
            pid,
            comm: "prog".into(),
            ..Counts::default()
        };
        c.calls[0][2] = copy_threads.0;
        c.bytes[0][2] = copy_threads.1;
        c.nanos[0] = ns;
        c
    }

    fn run<'a>(records: &'a [Counts], why: Option<String>) -> Run<'a> {
        Run {
            program: "prog",
            records,
            unreadable: 0,
            min: 1 << 20,
            not_preloaded: why,
        }
    }

    #[test]
    fn the_tree_is_summed_and_the_saving_estimated() {
        // Two processes, 2 GiB copied with helper threads in 1 s in all;
        // warm, the C library copies 5 GB/s and bulkmem 10: 0.4295 s
        // against 0.2147 s.
        let r = [
            counts(1, (1, 1 << 30), 500_000_000),
            counts(2, (1, 1 << 30), 500_000_000),
        ];
        let rate = |who, k, size| {
            assert_eq!((k, size), (0, 1 << 30));
            match who {
                Who::Libc => 5.0,
                Who::Bulkmem { threads } => {
                    assert!(threads);
                    10.0
                }
            }
        };
        let t = text(&run(&r, None), &rate);
        assert!(t.contains("2 processes of prog"), "{t}");
        assert!(t.contains("2 through bulkmem, copy 2 (2G)"), "{t}");
        assert!(t.contains("took 1.00 s (page faults"), "{t}");
        assert!(
            t.contains("C library 5.0 GB/s, bulkmem 10.0 with helper threads"),
            "{t}"
        );
        assert!(
            t.contains("takes the C library 429.5 ms and bulkmem 214.7 ms: about 214.7 ms saved"),
            "{t}"
        );
        // Slower than the C library is said as such.
        let t = text(&run(&r, None), &|who, _, _| {
            if who == Who::Libc {
                20.0
            } else {
                10.0
            }
        });
        assert!(t.contains("lost"), "{t}");
    }

    #[test]
    fn nothing_large_and_nothing_reported_say_why() {
        let t = text(
            &run(&[counts(1, (0, 0), 0)], None),
            &|_, _, _| unreachable!(),
        );
        assert!(
            t.contains("nothing reached 1M") && t.contains("copy_file_range"),
            "{t}"
        );
        let t = text(
            &run(&[], Some("x is statically linked".into())),
            &|_, _, _| 1.0,
        );
        assert!(t.contains("no process of prog reported"), "{t}");
        assert!(t.contains("x is statically linked."), "{t}");
        let t = text(&run(&[], None), &|_, _, _| 1.0);
        assert!(t.contains("_exit"), "{t}");
    }

    #[test]
    fn rates_are_measured_for_every_routine() {
        for who in [
            Who::Libc,
            Who::Bulkmem { threads: false },
            Who::Bulkmem { threads: true },
        ] {
            for kind in [0, 1] {
                let r = measured_rate(who, kind, 4096);
                assert!(r > 0.0 && r.is_finite(), "{who:?} {kind}: {r}");
            }
        }
    }
}
