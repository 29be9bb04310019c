//! The dicts (and lists of dicts) `Tensor` and `Region` describe their parts with: layout
//! fields, quantization, buffers and an element's location.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use tensordesc::layout::{tile_order_name, LayoutField};
use tensordesc::quant::QuantField;
use tensordesc::{
    ElementType, Error, ErrorKind, GlobalScale, LayoutRef, Location, QuantScheme, Quantization,
    TileLevel,
};

use super::desc;
use crate::errors::Fail;
use crate::node::sparse_flag_names;
use crate::source::Held;

pub(super) fn layout_params<'py>(
    py: Python<'py>,
    l: &LayoutRef<'_>,
) -> PyResult<Bound<'py, PyDict>> {
    let p = PyDict::new(py);
    match l {
        LayoutRef::Strided { strides } => p.set_item("strides", strides.to_vec())?,
        LayoutRef::DimOrder { order } => p.set_item("order", order.to_vec())?,
        LayoutRef::Tiled { levels } => p.set_item("levels", tile_levels(py, levels)?)?,
        LayoutRef::Subpaving { region_count } => p.set_item("region_count", region_count)?,
        LayoutRef::Coo { nnz, flags: f }
        | LayoutRef::Csr { nnz, flags: f }
        | LayoutRef::Csc { nnz, flags: f } => {
            p.set_item("nnz", nnz)?;
            p.set_item("flags", sparse_flag_names(*f))?;
        }
        LayoutRef::Csf { nnz, axis_order } => {
            p.set_item("nnz", nnz)?;
            p.set_item("axis_order", axis_order.to_vec())?;
        }
        LayoutRef::BlockPaged {
            block_size,
            pool_count,
        } => {
            p.set_item("block_size", block_size)?;
            p.set_item("pool_count", pool_count)?;
        }
        LayoutRef::GgmlBlocks { ggml_type } => {
            p.set_item("ggml_type", ggml_type.number)?;
            p.set_item("ggml_type_name", ggml_type.name)?;
            p.set_item("block_elems", ggml_type.block_elems)?;
            p.set_item("block_bytes", ggml_type.block_bytes)?;
        }
        LayoutRef::Extension { tag, data } | LayoutRef::Unknown { tag, data } => {
            p.set_item("tag", tag)?;
            p.set_item("data", PyBytes::new(py, data))?;
        }
        LayoutRef::RowMajor | LayoutRef::ColMajor | LayoutRef::Splat => {}
        // A layout added to the library since: its fields as the library names them.
        other => {
            for (name, value) in other.fields() {
                p.set_item(name, layout_field(py, value)?)?;
            }
        }
    }
    Ok(p)
}

/// A layout field as a Python value: ints, lists of ints, a bool, a str, bytes, and TILED
/// levels as the dicts `layout_params` gives.
fn layout_field<'py>(py: Python<'py>, v: LayoutField<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        LayoutField::U64(v) => v.into_pyobject(py)?.into_any(),
        LayoutField::Ints(v) => v.to_vec().into_pyobject(py)?.into_any(),
        LayoutField::Axes(v) => v.to_vec().into_pyobject(py)?.into_any(),
        LayoutField::Bool(v) => v.into_pyobject(py)?.to_owned().into_any(),
        LayoutField::Name(v) => v.into_pyobject(py)?.into_any(),
        LayoutField::Bytes(v) => PyBytes::new(py, v).into_any(),
        LayoutField::Levels(levels) => tile_levels(py, levels)?.into_any(),
        other => format!("{other:?}").into_pyobject(py)?.into_any(),
    })
}

