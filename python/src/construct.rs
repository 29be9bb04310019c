//! Building tensors from Python objects. Buffers are the objects' own memory (numpy
//! arrays are referenced, not copied); the descriptor is built by `TensorBuilder` with
//! explicit buffer handles, so every size is checked by the library's own rules.

use std::sync::Arc;

use numpy::npyffi::NPY_ARRAY_WRITEABLE;
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tensordesc::{
    BufferHandle, Descriptor, ElementType, Error, ErrorKind, GlobalScale, LayoutRef, NodeSpec,
    QuantScheme, Quantization, RegionSpec, Result, TensorBuilder, TileOrder,
};

use crate::args;
use crate::errors::Fail;
use crate::node::{compact_strides, NodeView};
use crate::source::{Held, Keep, MemBuf, MemTensor, Source};
use crate::tensor::Tensor;

fn element_type(code: u8) -> Result<ElementType> {
    ElementType::from_code(code)
}

/// Raw facts of a numpy array.
struct ArrayFacts {
    data: *const u8,
    shape: Vec<u64>,
    strides: Vec<isize>,
    itemsize: usize,
    writable: bool,
    c_contiguous: bool,
}

fn facts(a: &Bound<'_, PyUntypedArray>) -> ArrayFacts {
    let raw = a.as_array_ptr();
    // SAFETY: `raw` is the live PyArrayObject of `a` for the duration of the borrow; its
    // data pointer, flags and descr fields are plain reads.
    let (data, flags) = unsafe { ((*raw).fields.data as *const u8, (*raw).fields.flags) };
    ArrayFacts {
        data,
        shape: a.shape().iter().map(|&e| e as u64).collect(),
        strides: a.strides().to_vec(),
        itemsize: a.dtype().itemsize(),
        writable: flags & NPY_ARRAY_WRITEABLE != 0,
        c_contiguous: a.is_c_contiguous(),
    }
}

use numpy::PyArrayDescrMethods;

/// The whole memory of a C-contiguous array as one buffer (the array is referenced).
fn contiguous_buffer(a: &Bound<'_, PyUntypedArray>, what: &str) -> PyResult<MemBuf> {
    let f = facts(a);
    if !f.c_contiguous {
        return Err(PyValueError::new_err(format!(
            "{what}: the array must be C-contiguous (numpy.ascontiguousarray makes it so)"
        )));
    }
    let n: u64 = f.shape.iter().product();
    let len = (n as usize)
        .checked_mul(f.itemsize)
        .ok_or_else(|| Fail(Error::new(ErrorKind::Overflow, "array size overflows")))?;
    let (ptr, keep) = if len == 0 {
        (std::ptr::null(), Keep::Nothing)
    } else {
        (f.data, Keep::Python(a.clone().into_any().unbind()))
    };
    // SAFETY: a C-contiguous numpy array's data pointer addresses n * itemsize bytes of its
    // memory, which the referenced array keeps alive (a referenced array cannot be resized
    // in place: numpy refuses while other references exist). The package never writes it;
    // callers must not modify the array while the tensor is used (documented contract).
    Ok(unsafe { MemBuf::new(ptr, len, !f.writable, keep) })
}

