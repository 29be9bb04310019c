//! The Python classes: `Tensor` (a descriptor with its buffers), `Region` (one region of
//! a subpaving) and `File` (the tensors of a mapped `.tdf` file, by name).

use std::sync::Arc;

use numpy::PyArrayDescr;
use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use tensordesc::file::MetaValue;
use tensordesc::quant::QuantField;
use tensordesc::{
    BoundTensor, Descriptor, ElementType, Error, ErrorKind, FileReader, GlobalScale, LayoutRef,
    Location, QuantScheme, Quantization, TileOrder,
};

use crate::dlpack;
use crate::errors::Fail;
use crate::index::{box_bounds, Window};
use crate::node::{layout_name, layout_summary, quant_summary, NodeView};
use crate::read;
use crate::source::{Held, Source};
use crate::views::{buffer_view, dense_numpy, dtypes_module, numpy_dtype, unpack_codes};

// ---------------------------------------------------------------------------------------
// Shared by Tensor and Region
// ---------------------------------------------------------------------------------------

fn desc(held: &Held) -> PyResult<&Descriptor> {
    Ok(held.src.descriptor().map_err(Fail)?)
}

fn tuple_u64<'py>(py: Python<'py>, v: &[u64]) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, v)
}

fn layout_params<'py>(py: Python<'py>, l: &LayoutRef<'_>) -> PyResult<Bound<'py, PyDict>> {
    let p = PyDict::new(py);
    let flags = |f: u8| {
        let mut v = Vec::new();
        if f & 1 != 0 {
            v.push("SORTED");
        }
        if f & 2 != 0 {
            v.push("UNIQUE");
        }
        v
    };
    match l {
        LayoutRef::Strided { strides } => p.set_item("strides", strides.to_vec())?,
        LayoutRef::DimOrder { order } => p.set_item("order", order.to_vec())?,
        LayoutRef::Tiled { levels } => {
            let lv = PyList::empty(py);
            for l in levels {
                let d = PyDict::new(py);
                d.set_item("tile_shape", l.tile_shape.to_vec())?;
                d.set_item(
                    "tile_order",
                    match l.tile_order {
                        TileOrder::RowMajor => "ROW_MAJOR",
                        TileOrder::ColMajor => "COL_MAJOR",
                    },
                )?;
                d.set_item(
                    "inner",
                    // ROW_MAJOR, COL_MAJOR or TILED (checked when decoded).
                    tensordesc::layout::tag_name(l.inner_tag),
                )?;
                lv.append(d)?;
            }
            p.set_item("levels", lv)?;
        }
        LayoutRef::Subpaving { region_count } => p.set_item("region_count", region_count)?,
        LayoutRef::Coo { nnz, flags: f }
        | LayoutRef::Csr { nnz, flags: f }
        | LayoutRef::Csc { nnz, flags: f } => {
            p.set_item("nnz", nnz)?;
            p.set_item("flags", flags(*f))?;
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
    }
    Ok(p)
}

fn type_name(t: ElementType) -> String {
    t.name().to_ascii_lowercase()
}

fn quant_dict<'py>(py: Python<'py>, q: &Quantization) -> PyResult<Bound<'py, PyDict>> {
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
fn buffers_list<'py>(
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

/// One index coordinate: any Python integer (or `__index__`); one beyond `i128` is held as
/// `i128::MIN` / `i128::MAX`, outside every extent either way. Not an integer: `TypeError`.
fn coordinate(v: &Bound<'_, PyAny>) -> PyResult<i128> {
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
fn normalise_index(index: &Bound<'_, PyAny>, shape: &[u64]) -> PyResult<Vec<u64>> {
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
fn element_value(py: Python<'_>, t: &BoundTensor<'_>, index: &[u64]) -> PyResult<Py<PyAny>> {
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

fn location_dict<'py>(py: Python<'py>, loc: Location, rank: usize) -> PyResult<Bound<'py, PyDict>> {
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

/// `to_scipy` of the tensor or a region: COO, CSR or CSC as scipy sparse arrays whose
/// value arrays view the bound buffers and whose index arrays are int64 views of the u64
/// index buffers (after content validation proved every index fits).
fn to_scipy<'py>(
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

/// What `__reduce__` returns: a callable and its arguments.
type Reduced<'py, A> = (Bound<'py, PyAny>, A);

/// The node a `Tensor` (the tensor itself) or a `Region` shows: what the methods both
/// classes have (`node_methods!`) work on.
struct Node<'a> {
    held: &'a Arc<Held>,
    /// None: the tensor itself.
    region: Option<u32>,
}

