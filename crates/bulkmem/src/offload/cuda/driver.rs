//! The CUDA driver API as bulkmem uses it: the types and constants of
//! `cuda.h` (64-bit Linux), the function table looked up with `dlsym` in
//! `libcuda.so.1` (loaded once, never closed), error texts, and device
//! queries. The channels and the backend on top are in `mod.rs`.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::ptr;
use std::sync::OnceLock;

use super::super::GpuInfo;

// The driver's types, as cuda.h declares them for 64-bit Linux.
pub(super) type CUresult = c_int; // an enum: int-sized
pub(super) type CUdevice = c_int;
pub(super) type CUdeviceptr = u64; // unsigned long long under __LP64__
pub(super) type CUcontext = *mut c_void; // struct CUctx_st *
pub(super) type CUstream = *mut c_void; // struct CUstream_st *
pub(super) type CUevent = *mut c_void; // struct CUevent_st *

pub(super) const CUDA_SUCCESS: CUresult = 0;
pub(super) const CUDA_ERROR_NO_DEVICE: CUresult = 100;

// CUdevice_attribute values (cuda.h, `CUdevice_attribute_enum`).
pub(super) const CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: c_int = 33;
pub(super) const CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: c_int = 34;
pub(super) const CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: c_int = 40;
pub(super) const CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: c_int = 50;

/// `CUstream_flags`: the streams must not serialise with the legacy default
/// stream, which other code in the process may be using.
pub(super) const CU_STREAM_NON_BLOCKING: c_uint = 0x1;
/// `CUevent_flags`: the events only order work; timing them costs.
pub(super) const CU_EVENT_DISABLE_TIMING: c_uint = 0x2;
/// `CUevent_flags`: `cuEventSynchronize` sleeps instead of spinning, so a
/// channel waiting for its copies leaves the CPU to the workers.
pub(super) const CU_EVENT_BLOCKING_SYNC: c_uint = 0x1;
/// `cuMemHostRegister` flags: pinned for every context, not only ours.
pub(super) const CU_MEMHOSTREGISTER_PORTABLE: c_uint = 0x01;

pub(super) type GetErrorFn = unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult;

