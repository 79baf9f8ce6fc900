//! The 0.1 C structs of bulkmem.h that have a layout (the handles are
//! opaque), `#[repr(C)]` with the C field names. They sit here rather than
//! beside the functions that use them so that tests/c_suite.rs can include
//! this file (only std types) and check every field's offset against the
//! header; the sized `_v2` structs are in [`crate::sized`] for the same
//! reason. These layouts are frozen: programs built against 0.1 pass them.

use std::ffi::{c_char, c_int, c_uint, c_void};

/// The C `bm_extent`.
#[repr(C)]
pub struct BmExtent {
    pub dst: *mut c_void,
    pub src: *const c_void,
    pub len: usize,
}

/// The C `bm_fault`.
#[repr(C)]
pub struct BmFault {
    pub offset: usize,
    pub addr: *mut c_void,
    pub side: c_int,
    pub code: c_int,
}

/// The C `bm_engine_opts`.
#[repr(C)]
pub struct BmEngineOpts {
    pub threads: usize,
    pub placement: c_int,
    pub chunk: usize,
    pub strategy: *const c_char,
    pub hint: c_int,
}

/// The C `bm_ctl`.
#[repr(C)]
pub struct BmCtl {
    pub progress: Option<extern "C" fn(usize, usize, *mut c_void)>,
    pub ctx: *mut c_void,
    pub cancel: *const c_int,
}

/// The C `bm_report`.
#[repr(C)]
pub struct BmReport {
    pub total: usize,
    pub bytes_done: usize,
    pub extents_done: usize,
    pub workers: usize,
    pub cancelled: c_int,
    pub strategy: *const c_char,
}

/// The C `bm_move_report` (bytes).
#[repr(C)]
pub struct BmMoveReport {
    pub moved: usize,
    pub copied: usize,
    pub holes: usize,
    pub failures: usize,
    pub ioctls: usize,
}

/// The C `bm_migrate_report` (pages).
#[repr(C)]
#[derive(Default)]
pub struct BmMigrateReport {
    pub moved: usize,
    pub already: usize,
    pub not_present: usize,
    pub failed: usize,
}

/// The C `bm_compact_options`.
#[repr(C)]
pub struct BmCompactOptions {
    pub mode: c_uint,
    pub workers: c_uint,
    pub batch: c_uint,
    pub huge_pages: c_uint,
}

/// The C `bm_compact_space`.
#[repr(C)]
pub struct BmCompactSpace {
    pub heap: *mut std::ffi::c_void,
    pub len: usize,
    /// `bm_produce_fn` (the suite includes this file alone: the
    /// callback types are spelled out).
    pub produce: Option<
        unsafe extern "C" fn(
            *mut std::ffi::c_void,
            usize,
            *const std::ffi::c_void,
            *mut std::ffi::c_void,
        ) -> std::ffi::c_int,
    >,
    /// `bm_first_source_fn`.
    pub first_source: Option<unsafe extern "C" fn(*mut std::ffi::c_void, usize) -> usize>,
    /// `bm_last_source_fn`.
    pub last_source: Option<unsafe extern "C" fn(*mut std::ffi::c_void, usize) -> usize>,
    pub ctx: *mut std::ffi::c_void,
}

/// The C `bm_compact_stats`.
#[repr(C)]
#[derive(Default)]
pub struct BmCompactStats {
    pub pages: usize,
    pub by_collector: usize,
    pub by_mutators: usize,
    pub faults: usize,
    pub waits: usize,
    pub refaults: usize,
    pub ioctls: usize,
    pub moved: usize,
    pub copied: usize,
    pub zeroed: usize,
    pub move_fallbacks: usize,
    pub eexist: usize,
    pub released: usize,
    pub failed: usize,
    pub pause_us: f64,
    pub stall_p50_us: f64,
    pub stall_p99_us: f64,
    pub stall_p999_us: f64,
    pub stall_max_us: f64,
}

/// The C `bm_compact_stats_v2`, a sized struct (see `sized.rs`) kept here
/// beside the statistics it carries.
#[repr(C)]
#[derive(Default)]
pub struct BmCompactStatsV2 {
    pub size: usize,
    pub stats: BmCompactStats,
    pub memory_waits: usize,
}

/// `BM_COMPACT_STATS_V2_SIZE_VER0`: every field above.
pub const COMPACT_STATS_V2_VER0: usize = std::mem::size_of::<BmCompactStatsV2>();
