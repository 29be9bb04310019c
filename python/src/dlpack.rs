//! DLPack for Python: `__dlpack__` capsules of dense nodes (versioned
//! `dltensor_versioned` holding a `DLManagedTensorVersioned`, or the legacy `dltensor`
//! holding a `DLManagedTensor`), and `from_dlpack` imports of any producer's capsule.
//!
//! Capsule protocol (Python array API standard, DLPack 1.x): the producer names the capsule
//! `dltensor_versioned` / `dltensor`; a consumer that takes ownership renames it
//! `used_dltensor_versioned` / `used_dltensor` and from then on calls the deleter itself.
//! The capsule's destructor therefore calls the deleter only while the capsule still
//! carries the unconsumed name: exactly once either way.

use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tensordesc::{
    BufferHandle, DeviceType, ElementType, Error, ErrorKind, MemoryClass, NodeSpec, Result,
    TensorBuilder,
};

use crate::errors::Fail;
use crate::node::{compact_strides, dense_plan, DensePlan};
use crate::source::{AlignedBytes, Held, Keep, MemBuf, MemTensor, Source};

pub const VERSIONED_NAME: &CStr = c"dltensor_versioned";
pub const USED_VERSIONED_NAME: &CStr = c"used_dltensor_versioned";
pub const LEGACY_NAME: &CStr = c"dltensor";
pub const USED_LEGACY_NAME: &CStr = c"used_dltensor";

// The DLPack 1.1 ABI and the dtype mapping are the library's (safe Rust, shared with its
// C ABI).
use tensordesc::device::{MAX_ALIGNMENT_LOG2, MIN_ALIGNMENT_LOG2};
pub use tensordesc::interop::dlpack::abi::{
    DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor,
    DLPACK_FLAG_BITMASK_IS_COPIED as FLAG_IS_COPIED,
    DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED as FLAG_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY as FLAG_READ_ONLY, DLPACK_MAJOR_VERSION as DLPACK_MAJOR,
    DLPACK_MINOR_VERSION as DLPACK_MINOR,
};
pub use tensordesc::interop::dlpack::{check_element_aligned, dl_dtype, element_type_of};

// ---------------------------------------------------------------------------------------
// Export
// ---------------------------------------------------------------------------------------

/// Exports alive (made and not yet released by their deleter): what the tests read to
/// prove every deleter runs exactly once.
static LIVE_EXPORTS: AtomicIsize = AtomicIsize::new(0);

pub fn live_exports() -> isize {
    LIVE_EXPORTS.load(Ordering::SeqCst)
}

/// What an export owns besides the managed struct.
struct ExportParts {
    shape: Vec<i64>,
    strides: Vec<i64>,
    /// The tensor whose memory it exposes.
    _held: Arc<Held>,
    /// A copy made for `copy=True`.
    _copy: Option<AlignedBytes>,
}

/// A versioned export: `managed` first, so its address is the allocation's.
#[repr(C)]
struct VersionedExport {
    managed: DLManagedTensorVersioned,
    parts: ExportParts,
}

/// A legacy export.
#[repr(C)]
struct LegacyExport {
    managed: DLManagedTensor,
    parts: ExportParts,
}

unsafe extern "C" fn versioned_deleter(m: *mut DLManagedTensorVersioned) {
    if m.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: only exports made by `export` carry this deleter; `m` is the first field
        // of the leaked Box<VersionedExport> (repr(C)), so it is that Box's pointer. The
        // DLPack contract calls the deleter once, which reclaims the Box once.
        drop(unsafe { Box::from_raw(m as *mut VersionedExport) });
        LIVE_EXPORTS.fetch_sub(1, Ordering::SeqCst);
    }));
}

unsafe extern "C" fn legacy_deleter(m: *mut DLManagedTensor) {
    if m.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: as in versioned_deleter, for Box<LegacyExport>.
        drop(unsafe { Box::from_raw(m as *mut LegacyExport) });
        LIVE_EXPORTS.fetch_sub(1, Ordering::SeqCst);
    }));
}

