//! What the loader gives the engine it opens: the table of its services
//! ([`LOADER`]), whether the engine is to read the environment, and the
//! rule for warnings (only where a variable asked for the preload).

use core::sync::atomic::{AtomicBool, Ordering};

use crate::{calls, next, own_stack, signals, thread};
use bulkmem_preload_abi::abi::{self, Loader};
use bulkmem_preload_abi::sys;

/// Whether the engine is to read the `BULKMEM_PRELOAD_*` variables.
pub static READ_ENV: AtomicBool = AtomicBool::new(false);
/// Whether a `BULKMEM_PRELOAD*` variable was set (and read: not under
/// `AT_SECURE`): only then may the preload write a warning to fd 2, which
/// in a daemon may be a file of its own.
pub static ASKED: AtomicBool = AtomicBool::new(false);

/// A warning on stderr where a `BULKMEM_*` variable asked for the
/// preload, best effort; nothing otherwise.
pub(crate) fn warn(parts: &[&[u8]]) {
    if ASKED.load(Ordering::Relaxed) {
        sys::warn(parts);
    }
}

/// What the engine is given.
pub static LOADER: Loader = Loader {
    version: abi::VERSION,
    read_env: &READ_ENV,
    thread: thread::thread_for_engine,
    min: &calls::MIN,
    c_library: next::c_function,
    take_faults: signals::take_faults,
    faults_ours: signals::faults_ours,
    on_own_stack: own_stack::on_own_stack,
    on_valgrind: sys::running_on_valgrind,
};
