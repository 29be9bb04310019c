//! The C builder: node specs (a layout with its fields, buffers and quantization; a
//! subpaving node holds regions, each with a child node) and the tensor builder that
//! validates and encodes them with exactly the rules of decoding.
//!
//! Ownership is in the names: `tdesc_node_new_*` creates a node the caller owns;
//! `tdesc_node_add_region` and `tdesc_builder_new` *consume* the node passed to them
//! (always, also on failure), so the caller frees only nodes it never handed over.
//!
//! Every count is checked against the format's limit before the array it sizes is read:
//! a `rank` above `TDESC_MAX_RANK` is `TDESC_ERR_RANK_TOO_LARGE`, more than 8 TILED levels
//! `TDESC_ERR_LAYOUT_CONSTRAINT`, more than 255 handles `TDESC_ERR_INVALID_ARGUMENT`, an
//! extension_type name over 65535 bytes `TDESC_ERR_EXTENSION_TYPE_INVALID`, extension data
//! or metadata over `u32` bytes `TDESC_ERR_OVERFLOW`.

use tensordesc::builder::{LayoutSpec, NodeSpec, RegionSpec, TensorBuilder, TileSpec};
use tensordesc::device::BufferHandle;
use tensordesc::error::{Error, ErrorKind, Result};
use tensordesc::layout::{tag, TileOrder, MAX_TILED_DEPTH};
use tensordesc::sections::{ExtensionType, Shard, Statistics};

use super::args::{mut_arg, out_arg, out_handle, rank_arg, ref_arg, slice_arg};
use super::descriptor::{encode_out, tdesc_descriptor};
use super::handle;
use super::status::{guard, invalid, tdesc_status};
use super::types::*;

/// A node under construction: the tensor's body or a region's body. Owned by the caller
/// until handed to `tdesc_node_add_region` or `tdesc_builder_new`.
pub struct tdesc_node_spec {
    spec: NodeSpec,
    /// Nesting levels of subpaving inside this node (0 for a leaf), kept so a tree can
    /// never grow deeper than the format allows (and than a recursive drop can handle).
    height: u8,
}

/// A tensor under construction: element type, shape, the top-level node and the
/// optional sections. Building does not consume it.
pub struct tdesc_builder {
    b: TensorBuilder,
}

unsafe fn new_node(
    out: *mut *mut tdesc_node_spec,
    f: impl FnOnce() -> Result<NodeSpec>,
) -> tdesc_status {
    guard(|| {
        // SAFETY: `out` checked then written once.
        unsafe { out_handle(out, "out")? };
        let spec = f()?;
        // SAFETY: checked above.
        unsafe { handle::give(out, tdesc_node_spec { spec, height: 0 }) };
        Ok(())
    })
}

/// A ROW_MAJOR node (buffers sized automatically unless set).
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_row_major(out: *mut *mut tdesc_node_spec) -> tdesc_status {
    // SAFETY: forwarded caller promise on `out`.
    unsafe { new_node(out, || Ok(NodeSpec::row_major())) }
}

/// A COL_MAJOR node.
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_col_major(out: *mut *mut tdesc_node_spec) -> tdesc_status {
    // SAFETY: forwarded caller promise on `out`.
    unsafe { new_node(out, || Ok(NodeSpec::col_major())) }
}

/// A SPLAT node (one fill value for every element).
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_splat(out: *mut *mut tdesc_node_spec) -> tdesc_status {
    // SAFETY: forwarded caller promise on `out`.
    unsafe { new_node(out, || Ok(NodeSpec::splat())) }
}

/// A STRIDED node with `rank` strides, in elements (may be negative or 0).
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_strided(
    strides: *const i64,
    rank: usize,
    out: *mut *mut tdesc_node_spec,
) -> tdesc_status {
    // SAFETY: forwarded caller promises on `out` and on `rank` strides at `strides`.
    unsafe {
        new_node(out, || {
            rank_arg(rank, "strides")?;
            let s = slice_arg(strides, rank, "strides")?;
            Ok(NodeSpec::strided(s))
        })
    }
}