/// Runs a capsule's deleter when the capsule dies unconsumed.
unsafe extern "C" fn versioned_capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the GIL held and a live capsule. PyCapsule_IsValid
    // never fails (no exception is set); a consumer that took the tensor renamed the
    // capsule, so the name check tells whether the deleter is still ours to call. The
    // error indicator is saved and restored around the deleter, which may run Python
    // code (releasing objects) while an exception is pending.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, VERSIONED_NAME.as_ptr()) == 0 {
            return;
        }
        let m = ffi::PyCapsule_GetPointer(capsule, VERSIONED_NAME.as_ptr())
            as *mut DLManagedTensorVersioned;
        if m.is_null() {
            return;
        }
        let (mut t, mut v, mut tb) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        #[allow(deprecated)]
        ffi::PyErr_Fetch(&mut t, &mut v, &mut tb);
        if let Some(d) = (*m).deleter {
            d(m);
        }
        #[allow(deprecated)]
        ffi::PyErr_Restore(t, v, tb);
    }
}

unsafe extern "C" fn legacy_capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: as in versioned_capsule_destructor, for the legacy name and struct.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, LEGACY_NAME.as_ptr()) == 0 {
            return;
        }
        let m = ffi::PyCapsule_GetPointer(capsule, LEGACY_NAME.as_ptr()) as *mut DLManagedTensor;
        if m.is_null() {
            return;
        }
        let (mut t, mut v, mut tb) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        #[allow(deprecated)]
        ffi::PyErr_Fetch(&mut t, &mut v, &mut tb);
        if let Some(d) = (*m).deleter {
            d(m);
        }
        #[allow(deprecated)]
        ffi::PyErr_Restore(t, v, tb);
    }
}

/// What `__dlpack__` was asked for.
pub struct ExportRequest {
    /// None: the legacy capsule. Some(v): versioned, carrying min(v, 1.1).
    pub version: Option<DLPackVersion>,
    pub copy: bool,
}

/// The DLPack device of a dense node's DATA buffer.
pub fn device_of(held: &Held, region: Option<u32>) -> Result<(i32, i32)> {
    let d = held.src.descriptor()?;
    let p = dense_plan(d, region)?;
    Ok((
        p.handle.device_type.code() as i32,
        p.handle.device_id as i32,
    ))
}

/// A capsule exporting the tensor (`region` None) or one region.
pub fn export(
    py: Python<'_>,
    held: &Arc<Held>,
    region: Option<u32>,
    req: ExportRequest,
) -> PyResult<Py<PyAny>> {
    let d = held.src.descriptor().map_err(Fail)?;
    let plan = dense_plan(d, region).map_err(Fail)?;
    check_exportable(&plan)?;
    let shape = plan
        .shape
        .iter()
        .map(|&e| {
            i64::try_from(e).map_err(|_| {
                Fail(Error::new(
                    ErrorKind::Overflow,
                    format!("extent {e} exceeds int64"),
                ))
            })
        })
        .collect::<std::result::Result<Vec<i64>, Fail>>()?;
    let memory = exported_memory(held, &plan, req.copy)?;
    // A SPLAT is one element seen at every index: never writable through an export.
    let read_only =
        memory.read_only || plan.splat || (plan.handle.read_only && memory.copy.is_none());
    let dl_tensor = DLTensor {
        data: memory.data,
        device: DLDevice {
            device_type: plan.handle.device_type.code() as i32,
            device_id: plan.handle.device_id as i32,
        },
        ndim: shape.len() as i32,
        dtype: dl_dtype(plan.et),
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: memory.byte_offset,
    };
    let parts = ExportParts {
        shape,
        strides: plan.strides,
        _held: held.clone(),
        _copy: memory.copy,
    };
    match req.version {
        Some(v) => versioned_capsule(py, v, read_only, dl_tensor, parts),
        None => {
            if read_only {
                // The legacy struct has no flags: a consumer could not know it must not
                // write (numpy refuses the same for its read-only arrays).
                return Err(PyBufferError::new_err(format!(
                    "DLPack export of {}: the memory is read-only (a file mapping or a read-only array) and the legacy (unversioned) DLPack protocol cannot say so; call __dlpack__(max_version=(1, 0)) or newer (numpy >= 2.1 and torch >= 2.4 do)",
                    plan.what
                )));
            }
            legacy_capsule(py, dl_tensor, parts)
        }
    }
}

