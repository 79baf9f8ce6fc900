//! `bench copy|clear --against [LABEL=]LIB[:SYMBOL]`: another library's
//! `memcpy` or `memset` (AOCL-LibMem, a newer glibc, folly's, the user's
//! own) timed as one more row, in the same process and rounds as bulkmem's
//! strategies, byte-checked like them.
//!
//! The library is opened with `RTLD_LOCAL`: its symbols do not join the
//! global scope, so it cannot replace this process's own `memcpy` (the
//! `libc` row stays the C library's), and the function is found with
//! `dlsym` on its handle. Handles stay open for the life of the process.

use std::ffi::{c_int, c_void, CStr, CString};
use std::path::Path;

use bulkmem::Op;

/// `memcpy`'s signature.
pub type CopyFn = unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> *mut c_void;
/// `memset`'s signature.
pub type SetFn = unsafe extern "C" fn(*mut c_void, c_int, usize) -> *mut c_void;

/// A foreign routine, of the operation the plan measures.
#[derive(Clone, Copy, Debug)]
pub enum Foreign {
    Copy(CopyFn),
    Clear(SetFn),
}

impl Foreign {
    /// Copies `src` into `dst` (equal lengths).
    pub fn copy(self, dst: &mut [u8], src: &[u8]) {
        assert_eq!(dst.len(), src.len(), "a foreign copy of unequal lengths");
        let Foreign::Copy(f) = self else {
            unreachable!("a memset routine in a copy plan (load() matches the op)")
        };
        // What the routine does beyond memcpy's contract is its own bug;
        // every row is byte-checked before it is timed.
        // SAFETY: the user named this symbol as a memcpy; it gets two valid,
        // non-overlapping buffers of exactly dst.len() bytes.
        unsafe { f(dst.as_mut_ptr().cast(), src.as_ptr().cast(), dst.len()) };
    }

    /// Zeroes `dst`.
    pub fn clear(self, dst: &mut [u8]) {
        let Foreign::Clear(f) = self else {
            unreachable!("a memcpy routine in a clear plan (load() matches the op)")
        };
        // SAFETY: as in copy: a memset given a valid buffer of dst.len()
        // bytes and the byte 0.
        unsafe { f(dst.as_mut_ptr().cast(), 0, dst.len()) };
    }
}

/// What `--against` names: the row's label, the library and the symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub label: String,
    pub lib: String,
    pub symbol: String,
}

/// Parses `[LABEL=]LIB[:SYMBOL]`; the symbol defaults to `memcpy` for a
/// copy and `memset` for a clear, the label to the library file's stem and
/// the symbol (`libaocl-libmem:memcpy`).
pub fn parse(op: Op, spec: &str) -> Result<Spec, String> {
    let (label, rest) = match spec.split_once('=') {
        Some((l, r)) if !l.is_empty() && !l.contains('/') => (Some(l), r),
        _ => (None, spec),
    };
    // A ':' after the last '/' separates the symbol (paths may hold ':').
    let file_start = rest.rfind('/').map_or(0, |i| i + 1);
    let (lib, symbol) = match rest[file_start..].rfind(':') {
        Some(i) => (&rest[..file_start + i], &rest[file_start + i + 1..]),
        None => (rest, ""),
    };
    if lib.is_empty() {
        return Err(format!(
            "--against '{spec}': no library (expected [LABEL=]LIB[:SYMBOL])"
        ));
    }
    let symbol = if symbol.is_empty() {
        match op {
            Op::Copy => "memcpy",
            Op::Clear => "memset",
        }
    } else {
        symbol
    };
    let label = match label {
        Some(l) => l.to_string(),
        None => {
            let stem = Path::new(lib)
                .file_name()
                .and_then(|f| f.to_str())
                .map(|f| f.split(".so").next().unwrap_or(f))
                .filter(|s| !s.is_empty())
                .unwrap_or(lib);
            format!("{stem}:{symbol}")
        }
    };
    Ok(Spec {
        label,
        lib: lib.to_string(),
        symbol: symbol.to_string(),
    })
}

