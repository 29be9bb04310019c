//! DLPack interop in safe Rust: the DLPack 1.1 ABI types, the dtype mapping, and the
//! planning of exports (which strides, which buffer, which flags) and imports (which
//! descriptor, which byte span of the producer's memory). The C ABI (`ffi::dlpack`) only
//! allocates, fills pointers and manages ownership; other bindings can reuse the plans.
//! Users' guide and every decision: `docs/dlpack.md`.

#![allow(non_upper_case_globals)]

use crate::builder::{NodeSpec, TensorBuilder};
use crate::descriptor::{Descriptor, Node};
use crate::error::{Error, ErrorKind, Result};
use crate::format::buffer::{
    BufferHandle, DeviceType, MemoryClass, MAX_ALIGNMENT_LOG2, MIN_ALIGNMENT_LOG2,
};
use crate::format::element::ElementType;
use crate::layout::kind::{with_kind, LayoutKind};
use crate::layout::{self, LayoutRef};
use crate::BoundTensor;

/// The DLPack 1.1 ABI as defined by the official `dlpack.h` (dmlc/dlpack), for Rust
/// callers. C and C++ callers use the official header instead; `tensordesc.h` declares
/// only the incomplete managed-tensor types (the marker below keeps cbindgen out).
///
pub mod abi;

use abi::code::*;
use abi::{
    DLDataType, DLTensor, DLPACK_FLAG_BITMASK_IS_COPIED,
    DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, DLPACK_FLAG_BITMASK_READ_ONLY,
    DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION,
};

/// The DLPack dtype of an element type. Every element type of the format has one in
/// DLPack 1.1 (4-bit types packed, `bits` = 4; BOOL is 8 bits).
pub fn dl_dtype(et: ElementType) -> DLDataType {
    use ElementType::*;
    let code = match et {
        Bool => kDLBool,
        Int8 | Int16 | Int32 | Int64 | Int4 => kDLInt,
        Uint8 | Uint16 | Uint32 | Uint64 | Uint4 => kDLUInt,
        Float16 | Float32 | Float64 => kDLFloat,
        Bfloat16 => kDLBfloat,
        Complex64 | Complex128 => kDLComplex,
        Float8E4m3fn => kDLFloat8_e4m3fn,
        Float8E5m2 => kDLFloat8_e5m2,
        Float8E8m0fnu => kDLFloat8_e8m0fnu,
        Float4E2m1fn => kDLFloat4_e2m1fn,
    };
    DLDataType {
        code,
        bits: et.bits() as u8,
        lanes: 1,
    }
}

/// The element type of a DLPack dtype: the inverse of [`dl_dtype`].
pub fn element_type_of(dt: DLDataType) -> Result<ElementType> {
    if dt.lanes != 1 {
        return Err(Error::new(
            ErrorKind::NotBindable,
            format!(
                "DLPack dtype (code {}, bits {}, lanes {}): vector types (lanes != 1) have no element type in this format",
                dt.code, dt.bits, dt.lanes
            ),
        ));
    }
    ElementType::ALL
        .into_iter()
        .find(|&e| dl_dtype(e) == dt)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::NotBindable,
                format!(
                    "DLPack dtype (code {}, bits {}, lanes 1) has no element type in this format",
                    dt.code, dt.bits
                ),
            )
        })
}

/// An export error: NOT_BINDABLE with what cannot be expressed.
fn not_exportable(what: &str, why: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::NotBindable,
        format!("DLPack export of {what}: {why}"),
    )
}

/// Compact strides (in elements) for `shape` laid out in `order` (outermost axis first).
/// An extent of 0 counts as 1: a tensor without elements may carry any strides, and
/// these are the ones it would have with that extent 1.
fn compact_strides(shape: &[u64], order: &[usize], what: &str) -> Result<Vec<i64>> {
    let mut s = vec![0i64; shape.len()];
    let mut acc: i64 = 1;
    for (k, &a) in order.iter().rev().enumerate() {
        if k > 0 {
            let prev = shape[order[order.len() - k]].max(1);
            acc = i64::try_from(prev)
                .ok()
                .and_then(|p| acc.checked_mul(p))
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Overflow,
                        format!(
                            "DLPack export of {what}: the stride of axis {a} for shape {shape:?} exceeds int64"
                        ),
                    )
                })?;
        }
        s[a] = acc;
    }
    Ok(s)
}