/// A node DLPack can carry: not quantized (DLPack has no quantization parameters) and in
/// memory the host reads.
fn check_exportable(plan: &DensePlan) -> PyResult<()> {
    if plan.quantized {
        return Err(Fail(Error::new(
            ErrorKind::NotBindable,
            format!(
                "DLPack export of {}: it is quantized; DLPack has no quantization parameters, so its stored codes would be read as plain {} values (numpy(raw=True) views the codes)",
                plan.what,
                plan.et.name()
            ),
        ))
        .into());
    }
    if !plan.handle.is_host_readable() {
        return Err(Fail(Error::new(
            ErrorKind::NotBindable,
            format!(
                "DLPack export of {}: its buffer is device memory",
                plan.what
            ),
        ))
        .into());
    }
    Ok(())
}

/// The memory an export exposes.
struct ExportedMemory {
    /// The address DLPack's `data` holds (NULL for no elements).
    data: *mut c_void,
    byte_offset: u64,
    /// The copy made for `copy=True`, which `data` addresses.
    copy: Option<AlignedBytes>,
    /// Whether the source buffer is read-only (false for a copy).
    read_only: bool,
}

/// The memory exported for the node of `plan`: none for no elements, an aligned copy with
/// `copy`, else the node's buffer where it lies (which must be aligned to its elements).
fn exported_memory(held: &Held, plan: &DensePlan, copy: bool) -> PyResult<ExportedMemory> {
    let (bytes, read_only) = held.src.buffer(plan.buffer).map_err(Fail)?;
    if plan.element_count() == 0 {
        return Ok(ExportedMemory {
            data: std::ptr::null_mut(),
            byte_offset: 0,
            copy: None,
            read_only,
        });
    }
    if copy {
        let c = AlignedBytes::copy_of(bytes, 256).map_err(Fail)?;
        let p = c.as_slice().as_ptr() as *mut c_void;
        return Ok(ExportedMemory {
            data: p,
            byte_offset: plan.byte_offset,
            copy: Some(c),
            read_only: false,
        });
    }
    // Consumers load elements with aligned loads: memory below its element's
    // alignment (possible in format 1.1) is exported only as a copy.
    check_element_aligned(bytes, plan.byte_offset, plan.et, &plan.what).map_err(|e| {
        Fail(Error::new(
            e.kind,
            format!(
                "{}; __dlpack__(copy=True) exports an aligned copy",
                e.detail
            ),
        ))
    })?;
    Ok(ExportedMemory {
        data: bytes.as_ptr() as *mut c_void,
        byte_offset: plan.byte_offset,
        copy: None,
        read_only,
    })
}

/// A versioned capsule (`dltensor_versioned`, DLPack `v`) around `dl_tensor` and `parts`.
fn versioned_capsule(
    py: Python<'_>,
    v: DLPackVersion,
    read_only: bool,
    dl_tensor: DLTensor,
    parts: ExportParts,
) -> PyResult<Py<PyAny>> {
    let mut flags = 0;
    if read_only {
        flags |= FLAG_READ_ONLY;
    }
    if parts._copy.is_some() {
        flags |= FLAG_IS_COPIED;
    }
    let raw = Box::into_raw(Box::new(VersionedExport {
        managed: DLManagedTensorVersioned {
            version: v,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(versioned_deleter),
            flags,
            dl_tensor,
        },
        parts,
    }));
    LIVE_EXPORTS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: `raw` is the live allocation just leaked and not yet shared. The
    // shape and stride vectors are never resized while it lives, so their heap
    // pointers stay valid until the deleter frees it. Rank 0 keeps them NULL.
    unsafe {
        let e = &mut *raw;
        e.managed.manager_ctx = raw as *mut c_void;
        if !e.parts.shape.is_empty() {
            e.managed.dl_tensor.shape = e.parts.shape.as_mut_ptr();
            e.managed.dl_tensor.strides = e.parts.strides.as_mut_ptr();
        }
        new_capsule(
            py,
            raw as *mut c_void,
            VERSIONED_NAME,
            versioned_capsule_destructor,
            || versioned_deleter(raw as *mut DLManagedTensorVersioned),
        )
    }
}