/// A quantization and its parameter buffers, from the dict `tensordesc._quant` builds.
fn quantization(q: &Bound<'_, PyDict>) -> PyResult<(Quantization, Vec<MemBuf>)> {
    let scheme: String = item(q, "scheme")?.extract()?;
    let expressed = element_type(item(q, "expressed")?.extract()?).map_err(Fail)?;
    let mut bufs = Vec::new();
    let q = match scheme.as_str() {
        "PER_TENSOR_AFFINE" => {
            let zero_point: i64 = args::int(&item(q, "zero_point")?, "PerTensorAffine.zero_point")?;
            Quantization {
                scheme: QuantScheme::PerTensorAffine {
                    scale: item(q, "scale")?.extract()?,
                    zero_point,
                },
                expressed_type: expressed,
                has_zero_point: item(q, "has_zero_point")?.extract()?,
                global_scale: None,
            }
        }
        "PER_AXIS_AFFINE" | "BLOCKWISE" | "BLOCKWISE_2D" => {
            let scale_type = element_type(item(q, "scale_type")?.extract()?).map_err(Fail)?;
            let (has_zero_point, global_scale) = scale_buffers(q, &mut bufs)?;
            Quantization {
                scheme: scaled_scheme(q, &scheme, scale_type)?,
                expressed_type: expressed,
                has_zero_point,
                global_scale,
            }
        }
        "CODEBOOK" => {
            let cb = item(q, "codebook")?.cast_into::<PyUntypedArray>()?;
            let size = u32::try_from(cb.len()).map_err(|_| {
                Fail(Error::new(
                    ErrorKind::QuantizationInvalid,
                    "codebook larger than u32 entries",
                ))
            })?;
            bufs.push(contiguous_buffer(&cb, "quantization codebook")?);
            Quantization {
                scheme: QuantScheme::Codebook {
                    codebook_size: size,
                },
                expressed_type: expressed,
                has_zero_point: false,
                global_scale: None,
            }
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown quantization scheme {other:?}"
            )))
        }
    };
    Ok((q, bufs))
}

/// The entry `k` of the quantization dict `q` (a `ValueError` naming it when missing).
fn item<'py>(q: &Bound<'py, PyDict>, k: &str) -> PyResult<Bound<'py, PyAny>> {
    q.get_item(k)?
        .ok_or_else(|| PyValueError::new_err(format!("quantization: missing {k:?}")))
}

/// The parameter buffers of a scheme with scales, appended to `bufs`: the scales, the zero
/// points (if given) and the global scale (if given); whether there are zero points, and
/// how the global scale applies.
fn scale_buffers(
    q: &Bound<'_, PyDict>,
    bufs: &mut Vec<MemBuf>,
) -> PyResult<(bool, Option<GlobalScale>)> {
    let scales = item(q, "scales")?.cast_into::<PyUntypedArray>()?;
    bufs.push(contiguous_buffer(&scales, "quantization scales")?);
    let zp = item(q, "zero_points")?;
    let has_zero_point = !zp.is_none();
    if has_zero_point {
        bufs.push(contiguous_buffer(
            &zp.cast_into::<PyUntypedArray>()?,
            "quantization zero points",
        )?);
    }
    let global = q.get_item("global_scale")?.filter(|g| !g.is_none());
    let global_scale = match global {
        Some(g) => {
            bufs.push(contiguous_buffer(
                &g.cast_into::<PyUntypedArray>()?,
                "quantization global scale",
            )?);
            let divides = match q.get_item("global_divides")? {
                Some(d) => d.is_truthy()?,
                None => false,
            };
            Some(if divides {
                GlobalScale::Divides
            } else {
                GlobalScale::Multiplies
            })
        }
        None => None,
    };
    Ok((has_zero_point, global_scale))
}

/// The scheme with scales named `scheme` (PER_AXIS_AFFINE, BLOCKWISE or BLOCKWISE_2D),
/// its fields read from `q`.
fn scaled_scheme(
    q: &Bound<'_, PyDict>,
    scheme: &str,
    scale_type: ElementType,
) -> PyResult<QuantScheme> {
    Ok(match scheme {
        "BLOCKWISE" => QuantScheme::Blockwise {
            axis: args::int(&item(q, "axis")?, "Blockwise.axis")?,
            block_size: args::int(&item(q, "block_size")?, "Blockwise.block_size")?,
            scale_type,
        },
        "BLOCKWISE_2D" => {
            let axes = item(q, "axes")?;
            let block = item(q, "block")?;
            QuantScheme::Blockwise2D {
                axis_a: args::int(&axes.get_item(0)?, "Blockwise2D.axes[0]")?,
                block_a: args::int(&block.get_item(0)?, "Blockwise2D.block[0]")?,
                axis_b: args::int(&axes.get_item(1)?, "Blockwise2D.axes[1]")?,
                block_b: args::int(&block.get_item(1)?, "Blockwise2D.block[1]")?,
                scale_type,
            }
        }
        _ => QuantScheme::PerAxisAffine {
            axis: args::int(&item(q, "axis")?, "PerAxisAffine.axis")?,
            scale_type,
        },
    })
}