/// The node of `region` (None: the tensor) and its description.
fn export_node(d: &Descriptor, region: Option<u32>) -> Result<(&Node, String)> {
    let Some(region) = region else {
        return Ok((
            &d.root,
            format!("the tensor ({})", layout::tag_name(d.root.layout.tag())),
        ));
    };
    let node = d.nodes().get(region as usize).ok_or_else(|| {
        Error::new(
            ErrorKind::IndexOutOfBounds,
            format!(
                "DLPack export: region index {region} is not below the region count {} (no region exports the whole tensor)",
                d.region_count()
            ),
        )
    })?;
    Ok((
        node,
        format!("region {region} ({})", layout::tag_name(node.layout.tag())),
    ))
}

/// What a DLPack export of a dense node says: everything but the allocation.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportPlan<'a> {
    /// The node's DATA buffer as bound (empty when the node holds no element).
    pub data: &'a [u8],
    /// Bytes from the start of `data` to element [0, …, 0] (0 when the node holds no
    /// element: DLPack wants a NULL `data` then).
    pub byte_offset: u64,
    /// Extents, as DLPack's int64.
    pub shape: Vec<i64>,
    /// Strides in elements (negative and zero strides included).
    pub strides: Vec<i64>,
    /// The DLPack dtype of the element type.
    pub dtype: DLDataType,
    /// DLPack device type and id of the buffer.
    pub device: abi::DLDevice,
    /// The consumer must not write: the handle says read-only, or the memory is (a file
    /// mapping).
    pub read_only: bool,
    /// True when the node holds no element.
    pub empty: bool,
}

/// Plan the export of `region` of `t` (None: the whole tensor). The node must be dense
/// and unquantized: ROW_MAJOR, COL_MAJOR, STRIDED, DIM_ORDER or SPLAT (every stride 0);
/// anything else is NOT_BINDABLE, a region past the end INDEX_OUT_OF_BOUNDS, an extent
/// or stride beyond int64 OVERFLOW.
pub fn plan_export<'a>(t: &BoundTensor<'a>, region: Option<u32>) -> Result<ExportPlan<'a>> {
    let d = t.descriptor();
    let (node, what) = export_node(d, region)?;
    let rank = d.rank();
    let nb = d.node_box(region);
    let shape = nb.shape();
    let strides = export_strides(node.layout.view(&d.arena, rank), shape, &what)?;
    if let Some(q) = d.quant_of(node) {
        let scheme = q.scheme_name();
        return Err(not_exportable(
            &what,
            format!(
                "it is quantized ({scheme}); DLPack has no quantization parameters, so its stored codes would be read as plain {} values",
                d.stored_type(region).name()
            ),
        ));
    }
    let shape_i64 = export_shape(shape, &what)?;
    let (handle, data) = dense_data(t, node, &what)?;
    let empty = layout::element_count(shape)? == 0;
    // On devices whose pointers may be opaque handles there is no address to judge.
    if !empty && address_like(handle.device_type) {
        check_element_aligned(data, node.byte_offset, d.element_type, &what)?;
    }
    Ok(ExportPlan {
        data: if empty { &[] } else { data },
        byte_offset: if empty { 0 } else { node.byte_offset },
        shape: shape_i64,
        strides,
        // A region with a type of its own (1.1) exports the type it stores.
        dtype: dl_dtype(d.stored_type(region)),
        device: abi::DLDevice {
            device_type: handle.device_type.code() as i32,
            device_id: handle.device_id as i32,
        },
        // Memory the tensor must not write (a file mapping) is exported read-only too: a
        // consumer that writes through it would fault.
        read_only: handle.read_only || t.is_read_only(),
        empty,
    })
}

