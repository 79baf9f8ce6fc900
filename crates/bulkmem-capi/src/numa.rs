//! NUMA nodes and move_pages(2) migration.

use std::ffi::{c_int, c_void};

use bulkmem_core::numa::{self, MigrateOptions};

use bulkmem_core::topology::Nodes;

use crate::status::{call, fail, invalid};
use crate::structs::BmMigrateReport;

pub extern "C" fn bm_numa_nodes() -> c_int {
    call(|| Ok(Nodes::detect().ids().len().max(1) as c_int))
}

pub unsafe extern "C" fn bm_migrate(
    addr: *mut c_void,
    len: usize,
    node: c_int,
    r: *mut BmMigrateReport,
) -> c_int {
    call(|| {
        let to = usize::try_from(node).map_err(|_| invalid(format!("node {node} is negative")))?;
        if len == 0 {
            // The library refuses an empty range; the header promises that
            // a length of 0 is valid and does nothing.
            if !r.is_null() {
                // SAFETY: a non-NULL report points to a bm_migrate_report.
                unsafe { r.write(BmMigrateReport::default()) };
            }
            return Ok(0);
        }
        let rep = numa::migrate(addr as usize, len, to, MigrateOptions::default())?;
        if !r.is_null() {
            let c = BmMigrateReport {
                moved: rep.moved,
                already: rep.already,
                not_present: rep.not_present,
                failed: rep.failed.len(),
            };
            // SAFETY: a non-NULL report points to a bm_migrate_report.
            unsafe { r.write(c) };
        }
        if let Some(&(at, errno)) = rep.failed.first() {
            return Err(fail(
                libc::EAGAIN,
                format!(
                    "{} page(s) did not move; the first at {at:#x}: {}",
                    rep.failed.len(),
                    std::io::Error::from_raw_os_error(errno)
                ),
            ));
        }
        Ok(0)
    })
}