impl Node<'_> {
    /// The node as descriptor `d` has it.
    fn view<'d>(&self, d: &'d Descriptor) -> PyResult<NodeView<'d>> {
        Ok(NodeView::of(d, self.region).map_err(Fail)?)
    }

    /// The node's shape.
    fn shape(&self) -> PyResult<&[u64]> {
        Ok(self.view(desc(self.held)?)?.shape)
    }

    /// The box `[lo, hi)` (node coordinates) as a new numpy array.
    fn read_window<'py>(
        &self,
        py: Python<'py>,
        lo: Vec<u64>,
        hi: Vec<u64>,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (lo, hi) = match self.region {
            Some(r) => read::region_box(desc(self.held)?, r, &lo, &hi).map_err(Fail)?,
            None => (lo, hi),
        };
        read::read_box(py, self.held, self.region, lo, hi, dtype)
    }
}

/// The `#[pymethods]` of `Tensor` or `Region` (`$class`, whose `node()` is the `Node` it
/// shows): the methods both classes have, each written once here, then the class's own
/// methods (`$own`). A class's docstring of a shared method, if it has one, is given as
/// `name: /// doc`, in the order of the methods here (`shape` has none).
macro_rules! node_methods {
    (
        $class:ident;
        $(dtype: $(#[$dtype:meta])+)?
        $(layout: $(#[$layout:meta])+)?
        $(layout_params: $(#[$layout_params:meta])+)?
        $(quantization: $(#[$quantization:meta])+)?
        $(buffers: $(#[$buffers:meta])+)?
        $(get: $(#[$get:meta])+)?
        $(numpy: $(#[$numpy:meta])+)?
        $(read: $(#[$read:meta])+)?
        $(read_dtype: $(#[$read_dtype:meta])+)?
        $(__getitem__: $(#[$getitem:meta])+)?
        $(__array__: $(#[$array:meta])+)?
        $(to_scipy: $(#[$to_scipy:meta])+)?
        own: $($own:tt)*
    ) => {
        #[pymethods]
        impl $class {
            #[getter]
            fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                tuple_u64(py, self.node().shape()?)
            }

            $($(#[$dtype])+)?
            #[getter]
            fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDescr>> {
                numpy_dtype(py, desc(&self.held)?.element_type())
            }

            $($(#[$layout])+)?
            #[getter]
            fn layout(&self) -> PyResult<String> {
                Ok(layout_name(&self.node().view(desc(&self.held)?)?.layout))
            }

            $($(#[$layout_params])+)?
            #[getter]
            fn layout_params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
                layout_params(py, &self.node().view(desc(&self.held)?)?.layout)
            }

            $($(#[$quantization])+)?
            #[getter]
            fn quantization<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
                let v = self.node().view(desc(&self.held)?)?;
                v.quant.map(|q| quant_dict(py, q)).transpose()
            }

            $($(#[$buffers])+)?
            #[getter]
            fn buffers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
                let v = self.node().view(desc(&self.held)?)?;
                buffers_list(py, &self.held, v.first_buffer, v.buffer_count)
            }

            $($(#[$get])+)?
            fn get(&self, py: Python<'_>, index: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
                let b = self.held.src.bound().map_err(Fail)?;
                let v = self.node().view(b.descriptor())?;
                let local = normalise_index(index, v.shape)?;
                let global: Vec<u64> = local.iter().zip(&v.origin).map(|(i, o)| i + o).collect();
                element_value(py, &b, &global)
            }

            $($(#[$numpy])+)?
            #[pyo3(signature = (raw=false))]
            fn numpy<'py>(&self, py: Python<'py>, raw: bool) -> PyResult<Bound<'py, PyAny>> {
                dense_numpy(py, &self.held, self.node().region, raw)
            }

            $($(#[$read])+)?
            #[pyo3(signature = (r#box=None, dtype=None))]
            fn read<'py>(
                &self,
                py: Python<'py>,
                r#box: Option<&Bound<'py, PyAny>>,
                dtype: Option<&Bound<'py, PyAny>>,
            ) -> PyResult<Bound<'py, PyAny>> {
                let n = self.node();
                let (lo, hi) = box_bounds(r#box, n.shape()?)?;
                n.read_window(py, lo, hi, dtype)
            }

            $($(#[$read_dtype])+)?
            #[pyo3(signature = (dtype=None))]
            fn read_dtype<'py>(
                &self,
                py: Python<'py>,
                dtype: Option<&Bound<'py, PyAny>>,
            ) -> PyResult<Bound<'py, PyArrayDescr>> {
                Ok(read::output(py, desc(&self.held)?, self.node().region, dtype)?.1)
            }

            $($(#[$getitem])+)?
            fn __getitem__<'py>(
                &self,
                py: Python<'py>,
                key: &Bound<'py, PyAny>,
            ) -> PyResult<Bound<'py, PyAny>> {
                // The key parsed once, its box read by one windowed read.
                let n = self.node();
                let w = Window::of(key, n.shape()?)?;
                let a = n.read_window(py, w.lo.clone(), w.hi.clone(), None)?;
                w.finish(a)
            }

            $($(#[$array])+)?
            #[pyo3(signature = (dtype=None, copy=None))]
            fn __array__<'py>(
                &self,
                py: Python<'py>,
                dtype: Option<&Bound<'py, PyAny>>,
                copy: Option<bool>,
            ) -> PyResult<Bound<'py, PyAny>> {
                if copy == Some(false) {
                    return Err(PyValueError::new_err(
                        "the values of a tensor are read into a new array, so copy=False \
                         cannot be honoured (numpy() views the elements of a dense tensor \
                         without copying)",
                    ));
                }
                let a = self.read(py, None, None)?;
                match dtype.filter(|d| !d.is_none()) {
                    Some(dt) => {
                        let kw = PyDict::new(py);
                        kw.set_item("copy", false)?;
                        a.call_method("astype", (dt,), Some(&kw))
                    }
                    None => Ok(a),
                }
            }

            $($(#[$to_scipy])+)?
            #[pyo3(signature = (raw=false))]
            fn to_scipy<'py>(&self, py: Python<'py>, raw: bool) -> PyResult<Bound<'py, PyAny>> {
                to_scipy(py, &self.held, self.node().region, raw)
            }

            #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
            fn __dlpack__(
                &self,
                py: Python<'_>,
                stream: Option<&Bound<'_, PyAny>>,
                max_version: Option<&Bound<'_, PyAny>>,
                dl_device: Option<&Bound<'_, PyAny>>,
                copy: Option<bool>,
            ) -> PyResult<Py<PyAny>> {
                let region = self.node().region;
                let device = dlpack::device_of(&self.held, region).map_err(Fail)?;
                let req = dlpack::request(py, stream, max_version, dl_device, copy, device)?;
                dlpack::export(py, &self.held, region, req)
            }

            fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
                Ok(dlpack::device_of(&self.held, self.node().region).map_err(Fail)?)
            }

            $($own)*
        }
    };
}

// ---------------------------------------------------------------------------------------
// Tensor
// ---------------------------------------------------------------------------------------

/// A tensor: its descriptor and (unless decoded from bare bytes) its buffers.
#[pyclass(module = "tensordesc", frozen, name = "Tensor")]
pub struct Tensor {
    pub held: Arc<Held>,
}

impl Tensor {
    fn node(&self) -> Node<'_> {
        Node {
            held: &self.held,
            region: None,
        }
    }
}

node_methods! {
    Tensor;
    dtype:
    /// The numpy dtype of the elements (ml_dtypes types for BFLOAT16, FLOAT8_* and the
    /// 4-bit types).
    layout:
    /// The top-level layout's name, e.g. "ROW_MAJOR", "CSR", "SUBPAVING".
    layout_params:
    /// The top-level layout's fields (strides, nnz and flags, block size, ...).
    quantization:
    /// The top-level quantization as a dict, or None.
    buffers:
    /// Every effective buffer: role, size, device, alignment, file offset (tensors of a
    /// file), address (tensors with buffers).
    get:
    /// The value of one element (dequantized when quantized).
    numpy:
    /// The elements of a dense, unquantized tensor as a numpy array viewing its memory
    /// (read-only for files and streams); `raw=True` views the stored codes of a quantized
    /// one. Packed 4-bit types are unpacked into a copy.
    read:
    /// The box `box` (None: everything; a slice or a tuple of slices with step 1, as
    /// `numpy.s_[...]` or `Region.box` give them) as a new numpy array, read by the
    /// library's windowed read with the GIL released. `dtype`: None (the stored elements,
    /// or values — dequantized — when the tensor has quantized regions), "raw" (stored
    /// elements, quantized ones as codes), "float32", "float64", "float16", "bfloat16".
    read_dtype:
    /// The numpy dtype `read(dtype=dtype)` and `t[...]` give.
    __getitem__:
    /// `t[0:128, 64:96]`: basic indexing (integers, slices, `...`, None) by one windowed
    /// read; values as `read()` gives them.
    __array__:
    /// `numpy.asarray(t)`: `t.read()`.
    to_scipy:
    /// A COO/CSR/CSC tensor as a scipy.sparse array over its buffers.
    own:
    /// The tensor's name in its file or stream (None for tensors built in memory).
    #[getter]
    fn name(&self) -> Option<String> {
        self.held.name.clone()
    }

    #[getter]
    fn ndim(&self) -> PyResult<usize> {
        Ok(desc(&self.held)?.rank())
    }

    /// Number of elements.
    #[getter]
    fn size(&self) -> PyResult<u64> {
        Ok(desc(&self.held)?.element_count())
    }

    /// The element type's name in the format, e.g. "FLOAT8_E4M3FN".
    #[getter]
    fn element_type(&self) -> PyResult<&'static str> {
        Ok(desc(&self.held)?.element_type().name())
    }

    /// Every region, depth-first (nested regions follow their parent); empty unless the
    /// tensor is a subpaving.
    #[getter]
    fn regions(&self) -> PyResult<Vec<Region>> {
        let n = desc(&self.held)?.region_count();
        Ok((0..n as u32)
            .map(|index| Region {
                held: self.held.clone(),
                index,
            })
            .collect())
    }

    /// Region `i` (depth-first pre-order index, as `regions` lists them).
    fn region(&self, i: &Bound<'_, PyAny>) -> PyResult<Region> {
        let n = desc(&self.held)?.region_count() as i128;
        let k = coordinate(i)?;
        // |k| < 2^127 and n < 2^32: no overflow.
        let j = if k < 0 { k + n } else { k };
        if j < 0 || j >= n {
            return Err(PyIndexError::new_err(format!(
                "region {i} is out of range: the tensor has {n} regions"
            )));
        }
        Ok(Region {
            held: self.held.clone(),
            index: j as u32,
        })
    }

    /// Total bytes of the buffers.
    #[getter]
    fn nbytes(&self) -> PyResult<u64> {
        Ok(desc(&self.held)?
            .effective_buffer_iter()
            .map(|h| h.size_bytes)
            .sum())
    }

    /// True when the memory must not be written (a file mapping, a stream's buffers, a
    /// read-only source array).
    #[getter]
    fn read_only(&self) -> PyResult<bool> {
        let n = desc(&self.held)?.effective_buffer_count();
        Ok(!self.held.src.has_buffers()
            || (0..n).any(|k| self.held.src.buffer(k).map(|(_, ro)| ro).unwrap_or(true)))
    }

    /// True for a descriptor without buffers (`tensordesc.decode`).
    #[getter]
    fn has_buffers(&self) -> bool {
        self.held.src.has_buffers()
    }

    /// The encoded descriptor bytes.
    fn descriptor_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let b = desc(&self.held)?.encode().map_err(Fail)?;
        Ok(PyBytes::new(py, &b))
    }

    /// Content validation: sparse structure, block tables, quantization parameters.
    /// Raises `tensordesc.ContentInvalid` (or another `tensordesc.Error`) when invalid.
    fn validate(&self, py: Python<'_>) -> PyResult<()> {
        let h = self.held.clone();
        py.detach(move || h.validate()).map_err(Fail)?;
        Ok(())
    }

    /// Where element `index` lives: {"kind": "dense", "region", "buffer", "byte_offset",
    /// "bit_shift"} or {"kind": "lookup", "region", "layout_tag", ...}.
    fn locate<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = desc(&self.held)?;
        let idx = normalise_index(index, d.shape())?;
        location_dict(py, d.locate(&idx).map_err(Fail)?, d.rank())
    }

    /// Tensors of a file pickle as (path, name) and reopen (map) the file where they are
    /// unpickled; other tensors do not pickle.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Reduced<'py, (String, String)>> {
        match (self.held.src.path(), &self.held.name) {
            (Some(p), Some(n)) => Ok((
                py.import("tensordesc")?.getattr("_reopen")?,
                (p.to_string(), n.clone()),
            )),
            _ => Err(PyTypeError::new_err(format!(
                "only tensors of a file pickle (as path and name); this one is {}",
                self.held.src.kind()
            ))),
        }
    }

    fn __repr__(&self) -> String {
        let name = self
            .held
            .name
            .as_ref()
            .map(|n| format!(" {n:?}"))
            .unwrap_or_default();
        let d = match self.held.src.descriptor() {
            Ok(d) => d,
            Err(e) => return format!("<tensordesc.Tensor{name} opaque: {e}>"),
        };
        let mut s = format!(
            "<tensordesc.Tensor{name} {} {:?} {}",
            d.element_type().name(),
            d.shape(),
            layout_summary(&d.layout())
        );
        if let Some(q) = d.quantization() {
            s += &format!("; {}", quant_summary(q));
        }
        if d.region_count() > 0 {
            let leaves = d
                .regions()
                .filter(|r| !matches!(r.layout(), LayoutRef::Subpaving { .. }))
                .count();
            s += &format!(
                "; {} regions in all ({leaves} leaves), {} buffers",
                d.region_count(),
                d.effective_buffer_count()
            );
        }
        s += &format!("; {}>", self.held.src.kind());
        s
    }
}

// ---------------------------------------------------------------------------------------
// Region
// ---------------------------------------------------------------------------------------

/// One region of a subpaving (at any depth).
#[pyclass(module = "tensordesc", frozen, name = "Region")]
pub struct Region {
    pub held: Arc<Held>,
    pub index: u32,
}

impl Region {
    fn node(&self) -> Node<'_> {
        Node {
            held: &self.held,
            region: Some(self.index),
        }
    }
}

node_methods! {
    Region;
    buffers:
    /// Its buffers (the whole subtree's for a nested subpaving).
    get:
    /// The value of one element, `index` relative to the region's origin.
    read:
    /// The box `box` of the region (region-local coordinates; None: the whole region) as
    /// a new numpy array; `dtype` as for `Tensor.read`, the default chosen from this
    /// region's leaves.
    read_dtype:
    /// The numpy dtype `read(dtype=dtype)` and `r[...]` give.
    __getitem__:
    /// `r[...]`: basic indexing relative to the region's origin.
    __array__:
    /// `numpy.asarray(r)`: `r.read()`.
    own:
    /// Depth-first pre-order index.
    #[getter]
    fn index(&self) -> u32 {
        self.index
    }

    /// The enclosing region's index, or None at the top level.
    #[getter]
    fn parent(&self) -> PyResult<Option<u32>> {
        let d = desc(&self.held)?;
        Ok(d.get_region(self.index as usize).and_then(|r| r.parent()))
    }

    /// 1 for regions of the tensor-level subpaving.
    #[getter]
    fn depth(&self) -> PyResult<u8> {
        let d = desc(&self.held)?;
        Ok(d.get_region(self.index as usize).map_or(0, |r| r.depth()))
    }

    /// The numpy dtype of the elements the region stores: its own type (format 1.1),
    /// else inherited from an enclosing region, else the tensor's `dtype`. Values read
    /// from it (`r[...]`) are of the tensor's value type.
    #[getter]
    fn stored_dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDescr>> {
        numpy_dtype(py, desc(&self.held)?.stored_type(Some(self.index)))
    }

    /// The tensor this region belongs to.
    #[getter]
    fn tensor(&self) -> Tensor {
        Tensor {
            held: self.held.clone(),
        }
    }

    /// Origin in tensor coordinates.
    #[getter]
    fn origin<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let d = desc(&self.held)?;
        tuple_u64(py, &self.node().view(d)?.origin)
    }

    /// The region's box in tensor coordinates as a tuple of slices (index a dense copy of
    /// the tensor with it).
    #[getter]
    fn r#box<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let d = desc(&self.held)?;
        let v = self.node().view(d)?;
        let slice = py.get_type::<pyo3::types::PySlice>();
        let slices = v
            .origin
            .iter()
            .zip(v.shape)
            .map(|(&o, &e)| slice.call1((o, o + e)))
            .collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, slices)
    }

    #[getter]
    fn is_leaf(&self) -> PyResult<bool> {
        let d = desc(&self.held)?;
        Ok(!self.node().view(d)?.is_subpaving())
    }

    /// Regions pickle as their tensor and index.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Reduced<'py, (Py<Tensor>, u32)>> {
        let t = Py::new(
            py,
            Tensor {
                held: self.held.clone(),
            },
        )?;
        Ok((
            py.import("tensordesc")?.getattr("_region_of")?,
            (t, self.index),
        ))
    }

    fn __repr__(&self) -> String {
        let d = match self.held.src.descriptor() {
            Ok(d) => d,
            Err(e) => return format!("<tensordesc.Region {} opaque: {e}>", self.index),
        };
        let Ok(v) = NodeView::of(d, Some(self.index)) else {
            return format!("<tensordesc.Region {} (out of range)>", self.index);
        };
        let b: Vec<String> = v
            .origin
            .iter()
            .zip(v.shape)
            .map(|(o, e)| format!("{o}:{}", o + e))
            .collect();
        let mut s = format!(
            "<tensordesc.Region {} [{}] {}",
            self.index,
            b.join(", "),
            layout_summary(&v.layout)
        );
        if let Some(q) = v.quant {
            s += &format!("; {}", quant_summary(q));
        }
        s + ">"
    }
}

// ---------------------------------------------------------------------------------------
// File
// ---------------------------------------------------------------------------------------

/// The tensors of a `.tdf` file, by name. The file stays mapped (read-only) while this
/// object, any of its tensors, or any array or export viewing them is alive.
#[pyclass(module = "tensordesc", frozen, name = "File")]
pub struct File {
    pub reader: Arc<FileReader<'static>>,
    pub path: String,
    pub tensors: Vec<Arc<Held>>,
}

impl File {
    pub fn new(reader: FileReader<'static>, path: String) -> File {
        let reader = Arc::new(reader);
        let shared_path: Arc<str> = Arc::from(path.as_str());
        let tensors = reader
            .entries()
            .map(|e| {
                Held::new(
                    Source::File {
                        reader: reader.clone(),
                        index: e.index(),
                        path: shared_path.clone(),
                    },
                    Some(e.name().to_string()),
                )
            })
            .collect();
        File {
            reader,
            path,
            tensors,
        }
    }

    fn find(&self, name: &str) -> Option<&Arc<Held>> {
        self.reader.find(name).and_then(|i| self.tensors.get(i))
    }
}

/// A metadata value as a Python object (arrays as lists, element by element).
fn meta_value<'py>(py: Python<'py>, v: &MetaValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        MetaValue::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        MetaValue::Int(i) => i.into_pyobject(py)?.into_any(),
        MetaValue::UInt(u) => u.into_pyobject(py)?.into_any(),
        MetaValue::Float(f) => f.into_pyobject(py)?.into_any(),
        MetaValue::Str(s) => s.into_pyobject(py)?.into_any(),
        MetaValue::Array(items) => {
            let l = PyList::empty(py);
            for it in items {
                l.append(meta_value(py, it)?)?;
            }
            l.into_any()
        }
    })
}

#[pymethods]
impl File {
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// The file's data_buffer_alignment (a foreign file: the largest alignment one of its
    /// buffers has).
    #[getter]
    fn alignment(&self) -> u32 {
        self.reader.data_buffer_alignment()
    }

    /// What kind of file it is: "tdf", "safetensors", "sharded-safetensors" or "gguf".
    #[getter]
    fn container(&self) -> &'static str {
        self.reader.container().name()
    }

    /// Why pieces of quantized weights that look like a convention were left ungrouped.
    #[getter]
    fn grouping_notes(&self) -> Vec<String> {
        self.reader.grouping_notes().to_vec()
    }

    /// The file's metadata map as a dict (a new dict each time; values typed: str, int,
    /// float, bool, list).
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.reader.metadata() {
            d.set_item(k, meta_value(py, v)?)?;
        }
        Ok(d)
    }

    fn __len__(&self) -> usize {
        self.tensors.len()
    }

    fn __contains__(&self, name: &str) -> bool {
        self.reader.find(name).is_some()
    }

    fn __getitem__(&self, name: &str) -> PyResult<Tensor> {
        match self.find(name) {
            Some(h) => Ok(Tensor { held: h.clone() }),
            None => Err(Fail(Error::new(
                ErrorKind::NotFound,
                format!("no tensor named {name:?} in {}", self.path),
            ))
            .into()),
        }
    }

    /// The tensor named `name`, or `default`.
    #[pyo3(signature = (name, default=None))]
    fn get(&self, py: Python<'_>, name: &str, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        match self.find(name) {
            Some(h) => Ok(Py::new(py, Tensor { held: h.clone() })?.into_any()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    /// Tensor names in file order.
    fn keys(&self) -> Vec<String> {
        self.tensors.iter().filter_map(|h| h.name.clone()).collect()
    }

    fn values(&self) -> Vec<Tensor> {
        self.tensors
            .iter()
            .map(|h| Tensor { held: h.clone() })
            .collect()
    }

    fn items(&self) -> Vec<(String, Tensor)> {
        self.tensors
            .iter()
            .map(|h| {
                (
                    h.name.clone().unwrap_or_default(),
                    Tensor { held: h.clone() },
                )
            })
            .collect()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyList::new(py, self.keys())?.try_iter()?.into_any())
    }

    /// Validate every tensor's contents.
    fn validate(&self, py: Python<'_>) -> PyResult<()> {
        let all = self.tensors.clone();
        py.detach(move || all.iter().try_for_each(|h| h.validate()))
            .map_err(Fail)?;
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Leaving a `with` block releases nothing by itself: the mapping lives as long as any
    /// object using it.
    fn __exit__(
        &self,
        _t: Option<&Bound<'_, PyAny>>,
        _v: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        false
    }

    fn __repr__(&self) -> String {
        let kind = match self.reader.container().name() {
            "tdf" => String::new(),
            other => format!(" ({other})"),
        };
        format!(
            "<tensordesc.File {:?}{kind}: {} tensors>",
            self.path,
            self.tensors.len()
        )
    }
}