/// The strides, in elements, of a dense node of `layout` and `shape`; the layouts that no
/// set of strides expresses are NOT_BINDABLE, saying why (their family's
/// `LayoutKind::not_strided`).
fn export_strides(layout: LayoutRef<'_>, shape: &[u64], what: &str) -> Result<Vec<i64>> {
    if let Some(why) = with_kind!(layout.kind_tag(), |K| <K as LayoutKind>::not_strided(
        &layout
    )) {
        return Err(not_exportable(what, why));
    }
    let rank = shape.len();
    Ok(match layout {
        LayoutRef::RowMajor => compact_strides(shape, &(0..rank).collect::<Vec<_>>(), what)?,
        LayoutRef::ColMajor => compact_strides(shape, &(0..rank).rev().collect::<Vec<_>>(), what)?,
        LayoutRef::DimOrder { order } => compact_strides(
            shape,
            &order.iter().map(|&a| a as usize).collect::<Vec<_>>(),
            what,
        )?,
        LayoutRef::Strided { strides } => strides.to_vec(),
        LayoutRef::Splat => vec![0; rank],
        other => {
            return Err(Error::new(
                ErrorKind::Internal,
                format!("{other} was judged a strided array but has no strides"),
            ))
        }
    })
}

/// The extents as DLPack's int64 (OVERFLOW beyond).
fn export_shape(shape: &[u64], what: &str) -> Result<Vec<i64>> {
    shape
        .iter()
        .enumerate()
        .map(|(a, &e)| {
            i64::try_from(e).map_err(|_| {
                Error::new(
                    ErrorKind::Overflow,
                    format!("DLPack export of {what}: extent {e} of axis {a} exceeds int64"),
                )
            })
        })
        .collect()
}

/// The handle of a dense `node`'s DATA buffer and the buffer as bound in `t`.
fn dense_data<'a>(
    t: &BoundTensor<'a>,
    node: &Node,
    what: &str,
) -> Result<(BufferHandle, &'a [u8])> {
    let d = t.descriptor();
    let first = node.first_buffer as usize;
    let handle = d.effective_buffer(first).ok_or_else(|| {
        Error::new(
            ErrorKind::Internal,
            format!("{what}: a dense node without its DATA buffer"),
        )
    })?;
    let data = t.buffers().get(first).ok_or_else(|| {
        Error::new(
            ErrorKind::Internal,
            format!("{what}: a dense node without its bound DATA buffer"),
        )
    })?;
    Ok((handle, data))
}
/// The alignment DLPack consumers need of every element: its storage size (a COMPLEX64
/// element 8 bytes, as PyTorch's `complex<float>` is aligned), 1 byte for packed 4-bit
/// types. Strides are in elements, so element `[0, …, 0]` aligned makes every one aligned.
pub fn element_alignment(et: ElementType) -> u64 {
    if et.is_packed() {
        1
    } else {
        et.storage_bytes()
    }
}

/// NOT_BINDABLE unless element `[0, …, 0]` — `byte_offset` bytes into `data`, the node's
/// DATA buffer as bound — is at an address aligned to its element
/// ([`element_alignment`]): consumers load elements with aligned loads. A buffer may be
/// aligned to less than its element in format 1.1 (alignment_log2 below 6), and a
/// byte_offset need not be a multiple of the element size.
pub fn check_element_aligned(
    data: &[u8],
    byte_offset: u64,
    et: ElementType,
    what: &str,
) -> Result<()> {
    let align = element_alignment(et);
    let at = (data.as_ptr() as u64).checked_add(byte_offset);
    match at {
        Some(a) if a % align == 0 => Ok(()),
        _ => Err(not_exportable(
            what,
            format!(
                "element [0, …, 0] at 0x{:x} (buffer 0x{:x} + byte_offset {byte_offset}) is not aligned to the {align} bytes of a {} element, which DLPack consumers load with aligned loads; read it into an aligned output (read_box) or bind the buffer at element-aligned memory",
                at.unwrap_or(u64::MAX),
                data.as_ptr() as u64,
                et.name()
            ),
        )),
    }
}

/// Device types whose `data` is a memory address (so a buffer may start elsewhere);
/// on the others (OpenCL `cl_mem`, Vulkan, Metal, ...) it may be an opaque handle.
fn address_like(dt: DeviceType) -> bool {
    use DeviceType::*;
    matches!(
        dt,
        Cpu | Cuda | CudaHost | Rocm | RocmHost | CudaManaged | OneApi
    )
}