/// A legacy capsule (`dltensor`) around `dl_tensor` and `parts`.
fn legacy_capsule(py: Python<'_>, dl_tensor: DLTensor, parts: ExportParts) -> PyResult<Py<PyAny>> {
    let raw = Box::into_raw(Box::new(LegacyExport {
        managed: DLManagedTensor {
            dl_tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(legacy_deleter),
        },
        parts,
    }));
    LIVE_EXPORTS.fetch_add(1, Ordering::SeqCst);
    // SAFETY: as for the versioned export.
    unsafe {
        let e = &mut *raw;
        e.managed.manager_ctx = raw as *mut c_void;
        if !e.parts.shape.is_empty() {
            e.managed.dl_tensor.shape = e.parts.shape.as_mut_ptr();
            e.managed.dl_tensor.strides = e.parts.strides.as_mut_ptr();
        }
        new_capsule(
            py,
            raw as *mut c_void,
            LEGACY_NAME,
            legacy_capsule_destructor,
            || legacy_deleter(raw as *mut DLManagedTensor),
        )
    }
}

/// A capsule named `name` around `ptr`; when the capsule cannot be made, `release` frees
/// what `ptr` owns.
///
/// # Safety
///
/// `ptr` must be a managed tensor whose deleter `destructor` calls while the capsule keeps
/// `name`, and `release` must free it.
unsafe fn new_capsule(
    py: Python<'_>,
    ptr: *mut c_void,
    name: &'static CStr,
    destructor: unsafe extern "C" fn(*mut ffi::PyObject),
    release: impl FnOnce(),
) -> PyResult<Py<PyAny>> {
    // SAFETY: `name` is a 'static C string (the capsule keeps a pointer to it); `ptr` is
    // non-null; the destructor has the signature Python expects.
    let cap = unsafe { ffi::PyCapsule_New(ptr, name.as_ptr(), Some(destructor)) };
    if cap.is_null() {
        release();
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `cap` is a new, owned reference.
    Ok(unsafe { Bound::from_owned_ptr(py, cap) }.unbind())
}

/// Parse `__dlpack__`'s keyword arguments into a request. Raises BufferError for what a
/// CPU producer cannot do (a stream, another device, `copy=False` never applies).
pub fn request(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    max_version: Option<&Bound<'_, PyAny>>,
    dl_device: Option<&Bound<'_, PyAny>>,
    copy: Option<bool>,
    device: (i32, i32),
) -> PyResult<ExportRequest> {
    let _ = py;
    if let Some(s) = stream {
        if !s.is_none() {
            // The array API standard: for CPU arrays the stream must be None (a consumer
            // passing -1 means "no synchronization", also fine).
            let v: Option<i64> = s.extract().ok();
            if v != Some(-1) {
                return Err(PyBufferError::new_err(format!(
                    "stream={s} given for a CPU tensor: only None (or -1) is valid"
                )));
            }
        }
    }
    if let Some(dev) = dl_device {
        if !dev.is_none() {
            let (t, i): (i32, i32) = dev.extract().map_err(|_| {
                PyTypeError::new_err("dl_device must be a (device_type, device_id) tuple")
            })?;
            if (t, i) != device {
                return Err(PyBufferError::new_err(format!(
                    "dl_device=({t}, {i}) asked for; the tensor lives on ({}, {}) and is not copied across devices",
                    device.0, device.1
                )));
            }
        }
    }
    let version = match max_version {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => {
            let t = v
                .cast::<PyTuple>()
                .map_err(|_| PyTypeError::new_err("max_version must be a (major, minor) tuple"))?;
            let (major, minor): (u32, u32) = t.extract().map_err(|_| {
                PyTypeError::new_err("max_version must be a (major, minor) tuple of integers")
            })?;
            if major < DLPACK_MAJOR {
                None
            } else if major == DLPACK_MAJOR {
                Some(DLPackVersion {
                    major,
                    minor: minor.min(DLPACK_MINOR),
                })
            } else {
                Some(DLPackVersion {
                    major: DLPACK_MAJOR,
                    minor: DLPACK_MINOR,
                })
            }
        }
    };
    Ok(ExportRequest {
        version,
        copy: copy == Some(true),
    })
}

// ---------------------------------------------------------------------------------------
// Import
// ---------------------------------------------------------------------------------------

/// A consumed DLPack tensor: its deleter runs exactly once, when the guard is dropped.
pub enum ManagedGuard {
    Versioned(*mut DLManagedTensorVersioned),
    Legacy(*mut DLManagedTensor),
}

// SAFETY: the guard is the only owner of the managed tensor (the capsule was renamed
// before the guard was made); DLPack deleters may be called from any thread, and the
// Python producers' deleters take the interpreter lock themselves.
unsafe impl Send for ManagedGuard {}
// SAFETY: the guard exposes nothing through &self; the tensor's memory is read through
// the MemBuf that owns the guard.
unsafe impl Sync for ManagedGuard {}

impl Drop for ManagedGuard {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a capsule this guard consumed; the deleter is
        // called once, here (a NULL deleter means there is nothing to release).
        unsafe {
            match *self {
                ManagedGuard::Versioned(m) => {
                    if let Some(d) = (*m).deleter {
                        d(m)
                    }
                }
                ManagedGuard::Legacy(m) => {
                    if let Some(d) = (*m).deleter {
                        d(m)
                    }
                }
            }
        }
    }
}

