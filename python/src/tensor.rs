//! The Python classes: `Tensor` (a descriptor with its buffers), `Region` (one region of
//! a subpaving) and `File` (the tensors of a mapped `.tdf` file, by name).

mod dicts;
mod element;
mod file;
mod scipy;

use std::sync::Arc;

use numpy::PyArrayDescr;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use tensordesc::{Descriptor, LayoutRef};

use crate::dlpack;
use crate::errors::Fail;
use crate::index::{box_bounds, Window};
use crate::node::{layout_name, layout_summary, quant_summary, NodeView};
use crate::read;
use crate::source::Held;
use crate::views::{dense_numpy, numpy_dtype};
use dicts::{buffers_list, layout_params, location_dict, quant_dict};
use element::{coordinate, element_value, normalise_index};
pub use file::File;
use scipy::to_scipy;

// ---------------------------------------------------------------------------------------
// Shared by Tensor and Region
// ---------------------------------------------------------------------------------------

fn desc(held: &Held) -> PyResult<&Descriptor> {
    Ok(held.src.descriptor().map_err(Fail)?)
}

fn tuple_u64<'py>(py: Python<'py>, v: &[u64]) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, v)
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
