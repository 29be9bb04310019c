//! The parts of a descriptor beyond its shape, buffers and regions: each node's layout
//! fields, tiling levels, ggml type, quantization, shard, statistics and extension type;
//! and the names of element types, layouts, buffer roles and ggml block types.

use std::ffi::{c_char, CString};
use std::sync::OnceLock;

use tensordesc::descriptor::Descriptor;
use tensordesc::element::ElementType;
use tensordesc::error::{Error, ErrorKind, Result};
use tensordesc::layout::{self, BufferRole, LayoutRef};

use crate::args::{out_arg, slice_arg};
use crate::status::{guard, invalid, name_table, tdesc_status};
use crate::types::*;

use super::{desc_arg, region_of, tdesc_descriptor};

/// The layout and quantization of the tensor (`region` = `TDESC_NO_REGION`) or of region
/// `region`.
fn node_parts(
    d: &Descriptor,
    region: u32,
) -> Result<(LayoutRef<'_>, u64, Option<&tensordesc::Quantization>)> {
    if region == TDESC_NO_REGION {
        Ok((d.layout(), d.byte_offset(), d.quantization()))
    } else {
        let r = region_of(d, region as usize)?;
        Ok((r.layout(), r.byte_offset(), r.quantization()))
    }
}

/// Layout-specific fields of the tensor (`region` = `TDESC_NO_REGION`) or of one region.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_layout_info(
    d: *const tdesc_descriptor,
    region: u32,
    out: *mut tdesc_layout_info,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = &unsafe { desc_arg(d)? }.inner;
        out_arg(out, "out")?;
        let (layout, byte_offset, _) = node_parts(d, region)?;
        let tag = if region == TDESC_NO_REGION {
            d.layout_tag()
        } else {
            region_of(d, region as usize)?.layout_tag()
        };
        let mut v = tdesc_layout_info {
            tag,
            sparse_flags: 0,
            pool_count: 0,
            tile_levels: 0,
            region_count: 0,
            nnz: 0,
            block_size: 0,
            byte_offset,
            strides: std::ptr::null(),
            axis_order: std::ptr::null(),
            data: std::ptr::null(),
            data_len: 0,
        };
        match layout {
            // GGML_BLOCKS: its ggml_type through tdesc_descriptor_ggml_type. A layout whose
            // fields the struct has no place for leaves them zero: its own accessors tell
            // them.
            LayoutRef::RowMajor | LayoutRef::ColMajor | LayoutRef::Splat => {}
            LayoutRef::Strided { strides } => v.strides = strides.as_ptr(),
            LayoutRef::Tiled { levels } => v.tile_levels = levels.len() as u8,
            LayoutRef::DimOrder { order } => v.axis_order = order.as_ptr(),
            LayoutRef::Subpaving { region_count } => v.region_count = region_count,
            LayoutRef::Coo { nnz, flags }
            | LayoutRef::Csr { nnz, flags }
            | LayoutRef::Csc { nnz, flags } => {
                v.nnz = nnz;
                v.sparse_flags = flags;
            }
            LayoutRef::Csf { nnz, axis_order } => {
                v.nnz = nnz;
                v.axis_order = axis_order.as_ptr();
            }
            LayoutRef::BlockPaged {
                block_size,
                pool_count,
            } => {
                v.block_size = block_size;
                v.pool_count = pool_count;
            }
            LayoutRef::Extension { data, .. } | LayoutRef::Unknown { data, .. } => {
                v.data = data.as_ptr();
                v.data_len = data.len();
            }
            _ => {}
        }
        // SAFETY: `out` checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(v) };
        Ok(())
    })
}

/// Tiling level `level` (outermost first) of a TILED tensor or region. Not TILED:
/// `TDESC_ERR_INVALID_ARGUMENT`; `level` out of range: `TDESC_ERR_INDEX_OUT_OF_BOUNDS`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_tile_level(
    d: *const tdesc_descriptor,
    region: u32,
    level: usize,
    out: *mut tdesc_tile_level,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = &unsafe { desc_arg(d)? }.inner;
        out_arg(out, "out")?;
        let LayoutRef::Tiled { levels } = node_parts(d, region)?.0 else {
            return Err(invalid("the node's layout is not TILED"));
        };
        let l = levels.get(level).ok_or_else(|| {
            Error::new(
                ErrorKind::IndexOutOfBounds,
                format!(
                    "tile level {level} is not below the {} levels",
                    levels.len()
                ),
            )
        })?;
        let v = tdesc_tile_level {
            tile_shape: l.tile_shape.as_ptr(),
            tile_order: l.tile_order as u8,
            inner_tag: l.inner_tag,
        };
        // SAFETY: `out` checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(v) };
        Ok(())
    })
}