/// A TILED node with `levels` tiling levels, outermost first: `tile_shapes` holds
/// `levels * rank` extents (level-major), `tile_orders` `levels` values
/// (`TDESC_TILE_ORDER_*`), and `inner_tag` (ROW_MAJOR or COL_MAJOR) orders the elements
/// inside the innermost tile.
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_tiled(
    tile_shapes: *const u64,
    tile_orders: *const u8,
    levels: usize,
    rank: usize,
    inner_tag: u8,
    out: *mut *mut tdesc_node_spec,
) -> tdesc_status {
    // SAFETY: forwarded caller promises on `out` and on the two arrays.
    unsafe {
        new_node(out, || {
            if levels == 0 {
                return Err(invalid("a TILED node needs at least one level"));
            }
            if levels > MAX_TILED_DEPTH {
                return Err(Error::new(
                    ErrorKind::LayoutConstraint,
                    format!("{levels} TILED levels: at most {MAX_TILED_DEPTH} are allowed"),
                ));
            }
            rank_arg(rank, "tile_shapes")?;
            let n = levels
                .checked_mul(rank)
                .ok_or_else(|| invalid("levels x rank overflows"))?;
            let shapes = slice_arg(tile_shapes, n, "tile_shapes")?;
            let orders = slice_arg(tile_orders, levels, "tile_orders")?;
            if inner_tag != TDESC_LAYOUT_ROW_MAJOR && inner_tag != TDESC_LAYOUT_COL_MAJOR {
                return Err(invalid(format!(
                    "inner_tag 0x{inner_tag:02X} is neither TDESC_LAYOUT_ROW_MAJOR nor TDESC_LAYOUT_COL_MAJOR"
                )));
            }
            let mut specs = Vec::with_capacity(levels);
            for (l, &o) in orders.iter().enumerate() {
                let order = match o {
                    TDESC_TILE_ORDER_ROW_MAJOR => TileOrder::RowMajor,
                    TDESC_TILE_ORDER_COL_MAJOR => TileOrder::ColMajor,
                    _ => {
                        return Err(invalid(format!(
                            "tile_orders[{l}] is {o}; use TDESC_TILE_ORDER_*"
                        )))
                    }
                };
                specs.push(TileSpec {
                    tile_shape: shapes[l * rank..(l + 1) * rank].to_vec(),
                    order,
                });
            }
            Ok(NodeSpec::new(LayoutSpec::Tiled {
                levels: specs,
                inner: inner_tag,
            }))
        })
    }
}

/// A DIM_ORDER node: `order` is a permutation of `0..rank`, outermost axis first.
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_dim_order(
    order: *const u8,
    rank: usize,
    out: *mut *mut tdesc_node_spec,
) -> tdesc_status {
    // SAFETY: forwarded caller promises.
    unsafe {
        new_node(out, || {
            rank_arg(rank, "order")?;
            Ok(NodeSpec::dim_order(slice_arg(order, rank, "order")?))
        })
    }
}

fn sparse_flags_arg(flags: u8) -> Result<u8> {
    if flags & !(TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE) != 0 {
        return Err(invalid(format!(
            "sparse flags 0x{flags:02X} have bits other than TDESC_SPARSE_SORTED | TDESC_SPARSE_UNIQUE"
        )));
    }
    Ok(flags)
}

/// A COO node with `nnz` entries and `TDESC_SPARSE_*` flags (buffers sized automatically).
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_coo(
    nnz: u64,
    flags: u8,
    out: *mut *mut tdesc_node_spec,
) -> tdesc_status {
    // SAFETY: forwarded caller promise on `out`.
    unsafe { new_node(out, || Ok(NodeSpec::coo(nnz, sparse_flags_arg(flags)?))) }
}

/// A CSR node (rank 2).
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_csr(
    nnz: u64,
    flags: u8,
    out: *mut *mut tdesc_node_spec,
) -> tdesc_status {
    // SAFETY: forwarded caller promise on `out`.
    unsafe { new_node(out, || Ok(NodeSpec::csr(nnz, sparse_flags_arg(flags)?))) }
}

/// A CSC node (rank 2).
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_csc(
    nnz: u64,
    flags: u8,
    out: *mut *mut tdesc_node_spec,
) -> tdesc_status {
    // SAFETY: forwarded caller promise on `out`.
    unsafe { new_node(out, || Ok(NodeSpec::csc(nnz, sparse_flags_arg(flags)?))) }
}