/// The driver entry points this backend uses, each with the prototype
/// cuda.h declares for the named symbol.
pub(super) struct Driver {
    /// `cuInit`
    pub(super) init: unsafe extern "C" fn(c_uint) -> CUresult,
    /// `cuGetErrorName` (CUDA 6.0+; optional: only used for messages)
    pub(super) get_error_name: Option<GetErrorFn>,
    /// `cuGetErrorString` (as above)
    pub(super) get_error_string: Option<GetErrorFn>,
    /// `cuDeviceGetCount`
    pub(super) device_get_count: unsafe extern "C" fn(*mut c_int) -> CUresult,
    /// `cuDeviceGet`
    pub(super) device_get: unsafe extern "C" fn(*mut CUdevice, c_int) -> CUresult,
    /// `cuDeviceGetName`
    pub(super) device_get_name: unsafe extern "C" fn(*mut c_char, c_int, CUdevice) -> CUresult,
    /// `cuDeviceTotalMem_v2`
    pub(super) device_total_mem: unsafe extern "C" fn(*mut usize, CUdevice) -> CUresult,
    /// `cuDeviceGetAttribute`
    pub(super) device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, CUdevice) -> CUresult,
    /// `cuDevicePrimaryCtxRetain`
    pub(super) primary_ctx_retain: unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult,
    /// `cuDevicePrimaryCtxRelease_v2`
    pub(super) primary_ctx_release: unsafe extern "C" fn(CUdevice) -> CUresult,
    /// `cuCtxPushCurrent_v2`
    pub(super) ctx_push_current: unsafe extern "C" fn(CUcontext) -> CUresult,
    /// `cuCtxPopCurrent_v2`
    pub(super) ctx_pop_current: unsafe extern "C" fn(*mut CUcontext) -> CUresult,
    /// `cuStreamCreate`
    pub(super) stream_create: unsafe extern "C" fn(*mut CUstream, c_uint) -> CUresult,
    /// `cuStreamDestroy_v2`
    pub(super) stream_destroy: unsafe extern "C" fn(CUstream) -> CUresult,
    /// `cuStreamSynchronize`
    pub(super) stream_synchronize: unsafe extern "C" fn(CUstream) -> CUresult,
    /// `cuStreamWaitEvent`
    pub(super) stream_wait_event: unsafe extern "C" fn(CUstream, CUevent, c_uint) -> CUresult,
    /// `cuEventCreate`
    pub(super) event_create: unsafe extern "C" fn(*mut CUevent, c_uint) -> CUresult,
    /// `cuEventDestroy_v2`
    pub(super) event_destroy: unsafe extern "C" fn(CUevent) -> CUresult,
    /// `cuEventRecord`
    pub(super) event_record: unsafe extern "C" fn(CUevent, CUstream) -> CUresult,
    /// `cuEventSynchronize`
    pub(super) event_synchronize: unsafe extern "C" fn(CUevent) -> CUresult,
    /// `cuMemAlloc_v2`
    pub(super) mem_alloc: unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult,
    /// `cuMemFree_v2`
    pub(super) mem_free: unsafe extern "C" fn(CUdeviceptr) -> CUresult,
    /// `cuMemcpyHtoDAsync_v2`
    pub(super) memcpy_htod_async:
        unsafe extern "C" fn(CUdeviceptr, *const c_void, usize, CUstream) -> CUresult,
    /// `cuMemcpyDtoHAsync_v2`
    pub(super) memcpy_dtoh_async:
        unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize, CUstream) -> CUresult,
    /// `cuMemHostRegister_v2`
    pub(super) mem_host_register: unsafe extern "C" fn(*mut c_void, usize, c_uint) -> CUresult,
    /// `cuMemHostUnregister`
    pub(super) mem_host_unregister: unsafe extern "C" fn(*mut c_void) -> CUresult,
}

/// The driver, loaded and initialised once for the process (or why not).
/// The library is never closed: the function pointers live as long as the
/// process, and unloading a GPU driver under live contexts is not safe.
pub(super) static DRIVER: OnceLock<Result<Driver, String>> = OnceLock::new();

pub(super) fn driver() -> Result<&'static Driver, String> {
    DRIVER.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// The text of the last `dl*` failure on this thread.
pub(super) fn dlerror_text() -> String {
    // SAFETY: dlerror takes no arguments and returns null or a message
    // owned by libc.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        return "no detail from dlerror".into();
    }
    // SAFETY: non-null, so a NUL-terminated string that stays valid until
    // the next dl* call on this thread; it is copied before that.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Looks `name` up in `lib`, or `None` where the library lacks it.
