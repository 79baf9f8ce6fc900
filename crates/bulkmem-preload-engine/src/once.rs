//! One-time states a call may need, built by the first call that needs
//! them on its own thread, never waited for: bulkmem's policy (`accel`)
//! and the helpers' count (`helpers`).

use std::sync::atomic::{AtomicU8, Ordering};

use crate::{cancel, loader};

/// Runs `make` for the state `state` tracks (0 not built, 1 being built
/// by one thread, 2 built, 3 failed) if no thread has begun it and this
/// is not a signal handler; returns whether it is built now.
#[cold]
#[inline(never)]
pub fn build(state: &AtomicU8, make: fn() -> bool) -> bool {
    if loader::in_handler()
        || state
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    {
        return false;
    }
    // Cancellation stays out until the state is built: the building runs
    // code that catches unwinds (a cancellation's would abort in it). So
    // does every other asynchronous signal: the building allocates and
    // opens files, which a handler's siglongjmp must not leave half done
    // (the allocator's lock taken for good). The mask comes back last,
    // from a frame with nothing to unwind. The building needs more stack
    // than a caller may have: it runs on the loader's; if that cannot be
    // mapped, a later call tries again.
    let old = cancel::block_raw(cancel::all_but_synchronous());
    let built = loader::on_own_stack(make);
    state.store(
        match built {
            Some(true) => 2,
            Some(false) => 3,
            None => 0,
        },
        Ordering::Release,
    );
    cancel::set_raw(old);
    built == Some(true)
}