/// A CSF node whose level `l` (axis `axis_order[l]`) holds `level_nodes[l]` nodes; the
/// last count is nnz. Its `2 * rank + 1` buffers are sized from the counts and
/// `element_type` (which must be the tensor's).
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_csf(
    element_type: u8,
    axis_order: *const u8,
    level_nodes: *const u64,
    rank: usize,
    out: *mut *mut tdesc_node_spec,
) -> tdesc_status {
    // SAFETY: forwarded caller promises.
    unsafe {
        new_node(out, || {
            let et = element_type_arg(element_type, "element_type")?;
            rank_arg(rank, "axis_order")?;
            let axes = slice_arg(axis_order, rank, "axis_order")?;
            let nodes = slice_arg(level_nodes, rank, "level_nodes")?;
            if rank == 0 {
                return Err(invalid("CSF needs rank >= 1"));
            }
            NodeSpec::csf(et, axes, nodes)
        })
    }
}

/// A BLOCK_PAGED node: `block_size` positions per block, `pool_count` page pools
/// (automatic buffers give every block a page).
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_block_paged(
    block_size: u64,
    pool_count: u8,
    out: *mut *mut tdesc_node_spec,
) -> tdesc_status {
    // SAFETY: forwarded caller promise on `out`.
    unsafe { new_node(out, || Ok(NodeSpec::block_paged(block_size, pool_count))) }
}

/// A GGML_BLOCKS node (format 1.1): ggml's quantized blocks of type `ggml_type` (ggml's
/// type number, e.g. 8 for Q8_0, 12 for Q4_K; `tdesc_ggml_type_by_name`). Its automatic
/// buffer holds exactly the blocks, (element count / QK) × block bytes; the element type
/// is the value type (FLOAT32, FLOAT16 or BFLOAT16). An unknown type number is reported
/// when the tensor is built (`TDESC_ERR_LAYOUT_CONSTRAINT`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_ggml_blocks(
    ggml_type: u32,
    out: *mut *mut tdesc_node_spec,
) -> tdesc_status {
    // SAFETY: forwarded caller promise on `out`.
    unsafe { new_node(out, || Ok(NodeSpec::ggml_blocks(ggml_type))) }
}

/// A private-extension node with tag 0xF0–0xFE and `len` opaque bytes; set its buffers
/// with `tdesc_node_set_buffers` (at least one).
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_extension(
    tag: u8,
    data: *const u8,
    len: usize,
    out: *mut *mut tdesc_node_spec,
) -> tdesc_status {
    // SAFETY: forwarded caller promises.
    unsafe {
        new_node(out, || {
            if !(tag::EXTENSION_FIRST..=tag::EXTENSION_LAST).contains(&tag) {
                return Err(invalid(format!(
                    "extension tag 0x{tag:02X} is outside 0xF0..=0xFE"
                )));
            }
            if u32::try_from(len).is_err() {
                return Err(Error::new(
                    ErrorKind::Overflow,
                    format!("extension data of {len} bytes exceeds u32 (ext_length)"),
                ));
            }
            let data = slice_arg(data, len, "data")?;
            Ok(NodeSpec::extension(tag, data, Vec::new()))
        })
    }
}

/// An empty SUBPAVING node; add its regions with `tdesc_node_add_region`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_new_subpaving(out: *mut *mut tdesc_node_spec) -> tdesc_status {
    // SAFETY: forwarded caller promise on `out`.
    unsafe { new_node(out, || Ok(NodeSpec::subpaving(Vec::new()))) }
}