/// TILED levels as a list of dicts: `tile_shape`, `tile_order`, `inner`.
fn tile_levels<'py>(py: Python<'py>, levels: &[TileLevel<'_>]) -> PyResult<Bound<'py, PyList>> {
    let lv = PyList::empty(py);
    for l in levels {
        let d = PyDict::new(py);
        d.set_item("tile_shape", l.tile_shape.to_vec())?;
        d.set_item("tile_order", tile_order_name(l.tile_order))?;
        // ROW_MAJOR, COL_MAJOR or TILED (checked when decoded).
        d.set_item("inner", tensordesc::layout::tag_name(l.inner_tag))?;
        lv.append(d)?;
    }
    Ok(lv)
}

fn type_name(t: ElementType) -> String {
    t.name().to_ascii_lowercase()
}

pub(super) fn quant_dict<'py>(py: Python<'py>, q: &Quantization) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("expressed_type", type_name(q.expressed_type))?;
    d.set_item("has_zero_point", q.has_zero_point)?;
    match q.global_scale {
        Some(GlobalScale::Multiplies) => d.set_item("global_scale", "multiplies")?,
        Some(GlobalScale::Divides) => d.set_item("global_scale", "divides")?,
        None => {}
    }
    match &q.scheme {
        QuantScheme::Opaque { scheme, .. } => {
            d.set_item("scheme", format!("OPAQUE_0x{scheme:02X}"))?
        }
        _ => d.set_item("scheme", q.scheme_name())?,
    }
    for (name, v) in q.fields() {
        match v {
            QuantField::Int(i) => d.set_item(name, i)?,
            QuantField::Float(f) => d.set_item(name, f)?,
            QuantField::Type(t) => d.set_item(name, type_name(t))?,
            QuantField::Bytes(b) => d.set_item(name, PyBytes::new(py, b))?,
        }
    }
    Ok(d)
}

/// The effective buffers `first .. first + count` as dicts.
pub(super) fn buffers_list<'py>(
    py: Python<'py>,
    held: &Held,
    first: usize,
    count: usize,
) -> PyResult<Bound<'py, PyList>> {
    let d = desc(held)?;
    let offsets = held.src.file_offsets();
    let out = PyList::empty(py);
    for k in first..first + count {
        let info = d
            .buffer_info(k)
            .ok_or_else(|| Fail(Error::new(ErrorKind::Internal, "buffer index")))?;
        let h = info.handle;
        let b = PyDict::new(py);
        b.set_item("index", k)?;
        b.set_item("role", info.role.name())?;
        b.set_item("level", info.level)?;
        b.set_item("region", info.region)?;
        b.set_item("size", h.size_bytes)?;
        b.set_item("device", h.device_type.name())?;
        b.set_item("device_id", h.device_id)?;
        b.set_item("memory_class", h.memory_class.name())?;
        b.set_item("alignment", h.alignment())?;
        b.set_item("read_only", h.read_only)?;
        if let Some(o) = offsets.as_ref().and_then(|o| o.get(k)) {
            b.set_item("file_offset", o)?;
        }
        if held.src.has_buffers() {
            if let Ok((bytes, _)) = held.src.buffer(k) {
                b.set_item("address", bytes.as_ptr() as usize)?;
            }
        }
        out.append(b)?;
    }
    Ok(out)
}

pub(super) fn location_dict<'py>(
    py: Python<'py>,
    loc: Location,
    rank: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    match loc {
        Location::Dense {
            region,
            buffer,
            byte_offset,
            bit_shift,
        } => {
            d.set_item("kind", "dense")?;
            d.set_item("region", region)?;
            d.set_item("buffer", buffer)?;
            d.set_item("byte_offset", byte_offset)?;
            d.set_item("bit_shift", bit_shift)?;
        }
        Location::Lookup {
            region,
            layout_tag,
            first_buffer,
            buffer_count,
            local_index,
        } => {
            d.set_item("kind", "lookup")?;
            d.set_item("region", region)?;
            d.set_item("layout_tag", layout_tag)?;
            d.set_item("first_buffer", first_buffer)?;
            d.set_item("buffer_count", buffer_count)?;
            d.set_item("local_index", local_index[..rank].to_vec())?;
        }
    }
    Ok(d)
}
