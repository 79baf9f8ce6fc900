//! Skips decided at run time, written where they show: libtest hides a
//! passing test's stderr, and stable libtest cannot mark a test ignored
//! once it runs. Nothing here names the library, so the page moves' unit
//! tests (crates/bulkmem-pages) compile it too.

use std::io::Write;
use std::sync::{Mutex, Once};

static SKIPPED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records that the running test (libtest names its thread after it) left
/// out some or all of its work, and why: written to stderr directly, which
/// libtest does not capture (it captures `print!`/`eprint!` only), and
/// listed again after the run's summary line.
pub fn skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("a test").to_owned();
    let line = format!("SKIPPED {test}: {why}");
    let mut list = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    if list.contains(&line) {
        return;
    }
    let _ = writeln!(std::io::stderr(), "\n{line}");
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: `summary` takes nothing and cannot unwind; libtest's
        // summary is printed before main returns, so this comes after it.
        unsafe { libc::atexit(summary) };
    });
    list.push(line);
}

extern "C" fn summary() {
    let list = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "{} skipped at run time (not counted above):",
        list.len()
    );
    for line in list.iter() {
        let _ = writeln!(err, "    {line}");
    }
}
