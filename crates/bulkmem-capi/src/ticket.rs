//! Asynchronous engine batches: `bm_engine_submit_copy`/`_clear` return a
//! `bm_ticket` to wait on, poll, cancel or put in epoll.

use std::ffi::c_int;
use std::time::Duration;

use bulkmem_core::{Report, Ticket};

use crate::batch::{extents, write_report, BmEngine};
use crate::status::{call, fail, invalid, Res};
use crate::structs::{BmExtent, BmReport};

/// The C `bm_ticket`. The header requires every ticket of an engine to be
/// freed before the engine, which is what the `'static` stands for.
pub struct BmTicket(Ticket<'static>);

/// # Safety
/// The header's contract for `bm_engine_submit_*`.
unsafe fn submit(
    clear: bool,
    e: *mut BmEngine,
    ext: *const BmExtent,
    n: usize,
    flags: u32,
    out: *mut *mut BmTicket,
) -> Res<c_int> {
    if e.is_null() || out.is_null() {
        return Err(invalid("the engine or the ticket pointer is NULL"));
    }
    if flags != 0 {
        return Err(invalid(format!("flags {flags:#x}: none is defined yet")));
    }
    // SAFETY: a non-NULL engine came from bm_engine_new* (the contract).
    let engine = unsafe { &(*e).0 };
    // SAFETY: forwarded contract.
    let v = unsafe { extents(ext, n)? };
    // SAFETY: the memory stays valid and untouched until the ticket is
    // done or freed (the contract); the engine validates before queuing.
    let t = unsafe {
        if clear {
            engine.submit_clear(&v, None)
        } else {
            engine.submit_copy(&v, None)
        }
    }?;
    // SAFETY: only the lifetime changes; the contract frees every ticket
    // before its engine, so the engine outlives it.
    let t = unsafe { std::mem::transmute::<Ticket<'_>, Ticket<'static>>(t) };
    // SAFETY: `out` is non-NULL and writable (the contract).
    unsafe { out.write(Box::into_raw(Box::new(BmTicket(t)))) };
    Ok(0)
}

pub unsafe extern "C" fn bm_engine_submit_copy(
    e: *mut BmEngine,
    ext: *const BmExtent,
    n: usize,
    flags: u32,
    ticket: *mut *mut BmTicket,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { submit(false, e, ext, n, flags, ticket) })
}

pub unsafe extern "C" fn bm_engine_submit_clear(
    e: *mut BmEngine,
    ext: *const BmExtent,
    n: usize,
    flags: u32,
    ticket: *mut *mut BmTicket,
) -> c_int {
    // SAFETY: forwarded contract.
    call(|| unsafe { submit(true, e, ext, n, flags, ticket) })
}

fn ticket_ref<'a>(t: *const BmTicket) -> Res<&'a Ticket<'static>> {
    if t.is_null() {
        return Err(invalid("the ticket is NULL"));
    }
    // SAFETY: a non-NULL ticket came from bm_engine_submit_* and lives
    // until bm_ticket_free (the contract).
    Ok(&unsafe { &*t }.0)
}

/// The C code of a finished batch, as `bm_engine_copy_batch_ctl` returns.
fn outcome(r: Result<Report, bulkmem_core::Error>, report: *mut BmReport) -> Res<c_int> {
    match r {
        Ok(r) => {
            write_report(report, &r);
            if r.cancelled {
                return Err(fail(
                    libc::ECANCELED,
                    format!(
                        "cancelled after {} of {} bytes (extents 0..{} complete)",
                        r.bytes_done, r.total, r.extents_done
                    ),
                ));
            }
            Ok(0)
        }
        Err(bulkmem_core::Error::WorkerPanicked { report: r, message }) => {
            write_report(report, &r);
            Err(fail(
                libc::ENOTRECOVERABLE,
                format!("a worker panicked ({message})"),
            ))
        }
        Err(e) => Err(e.into()),
    }
}

pub unsafe extern "C" fn bm_ticket_wait(
    t: *mut BmTicket,
    timeout_ns: i64,
    report: *mut BmReport,
) -> c_int {
    call(|| {
        let t = ticket_ref(t)?;
        let r = match u64::try_from(timeout_ns) {
            // Negative: no limit.
            Err(_) => Some(t.wait()),
            Ok(ns) => t.wait_timeout(Duration::from_nanos(ns)),
        };
        match r {
            Some(r) => outcome(r, report),
            None => Err(fail(libc::ETIMEDOUT, "the batch is still running")),
        }
    })
}

pub unsafe extern "C" fn bm_ticket_poll(t: *const BmTicket) -> c_int {
    call(|| Ok(c_int::from(ticket_ref(t)?.is_done())))
}

pub unsafe extern "C" fn bm_ticket_fd(t: *const BmTicket) -> c_int {
    call(|| Ok(std::os::fd::AsRawFd::as_raw_fd(ticket_ref(t)?)))
}

pub unsafe extern "C" fn bm_ticket_cancel(t: *mut BmTicket) -> c_int {
    call(|| {
        ticket_ref(t)?.cancel();
        Ok(0)
    })
}

pub unsafe extern "C" fn bm_ticket_free(t: *mut BmTicket) {
    if !t.is_null() {
        // Waiting for the workers cannot unwind into C.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: `t` came from bm_engine_submit_* and is freed once
            // (the contract).
            drop(unsafe { Box::from_raw(t) })
        }));
    }
}
