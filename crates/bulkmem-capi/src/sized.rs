//! The extensible (sized) C structs of bulkmem.h, `#[repr(C)]` with the C
//! field names. Only std types here: tests/c_suite.rs includes this file
//! to print the offsets it checks the header's layout against.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::AtomicBool;

/// The C `bm_engine_opts_v2`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BmEngineOptsV2 {
    pub size: usize,
    pub threads: usize,
    pub placement: c_int,
    pub chunk: usize,
    pub strategy: *const c_char,
    pub hint: c_int,
}

/// `BM_ENGINE_OPTS_V2_SIZE_VER0`: every field above.
pub const ENGINE_OPTS_V2_VER0: usize = std::mem::size_of::<BmEngineOptsV2>();

/// The C `bm_ctl_v2`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BmCtlV2 {
    pub size: usize,
    pub progress: Option<extern "C" fn(usize, usize, *mut c_void)>,
    pub ctx: *mut c_void,
    pub cancel: *const c_int,
    pub cancel_handle: *const AtomicBool,
}

/// `BM_CTL_V2_SIZE_VER0`: up to `cancel` (what `bm_ctl` had).
pub const CTL_V2_VER0: usize = std::mem::offset_of!(BmCtlV2, cancel_handle);

/// The C `bm_report_v2`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BmReportV2 {
    pub size: usize,
    pub total: usize,
    pub bytes_done: usize,
    pub extents_done: usize,
    pub workers: usize,
    pub cancelled: c_int,
    pub strategy: *const c_char,
    pub chunks: usize,
    pub offloaded: usize,
    pub offload_redone: usize,
    pub partial: c_int,
    pub partial_extent: usize,
    pub partial_bytes: usize,
}

/// `BM_REPORT_V2_SIZE_VER0`: up to `strategy` (what `bm_report` had).
pub const REPORT_V2_VER0: usize = std::mem::offset_of!(BmReportV2, chunks);
