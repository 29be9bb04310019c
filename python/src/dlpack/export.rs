//! Export: `__dlpack__` capsules of dense nodes, versioned or legacy, whose deleters run
//! exactly once.

use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tensordesc::{Error, ErrorKind, Result};

use super::{
    check_element_aligned, dl_dtype, DLDevice, DLManagedTensor, DLManagedTensorVersioned,
    DLPackVersion, DLTensor, DLPACK_MAJOR, DLPACK_MINOR, FLAG_IS_COPIED, FLAG_READ_ONLY,
    LEGACY_NAME, VERSIONED_NAME,
};
use crate::errors::Fail;
use crate::node::{dense_plan, DensePlan};
use crate::source::{AlignedBytes, Held};

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

/// A DLPack managed-tensor struct: what a capsule destructor needs of it.
trait Managed {
    /// The producer's deleter.
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)>;
}

impl Managed for DLManagedTensorVersioned {
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

impl Managed for DLManagedTensor {
    fn deleter(&self) -> Option<unsafe extern "C" fn(*mut Self)> {
        self.deleter
    }
}

/// Runs the deleter of the `T` a capsule named `name` holds, when the capsule dies
/// unconsumed.
///
/// # Safety
/// Called by Python (through the destructors below) with the GIL held and a live capsule
/// whose pointer, under `name`, is a `T` this module made.
unsafe fn destroy_capsule<T: Managed>(capsule: *mut ffi::PyObject, name: &CStr) {
    // SAFETY: the caller's promise. PyCapsule_IsValid never fails (no exception is set);
    // a consumer that took the tensor renamed the capsule, so the name check tells whether
    // the deleter is still ours to call. The error indicator is saved and restored around
    // the deleter, which may run Python code (releasing objects) while an exception is
    // pending.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, name.as_ptr()) == 0 {
            return;
        }
        let m = ffi::PyCapsule_GetPointer(capsule, name.as_ptr()) as *mut T;
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
        if let Some(d) = (*m).deleter() {
            d(m);
        }
        #[allow(deprecated)]
        ffi::PyErr_Restore(t, v, tb);
    }
}

/// Runs a versioned capsule's deleter when the capsule dies unconsumed.
unsafe extern "C" fn versioned_capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: Python calls it with the GIL held on a capsule made by `export`.
    unsafe { destroy_capsule::<DLManagedTensorVersioned>(capsule, VERSIONED_NAME) }
}

/// Runs a legacy capsule's deleter when the capsule dies unconsumed.
unsafe extern "C" fn legacy_capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: Python calls it with the GIL held on a capsule made by `export`.
    unsafe { destroy_capsule::<DLManagedTensor>(capsule, LEGACY_NAME) }
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
        point_at_parts(&mut e.managed.dl_tensor, &mut e.parts);
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
        point_at_parts(&mut e.managed.dl_tensor, &mut e.parts);
        new_capsule(
            py,
            raw as *mut c_void,
            LEGACY_NAME,
            legacy_capsule_destructor,
            || legacy_deleter(raw as *mut DLManagedTensor),
        )
    }
}

/// Point `dl`'s shape and strides at the vectors of `parts`, which hold them for the
/// export's life; rank 0 keeps them NULL.
fn point_at_parts(dl: &mut DLTensor, parts: &mut ExportParts) {
    if !parts.shape.is_empty() {
        dl.shape = parts.shape.as_mut_ptr();
        dl.strides = parts.strides.as_mut_ptr();
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
