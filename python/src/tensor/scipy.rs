//! `to_scipy`: a COO, CSR or CSC node as a scipy.sparse array over its buffers.

use std::sync::Arc;

use numpy::PyArrayDescr;
use pyo3::prelude::*;
use tensordesc::{Error, ErrorKind, LayoutRef};

use super::desc;
use crate::errors::Fail;
use crate::node::NodeView;
use crate::source::Held;
use crate::views::{buffer_view, dtypes_module, numpy_dtype, unpack_codes};

/// `to_scipy` of the tensor or a region: COO, CSR or CSC as scipy sparse arrays whose
/// value arrays view the bound buffers and whose index arrays are int64 views of the u64
/// index buffers (after content validation proved every index fits).
pub(super) fn to_scipy<'py>(
    py: Python<'py>,
    held: &Arc<Held>,
    region: Option<u32>,
    raw: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let d = desc(held)?;
    let n = NodeView::of(d, region).map_err(Fail)?;
    let (format, nnz, flags) = match n.layout {
        LayoutRef::Coo { nnz, flags } => ("coo", nnz, flags),
        LayoutRef::Csr { nnz, flags } => ("csr", nnz, flags),
        LayoutRef::Csc { nnz, flags } => ("csc", nnz, flags),
        _ => {
            return Err(Fail(Error::new(
                ErrorKind::NotBindable,
                format!(
                    "{} is not a COO, CSR or CSC node: scipy.sparse has no equivalent",
                    n.what()
                ),
            ))
            .into())
        }
    };
    if n.quant.is_some() && !raw {
        return Err(Fail(Error::new(
            ErrorKind::NotBindable,
            format!(
                "{} is quantized: to_scipy(raw=True) gives its stored codes",
                n.what()
            ),
        ))
        .into());
    }
    if n.shape.iter().any(|&e| e > i64::MAX as u64) {
        return Err(Fail(Error::new(
            ErrorKind::Overflow,
            format!("{}: shape {:?} exceeds int64", n.what(), n.shape),
        ))
        .into());
    }
    // scipy's compiled routines do not bounds-check indices: only validated contents are
    // handed over (validation runs once per tensor).
    let h = held.clone();
    py.detach(move || h.validate()).map_err(Fail)?;
    let et = n.et;
    let rank = n.shape.len() as u64;
    let first = n.first_buffer;
    let u64_dtype = || PyArrayDescr::of::<u64>(py);
    let values_k = first + if format == "coo" { 1 } else { 2 };
    let values = if et.is_packed() {
        let (bytes, _) = held.src.buffer(values_k).map_err(Fail)?;
        let codes = unpack_codes(bytes, 0, nnz, &n.what()).map_err(Fail)?;
        dtypes_module(py)?.call_method1(
            "arrange_unpacked",
            (
                numpy::PyArray1::from_vec(py, codes),
                et.code(),
                vec![nnz],
                Some(vec![0usize]),
                false,
            ),
        )?
    } else {
        buffer_view(py, held, values_k, numpy_dtype(py, et)?, nnz)?
    };
    let (indices, indptr) = if format == "coo" {
        let count = nnz
            .checked_mul(rank)
            .ok_or_else(|| Fail(Error::new(ErrorKind::Overflow, "COO index count")))?;
        (
            buffer_view(py, held, first, u64_dtype(), count)?,
            py.None().into_bound(py),
        )
    } else {
        let major = if format == "csr" {
            n.shape[0]
        } else {
            n.shape[1]
        };
        (
            buffer_view(py, held, first + 1, u64_dtype(), nnz)?,
            buffer_view(py, held, first, u64_dtype(), major + 1)?,
        )
    };
    py.import("tensordesc._sparse")?.call_method1(
        "build",
        (format, n.shape.to_vec(), values, indices, indptr, flags),
    )
}
