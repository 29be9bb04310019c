//! numpy arrays over a tensor's memory: zero-copy views of dense nodes (any dtype numpy
//! knows, ml_dtypes' included), unpacked copies of packed 4-bit nodes, and the typed views
//! of sparse buffers that `to_scipy` hands to scipy.

use std::ffi::c_int;
use std::sync::Arc;

use numpy::npyffi::{self, npy_intp, NpyTypes, NPY_ARRAY_WRITEABLE, PY_ARRAY_API};
use numpy::{PyArray1, PyArrayDescr, PyArrayDescrMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;
use tensordesc::{ElementType, Error, ErrorKind, Result};

use crate::errors::Fail;
use crate::node::{dense_plan, DensePlan};
use crate::source::Held;

/// Keeps a tensor's memory alive as the `base` of the numpy arrays that view it.
#[pyclass(module = "tensordesc", frozen, name = "_Memory")]
pub struct Memory {
    #[allow(dead_code)]
    held: Arc<Held>,
}

static DTYPES: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The `tensordesc._dtypes` helper module.
pub fn dtypes_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    Ok(DTYPES
        .get_or_try_init(py, || -> PyResult<Py<PyModule>> {
            Ok(py.import("tensordesc._dtypes")?.unbind())
        })?
        .bind(py))
}

static NUMPY_DTYPES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// `tensordesc._dtypes._NUMPY`: the numpy dtype of each element type code numpy has here
/// (filled once, when the module is imported), looked up without calling into Python.
fn numpy_dtypes(py: Python<'_>) -> PyResult<&Bound<'_, PyDict>> {
    Ok(NUMPY_DTYPES
        .get_or_try_init(py, || -> PyResult<Py<PyDict>> {
            Ok(dtypes_module(py)?
                .getattr("_NUMPY")?
                .cast_into::<PyDict>()?
                .unbind())
        })?
        .bind(py))
}

/// The numpy dtype of an element type (ml_dtypes for BFLOAT16, FLOAT8_*, 4-bit types).
pub fn numpy_dtype<'py>(py: Python<'py>, et: ElementType) -> PyResult<Bound<'py, PyArrayDescr>> {
    let found = numpy_dtypes(py)?.get_item(et.code())?;
    // Not there: `_dtypes.numpy_dtype` raises the error that says why.
    let dt = match found {
        Some(dt) => dt,
        None => dtypes_module(py)?.call_method1("numpy_dtype", (et.code(),))?,
    };
    Ok(dt.cast_into::<PyArrayDescr>()?)
}

/// True when numpy has a dtype for `e` here (the ml_dtypes types need ml_dtypes).
pub fn has_dtype(py: Python<'_>, e: ElementType) -> PyResult<bool> {
    numpy_dtypes(py)?.contains(e.code())
}

fn out_of_buffer(what: &str) -> Error {
    Error::new(
        ErrorKind::Internal,
        format!("{what}: the elements reach outside the bound buffer"),
    )
}

/// Byte range [lo, hi) that the elements of `plan` occupy relative to the buffer start,
/// checked against `len` (the descriptor was validated; this is a second, cheap guard so
/// that no view can ever reach outside the buffer).
fn checked_span(plan: &DensePlan, esize: i128, len: usize) -> Result<()> {
    if plan.element_count() == 0 {
        return Ok(());
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&s, &e) in plan.strides.iter().zip(&plan.shape) {
        let span = s as i128 * (e as i128 - 1);
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    let off = plan.byte_offset as i128;
    if off + lo * esize < 0 || off + (hi + 1) * esize > len as i128 {
        return Err(out_of_buffer(&plan.what));
    }
    Ok(())
}

/// A numpy array of `dtype` over memory owned by `held`, read-only unless `writable`.
///
/// # Safety
///
/// `data` with `shape` and byte `strides` must address only bytes inside memory that
/// `held` keeps alive (and, if `writable`, that may be written).
unsafe fn array_over<'py>(
    py: Python<'py>,
    held: &Arc<Held>,
    dtype: Bound<'py, PyArrayDescr>,
    shape: &[u64],
    strides: &[i64],
    data: *mut u8,
    writable: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let mut dims = shape
        .iter()
        .map(|&e| npy_intp::try_from(e))
        .collect::<std::result::Result<Vec<npy_intp>, _>>()
        .map_err(|_| Fail(Error::new(ErrorKind::Overflow, "extent exceeds npy_intp")))?;
    let mut st = strides
        .iter()
        .map(|&s| npy_intp::try_from(s))
        .collect::<std::result::Result<Vec<npy_intp>, _>>()
        .map_err(|_| Fail(Error::new(ErrorKind::Overflow, "stride exceeds npy_intp")))?;
    let keeper = Py::new(py, Memory { held: held.clone() })?;
    let flags: c_int = if writable { NPY_ARRAY_WRITEABLE } else { 0 };
    // SAFETY: the type object and API table come from the imported numpy; `descr` is a
    // new reference that NewFromDescr steals; dims/strides hold ndim entries each and
    // live across the call; the caller guarantees that data/shape/strides stay inside
    // memory kept alive by `held`, which the array's base (the keeper) owns.
    unsafe {
        let arr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, NpyTypes::PyArray_Type),
            dtype.into_dtype_ptr(),
            dims.len() as c_int,
            dims.as_mut_ptr(),
            st.as_mut_ptr(),
            data as *mut std::ffi::c_void,
            flags,
            std::ptr::null_mut(),
        );
        if arr.is_null() {
            return Err(PyErr::fetch(py));
        }
        let arr = Bound::from_owned_ptr(py, arr);
        // SetBaseObject steals the reference to the keeper.
        if PY_ARRAY_API.PyArray_SetBaseObject(
            py,
            arr.as_ptr() as *mut npyffi::PyArrayObject,
            keeper.into_ptr(),
        ) != 0
        {
            return Err(PyErr::fetch(py));
        }
        Ok(arr)
    }
}

