//! One element: a Python index normalised against a shape, and the element's value as a
//! Python number.

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use tensordesc::{BoundTensor, Descriptor, ElementType, Error, ErrorKind, Location};

use crate::errors::Fail;

/// One index coordinate: any Python integer (or `__index__`); one beyond `i128` is held as
/// `i128::MIN` / `i128::MAX`, outside every extent either way. Not an integer: `TypeError`.
pub(super) fn coordinate(v: &Bound<'_, PyAny>) -> PyResult<i128> {
    match v.extract::<i128>() {
        Ok(x) => Ok(x),
        Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => {
            Ok(if v.lt(0)? { i128::MIN } else { i128::MAX })
        }
        Err(_) => Err(PyTypeError::new_err(format!(
            "an index is an integer or a sequence of integers, not {}",
            v.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".into())
        ))),
    }
}

/// Normalise a Python index (negative counts from the end) against `shape`: a coordinate
/// outside its extent, however large, is `IndexOutOfBounds` naming the axis and the value.
pub(super) fn normalise_index(index: &Bound<'_, PyAny>, shape: &[u64]) -> PyResult<Vec<u64>> {
    // An integer of any size is one coordinate; anything else must be a sequence.
    let single = match index.extract::<i128>() {
        Ok(_) => true,
        Err(e) => e.is_instance_of::<PyOverflowError>(index.py()),
    };
    let given: Vec<Bound<'_, PyAny>> = if single {
        vec![index.clone()]
    } else {
        match index.try_iter() {
            Ok(it) => it.collect::<PyResult<_>>()?,
            Err(_) => {
                return Err(PyTypeError::new_err(
                    "an index is an integer or a sequence of integers",
                ))
            }
        }
    };
    let raw: Vec<i128> = given.iter().map(coordinate).collect::<PyResult<_>>()?;
    if raw.len() != shape.len() {
        return Err(Fail(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "index has {} coordinates, the shape {shape:?} has {}",
                raw.len(),
                shape.len()
            ),
        ))
        .into());
    }
    let shown = || -> String {
        let parts: Vec<String> = given.iter().map(|v| v.to_string()).collect();
        format!("[{}]", parts.join(", "))
    };
    raw.iter()
        .zip(shape)
        .enumerate()
        .map(|(a, (&i, &e))| {
            // |i| < 2^127 and e < 2^64: no overflow.
            let j = if i < 0 { i + e as i128 } else { i };
            if j < 0 || j >= e as i128 {
                Err(Fail(Error::new(
                    ErrorKind::IndexOutOfBounds,
                    format!(
                        "index {}: axis {a} coordinate {} is outside extent {e}",
                        shown(),
                        given[a]
                    ),
                ))
                .into())
            } else {
                Ok(j as u64)
            }
        })
        .collect()
}

/// The value of element `index` (tensor coordinates) as a Python number: integers and
/// booleans exactly, floats (every float type) as float, complex as complex, quantized
/// elements dequantized (float).
pub(super) fn element_value(
    py: Python<'_>,
    t: &BoundTensor<'_>,
    index: &[u64],
) -> PyResult<Py<PyAny>> {
    let d = t.descriptor();
    let et = d.element_type();
    if quantized_at(d, index)? {
        return Ok(t
            .get_f64(index)
            .map_err(Fail)?
            .into_pyobject(py)?
            .into_any()
            .unbind());
    }
    if d.has_region_types() {
        // A region storing another type (format 1.1) converts exactly into the value type.
        let region = match d.locate(index).map_err(Fail)? {
            Location::Dense { region, .. } | Location::Lookup { region, .. } => region,
        };
        if d.stored_type(region) != et {
            let v = t.get_f64(index).map_err(Fail)?;
            return Ok(if et.is_integer() || et == ElementType::Bool {
                (v as i128).into_pyobject(py)?.into_any().unbind()
            } else {
                v.into_pyobject(py)?.into_any().unbind()
            });
        }
    }
    let mut b = [0u8; 16];
    t.get_bytes(index, &mut b).map_err(Fail)?;
    stored_value(py, t, index, &b)
}

/// Whether element `index` of `d` lies in a quantized node (its leaf region's
/// quantization, or the tensor's).
fn quantized_at(d: &Descriptor, index: &[u64]) -> PyResult<bool> {
    let loc = d.locate(index).map_err(Fail)?;
    let region = match loc {
        Location::Dense { region, .. } | Location::Lookup { region, .. } => region,
    };
    Ok(match region {
        Some(r) => d
            .get_region(r as usize)
            .and_then(|v| v.quantization())
            .is_some(),
        None => d.quantization().is_some(),
    })
}

/// The stored element `b` (its bytes, little-endian) of element `index` of `t` as a Python
/// number of its element type (floats read through `t` as float).
fn stored_value(
    py: Python<'_>,
    t: &BoundTensor<'_>,
    index: &[u64],
    b: &[u8; 16],
) -> PyResult<Py<PyAny>> {
    use ElementType::*;
    let v: Py<PyAny> = match t.descriptor().element_type() {
        Bool => (b[0] != 0)
            .into_pyobject(py)?
            .to_owned()
            .into_any()
            .unbind(),
        Int8 => (b[0] as i8).into_pyobject(py)?.into_any().unbind(),
        Uint8 => b[0].into_pyobject(py)?.into_any().unbind(),
        Int16 => i16::from_le_bytes([b[0], b[1]])
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Uint16 => u16::from_le_bytes([b[0], b[1]])
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Int32 => i32::from_le_bytes(b[..4].try_into().unwrap_or_default())
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Uint32 => u32::from_le_bytes(b[..4].try_into().unwrap_or_default())
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Int64 => i64::from_le_bytes(b[..8].try_into().unwrap_or_default())
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Uint64 => u64::from_le_bytes(b[..8].try_into().unwrap_or_default())
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Int4 => (((b[0] << 4) as i8) >> 4)
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Uint4 => (b[0] & 0xF).into_pyobject(py)?.into_any().unbind(),
        Complex64 => {
            let re = f32::from_le_bytes(b[..4].try_into().unwrap_or_default());
            let im = f32::from_le_bytes(b[4..8].try_into().unwrap_or_default());
            pyo3::types::PyComplex::from_doubles(py, re as f64, im as f64)
                .into_any()
                .unbind()
        }
        Complex128 => {
            let re = f64::from_le_bytes(b[..8].try_into().unwrap_or_default());
            let im = f64::from_le_bytes(b[8..16].try_into().unwrap_or_default());
            pyo3::types::PyComplex::from_doubles(py, re, im)
                .into_any()
                .unbind()
        }
        _ => t
            .get_f64(index)
            .map_err(Fail)?
            .into_pyobject(py)?
            .into_any()
            .unbind(),
    };
    Ok(v)
}