/// True when `strides` are the compact row-major strides of `shape` (axes of extent 1
/// may carry any stride). `shape` holds at least one element, so no product overflows.
fn is_compact_row_major(shape: &[u64], strides: &[i64]) -> bool {
    let mut expect: i128 = 1;
    for (&e, &s) in shape.iter().zip(strides).rev() {
        if e != 1 && s as i128 != expect {
            return false;
        }
        expect *= e as i128;
    }
    true
}

/// The DIM_ORDER permutation (outermost axis first) whose compact strides are `strides`,
/// if any. `shape` holds at least one element.
fn compact_order(shape: &[u64], strides: &[i64]) -> Option<Vec<u8>> {
    let mut order: Vec<usize> = (0..shape.len()).collect();
    // Axes of extent 1 take no room: put them outermost, the others by decreasing stride.
    order.sort_by_key(|&a| (shape[a] != 1, std::cmp::Reverse(strides[a])));
    let mut acc: i128 = 1;
    for &a in order.iter().rev() {
        if shape[a] != 1 && strides[a] as i128 != acc {
            return None;
        }
        acc *= shape[a] as i128;
    }
    Some(order.into_iter().map(|a| a as u8).collect())
}

/// Everything an import needs besides the memory: the descriptor and the buffer span.
pub struct ImportPlan {
    /// The descriptor of the imported tensor. Its buffer starts at the lowest byte an
    /// element occupies (at `data` on devices whose pointers may be handles) and declares
    /// the alignment of that address (at most 2^30): a 1.0 descriptor when that is 64
    /// bytes or more, else a 1.1 one (`version_minor` 1).
    pub desc: crate::descriptor::Descriptor,
    /// Address (or handle) of the buffer start; 0 for an empty buffer.
    pub start: usize,
    /// Buffer length in bytes.
    pub size: usize,
    /// Bytes from `start` to the lowest byte an element occupies. Always 0 since the
    /// buffer starts there (format 1.1; a 1.0 import aligned the start down to 64 bytes,
    /// taking in memory the producer did not hand over).
    pub pad: usize,
    /// A descriptor whose buffer starts `pad` bytes later, for reading when `pad` is not
    /// 0. Always `None` since `pad` is always 0.
    pub view: Option<crate::descriptor::Descriptor>,
}

/// An import error: `kind`, with the detail prefixed "DLPack import: ".
pub fn import_error(kind: ErrorKind, msg: impl std::fmt::Display) -> Error {
    Error::new(kind, format!("DLPack import: {msg}"))
}

/// The descriptor and buffer span of DLPack tensor `dl` (`shape` and `strides` read from
/// its arrays; `strides` None when NULL), with DLPack `flags`.
pub fn plan_import(
    dl: &DLTensor,
    flags: u64,
    shape: &[i64],
    strides: Option<&[i64]>,
) -> Result<ImportPlan> {
    let et = import_element_type(dl, flags)?;
    let (device_type, device_id) = import_device(dl)?;
    let shape_u = import_shape(shape)?;
    let n = layout::element_count(&shape_u).map_err(|e| e.context("DLPack import"))?;
    let mut handle = BufferHandle {
        size_bytes: 0,
        device_type,
        device_id,
        memory_class: MemoryClass::Default,
        alignment_log2: MIN_ALIGNMENT_LOG2,
        read_only: flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0,
    };
    if n == 0 {
        // No element: nothing is ever read, whatever data and strides say.
        return Ok(ImportPlan {
            desc: build_import(et, &shape_u, NodeSpec::row_major(), handle)?,
            start: 0,
            size: 0,
            pad: 0,
            view: None,
        });
    }
    if dl.data.is_null() {
        return Err(import_error(
            ErrorKind::InvalidArgument,
            format!("data is NULL but the tensor holds {n} elements"),
        ));
    }
    let (node, lo, hi) = import_layout(et, &shape_u, n, shape, strides)?;
    let span = import_span(dl, device_type, lo, hi, shape, strides)?;
    handle.size_bytes = span.size as u64;
    handle.alignment_log2 = (span.start.trailing_zeros() as u8).min(MAX_ALIGNMENT_LOG2);
    Ok(ImportPlan {
        desc: build_import(
            et,
            &shape_u,
            node.with_byte_offset(span.byte_offset),
            handle,
        )?,
        start: span.start,
        size: span.size,
        pad: 0,
        view: None,
    })
}