/// The `alignment` argument (bytes, default 64) as alignment_log2: a power of two from 1
/// to 2^30, else `InvalidArgument` naming it. Below 64 the descriptor is format 1.1.
fn alignment_log2(alignment: Option<&Bound<'_, PyAny>>) -> PyResult<u8> {
    let Some(a) = alignment else {
        return Ok(6);
    };
    let v: u64 = args::int(a, "alignment")?;
    if !v.is_power_of_two() || v > 1 << 30 {
        return Err(Fail(Error::new(
            ErrorKind::InvalidArgument,
            format!("alignment must be a power of two from 1 to 2**30, not {v}"),
        ))
        .into());
    }
    Ok(v.trailing_zeros() as u8)
}

/// CPU handles for `bufs`, each promising `2^alignment_log2`-byte alignment.
fn handles_of(bufs: &[MemBuf], alignment_log2: u8) -> Vec<BufferHandle> {
    bufs.iter()
        .map(|b| BufferHandle::cpu(b.as_slice().len() as u64).with_alignment(alignment_log2))
        .collect()
}

fn finish(desc: Descriptor, bufs: Vec<MemBuf>) -> PyResult<Tensor> {
    let mem = MemTensor::new(desc, bufs).map_err(Fail)?;
    Ok(Tensor {
        held: Held::new(Source::Memory(mem), None),
    })
}