///
/// # Safety
/// `lib` is a handle from `dlopen`, still open, and `T` is the
/// `unsafe extern "C" fn` type of the C prototype of `name`.
pub(super) unsafe fn sym_opt<T: Copy>(lib: *mut c_void, name: &CStr) -> Option<T> {
    // A function pointer type is pointer-sized; anything else is a bug here.
    assert_eq!(size_of::<T>(), size_of::<*mut c_void>());
    // A message left from an earlier dl* failure would otherwise be taken
    // for this lookup's.
    // SAFETY: dlerror takes no arguments; the old message is discarded.
    let _ = unsafe { libc::dlerror() };
    // SAFETY: `lib` is open (the caller's contract); `name` is a C string.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: `T` is a pointer-sized function pointer type whose prototype
    // matches the symbol's (the caller's contract), and `p` is non-null.
    Some(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

/// As [`sym_opt`], for a symbol the backend cannot do without.
///
/// # Safety
/// As [`sym_opt`].
pub(super) unsafe fn sym<T: Copy>(lib: *mut c_void, name: &CStr) -> Result<T, String> {
    // SAFETY: forwarded contract.
    unsafe { sym_opt(lib, name) }.ok_or_else(|| {
        format!(
            "libcuda.so.1 has no symbol {} (driver too old?): {}",
            name.to_string_lossy(),
            dlerror_text()
        )
    })
}

/// Why a statically linked program has no GPU backend.
pub(super) const STATIC_BINARY: &str = "this program is statically linked and cannot load \
    libcuda.so.1; build it without `-C target-feature=+crt-static` to use a GPU";

pub(super) fn load() -> Result<Driver, String> {
    // dlopen in a statically linked program maps a second C library beside
    // the one linked in, and libcuda's initialisers do not survive it
    // (`bulkmem info` died of SIGFPE on a host with an NVIDIA driver):
    // refuse instead.
    if cfg!(target_feature = "crt-static") {
        return Err(STATIC_BINARY.to_string());
    }
    // SAFETY: the name is a C string literal; loading the driver runs its
    // initialisers, which is what loading it is for.
    let lib = unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if lib.is_null() {
        return Err(format!(
            "libcuda.so.1 not found (no NVIDIA driver here): {}",
            dlerror_text()
        ));
    }
    // SAFETY: `lib` was just opened and is never closed; each field's type
    // is the prototype cuda.h declares for the exact symbol named (the
    // `_v2` names being the ones cuda.h's macros select).
    let drv = unsafe {
        Driver {
            init: sym(lib, c"cuInit")?,
            get_error_name: sym_opt(lib, c"cuGetErrorName"),
            get_error_string: sym_opt(lib, c"cuGetErrorString"),
            device_get_count: sym(lib, c"cuDeviceGetCount")?,
            device_get: sym(lib, c"cuDeviceGet")?,
            device_get_name: sym(lib, c"cuDeviceGetName")?,
            device_total_mem: sym(lib, c"cuDeviceTotalMem_v2")?,
            device_get_attribute: sym(lib, c"cuDeviceGetAttribute")?,
            primary_ctx_retain: sym(lib, c"cuDevicePrimaryCtxRetain")?,
            primary_ctx_release: sym(lib, c"cuDevicePrimaryCtxRelease_v2")?,
            ctx_push_current: sym(lib, c"cuCtxPushCurrent_v2")?,
            ctx_pop_current: sym(lib, c"cuCtxPopCurrent_v2")?,
            stream_create: sym(lib, c"cuStreamCreate")?,
            stream_destroy: sym(lib, c"cuStreamDestroy_v2")?,
            stream_synchronize: sym(lib, c"cuStreamSynchronize")?,
            stream_wait_event: sym(lib, c"cuStreamWaitEvent")?,
            event_create: sym(lib, c"cuEventCreate")?,
            event_destroy: sym(lib, c"cuEventDestroy_v2")?,
            event_record: sym(lib, c"cuEventRecord")?,
            event_synchronize: sym(lib, c"cuEventSynchronize")?,
            mem_alloc: sym(lib, c"cuMemAlloc_v2")?,
            mem_free: sym(lib, c"cuMemFree_v2")?,
            memcpy_htod_async: sym(lib, c"cuMemcpyHtoDAsync_v2")?,
            memcpy_dtoh_async: sym(lib, c"cuMemcpyDtoHAsync_v2")?,
            mem_host_register: sym(lib, c"cuMemHostRegister_v2")?,
            mem_host_unregister: sym(lib, c"cuMemHostUnregister")?,
        }
    };
    // SAFETY: cuInit takes flags (which must be 0) and no pointers; the
    // OnceLock makes this the only call.
    let r = unsafe { (drv.init)(0) };
    if r == CUDA_ERROR_NO_DEVICE {
        return Err("the CUDA driver sees no GPU".into());
    }
    drv.check(r, "cuInit")?;
    Ok(drv)
}

impl Driver {
    /// `Ok` for `CUDA_SUCCESS`, otherwise the error naming `call`.
    pub(super) fn check(&self, r: CUresult, call: &str) -> Result<(), String> {
        if r == CUDA_SUCCESS {
            Ok(())
        } else {
            Err(self.error(r, call))
        }
    }

    /// `call` failed with `r`: the driver's name and text for it where it
    /// can give them, always with the number.
    pub(super) fn error(&self, r: CUresult, call: &str) -> String {
        let name = self.get_error_name.and_then(|f| error_text(f, r));
        let text = self.get_error_string.and_then(|f| error_text(f, r));
        match (name, text) {
            (Some(n), Some(t)) => format!("{call} failed: {n} ({r}): {t}"),
            (Some(n), None) => format!("{call} failed: {n} ({r})"),
            (None, Some(t)) => format!("{call} failed: CUresult {r}: {t}"),
            (None, None) => format!("{call} failed: CUresult {r}"),
        }
    }

    /// How many devices the driver sees.
    pub(super) fn device_count(&self) -> Result<usize, String> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid int to write.
        let r = unsafe { (self.device_get_count)(&mut n) };
        self.check(r, "cuDeviceGetCount")?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// The handle of device `ordinal`, checked against the count so that a
    /// wrong ordinal says what there is.
    pub(super) fn device(&self, ordinal: usize) -> Result<CUdevice, String> {
        let count = self.device_count()?;
        if ordinal >= count {
            return Err(format!(
                "there is no GPU {ordinal}: the CUDA driver sees {count} (ordinals 0..{count})"
            ));
        }
        let ord =
            c_int::try_from(ordinal).map_err(|_| format!("GPU ordinal {ordinal} too large"))?;
        let mut dev: CUdevice = 0;
        // SAFETY: `dev` is a valid int to write; the ordinal is in range.
        let r = unsafe { (self.device_get)(&mut dev, ord) };
        self.check(r, "cuDeviceGet")?;
        Ok(dev)
    }

    pub(super) fn attribute(
        &self,
        dev: CUdevice,
        attr: c_int,
        what: &str,
    ) -> Result<c_int, String> {
        let mut v: c_int = 0;
        // SAFETY: `v` is a valid int to write; `dev` came from cuDeviceGet.
        let r = unsafe { (self.device_get_attribute)(&mut v, attr, dev) };
        self.check(r, &format!("cuDeviceGetAttribute({what})"))?;
        Ok(v)
    }

    pub(super) fn info(&self, ordinal: usize) -> Result<GpuInfo, String> {
        let dev = self.device(ordinal)?;
        let mut buf = [0u8; 256];
        // SAFETY: the driver writes at most `len` bytes, NUL included, into
        // the buffer, which has that many.
        let r = unsafe { (self.device_get_name)(buf.as_mut_ptr().cast(), buf.len() as c_int, dev) };
        self.check(r, "cuDeviceGetName")?;
        let name = CStr::from_bytes_until_nul(&buf)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|_| String::from_utf8_lossy(&buf).into_owned());
        let mut memory: usize = 0;
        // SAFETY: `memory` is a valid size_t to write.
        let r = unsafe { (self.device_total_mem)(&mut memory, dev) };
        self.check(r, "cuDeviceTotalMem_v2")?;
        let engines = self.attribute(
            dev,
            CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT,
            "ASYNC_ENGINE_COUNT",
        )?;
        let domain = self.attribute(dev, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, "PCI_DOMAIN_ID")?;
        let bus = self.attribute(dev, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, "PCI_BUS_ID")?;
        let slot = self.attribute(dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, "PCI_DEVICE_ID")?;
        Ok(GpuInfo {
            ordinal,
            name,
            copy_engines: u32::try_from(engines).unwrap_or(0),
            pci: format!("{domain:04x}:{bus:02x}:{slot:02x}"),
            memory: memory as u64,
        })
    }
}

/// The driver's static string for `r`, if it knows `r`.
pub(super) fn error_text(f: GetErrorFn, r: CUresult) -> Option<String> {
    let mut p: *const c_char = ptr::null();
    // SAFETY: `p` is a valid pointer to write; the driver accepts any value
    // of `r` (unknown ones give CUDA_ERROR_INVALID_VALUE).
    let rr = unsafe { f(r, &mut p) };
    if rr != CUDA_SUCCESS || p.is_null() {
        return None;
    }
    // SAFETY: on success the driver points at a static NUL-terminated
    // string.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}