/// The element type of `dl`, with `flags` this DLPack version defines and 4-bit elements
/// packed (not padded to a byte each).
fn import_element_type(dl: &DLTensor, flags: u64) -> Result<ElementType> {
    const KNOWN: u64 = DLPACK_FLAG_BITMASK_READ_ONLY
        | DLPACK_FLAG_BITMASK_IS_COPIED
        | DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED;
    if flags & !KNOWN != 0 {
        return Err(import_error(
            ErrorKind::NotBindable,
            format!(
                "flags 0x{flags:X} carry bits DLPack {DLPACK_MAJOR_VERSION}.{DLPACK_MINOR_VERSION} does not define (0x{:X}); their meaning is unknown",
                flags & !KNOWN
            ),
        ));
    }
    let et = element_type_of(dl.dtype).map_err(|e| e.context("DLPack import"))?;
    if et.is_packed() && flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED != 0 {
        return Err(import_error(
            ErrorKind::NotBindable,
            format!(
                "{} elements padded to one byte each (IS_SUBBYTE_TYPE_PADDED): this format stores 4-bit types packed only",
                et.name()
            ),
        ));
    }
    Ok(et)
}

/// The device type and id of `dl`, each within what a buffer handle holds.
fn import_device(dl: &DLTensor) -> Result<(DeviceType, u16)> {
    let device_type = u16::try_from(dl.device.device_type)
        .map_err(|_| {
            Error::new(
                ErrorKind::DeviceInvalid,
                format!("device_type {} is not assigned", dl.device.device_type),
            )
        })
        .and_then(DeviceType::from_code)
        .map_err(|e| e.context("DLPack import"))?;
    let device_id = u16::try_from(dl.device.device_id).map_err(|_| {
        import_error(
            ErrorKind::DeviceInvalid,
            format!("device_id {} is outside 0..=65535", dl.device.device_id),
        )
    })?;
    Ok((device_type, device_id))
}

/// The extents, none negative.
fn import_shape(shape: &[i64]) -> Result<Vec<u64>> {
    shape
        .iter()
        .enumerate()
        .map(|(a, &e)| {
            u64::try_from(e).map_err(|_| {
                import_error(
                    ErrorKind::InvalidArgument,
                    format!("shape[{a}] is {e}, a negative extent"),
                )
            })
        })
        .collect()
}

/// The imported descriptor: `et` elements of `shape` in `node`, whose one buffer is
/// `handle`.
fn build_import(
    et: ElementType,
    shape: &[u64],
    node: NodeSpec,
    handle: BufferHandle,
) -> Result<crate::descriptor::Descriptor> {
    TensorBuilder::new(et, shape, node.with_buffers(vec![handle]))
        .build()
        .map_err(|e| e.context("DLPack import"))
}

/// The layout of `n` elements of `et` in `shape_u` (`shape` as DLPack gave it, for
/// messages) with `strides`, and the byte span its elements occupy relative to element
/// [0, …, 0]: compact row-major; a compact axis order for packed 4-bit elements; else
/// STRIDED.
fn import_layout(
    et: ElementType,
    shape_u: &[u64],
    n: u64,
    shape: &[i64],
    strides: Option<&[i64]>,
) -> Result<(NodeSpec, i128, i128)> {
    match strides {
        Some(s) if !is_compact_row_major(shape_u, s) => {
            if et.is_packed() {
                let order = compact_order(shape_u, s).ok_or_else(|| {
                    import_error(
                        ErrorKind::NotBindable,
                        format!(
                            "packed {} elements with strides {s:?} for shape {shape:?}: this format packs 4-bit elements only in compact axis orders, and these strides are not a permutation of compact strides",
                            et.name()
                        ),
                    )
                })?;
                let bytes = et.checked_bytes_for(n, "DLPack import: data")? as i128;
                Ok((NodeSpec::dim_order(&order), 0, bytes))
            } else {
                let (lo, hi) = strided_span(et, shape_u, shape, s)?;
                Ok((NodeSpec::strided(s), lo, hi))
            }
        }
        _ => {
            let bytes = et.checked_bytes_for(n, "DLPack import: data")? as i128;
            Ok((NodeSpec::row_major(), 0, bytes))
        }
    }
}

