//! Windowed reads into new numpy arrays: `Tensor.read` / `Region.read` and, through
//! `index.rs`, `t[...]`. Every layout and scheme is read by the library's
//! `BoundTensor::read_box`, with the GIL released.
//!
//! The output type of a read is chosen once per tensor (or region), never per box, so that
//! every window of one tensor has the same dtype (Dask's chunks rely on it):
//!
//! - no quantized leaf: the stored elements as they are (RAW) in their numpy dtype — or
//!   float32 for the ml_dtypes types when ml_dtypes is not installed;
//! - some quantized leaves: the narrowest float type that holds every leaf's values
//!   exactly — each quantized leaf's expressed type and, when some leaves are not
//!   quantized, the smallest float type holding every value of the element type.

use std::ffi::c_int;
use std::sync::Arc;

use numpy::npyffi::{self, npy_intp, NpyTypes, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tensordesc::{Descriptor, ElementType, Error, ErrorKind, LayoutRef, OutputType, Quantization};

use crate::errors::Fail;
use crate::node::NodeView;
use crate::source::Held;
use crate::views::{dtypes_module, has_dtype, numpy_dtype};

/// The quantization of every leaf of the tensor (`region` None) or of region `region`'s
/// subtree (regions are numbered in pre-order, so a subtree is a contiguous run).
fn leaf_quants(d: &Descriptor, region: Option<u32>) -> Vec<(Option<&Quantization>, ElementType)> {
    let is_leaf =
        |r: &tensordesc::RegionView<'_>| !matches!(r.layout(), LayoutRef::Subpaving { .. });
    match region {
        None if d.region_count() == 0 => vec![(d.quantization(), d.element_type())],
        None => d
            .regions()
            .filter(is_leaf)
            .map(|r| (r.quantization(), r.element_type()))
            .collect(),
        Some(i) => {
            let Some(top) = d.get_region(i as usize) else {
                return Vec::new();
            };
            if is_leaf(&top) {
                return vec![(top.quantization(), top.element_type())];
            }
            let within = |j: usize| {
                let mut p = d.get_region(j).and_then(|r| r.parent());
                while let Some(q) = p {
                    if q == i {
                        return true;
                    }
                    p = d.get_region(q as usize).and_then(|r| r.parent());
                }
                false
            };
            (i as usize + 1..d.region_count())
                .take_while(|&j| within(j))
                .filter_map(|j| d.get_region(j))
                .filter(is_leaf)
                .map(|r| (r.quantization(), r.element_type()))
                .collect()
        }
    }
}

/// The float output whose values are exactly those of a float element type.
fn float_output(e: ElementType) -> Option<OutputType> {
    match e {
        ElementType::Float16 => Some(OutputType::Float16),
        ElementType::Bfloat16 => Some(OutputType::BFloat16),
        ElementType::Float32 => Some(OutputType::Float32),
        ElementType::Float64 => Some(OutputType::Float64),
        _ => None,
    }
}

/// The narrowest float output holding every value of element type `e` exactly (int64 and
/// uint64: float64, the widest there is).
fn exact_float(e: ElementType) -> OutputType {
    use ElementType as E;
    match e {
        E::Bool
        | E::Int8
        | E::Uint8
        | E::Int4
        | E::Uint4
        | E::Float4E2m1fn
        | E::Float8E4m3fn
        | E::Float8E5m2
        | E::Float16 => OutputType::Float16,
        E::Bfloat16 | E::Float8E8m0fnu => OutputType::BFloat16,
        E::Int16 | E::Uint16 | E::Float32 | E::Complex64 => OutputType::Float32,
        E::Int32 | E::Uint32 | E::Int64 | E::Uint64 | E::Float64 | E::Complex128 => {
            OutputType::Float64
        }
    }
}

/// The narrowest float output holding the values of both.
fn join(a: OutputType, b: OutputType) -> OutputType {
    use OutputType as O;
    match (a, b) {
        (x, y) if x == y => x,
        (O::Float64, _) | (_, O::Float64) => O::Float64,
        _ => O::Float32,
    }
}

/// The element type whose numpy dtype an output of `o` has (`et` for RAW).
fn output_element(o: OutputType, et: ElementType) -> ElementType {
    match o {
        OutputType::Raw => et,
        OutputType::Float32 => ElementType::Float32,
        OutputType::Float64 => ElementType::Float64,
        OutputType::Float16 => ElementType::Float16,
        OutputType::BFloat16 => ElementType::Bfloat16,
    }
}

/// The output of a read of the tensor (`region` None) or of a region, and the numpy dtype
/// of the result. `dtype`: None (the default described in the module comment), "raw" (the
/// stored elements; quantized ones as their codes), "float32", "float64", "float16",
/// "bfloat16" (or those numpy dtypes), or the element type's own dtype when nothing in
/// scope is quantized.
pub fn output<'py>(
    py: Python<'py>,
    d: &Descriptor,
    region: Option<u32>,
    dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<(OutputType, Bound<'py, PyArrayDescr>)> {
    let et = d.element_type();
    let quants = leaf_quants(d, region);
    // A leaf storing another type than the value type (format 1.1) reads as values too.
    let quantized = quants.iter().any(|&(q, st)| q.is_some() || st != et);
    let chosen = match dtype.filter(|x| !x.is_none()) {
        None if !quantized => {
            if has_dtype(py, et)? {
                OutputType::Raw
            } else {
                OutputType::Float32
            }
        }
        None => {
            let mut o: Option<OutputType> = None;
            for (q, _) in &quants {
                let need = match q {
                    Some(q) => float_output(q.expressed_type).unwrap_or(OutputType::Float32),
                    None => exact_float(et),
                };
                o = Some(o.map_or(need, |x| join(x, need)));
            }
            let o = o.unwrap_or(OutputType::Float32);
            if o == OutputType::BFloat16 && !has_dtype(py, ElementType::Bfloat16)? {
                OutputType::Float32
            } else {
                o
            }
        }
        Some(dt) => {
            let raw = dt
                .extract::<String>()
                .is_ok_and(|s| s.eq_ignore_ascii_case("raw"));
            if raw {
                OutputType::Raw
            } else {
                let code: u8 = dtypes_module(py)?
                    .call_method1("element_type", (dt,))?
                    .extract()?;
                let e = ElementType::from_code(code).map_err(Fail)?;
                match float_output(e) {
                    // The element type's own dtype: its stored elements, bit for bit.
                    _ if e == et && !quantized => OutputType::Raw,
                    Some(o) => o,
                    None => {
                        return Err(PyValueError::new_err(format!(
                            "dtype {dt} is not an output of a read: \"raw\" (the stored {} {}), \
                             \"float32\", \"float64\", \"float16\" or \"bfloat16\"{}",
                            et.name(),
                            if quantized { "codes" } else { "elements" },
                            if quantized {
                                ""
                            } else {
                                " (or the element type's own dtype)"
                            }
                        )))
                    }
                }
            }
        }
    };
    let descr = numpy_dtype(py, output_element(chosen, et))?;
    Ok((chosen, descr))
}

/// A new C-contiguous array of `shape`, of zero bytes when `zeroed` (numpy's `zeros`:
/// `calloc`, whose large blocks are fresh pages the system zeroes as they are touched),
/// else uninitialised (numpy's `empty`).
fn new_array<'py>(
    py: Python<'py>,
    dtype: Bound<'py, PyArrayDescr>,
    shape: &[u64],
    zeroed: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let mut dims = shape
        .iter()
        .map(|&e| npy_intp::try_from(e))
        .collect::<Result<Vec<npy_intp>, _>>()
        .map_err(|_| Fail(Error::new(ErrorKind::Overflow, "extent exceeds npy_intp")))?;
    if zeroed {
        // SAFETY: the API table comes from the imported numpy; `descr` is a new reference
        // that PyArray_Zeros steals; dims holds ndim entries and lives across the call.
        unsafe {
            let arr = PY_ARRAY_API.PyArray_Zeros(
                py,
                dims.len() as c_int,
                dims.as_mut_ptr(),
                dtype.into_dtype_ptr(),
                0,
            );
            if arr.is_null() {
                return Err(PyErr::fetch(py));
            }
            return Ok(Bound::from_owned_ptr(py, arr));
        }
    }
    // SAFETY: the type object and API table come from the imported numpy; `descr` is a new
    // reference that NewFromDescr steals; dims holds ndim entries and lives across the
    // call; null strides and data ask numpy for a new C-contiguous allocation.
    unsafe {
        let arr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, NpyTypes::PyArray_Type),
            dtype.into_dtype_ptr(),
            dims.len() as c_int,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
        );
        if arr.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, arr))
    }
}