/// Take the tensor out of a DLPack capsule (renaming it, so its destructor leaves the
/// tensor to us).
fn consume_capsule(cap: &Bound<'_, PyAny>) -> PyResult<ManagedGuard> {
    let p = cap.as_ptr();
    // SAFETY: `p` is a live object for the borrow of `cap`; the capsule functions check
    // its type and name, and PyCapsule_IsValid never raises.
    unsafe {
        if ffi::PyCapsule_IsValid(p, VERSIONED_NAME.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(p, VERSIONED_NAME.as_ptr())
                as *mut DLManagedTensorVersioned;
            if m.is_null() {
                return Err(PyErr::fetch(cap.py()));
            }
            if ffi::PyCapsule_SetName(p, USED_VERSIONED_NAME.as_ptr()) != 0 {
                return Err(PyErr::fetch(cap.py()));
            }
            return Ok(ManagedGuard::Versioned(m));
        }
        if ffi::PyCapsule_IsValid(p, LEGACY_NAME.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(p, LEGACY_NAME.as_ptr()) as *mut DLManagedTensor;
            if m.is_null() {
                return Err(PyErr::fetch(cap.py()));
            }
            if ffi::PyCapsule_SetName(p, USED_LEGACY_NAME.as_ptr()) != 0 {
                return Err(PyErr::fetch(cap.py()));
            }
            return Ok(ManagedGuard::Legacy(m));
        }
    }
    Err(PyValueError::new_err(
        "not an unconsumed DLPack capsule (expected a PyCapsule named 'dltensor_versioned' or 'dltensor'; a 'used_' capsule was already consumed)",
    ))
}

/// Device types whose memory the host reads.
fn host_device(t: i32) -> Option<DeviceType> {
    match t {
        1 => Some(DeviceType::Cpu),
        3 => Some(DeviceType::CudaHost),
        11 => Some(DeviceType::RocmHost),
        13 => Some(DeviceType::CudaManaged),
        _ => None,
    }
}