/// A dense tensor over a numpy array's memory: ROW_MAJOR when C-contiguous, COL_MAJOR
/// when Fortran-contiguous, else STRIDED with the array's strides (negative and zero ones
/// included). The element type's size must be the array's item size, and every byte
/// stride a multiple of it. `alignment` (bytes, default 64) is what every buffer's
/// handle promises.
#[pyfunction]
#[pyo3(signature = (array, element_type, quantization=None, alignment=None))]
pub fn _from_array(
    array: &Bound<'_, PyUntypedArray>,
    element_type: u8,
    quantization: Option<&Bound<'_, PyDict>>,
    alignment: Option<&Bound<'_, PyAny>>,
) -> PyResult<Tensor> {
    let align = alignment_log2(alignment)?;
    let et = self::element_type(element_type).map_err(Fail)?;
    let f = facts(array);
    if et.is_packed() || (et.bits() / 8) as usize != f.itemsize {
        return Err(PyValueError::new_err(format!(
            "{} elements are not {}-byte numpy items",
            et.name(),
            f.itemsize
        )));
    }
    let rank = f.shape.len();
    let e = f.itemsize as isize;
    let n: u64 = f.shape.iter().product();
    let mut elem_strides = Vec::with_capacity(rank);
    for (a, &s) in f.strides.iter().enumerate() {
        if s % e != 0 {
            return Err(PyValueError::new_err(format!(
                "axis {a} has byte stride {s}, not a multiple of the item size {e} (numpy.ascontiguousarray makes a usable copy)"
            )));
        }
        elem_strides.push((s / e) as i64);
    }
    let same = |c: &[i64]| (0..rank).all(|k| f.shape[k] == 1 || elem_strides[k] == c[k]);
    let row: Vec<usize> = (0..rank).collect();
    let col: Vec<usize> = (0..rank).rev().collect();
    let (node, start, len, offset) = if n == 0 {
        (NodeSpec::row_major(), std::ptr::null::<u8>(), 0usize, 0u64)
    } else if same(&compact_strides(&f.shape, &row).map_err(Fail)?) {
        (NodeSpec::row_major(), f.data, n as usize * f.itemsize, 0)
    } else if same(&compact_strides(&f.shape, &col).map_err(Fail)?) {
        (NodeSpec::col_major(), f.data, n as usize * f.itemsize, 0)
    } else {
        let (mut lo, mut hi) = (0i128, 0i128);
        for (&s, &e) in elem_strides.iter().zip(&f.shape) {
            let span = s as i128 * (e as i128 - 1);
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        let e = e as i128;
        // numpy guarantees every element lies in the array's allocation, so these stay
        // inside it.
        let start = (f.data as i128 + lo * e) as usize as *const u8;
        (
            NodeSpec::strided(&elem_strides),
            start,
            ((hi - lo + 1) * e) as usize,
            (-lo * e) as u64,
        )
    };
    let keep = if len == 0 {
        Keep::Nothing
    } else {
        Keep::Python(array.clone().into_any().unbind())
    };
    // SAFETY: [start, start + len) is the span of bytes the array's elements occupy
    // (computed from numpy's own shape, strides and data pointer), inside memory the
    // referenced array keeps alive; see contiguous_buffer for the no-modification contract.
    let data = unsafe { MemBuf::new(start, len, !f.writable, keep) };
    let mut bufs = vec![data];
    let mut node = node.with_byte_offset(offset);
    if let Some(q) = quantization {
        let (q, params) = self::quantization(q)?;
        bufs.extend(params);
        node = node.with_quantization(q);
    }
    let node = node.with_buffers(handles_of(&bufs, align));
    let desc = TensorBuilder::new(et, &f.shape, node)
        .build()
        .map_err(Fail)?;
    finish(desc, bufs)
}

/// A leaf tensor of any layout from explicit C-contiguous buffers (`layout` names the
/// layout, `params` holds its fields); `alignment` as for `_from_array`.
#[pyfunction]
#[pyo3(signature = (element_type, shape, layout, params, buffers, quantization=None, alignment=None))]
pub fn _leaf(
    element_type: u8,
    shape: &Bound<'_, PyAny>,
    layout: &str,
    params: &Bound<'_, PyDict>,
    buffers: &Bound<'_, PyList>,
    quantization: Option<&Bound<'_, PyDict>>,
    alignment: Option<&Bound<'_, PyAny>>,
) -> PyResult<Tensor> {
    let align = alignment_log2(alignment)?;
    let et = self::element_type(element_type).map_err(Fail)?;
    let shape: Vec<u64> = args::ints(shape, "shape")?;
    let mut bufs = Vec::with_capacity(buffers.len());
    for (k, b) in buffers.iter().enumerate() {
        let a = b.cast_into::<PyUntypedArray>()?;
        bufs.push(contiguous_buffer(&a, &format!("buffer {k}"))?);
    }
    let p = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        params
            .get_item(k)?
            .ok_or_else(|| PyValueError::new_err(format!("{layout}: missing parameter {k:?}")))
    };
    let node = match layout {
        "ROW_MAJOR" => NodeSpec::row_major(),
        "COL_MAJOR" => NodeSpec::col_major(),
        "STRIDED" => NodeSpec::strided(&args::ints::<i64>(&p("strides")?, "strides")?),
        "DIM_ORDER" => NodeSpec::dim_order(&args::ints::<u8>(&p("order")?, "order")?),
        "TILED" => NodeSpec::tiled(&args::ints::<u64>(&p("tile_shape")?, "tile_shape")?),
        "SPLAT" => NodeSpec::splat(),
        "COO" | "CSR" | "CSC" => {
            let nnz = args::int(&p("nnz")?, "nnz")?;
            let flags = args::int(&p("flags")?, "flags")?;
            match layout {
                "COO" => NodeSpec::coo(nnz, flags),
                "CSR" => NodeSpec::csr(nnz, flags),
                _ => NodeSpec::csc(nnz, flags),
            }
        }
        "CSF" => {
            let level_nodes: Vec<u64> = args::ints(&p("level_nodes")?, "level_nodes")?;
            let axis_order: Vec<u8> = args::ints(&p("axis_order")?, "axis_order")?;
            NodeSpec::csf(et, &axis_order, &level_nodes).map_err(Fail)?
        }
        "BLOCK_PAGED" => NodeSpec::block_paged(
            args::int(&p("block_size")?, "block_size")?,
            args::int(&p("pool_count")?, "the pool count (len(pools))")?,
        ),
        "GGML_BLOCKS" => NodeSpec::ggml_blocks(args::int(&p("ggml_type")?, "ggml_type")?),
        other => {
            return Err(PyValueError::new_err(format!(
                "layout {other:?} cannot be built from Python"
            )))
        }
    };
    let mut node = node;
    if let Some(off) = params.get_item("byte_offset")? {
        node = node.with_byte_offset(args::int(&off, "byte_offset")?);
    }
    if let Some(q) = quantization {
        let (q, params) = self::quantization(q)?;
        bufs.extend(params);
        node = node.with_quantization(q);
    }
    let node = node.with_buffers(handles_of(&bufs, align));
    let desc = TensorBuilder::new(et, &shape, node).build().map_err(Fail)?;
    finish(desc, bufs)
}