/// Add a region to a SUBPAVING node: `origin` (relative to the node's own extent) and
/// `shape`, `rank` entries each, with body `child`.
///
/// `child` is consumed in every case (do not use or free it afterwards), except when it
/// is the same pointer as `subpaving`, which is rejected without consuming anything.
/// A tree nested deeper than 8 subpaving levels is `TDESC_ERR_SUBPAVING_TOO_DEEP`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_add_region(
    subpaving: *mut tdesc_node_spec,
    origin: *const u64,
    shape: *const u64,
    rank: usize,
    child: *mut tdesc_node_spec,
) -> tdesc_status {
    guard(|| {
        if std::ptr::eq(subpaving, child) {
            return Err(invalid("a node cannot be a region of itself"));
        }
        // Take ownership first so every later failure still frees the child.
        let child = if child.is_null() {
            None
        } else {
            // SAFETY: the caller hands over a live node created by this library.
            Some(unsafe { handle::take(child) })
        };
        rank_arg(rank, "origin/shape")?;
        // SAFETY: caller promises on `subpaving` and the arrays (`rank` is at most 64).
        let (parent, origin, shape) = unsafe {
            (
                mut_arg(subpaving, "subpaving")?,
                slice_arg(origin, rank, "origin")?,
                slice_arg(shape, rank, "shape")?,
            )
        };
        let child = child.ok_or_else(|| invalid("child is NULL"))?;
        let LayoutSpec::Subpaving(regions) = &mut parent.spec.layout else {
            return Err(invalid("the node is not a SUBPAVING node"));
        };
        let height = child.height.saturating_add(1);
        if height > TDESC_MAX_SUBPAVING_DEPTH {
            return Err(Error::new(
                ErrorKind::SubpavingTooDeep,
                format!(
                    "adding a region whose body nests {} subpaving levels gives {height} levels; at most {TDESC_MAX_SUBPAVING_DEPTH} are allowed",
                    child.height
                ),
            ));
        }
        if regions.len() >= u32::MAX as usize - 1 {
            return Err(Error::new(ErrorKind::Overflow, "too many regions"));
        }
        regions.push(RegionSpec::new(origin, shape, child.spec));
        parent.height = parent.height.max(height);
        Ok(())
    })
}

/// Set the node's byte_offset.
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_set_byte_offset(
    node: *mut tdesc_node_spec,
    byte_offset: u64,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `node`.
        unsafe { mut_arg(node, "node")? }.spec.byte_offset = byte_offset;
        Ok(())
    })
}

/// Set the node's buffer sub-table explicitly (`count` handles, at most 255; 0 returns
/// to automatic sizing). Required for private extensions.
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_set_buffers(
    node: *mut tdesc_node_spec,
    handles: *const tdesc_buffer_handle,
    count: usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `node`.
        let node = unsafe { mut_arg(node, "node")? };
        if count > 255 {
            return Err(invalid(format!(
                "{count} handles exceed the 255 a sub-table holds"
            )));
        }
        // SAFETY: caller promise on `count` (at most 255) handles.
        let hs = unsafe { slice_arg(handles, count, "handles")? };
        let v = hs
            .iter()
            .enumerate()
            .map(|(i, h)| h.to_rust(&format!("handles[{i}]")))
            .collect::<Result<Vec<BufferHandle>>>()?;
        node.spec.buffers = v;
        Ok(())
    })
}

/// Set (or, with NULL, clear) the node's quantization. Integer fields are checked here
/// (`TDESC_ERR_INVALID_ARGUMENT`); the scheme's rules when the tensor is built
/// (`TDESC_ERR_QUANTIZATION_INVALID`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_set_quantization(
    node: *mut tdesc_node_spec,
    q: *const tdesc_quantization,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `node`.
        let node = unsafe { mut_arg(node, "node")? };
        node.spec.quantization = if q.is_null() {
            None
        } else {
            // SAFETY: caller promise on `q`.
            Some(unsafe { ref_arg(q, "q")? }.to_rust(None)?)
        };
        Ok(())
    })
}

/// Set (or, with `q` NULL, clear) the node's quantization with its format 1.1 fields
/// (`ext`: BLOCKWISE_2D's second axis and block, a global scale; NULL is all 0). The
/// descriptor built is version 1.1 only when a 1.1 feature is used.
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_set_quantization_ext(
    node: *mut tdesc_node_spec,
    q: *const tdesc_quantization,
    ext: *const tdesc_quantization_ext,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `node`.
        let node = unsafe { mut_arg(node, "node")? };
        node.spec.quantization = if q.is_null() {
            None
        } else {
            let ext = if ext.is_null() {
                None
            } else {
                // SAFETY: caller promise on `ext`.
                Some(unsafe { ref_arg(ext, "ext")? })
            };
            // SAFETY: caller promise on `q`.
            Some(unsafe { ref_arg(q, "q")? }.to_rust(ext)?)
        };
        Ok(())
    })
}

/// Make the node, placed as a region, store elements of `element_type` (format 1.1;
/// 0 clears it): the tensor's element type is then its value type, which the region must
/// yield (quantized with that expressed type, or of a type converting exactly into it;
/// `TDESC_ERR_REGION_TYPE_MISMATCH` when the tensor is built otherwise). Ignored on the
/// tensor's own node.
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_set_element_type(
    node: *mut tdesc_node_spec,
    element_type: u8,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `node`.
        let node = unsafe { mut_arg(node, "node")? };
        node.spec.element_type = match element_type {
            0 => None,
            c => Some(element_type_arg(c, "element_type")?),
        };
        Ok(())
    })
}