/// A tensor over the memory of `obj`: an object with `__dlpack__` (numpy, torch, ...,
/// another tensordesc tensor) or a DLPack capsule.
pub fn import(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Arc<Held>> {
    let cap = if obj.hasattr("__dlpack__")? {
        if obj.hasattr("__dlpack_device__")? {
            let (t, _): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
            if host_device(t).is_none() {
                return Err(Fail(Error::new(
                    ErrorKind::NotBindable,
                    format!("DLPack device type {t} is not memory the host can read; move the tensor to the CPU first"),
                ))
                .into());
            }
        }
        let kwargs = pyo3::types::PyDict::new(py);
        kwargs.set_item("max_version", (DLPACK_MAJOR, DLPACK_MINOR))?;
        match obj.call_method("__dlpack__", (), Some(&kwargs)) {
            Ok(c) => c,
            // A producer that predates max_version.
            Err(e) if e.is_instance_of::<PyTypeError>(py) => obj.call_method0("__dlpack__")?,
            Err(e) => return Err(e),
        }
    } else {
        obj.clone()
    };
    let guard = consume_capsule(&cap)?;
    // From here the guard owns the tensor: any failure below drops it, running the
    // producer's deleter once (DLPack asks the consumer to, whatever went wrong).
    let (t, flags) = match &guard {
        // SAFETY: the guard's pointer is the producer's live managed tensor.
        ManagedGuard::Versioned(m) => unsafe {
            let v = (**m).version;
            if v.major != DLPACK_MAJOR {
                return Err(Fail(Error::new(
                    ErrorKind::UnsupportedVersion,
                    format!(
                        "DLPack version {}.{}: only major version 1 is read",
                        v.major, v.minor
                    ),
                ))
                .into());
            }
            ((**m).dl_tensor, (**m).flags)
        },
        // SAFETY: as above.
        ManagedGuard::Legacy(m) => unsafe { ((**m).dl_tensor, 0) },
    };
    let known = FLAG_READ_ONLY | FLAG_IS_COPIED | FLAG_IS_SUBBYTE_TYPE_PADDED;
    if flags & !known != 0 {
        return Err(Fail(Error::new(
            ErrorKind::NotBindable,
            format!("DLPack flags 0x{flags:x} hold bits DLPack 1.1 does not define"),
        ))
        .into());
    }
    let (desc, start, len) = plan_import(&t, flags).map_err(Fail)?;
    let buf = unsafe {
        // SAFETY: plan_import checked that [start, start + len) is exactly the bytes the
        // producer's elements occupy (no wrap-around; NULL only when len is 0). The
        // producer keeps that memory valid until its deleter runs, which the guard (kept by
        // this MemBuf) calls only when the buffer is dropped. The memory is not written by
        // this package; the producer and other consumers must not write it either while
        // the tensor is read (the documented contract for imported memory).
        MemBuf::new(start, len, flags & FLAG_READ_ONLY != 0, Keep::DLPack(guard))
    };
    let mem = MemTensor::new(desc, vec![buf]).map_err(Fail)?;
    Ok(Held::new(Source::Memory(mem), None))
}

/// The descriptor of a DLPack tensor and the bytes its elements occupy.
fn plan_import(t: &DLTensor, flags: u64) -> Result<(tensordesc::Descriptor, *const u8, usize)> {
    let (dev, device_id) = import_device(t)?;
    let et = import_element_type(t, flags)?;
    let shape = import_shape(t)?;
    let rank = shape.len();
    let n = shape
        .iter()
        .try_fold(1u64, |acc, &e| acc.checked_mul(e))
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Overflow,
                format!("DLPack shape {shape:?}: element count overflows"),
            )
        })?;
    let row_major: Vec<usize> = (0..rank).collect();
    let compact = compact_strides(&shape, &row_major)?;
    let strides: Vec<i64> = if rank == 0 || t.strides.is_null() {
        compact.clone()
    } else {
        // SAFETY: DLPack: strides (when not NULL) points to ndim strides.
        unsafe { std::slice::from_raw_parts(t.strides, rank) }.to_vec()
    };
    // Each buffer starts at the lowest byte an element occupies and promises the
    // alignment that address has (at most 2^30): below 64 bytes the descriptor is format
    // 1.1, and the memory is read where it lies.
    let handle = |size: u64, start: usize| BufferHandle {
        size_bytes: size,
        device_type: dev,
        device_id,
        memory_class: MemoryClass::Default,
        alignment_log2: (start.trailing_zeros() as u8).min(MAX_ALIGNMENT_LOG2),
        read_only: flags & FLAG_READ_ONLY != 0,
    };
    if n == 0 {
        let d = TensorBuilder::new(et, &shape, NodeSpec::row_major())
            .buffers(vec![handle(0, 1 << MIN_ALIGNMENT_LOG2)])
            .build()?;
        return Ok((d, std::ptr::null(), 0));
    }
    if t.data.is_null() {
        return Err(invalid(
            "DLPack data is NULL for a tensor with elements".into(),
        ));
    }
    let base = (t.data as usize)
        .checked_add(usize::try_from(t.byte_offset).unwrap_or(usize::MAX))
        .ok_or_else(|| invalid("DLPack data + byte_offset overflows the address space".into()))?;
    let layout = ImportLayout {
        et,
        shape: &shape,
        strides: &strides,
        compact: &compact,
    };
    if et.is_packed() {
        plan_packed(&layout, n, base, handle)
    } else {
        plan_strided(&layout, base, handle)
    }
}