/// The ggml type number of a GGML_BLOCKS tensor (`region` = `TDESC_NO_REGION`) or region
/// (its `ggml_type` field; `tdesc_ggml_type_info` gives its name and block geometry).
/// Another layout: `TDESC_ERR_INVALID_ARGUMENT`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_ggml_type(
    d: *const tdesc_descriptor,
    region: u32,
    out: *mut u32,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = &unsafe { desc_arg(d)? }.inner;
        out_arg(out, "out")?;
        let LayoutRef::GgmlBlocks { ggml_type } = node_parts(d, region)?.0 else {
            return Err(invalid("the node's layout is not GGML_BLOCKS"));
        };
        // SAFETY: `out` checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(ggml_type.number) };
        Ok(())
    })
}

/// The ggml block type numbered `number`: its name, values and bytes per block.
/// `TDESC_ERR_NOT_FOUND` for a number this library does not dequantize (F32, F16, Q8_1,
/// Q8_K, ...).
#[no_mangle]
pub unsafe extern "C" fn tdesc_ggml_type_info(
    number: u32,
    out: *mut tdesc_ggml_block_type,
) -> tdesc_status {
    guard(|| {
        out_arg(out, "out")?;
        let t = layout::ggml::ggml_type(number).ok_or_else(|| {
            Error::new(
                ErrorKind::NotFound,
                format!("ggml type {number} is not a block type this library knows"),
            )
        })?;
        static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
        let names = name_table(&NAMES, layout::ggml::GGML_TYPES.len(), |i| {
            layout::ggml::GGML_TYPES[i].name
        });
        let k = layout::ggml::GGML_TYPES
            .iter()
            .position(|g| g == t)
            .ok_or_else(|| Error::new(ErrorKind::Internal, "ggml type table"))?;
        let v = tdesc_ggml_block_type {
            name: names[k].as_ptr(),
            number: t.number,
            block_elems: t.block_elems,
            block_bytes: t.block_bytes,
        };
        // SAFETY: `out` checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(v) };
        Ok(())
    })
}

/// The number of the ggml block type named `name[0, len)` (not NUL-terminated; ASCII case
/// ignored: `"Q4_K"`, `"iq2_xxs"`). `TDESC_ERR_NOT_FOUND` for another name.
#[no_mangle]
pub unsafe extern "C" fn tdesc_ggml_type_by_name(
    name: *const c_char,
    len: usize,
    out: *mut u32,
) -> tdesc_status {
    guard(|| {
        out_arg(out, "out")?;
        // SAFETY: caller promise on `len` bytes at `name`.
        let bytes = unsafe { slice_arg(name as *const u8, len, "name")? };
        let t = std::str::from_utf8(bytes)
            .ok()
            .and_then(layout::ggml::ggml_type_by_name)
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "{:?} is not a ggml block type this library knows",
                        String::from_utf8_lossy(bytes)
                    ),
                )
            })?;
        // SAFETY: `out` checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(t.number) };
        Ok(())
    })
}

fn not_found(what: &str) -> Error {
    Error::new(ErrorKind::NotFound, format!("the descriptor has no {what}"))
}

/// The quantization of the tensor (`region` = `TDESC_NO_REGION`) or of one region;
/// `TDESC_ERR_NOT_FOUND` when it has none.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_quantization(
    d: *const tdesc_descriptor,
    region: u32,
    out: *mut tdesc_quantization,
) -> tdesc_status {
    // SAFETY: the caller's promises on `d` and `out`, forwarded.
    unsafe { write_quantization(d, region, out, tdesc_quantization::from_rust) }
}

/// The format 1.1 fields of the quantization of the tensor (`region` =
/// `TDESC_NO_REGION`) or of one region (all 0 for a 1.0 section); `TDESC_ERR_NOT_FOUND`
/// when it has none.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_quantization_ext(
    d: *const tdesc_descriptor,
    region: u32,
    out: *mut tdesc_quantization_ext,
) -> tdesc_status {
    // SAFETY: the caller's promises on `d` and `out`, forwarded.
    unsafe { write_quantization(d, region, out, tdesc_quantization_ext::from_rust) }
}

/// Write `convert` of the node's quantization to `out` (NOT_FOUND when it has none).
///
/// # Safety
/// `d` is NULL or a live descriptor handle; `out` is NULL or writable for one `T`.
unsafe fn write_quantization<T>(
    d: *const tdesc_descriptor,
    region: u32,
    out: *mut T,
    convert: fn(&tensordesc::Quantization) -> T,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = &unsafe { desc_arg(d)? }.inner;
        out_arg(out, "out")?;
        let q = node_parts(d, region)?
            .2
            .ok_or_else(|| not_found("quantization there"))?;
        // SAFETY: `out` checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(convert(q)) };
        Ok(())
    })
}

