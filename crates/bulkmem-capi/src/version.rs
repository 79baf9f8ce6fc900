//! The library's version, as the header's `BULKMEM_VERSION*` macros
//! spell it: `bm_version`, `bm_version_number`, `bm_check_version`.

use std::ffi::{c_char, c_int};

use crate::status;

/// `bm_version`.
pub extern "C" fn bm_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// A decimal version component from Cargo (a compile-time constant).
const fn component(s: &str) -> i32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut n = 0;
    while i < b.len() {
        n = n * 10 + (b[i] - b'0') as i32;
        i += 1;
    }
    n
}

const MAJOR: i32 = component(env!("CARGO_PKG_VERSION_MAJOR"));
const MINOR: i32 = component(env!("CARGO_PKG_VERSION_MINOR"));
const PATCH: i32 = component(env!("CARGO_PKG_VERSION_PATCH"));

/// `bm_version_number`: the header's `BULKMEM_VERSION_NUMBER` formula.
pub extern "C" fn bm_version_number() -> c_int {
    MAJOR * 10000 + MINOR * 100 + PATCH
}

/// `bm_check_version`.
pub extern "C" fn bm_check_version(major: c_int, minor: c_int) -> c_int {
    status::call(|| {
        if major != MAJOR {
            return Err(status::fail(
                libc::ENOTSUP,
                format!("built for bulkmem {major}.x, running with {MAJOR}.{MINOR}.{PATCH}"),
            ));
        }
        if minor > MINOR {
            return Err(status::fail(
                libc::ENOTSUP,
                format!(
                    "built for bulkmem {major}.{minor}, running with the older {MAJOR}.{MINOR}.{PATCH}"
                ),
            ));
        }
        Ok(0)
    })
}
