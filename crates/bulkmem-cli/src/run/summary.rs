//! The summary `bulkmem run` prints when the program is done: what the
//! process tree sent through bulkmem and what stayed with the C library,
//! in lines of at most 100 columns.
//!
//! It says nothing of time saved. An estimate from the copying alone
//! (both routines timed after the run on warm buffers of the calls' mean
//! size) flipped sign from run to run of one program and cost seconds
//! nobody asked for; `bulkmem run --compare N` measures the program
//! itself, with and without bulkmem, and says how sure it is.

use std::fmt::Write as _;

use super::records::{Counts, KINDS};
use bulkmem_machine::units::format_bytes;

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

/// What the processes were, where that is not just the program: a
/// wrapper (a pyenv shim is bash) or children of other names; the four
/// most common names, with counts.
fn names(run: &Run) -> String {
    let base = run.program.rsplit('/').next().unwrap_or(run.program);
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for r in run.records {
        match counts.iter_mut().find(|(n, _)| *n == r.comm) {
            Some((_, c)) => *c += 1,
            None => counts.push((&r.comm, 1)),
        }
    }
    if counts.iter().all(|(n, _)| *n == base) {
        return String::new();
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut parts: Vec<String> = counts
        .iter()
        .take(4)
        .map(|(n, c)| format!("{c} {n}"))
        .collect();
    if counts.len() > 4 {
        parts.push("...".into());
    }
    format!(" ({})", parts.join(", "))
}

fn gib(b: u64) -> String {
    format_bytes(b as usize)
}

/// The summary's lines, each at most [`WIDTH`] columns (words longer
/// than that stand alone).
pub fn text(run: &Run) -> String {
    wrap(&unwrapped(run))
}

/// Columns a summary line may take.
pub const WIDTH: usize = 100;

/// `text` with each line longer than [`WIDTH`] columns cut at spaces; a
/// continued line starts with four spaces more than the line's own indent.
/// Lines that fit stay as they are, aligned columns included.
pub fn wrap(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.chars().count() <= WIDTH {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let mut cur = line[..indent].to_string();
        let mut fresh = true;
        for word in line.split_whitespace() {
            if !fresh && cur.chars().count() + 1 + word.chars().count() > WIDTH {
                out.push_str(&cur);
                out.push('\n');
                cur = " ".repeat(indent + 4);
                fresh = true;
            }
            if !fresh {
                cur.push(' ');
            }
            cur.push_str(word);
            fresh = false;
        }
        out.push_str(&cur);
        out.push('\n');
    }
    out
}

/// The summary's logical lines, before wrapping.
fn unwrapped(run: &Run) -> String {
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
            "it made no call of the threshold's size, or is statically linked or \
             set-user-ID, which the loader never preloads into"
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
        "bulkmem run: {procs} of {}{}; calls of {} and more: {bulk_calls} through bulkmem",
        run.program,
        names(run),
        format_bytes(run.min)
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
            format_bytes(run.min)
        );
    } else {
        let took: f64 = total.nanos.iter().map(|&n| n as f64 * 1e-9).sum();
        let _ = writeln!(
            s,
            "  those calls spent {} in bulkmem (page faults of fresh memory included); what \
             bulkmem changes in the program's time: bulkmem run --compare 10 -- {}",
            secs(took),
            run.program,
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

    /// The summary with its continuation lines joined back.
    fn joined(t: &str) -> String {
        t.lines().map(str::trim).collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn the_tree_is_summed_in_lines_that_fit() {
        // Two processes, 2 GiB copied with helper threads in 1 s in all.
        let r = [
            counts(1, (1, 1 << 30), 500_000_000),
            counts(2, (1, 1 << 30), 500_000_000),
        ];
        let t = text(&run(&r, None));
        assert!(t.lines().all(|l| l.chars().count() <= WIDTH), "{t}");
        let j = joined(&t);
        assert!(j.contains("2 processes of prog"), "{t}");
        assert!(j.contains("2 through bulkmem, copy 2 (2G)"), "{t}");
        assert!(j.contains("spent 1.00 s in bulkmem (page faults"), "{t}");
        // No estimate of time saved: the way to measure it instead.
        assert!(!j.contains("saved") && !j.contains("lost"), "{t}");
        assert!(j.contains("bulkmem run --compare 10 -- prog"), "{t}");
    }

    #[test]
    fn processes_of_other_names_are_said() {
        let mut r = vec![counts(1, (1, 1 << 20), 1), counts(2, (0, 0), 0)];
        // All named as the program: nothing added.
        assert!(joined(&text(&run(&r, None))).contains("2 processes of prog; calls"));
        // A shim: the program given is python3, the processes bash.
        r[0].comm = "bash".into();
        r[1].comm = "bash".into();
        let mut x = run(&r, None);
        x.program = "/usr/bin/python3";
        let t = joined(&text(&x));
        assert!(
            t.contains("2 processes of /usr/bin/python3 (2 bash); calls"),
            "{t}"
        );
    }

    #[test]
    fn wrapping_keeps_words_and_indents() {
        let long = format!("  {}", ["word"; 40].join(" "));
        let w = wrap(&long);
        assert!(w.lines().count() > 1, "{w}");
        assert!(w.lines().all(|l| l.chars().count() <= WIDTH), "{w}");
        assert!(w.lines().skip(1).all(|l| l.starts_with("      w")), "{w}");
        assert_eq!(joined(&w), ["word"; 40].join(" "));
        // A word longer than a line stands alone rather than being cut.
        let huge = "x".repeat(150);
        assert_eq!(
            wrap(&format!("a {huge} b")),
            format!("a\n    {huge}\n    b\n")
        );
    }

    #[test]
    fn nothing_large_and_nothing_reported_say_why() {
        let t = joined(&text(&run(&[counts(1, (0, 0), 0)], None)));
        assert!(
            t.contains("nothing reached 1M") && t.contains("copy_file_range"),
            "{t}"
        );
        let t = joined(&text(&run(&[], Some("x is statically linked".into()))));
        assert!(t.contains("no process of prog reported"), "{t}");
        assert!(t.contains("x is statically linked."), "{t}");
        let t = joined(&text(&run(&[], None)));
        assert!(t.contains("no call of the threshold's size"), "{t}");
    }
}