/// The stored elements of a dense node as numpy: a zero-copy view (read-only for files,
/// streams and read-only sources), or for packed 4-bit types an unpacked copy.
pub fn dense_numpy<'py>(
    py: Python<'py>,
    held: &Arc<Held>,
    region: Option<u32>,
    raw: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let d = held.src.descriptor().map_err(Fail)?;
    let plan = dense_plan(d, region).map_err(Fail)?;
    if plan.quantized && !raw {
        return Err(Fail(Error::new(
            ErrorKind::NotBindable,
            format!(
                "{} is quantized: numpy(raw=True) views its stored codes",
                plan.what
            ),
        ))
        .into());
    }
    if !plan.handle.is_host_readable() {
        return Err(Fail(Error::new(
            ErrorKind::NotBindable,
            format!("{}: its buffer is device memory", plan.what),
        ))
        .into());
    }
    let (bytes, read_only) = held.src.buffer(plan.buffer).map_err(Fail)?;
    if plan.et.is_packed() {
        return unpack4(py, &plan, bytes);
    }
    let esize = (plan.et.bits() / 8) as i128;
    checked_span(&plan, esize, bytes.len()).map_err(Fail)?;
    let strides: Vec<i64> = plan
        .strides
        .iter()
        .map(|&s| s.checked_mul(esize as i64))
        .collect::<Option<Vec<i64>>>()
        .ok_or_else(|| Fail(Error::new(ErrorKind::Overflow, "byte stride exceeds int64")))?;
    let dtype = numpy_dtype(py, plan.et)?;
    let data = if plan.element_count() == 0 {
        bytes.as_ptr() as *mut u8
    } else {
        // In bounds: checked_span put byte_offset inside the buffer.
        bytes[plan.byte_offset as usize..].as_ptr() as *mut u8
    };
    // SAFETY: checked_span proved every element's bytes lie inside `bytes`, which `held`
    // keeps alive; the array is writable only when the source is not read-only.
    // A SPLAT's one element is seen at every index: its view is never writable.
    let writable = !read_only && !plan.splat;
    unsafe { array_over(py, held, dtype, &plan.shape, &strides, data, writable) }
}

/// `n` packed 4-bit codes starting at byte `off` of `bytes`, one per byte (low nibble
/// first, as the format packs them).
pub fn unpack_codes(bytes: &[u8], off: u64, n: u64, what: &str) -> Result<Vec<u8>> {
    let need = (off as u128) + (n as u128).div_ceil(2);
    if need > bytes.len() as u128 {
        return Err(out_of_buffer(what));
    }
    let run = &bytes[off as usize..];
    let n = n as usize;
    let mut codes = Vec::with_capacity(n);
    for l in 0..n {
        let b = run[l / 2];
        codes.push(if l % 2 == 0 { b & 0xF } else { b >> 4 });
    }
    Ok(codes)
}

/// Packed 4-bit elements, one code per byte, in storage order, arranged by
/// `tensordesc._dtypes.arrange_unpacked` into the node's shape with the ml_dtypes type.
fn unpack4<'py>(py: Python<'py>, plan: &DensePlan, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let n = if plan.splat { 1 } else { plan.element_count() };
    let codes = unpack_codes(bytes, plan.byte_offset, n, &plan.what).map_err(Fail)?;
    let codes = PyArray1::from_vec(py, codes);
    dtypes_module(py)?.call_method1(
        "arrange_unpacked",
        (
            codes,
            plan.et.code(),
            plan.shape.clone(),
            plan.order.clone(),
            plan.splat,
        ),
    )
}

/// A read-only (unless the source is writable) 1-D numpy view of `len` elements of
/// `dtype` at byte `at` of effective buffer `k` — the typed views `to_scipy` needs.
pub fn buffer_view<'py>(
    py: Python<'py>,
    held: &Arc<Held>,
    k: usize,
    dtype: Bound<'py, PyArrayDescr>,
    count: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let (bytes, read_only) = held.src.buffer(k).map_err(Fail)?;
    let esize = dtype.itemsize() as u64;
    let need = count
        .checked_mul(esize)
        .ok_or_else(|| Fail(Error::new(ErrorKind::Overflow, "view size overflows")))?;
    if need > bytes.len() as u64 {
        return Err(Fail(Error::new(
            ErrorKind::Internal,
            format!(
                "buffer {k} holds {} bytes, {count} elements of {esize} bytes need {need}",
                bytes.len()
            ),
        ))
        .into());
    }
    // SAFETY: count elements of esize bytes from the buffer start fit in `bytes`
    // (checked above), which `held` keeps alive.
    unsafe {
        array_over(
            py,
            held,
            dtype,
            &[count],
            &[esize as i64],
            bytes.as_ptr() as *mut u8,
            !read_only,
        )
    }
}