/// The shard section; `TDESC_ERR_NOT_FOUND` when absent.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_shard(
    d: *const tdesc_descriptor,
    out: *mut tdesc_shard,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = &unsafe { desc_arg(d)? }.inner;
        out_arg(out, "out")?;
        let s = d.shard().ok_or_else(|| not_found("shard section"))?;
        let v = tdesc_shard {
            parent_shape: s.parent_shape.as_ptr(),
            shard_origin: s.shard_origin.as_ptr(),
            rank: s.parent_shape.len() as u8,
            shard_index: s.shard_index,
            shard_count: s.shard_count,
        };
        // SAFETY: `out` checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(v) };
        Ok(())
    })
}

/// The statistics section; `TDESC_ERR_NOT_FOUND` when absent.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_statistics(
    d: *const tdesc_descriptor,
    out: *mut tdesc_statistics,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let d = &unsafe { desc_arg(d)? }.inner;
        out_arg(out, "out")?;
        let s = d
            .statistics()
            .ok_or_else(|| not_found("statistics section"))?;
        let (min, max) = s.min_max.unwrap_or((0.0, 0.0));
        let v = tdesc_statistics {
            has_nnz: s.nnz.is_some() as u8,
            has_min_max: s.min_max.is_some() as u8,
            has_nan_count: s.nan_count.is_some() as u8,
            nnz: s.nnz.unwrap_or(0),
            min,
            max,
            nan_count: s.nan_count.unwrap_or(0),
        };
        // SAFETY: `out` checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(v) };
        Ok(())
    })
}

/// The extension_type section; `TDESC_ERR_NOT_FOUND` when absent. The strings are
/// borrowed from `d`.
#[no_mangle]
pub unsafe extern "C" fn tdesc_descriptor_extension_type(
    d: *const tdesc_descriptor,
    out: *mut tdesc_extension_type,
) -> tdesc_status {
    guard(|| {
        // SAFETY: caller promise on `d`.
        let h = unsafe { desc_arg(d)? };
        out_arg(out, "out")?;
        let e = h
            .inner
            .extension_type()
            .ok_or_else(|| not_found("extension_type section"))?;
        let name = h
            .ext_name
            .as_ref()
            .ok_or_else(|| Error::new(ErrorKind::Internal, "extension_type name copy missing"))?;
        let v = tdesc_extension_type {
            name: name.as_ptr() as *const u8,
            name_len: e.name.len(),
            metadata: e.metadata.as_ptr(),
            metadata_len: e.metadata.len(),
        };
        // SAFETY: `out` checked non-null and aligned; writable is the caller's promise.
        unsafe { out.write(v) };
        Ok(())
    })
}

/// The name of an element type code, e.g. `"FLOAT32"`; `"UNKNOWN"` when unassigned.
/// Static storage.
#[no_mangle]
pub extern "C" fn tdesc_element_type_name(code: u8) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    let names = name_table(&NAMES, 256, |i| {
        ElementType::from_code(i as u8).map_or("UNKNOWN", |t| t.name())
    });
    names[code as usize].as_ptr()
}

/// Bits per element of an element type code (4, 8, 16, 32, 64 or 128); 0 when unassigned.
#[no_mangle]
pub extern "C" fn tdesc_element_type_bits(code: u8) -> u32 {
    ElementType::from_code(code).map_or(0, |t| t.bits())
}

/// The name of a layout tag, e.g. `"CSR"`; `"EXTENSION"` for 0xF0–0xFE, `"UNKNOWN"` for
/// unassigned tags. Static storage.
#[no_mangle]
pub extern "C" fn tdesc_layout_name(tag: u8) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    let names = name_table(&NAMES, 256, |i| layout::tag_name(i as u8));
    names[tag as usize].as_ptr()
}

/// The name of a buffer role, e.g. `"INDPTR"`; `"UNKNOWN"` for other values. Static storage.
#[no_mangle]
pub extern "C" fn tdesc_buffer_role_name(role: u32) -> *const c_char {
    use BufferRole::*;
    const ROLES: [BufferRole; 11] = [
        Data,
        Values,
        Indices,
        Indptr,
        BlockTable,
        RowLengths,
        PagePool,
        QuantScales,
        QuantZeroPoints,
        QuantCodebook,
        Extension,
    ];
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    let names = name_table(&NAMES, ROLES.len(), |i| ROLES[i].name());
    names
        .get(role as usize)
        .map_or(c"UNKNOWN".as_ptr(), |s| s.as_ptr())
}
