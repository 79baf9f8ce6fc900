//! The interposed calls by number: the C library's numbering in `abi`
//! (a fortified form is its plain one's plus [`FORTIFIED`]), each call's
//! slot in the tables indexed by it ([`NEXT`], `small::END`), the C
//! library's definition of each, and [`MIN`], below which every call
//! takes the C library. The router (`route.rs`) and the small path
//! (`small.rs`) both read these; neither reads the other's.

use core::sync::atomic::AtomicUsize;

use crate::next;
use bulkmem_preload_abi::abi;

/// Calls below this take the C library; `usize::MAX` until the constructor
/// has decided (and when switched off), 0 when the engine counts every
/// call (`BULKMEM_PRELOAD_STATS=1`).
pub static MIN: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Which function called the router: the plain ones are the C library's
/// numbers in `abi`, a fortified one its plain one's plus [`FORTIFIED`].
pub const MEMCPY: u32 = abi::C_MEMCPY;
pub const MEMMOVE: u32 = abi::C_MEMMOVE;
pub const MEMSET: u32 = abi::C_MEMSET;
pub const MEMPCPY: u32 = abi::C_MEMPCPY;
pub const FORTIFIED: u32 = 4;
pub const MEMCPY_CHK: u32 = MEMCPY + FORTIFIED;
pub const MEMMOVE_CHK: u32 = MEMMOVE + FORTIFIED;
pub const MEMSET_CHK: u32 = MEMSET + FORTIFIED;
/// The functions' slots in [`NEXT`] and `small::END`.
pub const MEMCPY_CALL: usize = MEMCPY as usize;
pub const MEMMOVE_CALL: usize = MEMMOVE as usize;
pub const MEMSET_CALL: usize = MEMSET as usize;
pub const MEMPCPY_CALL: usize = MEMPCPY as usize;
pub const MEMSET_CHK_CALL: usize = MEMSET_CHK as usize;

/// The C library's definitions by call number (the slots of
/// `small::END`).
pub static NEXT: [&next::Next; 7] = [
    &next::MEMCPY,
    &next::MEMMOVE,
    &next::MEMSET,
    &next::MEMPCPY,
    &next::MEMCPY_CHK,
    &next::MEMMOVE_CHK,
    &next::MEMSET_CHK,
];