/// The builder's spec of node `region` (None: the root) of `d`, with its buffer handles,
/// byte offset and quantization as they are; subpavings recursively.
fn node_spec_of(d: &Descriptor, region: Option<u32>, children: &[Vec<u32>]) -> Result<NodeSpec> {
    let n = NodeView::of(d, region)?;
    if n.is_subpaving() {
        let kids = &children[region.map_or(0, |r| r as usize + 1)];
        let mut regions = Vec::with_capacity(kids.len());
        for &c in kids {
            let v = d
                .get_region(c as usize)
                .ok_or_else(|| Error::new(ErrorKind::Internal, "region index"))?;
            let mut spec = node_spec_of(d, Some(c), children)?;
            if let Some(t) = v.own_element_type() {
                spec = spec.with_element_type(t);
            }
            regions.push(RegionSpec::new(&v.origin(), v.shape(), spec));
        }
        return Ok(NodeSpec::subpaving(regions));
    }
    let handles = (n.first_buffer..n.first_buffer + n.buffer_count)
        .map(|k| d.effective_buffer(k))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| Error::new(ErrorKind::Internal, "sub-table outside the buffer list"))?;
    let spec = match &n.layout {
        LayoutRef::RowMajor => NodeSpec::row_major(),
        LayoutRef::ColMajor => NodeSpec::col_major(),
        LayoutRef::Strided { strides } => NodeSpec::strided(strides),
        LayoutRef::DimOrder { order } => NodeSpec::dim_order(order),
        LayoutRef::Splat => NodeSpec::splat(),
        LayoutRef::Coo { nnz, flags } => NodeSpec::coo(*nnz, *flags),
        LayoutRef::Csr { nnz, flags } => NodeSpec::csr(*nnz, *flags),
        LayoutRef::Csc { nnz, flags } => NodeSpec::csc(*nnz, *flags),
        LayoutRef::Csf { nnz, axis_order } => {
            // Level node counts from the INDICES handles (buffers rank .. 2 rank).
            let rank = n.shape.len();
            let mut level_nodes: Vec<u64> = handles
                .get(rank..2 * rank)
                .ok_or_else(|| Error::new(ErrorKind::Internal, "CSF sub-table"))?
                .iter()
                .map(|h| h.size_bytes / 8)
                .collect();
            if let Some(last) = level_nodes.last_mut() {
                *last = *nnz;
            }
            NodeSpec::csf(d.element_type(), axis_order, &level_nodes)?
        }
        LayoutRef::BlockPaged {
            block_size,
            pool_count,
        } => NodeSpec::block_paged(*block_size, *pool_count),
        LayoutRef::GgmlBlocks { ggml_type } => NodeSpec::ggml_blocks(ggml_type.number),
        LayoutRef::Tiled { levels } => match levels.as_slice() {
            [l] if l.tile_order == TileOrder::RowMajor && l.inner_tag == 0x01 => {
                NodeSpec::tiled(l.tile_shape)
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::NotBindable,
                    format!(
                        "{}: only single-level row-major TILED regions can be placed into a new subpaving",
                        n.what()
                    ),
                ))
            }
        },
        LayoutRef::Extension { tag, data } => NodeSpec::extension(*tag, data, handles.clone()),
        LayoutRef::Subpaving { .. } | LayoutRef::Unknown { .. } => {
            return Err(Error::new(
                ErrorKind::NotBindable,
                format!("{}: an opaque node cannot be rebuilt", n.what()),
            ))
        }
        other => {
            return Err(Error::new(
                ErrorKind::NotBindable,
                format!(
                    "{}: {} regions cannot be placed into a new subpaving by this package",
                    n.what(),
                    other.name()
                ),
            ))
        }
    };
    let mut spec = spec.with_buffers(handles).with_byte_offset(n.byte_offset);
    if let Some(q) = n.quant {
        spec = spec.with_quantization(q.clone());
    }
    Ok(spec)
}