/// Opens every library and finds its routine. Labels are made unique (a
/// second `libc:memcpy` becomes `libc:memcpy#2`); a label equal to a
/// strategy name is refused, since rows are told apart by name.
pub fn load(op: Op, specs: &[String]) -> Result<Vec<(String, Foreign)>, String> {
    let mut out: Vec<(String, Foreign)> = Vec::new();
    for raw in specs {
        let spec = parse(op, raw)?;
        if spec.label.parse::<bulkmem::Strategy>().is_ok() || spec.label == "checked" {
            return Err(format!(
                "--against '{raw}': the label '{}' is a strategy's name; choose another (LABEL=LIB[:SYMBOL])",
                spec.label
            ));
        }
        let f = open(&spec).map_err(|e| format!("--against '{raw}': {e}"))?;
        let f = match op {
            // SAFETY: the user names this symbol as a memcpy (or memset);
            // its signature is that promise (as with any C declaration).
            Op::Copy => Foreign::Copy(unsafe { std::mem::transmute::<*mut c_void, CopyFn>(f) }),
            // SAFETY: as above, for memset.
            Op::Clear => Foreign::Clear(unsafe { std::mem::transmute::<*mut c_void, SetFn>(f) }),
        };
        let mut label = spec.label.clone();
        let mut n = 1;
        while out.iter().any(|(l, _)| *l == label) {
            n += 1;
            label = format!("{}#{n}", spec.label);
        }
        out.push((label, f));
    }
    Ok(out)
}

/// `dlopen(RTLD_NOW | RTLD_LOCAL)` then `dlsym` on the handle; the handle
/// is never closed (the routine is called until the process exits).
fn open(spec: &Spec) -> Result<*mut c_void, String> {
    let path = Path::new(&spec.lib);
    if !path.exists() {
        return Err(format!("no such file: {}", spec.lib));
    }
    // dlopen searches the library path for a name without '/': say ./ for
    // a file here.
    let name = if spec.lib.contains('/') {
        spec.lib.clone()
    } else {
        format!("./{}", spec.lib)
    };
    let c_lib = CString::new(name).map_err(|_| "the path holds a NUL byte".to_string())?;
    let c_sym = CString::new(spec.symbol.as_str())
        .map_err(|_| "the symbol holds a NUL byte".to_string())?;
    // SAFETY: a NUL-terminated path; RTLD_LOCAL keeps the library's symbols
    // out of the global scope. Its constructors run, as with any dlopen.
    let handle = unsafe { libc::dlopen(c_lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(format!("cannot load {}: {}", spec.lib, dl_error()));
    }
    // SAFETY: clears any stale error, so a null result below is told apart
    // from a symbol whose value is null.
    unsafe { libc::dlerror() };
    // SAFETY: a live handle and a NUL-terminated name.
    let f = unsafe { libc::dlsym(handle, c_sym.as_ptr()) };
    if f.is_null() {
        return Err(format!(
            "{} has no symbol '{}': {}",
            spec.lib,
            spec.symbol,
            dl_error()
        ));
    }
    Ok(f)
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until
    // the next dl* call on this thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "no error text".to_string()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_label_library_and_symbol() {
        let p = |s| parse(Op::Copy, s).unwrap();
        assert_eq!(
            p("/opt/aocl/lib/libaocl-libmem.so"),
            Spec {
                label: "libaocl-libmem:memcpy".into(),
                lib: "/opt/aocl/lib/libaocl-libmem.so".into(),
                symbol: "memcpy".into()
            }
        );
        assert_eq!(
            p("libfolly.so:__folly_memcpy").label,
            "libfolly:__folly_memcpy"
        );
        assert_eq!(p("libfolly.so:__folly_memcpy").symbol, "__folly_memcpy");
        let l = p("folly=/a:b/libfolly.so.1");
        assert_eq!(
            (l.label.as_str(), l.lib.as_str()),
            ("folly", "/a:b/libfolly.so.1")
        );
        assert_eq!(l.symbol, "memcpy");
        assert_eq!(parse(Op::Clear, "x.so").unwrap().symbol, "memset");
        assert!(parse(Op::Copy, ":memcpy")
            .unwrap_err()
            .contains("no library"));
    }

    #[test]
    fn loading_names_what_is_missing() {
        let e = load(Op::Copy, &["/nonexistent/libx.so".into()]).unwrap_err();
        assert!(
            e.contains("/nonexistent/libx.so") && e.contains("no such file"),
            "{e}"
        );
        let libc_path = "/lib/x86_64-linux-gnu/libc.so.6";
        if Path::new(libc_path).exists() {
            let e = load(Op::Copy, &[format!("{libc_path}:no_such_symbol_here")]).unwrap_err();
            assert!(e.contains("no_such_symbol_here"), "{e}");
            let e = load(Op::Copy, &[format!("libc={libc_path}")]).unwrap_err();
            assert!(e.contains("strategy's name"), "{e}");
            let two = load(Op::Copy, &[libc_path.into(), libc_path.into()]).unwrap();
            assert_eq!(two[0].0, "libc:memcpy");
            assert_eq!(two[1].0, "libc:memcpy#2");
            let mut dst = [0u8; 100];
            two[0].1.copy(&mut dst, &[7u8; 100]);
            assert_eq!(dst, [7u8; 100]);
        }
    }
}
