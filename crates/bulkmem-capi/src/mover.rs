//! Page moves with userfaultfd UFFDIO_MOVE (the kernel's UFFDIO_MOVE batching patches).

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Mutex;

use bulkmem_core::uffd::{MoveOptions, MoveReport, Mover};
use bulkmem_core::PagesError;

use crate::status::{call, call_ptr, fail, invalid, Res};
use crate::structs::BmMoveReport;

const PAGE: usize = 4096;

/// The C `bm_mover`: registration needs `&mut`, so the mover sits behind a
/// lock and a handle may be shared between threads.
pub struct BmMover(Mutex<Mover>);

fn mover<'a>(m: *mut BmMover) -> Res<std::sync::MutexGuard<'a, Mover>> {
    if m.is_null() {
        return Err(invalid("the mover is NULL"));
    }
    // SAFETY: a non-NULL mover came from bm_mover_new (the contract).
    let m = unsafe { &*m };
    Ok(m.0.lock().unwrap_or_else(|e| e.into_inner()))
}

pub extern "C" fn bm_mover_new() -> *mut BmMover {
    call_ptr(|| Ok(Box::into_raw(Box::new(BmMover(Mutex::new(Mover::new()?))))))
}

pub unsafe extern "C" fn bm_mover_register(
    m: *mut BmMover,
    addr: *mut c_void,
    len: usize,
) -> c_int {
    call(|| {
        let mut m = mover(m)?;
        // A length of 0 is valid and does nothing (the header's promise;
        // the kernel refuses an empty range).
        if len > 0 {
            m.register(addr.cast(), len)?;
        }
        Ok(0)
    })
}

pub unsafe extern "C" fn bm_mover_unregister(
    m: *mut BmMover,
    addr: *mut c_void,
    len: usize,
) -> c_int {
    call(|| {
        let mut m = mover(m)?;
        if len > 0 {
            m.unregister(addr.cast(), len)?;
        }
        Ok(0)
    })
}

pub unsafe extern "C" fn bm_mover_move(
    m: *mut BmMover,
    dst: *mut c_void,
    src: *mut c_void,
    len: usize,
    flags: c_uint,
    r: *mut BmMoveReport,
) -> c_int {
    call(|| {
        if flags & !7 != 0 {
            return Err(invalid(format!("unknown move flags {flags:#x}")));
        }
        let opts = MoveOptions::default()
            .allow_src_holes(flags & 1 != 0)
            .fallback_copy(flags & 2 != 0)
            .dont_wake(flags & 4 != 0);
        let guard = mover(m)?;
        // SAFETY: the header's contract: private anonymous ranges of this
        // process that nothing else touches during the call; move_range
        // checks alignment, overlap and registration.
        let result = unsafe { guard.move_range(dst.cast(), src.cast(), len, opts) };
        let report = match result {
            Ok(rep) => rep,
            Err(PagesError::Ioctl {
                op,
                addr,
                errno,
                report,
            }) => {
                // The pages moved before the failure stay moved: C learns
                // how far it got.
                write(r, &report);
                return Err(fail(
                    errno,
                    format!(
                        "{op} failed at {addr:#x}: {}",
                        std::io::Error::from_raw_os_error(errno)
                    ),
                ));
            }
            Err(e) => return Err(e.into()),
        };
        write(r, &report);
        if let Some(f) = report.failures.first() {
            return Err(fail(
                libc::EAGAIN,
                format!(
                    "{} page(s) left behind; the first at {:#x} -> {:#x}: {}",
                    report.failures.len(),
                    f.src,
                    f.dst,
                    std::io::Error::from_raw_os_error(f.errno)
                ),
            ));
        }
        Ok(0)
    })
}

fn write(out: *mut BmMoveReport, r: &MoveReport) {
    if out.is_null() {
        return;
    }
    let c = BmMoveReport {
        moved: r.moved * PAGE,
        copied: r.copied * PAGE,
        holes: r.holes * PAGE,
        failures: r.failures.len(),
        ioctls: r.ioctls,
    };
    // SAFETY: a non-NULL report points to a bm_move_report (the contract).
    unsafe { out.write(c) };
}

pub unsafe extern "C" fn bm_mover_free(m: *mut BmMover) {
    if !m.is_null() {
        // SAFETY: `m` came from bm_mover_new and is freed once (contract).
        drop(unsafe { Box::from_raw(m) });
    }
}