/// An `InvalidArgument` error with `m` as its detail.
fn invalid(m: String) -> Error {
    Error::new(ErrorKind::InvalidArgument, m)
}

/// The device of a DLPack tensor: one whose memory the host reads, and its id.
fn import_device(t: &DLTensor) -> Result<(DeviceType, u16)> {
    let dev = host_device(t.device.device_type).ok_or_else(|| {
        Error::new(
            ErrorKind::NotBindable,
            format!(
                "DLPack device type {} is not memory the host can read",
                t.device.device_type
            ),
        )
    })?;
    let device_id = u16::try_from(t.device.device_id).map_err(|_| {
        invalid(format!(
            "DLPack device id {} out of range",
            t.device.device_id
        ))
    })?;
    Ok((dev, device_id))
}

/// The element type of a DLPack tensor's dtype (one lane; 4-bit types packed two per
/// byte, not padded).
fn import_element_type(t: &DLTensor, flags: u64) -> Result<ElementType> {
    if t.dtype.lanes != 1 {
        return Err(Error::new(
            ErrorKind::NotBindable,
            format!(
                "DLPack dtype with {} lanes: vector types have no element type in this format",
                t.dtype.lanes
            ),
        ));
    }
    let et = element_type_of(t.dtype)?;
    if et.is_packed() && flags & FLAG_IS_SUBBYTE_TYPE_PADDED != 0 {
        return Err(Error::new(
            ErrorKind::NotBindable,
            "4-bit elements padded to one byte each (IS_SUBBYTE_TYPE_PADDED): this format packs two per byte",
        ));
    }
    Ok(et)
}

/// The shape of a DLPack tensor: at most 64 non-negative extents.
fn import_shape(t: &DLTensor) -> Result<Vec<u64>> {
    if !(0..=64).contains(&t.ndim) {
        return Err(Error::new(
            ErrorKind::RankTooLarge,
            format!("DLPack ndim {} (0 ..= 64 allowed)", t.ndim),
        ));
    }
    let rank = t.ndim as usize;
    let raw_shape: &[i64] = if rank == 0 {
        &[]
    } else if t.shape.is_null() {
        return Err(invalid("DLPack shape is NULL".into()));
    } else {
        // SAFETY: DLPack: shape points to ndim extents, alive while the tensor is.
        unsafe { std::slice::from_raw_parts(t.shape, rank) }
    };
    let mut shape = Vec::with_capacity(rank);
    for (a, &e) in raw_shape.iter().enumerate() {
        shape.push(
            u64::try_from(e)
                .map_err(|_| invalid(format!("DLPack extent {e} of axis {a} is negative")))?,
        );
    }
    Ok(shape)
}

