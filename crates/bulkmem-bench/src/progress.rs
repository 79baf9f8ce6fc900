//! Progress on stderr while a bench measures. On a terminal a bar that
//! ticks every second, so a cell that takes minutes (17-byte extents
//! batched cold) still shows time passing. Where stderr is a file or a
//! pipe (a CI log, a terminal pane that is not a tty), where a bar is
//! never drawn, a [`Heartbeat`]: one line every [`EVERY`] while the bench
//! runs, so a long run never looks hung, and nothing at all from a short
//! one.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a [`Heartbeat`] speaks.
pub const EVERY: Duration = Duration::from_secs(10);

/// What the bench is doing now, as the heartbeat's thread reads it.
struct Now {
    done: usize,
    of: usize,
    label: String,
    over: bool,
}

/// A thread that says where a bench is every so often until dropped.
pub struct Heartbeat {
    now: Arc<(Mutex<Now>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    /// Calls `say` with a progress line every `every` (never before the
    /// first `every` has passed) until the heartbeat is dropped.
    pub fn start(every: Duration, mut say: impl FnMut(&str) + Send + 'static) -> Heartbeat {
        let now = Arc::new((
            Mutex::new(Now {
                done: 0,
                of: 0,
                label: String::new(),
                over: false,
            }),
            Condvar::new(),
        ));
        let shared = Arc::clone(&now);
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut next = every;
            let (lock, wake) = &*shared;
            let mut g = lock.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if g.over {
                    return;
                }
                let elapsed = start.elapsed();
                if elapsed >= next {
                    say(&line(&g, elapsed));
                    next = elapsed + every;
                }
                let wait = next.saturating_sub(start.elapsed());
                g = wake
                    .wait_timeout(g, wait)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        });
        Heartbeat {
            now,
            thread: Some(thread),
        }
    }

    /// The bench has done `done` of `of` units and measures `label` now.
    pub fn set(&self, done: usize, of: usize, label: &str) {
        let mut g = self.now.0.lock().unwrap_or_else(|p| p.into_inner());
        (g.done, g.of) = (done, of);
        g.label.clear();
        g.label.push_str(label);
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.now.0.lock().unwrap_or_else(|p| p.into_inner()).over = true;
        self.now.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `label`, and the time left at the pace so far once a unit is done
/// (the units of one bench are alike enough for that: a regime and size
/// group each).
pub fn with_time_left(label: &str, elapsed: Duration, done: usize, of: usize) -> String {
    if done == 0 || done >= of {
        return label.to_string();
    }
    let left = elapsed.as_secs_f64() / done as f64 * (of - done) as f64;
    format!("{label} (about {} s left)", left.ceil())
}

/// `bulkmem: 30 s, 1/2 done: copy cold 17 (about 30 s left)`.
fn line(now: &Now, elapsed: Duration) -> String {
    format!(
        "bulkmem: {} s, {}/{} done: {}",
        elapsed.as_secs(),
        now.done,
        now.of,
        with_time_left(&now.label, elapsed, now.done, now.of)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn it_speaks_while_the_bench_runs_and_stops_when_dropped() {
        let (tx, rx) = mpsc::channel();
        let beat = Heartbeat::start(Duration::from_millis(1), move |l| {
            let _ = tx.send(l.to_string());
        });
        beat.set(1, 2, "copy cold 17");
        // The first line may predate `set`; one after it names the cell.
        let named = rx
            .iter()
            .find(|l| l.contains("copy cold 17"))
            .expect("a line naming the cell");
        assert!(
            named.starts_with("bulkmem: ") && named.contains(" s, 1/2 done: copy cold 17 (about "),
            "{named}"
        );
        drop(beat);
        // The thread is gone: its sender with it, so the channel ends.
        while rx.recv().is_ok() {}
    }

    #[test]
    fn a_short_run_says_nothing() {
        let (tx, rx) = mpsc::channel();
        let beat = Heartbeat::start(Duration::from_secs(3600), move |l| {
            let _ = tx.send(l.to_string());
        });
        beat.set(0, 3, "copy hot 4K");
        drop(beat);
        assert_eq!(rx.iter().count(), 0);
    }

    #[test]
    fn lines_say_how_far_and_how_long() {
        let now = Now {
            done: 1,
            of: 2,
            label: "copy cold 17".into(),
            over: false,
        };
        assert_eq!(
            line(&now, Duration::from_secs(30)),
            "bulkmem: 30 s, 1/2 done: copy cold 17 (about 30 s left)"
        );
    }
}
