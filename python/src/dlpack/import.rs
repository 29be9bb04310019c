//! Import: `from_dlpack` of any producer's capsule, consumed so that its deleter runs
//! exactly once, when the last object using the memory is gone.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use tensordesc::device::{MAX_ALIGNMENT_LOG2, MIN_ALIGNMENT_LOG2};
use tensordesc::{
    BufferHandle, DeviceType, ElementType, Error, ErrorKind, MemoryClass, NodeSpec, Result,
    TensorBuilder,
};

use super::{
    element_type_of, DLManagedTensor, DLManagedTensorVersioned, DLTensor, DLPACK_MAJOR,
    DLPACK_MINOR, FLAG_IS_COPIED, FLAG_IS_SUBBYTE_TYPE_PADDED, FLAG_READ_ONLY, LEGACY_NAME,
    USED_LEGACY_NAME, USED_VERSIONED_NAME, VERSIONED_NAME,
};
use crate::errors::Fail;
use crate::node::compact_strides;
use crate::source::{Held, Keep, MemBuf, MemTensor, Source};

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