/// What a DLPack tensor's elements are and how they are laid out: its element type,
/// shape, strides (in elements) and the compact row-major strides of that shape.
struct ImportLayout<'a> {
    et: ElementType,
    shape: &'a [u64],
    strides: &'a [i64],
    compact: &'a [i64],
}

impl ImportLayout<'_> {
    /// Whether the strides `a` and `b` agree on every axis that moves (an axis of extent 1
    /// never does: its stride is irrelevant, and PyTorch normalises them).
    fn same(&self, a: &[i64], b: &[i64]) -> bool {
        (0..self.shape.len()).all(|k| self.shape[k] == 1 || a[k] == b[k])
    }
}

/// The descriptor of a packed 4-bit DLPack tensor of `n` elements at `base` (only compact
/// orders exist in this format: ROW_MAJOR or DIM_ORDER) and the bytes they occupy.
fn plan_packed(
    l: &ImportLayout<'_>,
    n: u64,
    base: usize,
    handle: impl Fn(u64, usize) -> BufferHandle,
) -> Result<(tensordesc::Descriptor, *const u8, usize)> {
    let rank = l.shape.len();
    let mut order: Vec<usize> = (0..rank).collect();
    order.sort_by_key(|&k| std::cmp::Reverse((l.strides[k], k)));
    let c = compact_strides(l.shape, &order)?;
    if !l.same(l.strides, &c) {
        return Err(Error::new(
            ErrorKind::NotBindable,
            format!("packed 4-bit DLPack tensor with strides {:?}: only compact orders (a permutation of compact strides) can be described", l.strides),
        ));
    }
    let size = n.div_ceil(2);
    let node = if l.same(l.strides, l.compact) {
        NodeSpec::row_major()
    } else {
        NodeSpec::dim_order(&order.iter().map(|&a| a as u8).collect::<Vec<_>>())
    };
    let d = TensorBuilder::new(l.et, l.shape, node)
        .buffers(vec![handle(size, base)])
        .build()?;
    let len = usize::try_from(size)
        .map_err(|_| Error::new(ErrorKind::Overflow, "size exceeds the address space"))?;
    base.checked_add(len)
        .ok_or_else(|| invalid("DLPack tensor reaches past the address space".into()))?;
    Ok((d, base as *const u8, len))
}

/// The descriptor of a DLPack tensor of whole-byte elements at `base` (ROW_MAJOR when its
/// strides are compact, else STRIDED from the lowest byte an element occupies) and the
/// bytes its elements span.
fn plan_strided(
    l: &ImportLayout<'_>,
    base: usize,
    handle: impl Fn(u64, usize) -> BufferHandle,
) -> Result<(tensordesc::Descriptor, *const u8, usize)> {
    let e = (l.et.bits() / 8) as i128;
    let (mut lo, mut hi) = (0i128, 0i128);
    for k in 0..l.shape.len() {
        let span = l.strides[k] as i128 * (l.shape[k] as i128 - 1);
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    let start = base as i128 + lo * e;
    let end = base as i128 + (hi + 1) * e;
    if start < 0 || end > usize::MAX as i128 {
        return Err(invalid(format!(
            "DLPack tensor with strides {:?} reaches outside the address space",
            l.strides
        )));
    }
    let size = (end - start) as u64;
    let (node, offset) = if l.same(l.strides, l.compact) {
        (NodeSpec::row_major(), 0)
    } else {
        (NodeSpec::strided(l.strides), (-lo * e) as u64)
    };
    let d = TensorBuilder::new(l.et, l.shape, node)
        .buffers(vec![handle(size, start as usize)])
        .byte_offset(offset)
        .build()?;
    Ok((d, start as usize as *const u8, size as usize))
}