/// Direct children of every subpaving: index 0 the top level, index r + 1 region r's.
fn children_of(d: &Descriptor) -> Vec<Vec<u32>> {
    let mut c = vec![Vec::new(); d.region_count() + 1];
    for r in d.regions() {
        let slot = r.parent().map_or(0, |p| p as usize + 1);
        c[slot].push(r.index());
    }
    c
}

/// A subpaving of `shape` whose regions are existing tensors placed at `origin`s: each
/// keeps its layout, buffers and quantization (its memory is referenced, not copied).
#[pyfunction]
#[pyo3(signature = (element_type, shape, regions))]
pub fn _subpaving(
    element_type: u8,
    shape: &Bound<'_, PyAny>,
    regions: Vec<(Bound<'_, PyAny>, Py<Tensor>)>,
) -> PyResult<Tensor> {
    let et = self::element_type(element_type).map_err(Fail)?;
    let shape: Vec<u64> = args::ints(shape, "shape")?;
    let mut specs = Vec::with_capacity(regions.len());
    let mut bufs = Vec::new();
    for (i, (origin, t)) in regions.iter().enumerate() {
        let origin: Vec<u64> = args::ints(origin, &format!("region {i}: origin"))?;
        let held: &Arc<Held> = &t.get().held;
        let d = held.src.descriptor().map_err(Fail)?;
        if !held.src.has_buffers() {
            return Err(Fail(Error::new(
                ErrorKind::NotBindable,
                format!("region {i} is a descriptor without buffers"),
            ))
            .into());
        }
        let mut spec = node_spec_of(d, None, &children_of(d))
            .map_err(|e| Fail(e.context(format!("region {i}"))))?;
        // A tensor of another type becomes a region storing that type (format 1.1): the
        // subpaving's type is then the value type, which decoding checks it yields.
        if d.element_type() != et {
            spec = spec.with_element_type(d.element_type());
        }
        specs.push(RegionSpec::new(&origin, d.shape(), spec));
        for k in 0..d.effective_buffer_count() {
            let (bytes, ro) = held.src.buffer(k).map_err(Fail)?;
            // SAFETY: `bytes` is effective buffer k of the region's tensor, alive while its
            // Held lives, which the buffer keeps.
            bufs.push(unsafe {
                MemBuf::new(bytes.as_ptr(), bytes.len(), ro, Keep::Tensor(held.clone()))
            });
        }
    }
    let desc = TensorBuilder::subpaving(et, &shape, specs)
        .build()
        .map_err(Fail)?;
    finish(desc, bufs)
}