/// Free a node the caller still owns. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tdesc_node_free(node: *mut tdesc_node_spec) {
    // SAFETY: the caller passes NULL or a handle of this type it owns, freed once.
    unsafe { handle::free(node) }
}

/// A builder for a tensor of `element_type` (`TDESC_ELEMENT_*`) and `shape[0, rank)`
/// laid out by `node`, which is consumed in every case.
#[no_mangle]
pub unsafe extern "C" fn tdesc_builder_new(
    element_type: u8,
    shape: *const u64,
    rank: usize,
    node: *mut tdesc_node_spec,
    out: *mut *mut tdesc_builder,
) -> tdesc_status {
    guard(|| {
        let node = if node.is_null() {
            None
        } else {
            // SAFETY: the caller hands over a live node created by this library.
            Some(unsafe { handle::take(node) })
        };
        // SAFETY: caller promise on `out`.
        unsafe { out_handle(out, "out")? };
        rank_arg(rank, "shape")?;
        // SAFETY: caller promise on `rank` (at most 64) extents at `shape`.
        let shape = unsafe { slice_arg(shape, rank, "shape")? };
        let node = node.ok_or_else(|| invalid("node is NULL"))?;
        let et = element_type_arg(element_type, "element_type")?;
        let b = TensorBuilder::new(et, shape, node.spec);
        // SAFETY: checked above.
        unsafe { handle::give(out, tdesc_builder { b }) };
        Ok(())
    })
}

/// Set the shard section: this tensor is shard `shard_index` of `shard_count` of a
/// parent of `parent_shape`, starting at `shard_origin` (`rank` entries each).
#[no_mangle]
pub unsafe extern "C" fn tdesc_builder_set_shard(
    b: *mut tdesc_builder,
    parent_shape: *const u64,
    shard_origin: *const u64,
    rank: usize,
    shard_index: u32,
    shard_count: u32,
) -> tdesc_status {
    guard(|| {
        rank_arg(rank, "shard")?;
        // SAFETY: caller promises on `b` and the arrays (`rank` is at most 64).
        let (b, p, o) = unsafe {
            (
                mut_arg(b, "builder")?,
                slice_arg(parent_shape, rank, "parent_shape")?,
                slice_arg(shard_origin, rank, "shard_origin")?,
            )
        };
        b.b.shard = Some(Shard {
            parent_shape: p.to_vec(),
            shard_origin: o.to_vec(),
            shard_index,
            shard_count,
        });
        Ok(())
    })
}

/// Set (or, with NULL, clear) the statistics section; `has_*` fields other than 0 or 1
/// are `TDESC_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_builder_set_statistics(
    b: *mut tdesc_builder,
    s: *const tdesc_statistics,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `b`.
        let b = unsafe { mut_arg(b, "builder")? };
        if s.is_null() {
            b.b.statistics = None;
            return Ok(());
        }
        // SAFETY: caller promise on `s`.
        let s = unsafe { ref_arg(s, "statistics")? };
        for (v, what) in [
            (s.has_nnz, "has_nnz"),
            (s.has_min_max, "has_min_max"),
            (s.has_nan_count, "has_nan_count"),
        ] {
            if v > 1 {
                return Err(invalid(format!("statistics {what} is {v}; use 0 or 1")));
            }
        }
        b.b.statistics = Some(Statistics {
            nnz: (s.has_nnz == 1).then_some(s.nnz),
            min_max: (s.has_min_max == 1).then_some((s.min, s.max)),
            nan_count: (s.has_nan_count == 1).then_some(s.nan_count),
        });
        Ok(())
    })
}