/// Smallest sparse-to-dense read whose output array is allocated zeroed.
const ZEROED_MIN_BYTES: u64 = 1 << 20;

/// Read the box `[lo, hi)` (tensor coordinates) of the tensor — as the tensor's output
/// (`region` None) or as region `region`'s — into a new numpy array.
pub fn read_box<'py>(
    py: Python<'py>,
    held: &Arc<Held>,
    region: Option<u32>,
    lo: Vec<u64>,
    hi: Vec<u64>,
    dtype: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let d = held.src.descriptor().map_err(Fail)?;
    let (out, descr) = output(py, d, region, dtype)?;
    d.check_box(&lo, &hi).map_err(Fail)?;
    let esize = out.element_bytes(d.element_type());
    if descr.itemsize() != esize {
        return Err(Fail(Error::new(
            ErrorKind::Internal,
            format!(
                "dtype {} has {} bytes, a {} element {esize}",
                descr,
                descr.itemsize(),
                out.name()
            ),
        ))
        .into());
    }
    let shape: Vec<u64> = lo.iter().zip(&hi).map(|(l, h)| h - l).collect();
    // A sparse tensor read to dense into zeroed memory writes only its stored entries
    // (read_box_into_zeroed); below 1 MiB, or for other layouts (whose every element is
    // written anyway), the array is not zeroed first.
    let zeroed = region.is_none()
        && matches!(
            d.layout(),
            LayoutRef::Coo { .. }
                | LayoutRef::Csr { .. }
                | LayoutRef::Csc { .. }
                | LayoutRef::Csf { .. }
        )
        && shape
            .iter()
            .try_fold(esize as u64, |a, &e| a.checked_mul(e))
            .is_some_and(|b| b >= ZEROED_MIN_BYTES);
    let arr = new_array(py, descr, &shape, zeroed)?;
    let count = shape
        .iter()
        .try_fold(1u64, |a, &e| a.checked_mul(e))
        .and_then(|n| n.checked_mul(esize as u64))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| Fail(Error::new(ErrorKind::Overflow, "window size overflows")))?;
    // SAFETY: `arr` is a new C-contiguous array that numpy allocated for exactly these
    // `count` bytes; nothing else references it until it is returned.
    let data = unsafe { (*(arr.as_ptr() as *mut npyffi::PyArrayObject)).fields.data } as usize;
    let h = held.clone();
    py.detach(move || -> tensordesc::Result<()> {
        let t = h.src.bound()?;
        if count == 0 {
            // Nothing to write; the call still checks the request (a float read of a
            // complex tensor, device memory). An aligned, empty output:
            let mut word = [0u64; 1];
            let empty: &mut [u8] =
                // SAFETY: zero bytes at an address aligned for any output element.
                unsafe { std::slice::from_raw_parts_mut(word.as_mut_ptr() as *mut u8, 0) };
            return t.read_box(&lo, &hi, out, empty, None);
        }
        // SAFETY: `data` addresses the `count` bytes of the new array (see above), which
        // stays alive (owned by this frame's `arr`) and is written only here.
        let buf = unsafe { std::slice::from_raw_parts_mut(data as *mut u8, count) };
        if zeroed {
            t.read_box_into_zeroed(&lo, &hi, out, buf, None)
        } else {
            t.read_box(&lo, &hi, out, buf, None)
        }
    })
    .map_err(Fail)?;
    Ok(arr)
}

/// The box of region `region` whose region-local corners are `[lo, hi)`, in tensor
/// coordinates (INDEX_OUT_OF_BOUNDS outside the region).
pub fn region_box(
    d: &Descriptor,
    region: u32,
    lo: &[u64],
    hi: &[u64],
) -> tensordesc::Result<(Vec<u64>, Vec<u64>)> {
    let v = NodeView::of(d, Some(region))?;
    let rank = v.shape.len();
    if lo.len() != rank || hi.len() != rank {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "a box of {} and {} coordinates for a region of rank {rank}",
                lo.len(),
                hi.len()
            ),
        ));
    }
    for a in 0..rank {
        if lo[a] > hi[a] || hi[a] > v.shape[a] {
            return Err(Error::new(
                ErrorKind::IndexOutOfBounds,
                format!(
                    "box {lo:?}..{hi:?}: axis {a} runs {}..{} outside region {region}'s extent {}",
                    lo[a], hi[a], v.shape[a]
                ),
            ));
        }
    }
    let glo = lo.iter().zip(&v.origin).map(|(l, o)| l + o).collect();
    let ghi = hi.iter().zip(&v.origin).map(|(h, o)| h + o).collect();
    Ok((glo, ghi))
}