/// The bytes elements of `et` in `shape_u` with strides `s` occupy, from the lowest to
/// one past the highest, relative to element [0, …, 0].
fn strided_span(
    et: ElementType,
    shape_u: &[u64],
    shape: &[i64],
    s: &[i64],
) -> Result<(i128, i128)> {
    let esize = et.storage_bytes() as i128;
    let overflow = || {
        import_error(
            ErrorKind::Overflow,
            format!("strides {s:?} for shape {shape:?} reach beyond 2^127 bytes"),
        )
    };
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&st, &e) in s.iter().zip(shape_u) {
        let span = (st as i128)
            .checked_mul(e as i128 - 1)
            .ok_or_else(overflow)?;
        if span < 0 {
            lo = lo.checked_add(span).ok_or_else(overflow)?;
        } else {
            hi = hi.checked_add(span).ok_or_else(overflow)?;
        }
    }
    let lo = lo.checked_mul(esize).ok_or_else(overflow)?;
    let hi = hi
        .checked_add(1)
        .and_then(|h| h.checked_mul(esize))
        .ok_or_else(overflow)?;
    Ok((lo, hi))
}

/// Where an imported buffer lies: its start, its length and the byte offset of element
/// [0, …, 0] in it.
struct ImportSpan {
    start: usize,
    size: usize,
    byte_offset: u64,
}

/// The buffer of `dl` whose elements occupy bytes `lo .. hi` relative to element
/// [0, …, 0] (`shape` and `strides` as DLPack gave them, for messages): from the lowest
/// byte an element occupies (from `data` on devices whose pointers may be handles), inside
/// the address space and not at address 0.
fn import_span(
    dl: &DLTensor,
    device_type: DeviceType,
    lo: i128,
    hi: i128,
    shape: &[i64],
    strides: Option<&[i64]>,
) -> Result<ImportSpan> {
    let data = dl.data as usize as i128;
    let first = data + dl.byte_offset as i128; // element [0, …, 0]: < 2^65, no overflow
    let low = first + lo;
    let high = first + hi;
    if low < 0 || high > usize::MAX as i128 {
        return Err(import_error(
            ErrorKind::InvalidArgument,
            format!(
                "data {:p} + byte_offset {} with strides {strides:?} for shape {shape:?} reaches outside the address space",
                dl.data, dl.byte_offset
            ),
        ));
    }
    let start = if address_like(device_type) {
        // The buffer starts at the lowest byte an element occupies and declares the
        // alignment that address has (format 1.1 allows any): nothing the producer did not
        // hand over is taken in, and a start below 64-byte alignment makes the descriptor
        // a 1.1 one.
        low as usize
    } else {
        if low < data {
            return Err(import_error(
                ErrorKind::NotBindable,
                format!(
                    "on {} the data pointer {:p} may be an opaque handle, which cannot be offset: no element may lie before it, and these strides {strides:?} reach {} bytes below it",
                    device_type.name(),
                    dl.data,
                    data - low
                ),
            ));
        }
        data as usize
    };
    if start == 0 {
        return Err(import_error(
            ErrorKind::InvalidArgument,
            format!("data {:p}: the lowest element lies at address 0", dl.data),
        ));
    }
    let size = usize::try_from(high - start as i128)
        .ok()
        .filter(|&s| s <= isize::MAX as usize)
        .ok_or_else(|| {
            import_error(
                ErrorKind::InvalidArgument,
                format!(
                    "the tensor spans {} bytes, more than the address space",
                    high - start as i128
                ),
            )
        })?;
    Ok(ImportSpan {
        start,
        size,
        byte_offset: (first - start as i128) as u64,
    })
}

#[cfg(test)]
mod tests;