/// Set the extension_type section: a UTF-8 `name` of `name_len` bytes (no NUL needed)
/// and `metadata_len` opaque bytes. A name that is not UTF-8 is
/// `TDESC_ERR_INVALID_ARGUMENT`; an empty one fails the build
/// (`TDESC_ERR_EXTENSION_TYPE_INVALID`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_builder_set_extension_type(
    b: *mut tdesc_builder,
    name: *const u8,
    name_len: usize,
    metadata: *const u8,
    metadata_len: usize,
) -> tdesc_status {
    guard(|| {
        if name_len > u16::MAX as usize {
            return Err(Error::new(
                ErrorKind::ExtensionTypeInvalid,
                format!("extension_type name length {name_len} not in 1..=65535"),
            ));
        }
        if u32::try_from(metadata_len).is_err() {
            return Err(Error::new(
                ErrorKind::Overflow,
                format!("extension_type metadata of {metadata_len} bytes exceeds u32"),
            ));
        }
        // SAFETY: caller promises on `b` and the arrays (lengths within the format's).
        let (b, name, meta) = unsafe {
            (
                mut_arg(b, "builder")?,
                slice_arg(name, name_len, "name")?,
                slice_arg(metadata, metadata_len, "metadata")?,
            )
        };
        let name = std::str::from_utf8(name)
            .map_err(|e| invalid(format!("extension_type name is not UTF-8: {e}")))?;
        b.b.extension_type = Some(ExtensionType {
            name: name.to_owned(),
            metadata: meta.to_vec(),
        });
        Ok(())
    })
}

/// Set the template (device type, id, memory class, alignment, flags) of automatically
/// sized buffers; `size_bytes` is ignored. The default is a CPU, 64-byte aligned buffer;
/// `tdesc_builder_set_alignment` changes the alignment alone.
#[no_mangle]
pub unsafe extern "C" fn tdesc_builder_set_device(
    b: *mut tdesc_builder,
    template_handle: *const tdesc_buffer_handle,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on both handles.
        let (b, t) = unsafe {
            (
                mut_arg(b, "builder")?,
                ref_arg(template_handle, "template_handle")?,
            )
        };
        b.b.template = t.to_rust("template_handle")?;
        Ok(())
    })
}

/// Align automatically sized buffers to `2^alignment_log2` bytes (0..=30, else
/// `TDESC_ERR_INVALID_ARGUMENT`): the alignment their memory is promised to have, which
/// binding checks. The default is 6 (64 bytes). Below 6 the descriptor is format 1.1
/// (`version_minor` 1): declare 4 (16 bytes) for memory from `malloc`, 0 for bytes at any
/// address. Explicit handles (`tdesc_node_set_buffers`) keep their own alignment; the
/// rest of the template (`tdesc_builder_set_device`) is unchanged. (ABI 1.4)
#[no_mangle]
pub unsafe extern "C" fn tdesc_builder_set_alignment(
    b: *mut tdesc_builder,
    alignment_log2: u8,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `b`.
        let b = unsafe { mut_arg(b, "builder")? };
        alignment_arg(alignment_log2, "alignment_log2")?;
        b.b.template.alignment_log2 = alignment_log2;
        Ok(())
    })
}

/// Validate and build the descriptor (the builder stays usable). Every rule of decoding
/// applies, with the same statuses.
#[no_mangle]
pub unsafe extern "C" fn tdesc_builder_build(
    b: *const tdesc_builder,
    out: *mut *mut tdesc_descriptor,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promises on `out` and `b`.
        let b = unsafe {
            out_handle(out, "out")?;
            ref_arg(b, "builder")?
        };
        let d = b.b.build()?;
        // SAFETY: checked above.
        unsafe { out.write(tdesc_descriptor::into_raw(d)) };
        Ok(())
    })
}

/// Validate and encode into `out[0, cap)`, with the protocol of `tdesc_descriptor_encode`
/// (`TDESC_ERR_OUTPUT_TOO_SMALL` reports the needed size in `*written`).
#[no_mangle]
pub unsafe extern "C" fn tdesc_builder_encode(
    b: *const tdesc_builder,
    out: *mut u8,
    cap: usize,
    written: *mut usize,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `b`.
        let b = unsafe { ref_arg(b, "builder")? };
        out_arg(written, "written")?;
        let bytes = b.b.encode()?;
        encode_out(&bytes, out, cap, written)
    })
}

/// Free a builder. NULL is a no-op.
#[no_mangle]
pub unsafe extern "C" fn tdesc_builder_free(b: *mut tdesc_builder) {
    // SAFETY: the caller passes NULL or a handle of this type it owns, freed once.
    unsafe { handle::free(b) }
}

#[cfg(test)]
mod tests;
