//! The plain C types of the ABI: constants, value structs and the tagged location union.
//!
//! Enumerations that C passes *in* are plain integers (`typedef`s and `#define`s) that
//! every entry point validates; enumerations that only the library writes (status, buffer
//! role, location tag) are C enums.

use std::ffi::c_char;

use super::status::invalid;
use tensordesc::device::{BufferHandle, DeviceType, MemoryClass, MAX_ALIGNMENT_LOG2};
use tensordesc::element::ElementType;
use tensordesc::error::Result;
use tensordesc::layout::BufferRole;
use tensordesc::quant::{GlobalScale, QuantScheme, Quantization};

/// Largest rank a descriptor may have; the length of the inline index arrays.
pub const TDESC_MAX_RANK: usize = 64;
/// The "no region" value of region fields: the tensor is not a subpaving, or the region
/// is at the top level.
pub const TDESC_NO_REGION: u32 = u32::MAX;
/// Deepest subpaving nesting (the tensor-level subpaving is depth 1).
pub const TDESC_MAX_SUBPAVING_DEPTH: u8 = 8;

/// How strictly to decode: `TDESC_MODE_STRICT` or `TDESC_MODE_PERMISSIVE`.
pub type tdesc_mode = u32;
/// Reject anything this version does not know.
pub const TDESC_MODE_STRICT: tdesc_mode = 0;
/// Read what is known; keep unknown layouts, regions, schemes and newer-minor trailing
/// bytes opaque (such a descriptor cannot be bound).
pub const TDESC_MODE_PERMISSIVE: tdesc_mode = 1;

/// What kind of file a `tdesc_file` was opened on (`tdesc_file_container`, ABI 1.4).
pub type tdesc_container = u32;
/// A `.tdf` file (container version 1 or 2).
pub const TDESC_CONTAINER_TDF: tdesc_container = 1;
/// A safetensors file, read in place.
pub const TDESC_CONTAINER_SAFETENSORS: tdesc_container = 2;
/// A sharded safetensors checkpoint (a `*.safetensors.index.json` and its shards, each
/// mapped), read in place.
pub const TDESC_CONTAINER_SAFETENSORS_SHARDED: tdesc_container = 3;
/// A GGUF file (versions 2 and 3, little-endian), read in place.
pub const TDESC_CONTAINER_GGUF: tdesc_container = 4;

/// `tdesc_file_open_ex` flag: list a checkpoint's own tensors, without grouping the pieces
/// of quantized weights into one tensor each (ABI 1.4).
pub const TDESC_FILE_UNGROUPED: u32 = 1;

/// Element type codes (the wire values).
pub const TDESC_ELEMENT_BOOL: u8 = 0x01;
/// INT8.
pub const TDESC_ELEMENT_INT8: u8 = 0x02;
/// UINT8.
pub const TDESC_ELEMENT_UINT8: u8 = 0x03;
/// INT16.
pub const TDESC_ELEMENT_INT16: u8 = 0x04;
/// UINT16.
pub const TDESC_ELEMENT_UINT16: u8 = 0x05;
/// INT32.
pub const TDESC_ELEMENT_INT32: u8 = 0x06;
/// UINT32.
pub const TDESC_ELEMENT_UINT32: u8 = 0x07;
/// INT64.
pub const TDESC_ELEMENT_INT64: u8 = 0x08;
/// UINT64.
pub const TDESC_ELEMENT_UINT64: u8 = 0x09;
/// FLOAT16 (IEEE binary16).
pub const TDESC_ELEMENT_FLOAT16: u8 = 0x0A;
/// BFLOAT16.
pub const TDESC_ELEMENT_BFLOAT16: u8 = 0x0B;
/// FLOAT32.
pub const TDESC_ELEMENT_FLOAT32: u8 = 0x0C;
/// FLOAT64.
pub const TDESC_ELEMENT_FLOAT64: u8 = 0x0D;
/// COMPLEX64 (two FLOAT32).
pub const TDESC_ELEMENT_COMPLEX64: u8 = 0x0E;
/// COMPLEX128 (two FLOAT64).
pub const TDESC_ELEMENT_COMPLEX128: u8 = 0x0F;
/// FLOAT8_E4M3FN.
pub const TDESC_ELEMENT_FLOAT8_E4M3FN: u8 = 0x10;
/// FLOAT8_E5M2.
pub const TDESC_ELEMENT_FLOAT8_E5M2: u8 = 0x11;
/// FLOAT8_E8M0FNU.
pub const TDESC_ELEMENT_FLOAT8_E8M0FNU: u8 = 0x12;
/// INT4 (packed, two per byte, low nibble first).
pub const TDESC_ELEMENT_INT4: u8 = 0x13;
/// UINT4 (packed).
pub const TDESC_ELEMENT_UINT4: u8 = 0x14;
/// FLOAT4_E2M1FN (packed).
pub const TDESC_ELEMENT_FLOAT4_E2M1FN: u8 = 0x15;

/// Layout tags (the wire values). Dense, row-major.
pub const TDESC_LAYOUT_ROW_MAJOR: u8 = 0x01;
/// Dense, column-major.
pub const TDESC_LAYOUT_COL_MAJOR: u8 = 0x02;
/// Dense with per-axis element strides.
pub const TDESC_LAYOUT_STRIDED: u8 = 0x03;
/// Dense tiles in a grid, optionally nested.
pub const TDESC_LAYOUT_TILED: u8 = 0x04;
/// Dense with an axis permutation.
pub const TDESC_LAYOUT_DIM_ORDER: u8 = 0x05;
/// A general subpaving (regions).
pub const TDESC_LAYOUT_SUBPAVING: u8 = 0x06;
/// Sparse coordinate list.
pub const TDESC_LAYOUT_COO: u8 = 0x07;
/// Compressed sparse rows.
pub const TDESC_LAYOUT_CSR: u8 = 0x08;
/// Compressed sparse columns.
pub const TDESC_LAYOUT_CSC: u8 = 0x09;
/// Compressed sparse fibers.
pub const TDESC_LAYOUT_CSF: u8 = 0x0A;
/// Block table over page pools.
pub const TDESC_LAYOUT_BLOCK_PAGED: u8 = 0x0B;
/// ggml's quantized blocks, where they lie (format 1.1; its ggml type:
/// `tdesc_descriptor_ggml_type`).
pub const TDESC_LAYOUT_GGML_BLOCKS: u8 = 0x0C;
/// One fill value for every element.
pub const TDESC_LAYOUT_SPLAT: u8 = 0x40;
/// First private extension tag.
pub const TDESC_LAYOUT_EXTENSION_FIRST: u8 = 0xF0;
/// Last private extension tag.
pub const TDESC_LAYOUT_EXTENSION_LAST: u8 = 0xFE;

/// Sparse flag: entries sorted.
pub const TDESC_SPARSE_SORTED: u8 = 1;
/// Sparse flag: no duplicate coordinates.
pub const TDESC_SPARSE_UNIQUE: u8 = 2;

/// Tile order of a TILED level: row-major grid.
pub const TDESC_TILE_ORDER_ROW_MAJOR: u8 = 0;
/// Tile order of a TILED level: column-major grid.
pub const TDESC_TILE_ORDER_COL_MAJOR: u8 = 1;

/// Region flag bit 0: the region carries its own quantization.
pub const TDESC_REGION_HAS_QUANTIZATION: u8 = 1;

/// Buffer flag bit 0: READ_ONLY.
pub const TDESC_BUFFER_READ_ONLY: u8 = 1;

/// Device types (DLPack numbering). CPU.
pub const TDESC_DEVICE_CPU: u16 = 1;
/// CUDA.
pub const TDESC_DEVICE_CUDA: u16 = 2;
/// CUDA host (pinned) memory.
pub const TDESC_DEVICE_CUDA_HOST: u16 = 3;
/// OpenCL.
pub const TDESC_DEVICE_OPENCL: u16 = 4;
/// Vulkan.
pub const TDESC_DEVICE_VULKAN: u16 = 7;
/// Metal.
pub const TDESC_DEVICE_METAL: u16 = 8;
/// VPI.
pub const TDESC_DEVICE_VPI: u16 = 9;
/// ROCm.
pub const TDESC_DEVICE_ROCM: u16 = 10;
/// ROCm host memory.
pub const TDESC_DEVICE_ROCM_HOST: u16 = 11;
/// Extension device.
pub const TDESC_DEVICE_EXT_DEV: u16 = 12;
/// CUDA managed memory.
pub const TDESC_DEVICE_CUDA_MANAGED: u16 = 13;
/// oneAPI.
pub const TDESC_DEVICE_ONEAPI: u16 = 14;
/// WebGPU.
pub const TDESC_DEVICE_WEBGPU: u16 = 15;
/// Hexagon.
pub const TDESC_DEVICE_HEXAGON: u16 = 16;
/// MAIA.
pub const TDESC_DEVICE_MAIA: u16 = 17;
/// Trainium.
pub const TDESC_DEVICE_TRN: u16 = 18;

/// Memory classes. The device's ordinary memory.
pub const TDESC_MEMORY_DEFAULT: u8 = 0;
/// Pageable host memory.
pub const TDESC_MEMORY_PAGEABLE: u8 = 1;
/// Page-locked host memory.
pub const TDESC_MEMORY_PINNED: u8 = 2;
/// Device-local memory.
pub const TDESC_MEMORY_DEVICE_LOCAL: u8 = 3;
/// Unified (managed) memory.
pub const TDESC_MEMORY_UNIFIED: u8 = 4;

/// Quantization schemes. One scale and zero point for the whole tensor.
pub const TDESC_QUANT_PER_TENSOR_AFFINE: u8 = 1;
/// Scales (and zero points) per index along an axis.
pub const TDESC_QUANT_PER_AXIS_AFFINE: u8 = 2;
/// Scales (and zero points) per block along an axis.
pub const TDESC_QUANT_BLOCKWISE: u8 = 3;
/// Elements index a codebook.
pub const TDESC_QUANT_CODEBOOK: u8 = 4;
/// Scales (and zero points) per two-dimensional block over two axes (format 1.1; its
/// second axis and block are in `tdesc_quantization_ext`).
pub const TDESC_QUANT_BLOCKWISE_2D: u8 = 5;

/// What an effective buffer holds in its node's sub-table.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum tdesc_buffer_role {
    /// Dense element data (also a splat's fill value).
    TDESC_ROLE_DATA = 0,
    /// Sparse values.
    TDESC_ROLE_VALUES = 1,
    /// Sparse indices / coordinates.
    TDESC_ROLE_INDICES = 2,
    /// Sparse pointers.
    TDESC_ROLE_INDPTR = 3,
    /// Block table of a block-paged layout.
    TDESC_ROLE_BLOCK_TABLE = 4,
    /// Row lengths of a block-paged layout.
    TDESC_ROLE_ROW_LENGTHS = 5,
    /// A page pool (`level` is the pool number).
    TDESC_ROLE_PAGE_POOL = 6,
    /// Quantization scales.
    TDESC_ROLE_QUANT_SCALES = 7,
    /// Quantization zero points.
    TDESC_ROLE_QUANT_ZERO_POINTS = 8,
    /// Quantization codebook.
    TDESC_ROLE_QUANT_CODEBOOK = 9,
    /// A private-extension buffer (`level` is its ordinal).
    TDESC_ROLE_EXTENSION = 10,
    /// The FLOAT32 global scale of a quantization (format 1.1).
    TDESC_ROLE_QUANT_GLOBAL_SCALE = 11,
}

impl From<BufferRole> for tdesc_buffer_role {
    fn from(r: BufferRole) -> Self {
        use tdesc_buffer_role::*;
        match r {
            BufferRole::Data => TDESC_ROLE_DATA,
            BufferRole::Values => TDESC_ROLE_VALUES,
            BufferRole::Indices => TDESC_ROLE_INDICES,
            BufferRole::Indptr => TDESC_ROLE_INDPTR,
            BufferRole::BlockTable => TDESC_ROLE_BLOCK_TABLE,
            BufferRole::RowLengths => TDESC_ROLE_ROW_LENGTHS,
            BufferRole::PagePool => TDESC_ROLE_PAGE_POOL,
            BufferRole::QuantScales => TDESC_ROLE_QUANT_SCALES,
            BufferRole::QuantZeroPoints => TDESC_ROLE_QUANT_ZERO_POINTS,
            BufferRole::QuantCodebook => TDESC_ROLE_QUANT_CODEBOOK,
            BufferRole::QuantGlobalScale => TDESC_ROLE_QUANT_GLOBAL_SCALE,
            BufferRole::Extension => TDESC_ROLE_EXTENSION,
        }
    }
}

/// The 16-byte buffer handle as the builder takes it (`tdesc_node_set_buffers`,
/// `tdesc_builder_set_device`). Every field is validated like the wire value.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct tdesc_buffer_handle {
    /// Byte length of the buffer.
    pub size_bytes: u64,
    /// `TDESC_DEVICE_*`.
    pub device_type: u16,
    /// Ordinal on that device type.
    pub device_id: u16,
    /// `TDESC_MEMORY_*`.
    pub memory_class: u8,
    /// log2 of the start alignment, 0..=30 (format 1.0: 6..=30; below 6 the descriptor
    /// is format 1.1).
    pub alignment_log2: u8,
    /// `TDESC_BUFFER_READ_ONLY` or 0.
    pub flags: u8,
}

/// Check a caller's `alignment_log2`: 0..=30 (format 1.1; below 6 the descriptor built
/// with it is a 1.1 one), else `TDESC_ERR_INVALID_ARGUMENT`.
pub(crate) fn alignment_arg(alignment_log2: u8, what: &str) -> Result<()> {
    if alignment_log2 > MAX_ALIGNMENT_LOG2 {
        return Err(invalid(format!(
            "{what}: alignment_log2 {alignment_log2} is outside 0..={MAX_ALIGNMENT_LOG2}"
        )));
    }
    Ok(())
}

impl tdesc_buffer_handle {
    /// Validate and convert.
    pub(crate) fn to_rust(self, what: &str) -> Result<BufferHandle> {
        let device_type = DeviceType::from_code(self.device_type).map_err(|_| {
            invalid(format!(
                "{what}: device_type {} is not assigned",
                self.device_type
            ))
        })?;
        let memory_class = MemoryClass::from_code(self.memory_class).map_err(|_| {
            invalid(format!(
                "{what}: memory_class {} is not assigned",
                self.memory_class
            ))
        })?;
        alignment_arg(self.alignment_log2, what)?;
        if self.flags & !TDESC_BUFFER_READ_ONLY != 0 {
            return Err(invalid(format!(
                "{what}: flags 0x{:02X} has unknown bits",
                self.flags
            )));
        }
        Ok(BufferHandle {
            size_bytes: self.size_bytes,
            device_type,
            device_id: self.device_id,
            memory_class,
            alignment_log2: self.alignment_log2,
            read_only: self.flags & TDESC_BUFFER_READ_ONLY != 0,
        })
    }
}

/// One entry of the effective buffer list (`tdesc_descriptor_buffer`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct tdesc_buffer {
    /// Byte length of the buffer.
    pub size_bytes: u64,
    /// `TDESC_DEVICE_*`.
    pub device_type: u16,
    /// Ordinal on that device type.
    pub device_id: u16,
    /// `TDESC_MEMORY_*`.
    pub memory_class: u8,
    /// log2 of the start alignment (0..=30; below 6 only in a format 1.1 descriptor).
    pub alignment_log2: u8,
    /// `TDESC_BUFFER_READ_ONLY` or 0.
    pub flags: u8,
    /// What the buffer holds.
    pub role: tdesc_buffer_role,
    /// CSF level, page pool number or extension ordinal; 0 otherwise.
    pub level: u32,
    /// The owning (leaf) region, or `TDESC_NO_REGION` when the tensor is not a subpaving.
    pub region: u32,
    /// Position inside the owner's buffer sub-table.
    pub index_in_table: u32,
}

/// One region of a subpaving (`tdesc_descriptor_region`), in depth-first pre-order over
/// every nesting level.
///
/// `global_origin` and `shape` point into the descriptor (valid while the descriptor
/// handle lives; for a grid of plain tiles, held without region records, the first call
/// computes every region's box once); the wire origin (relative to the parent region) is
/// not stored by the decoded form, so it is computed into the inline `origin` array:
/// entries `[0, rank)` are written, the entries past `rank` are left as they were.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tdesc_region {
    /// This region's pre-order index.
    pub index: u32,
    /// The parent region, or `TDESC_NO_REGION` at the top level.
    pub parent: u32,
    /// 1 for regions of the tensor-level subpaving, 2 for their children, ...
    pub depth: u8,
    /// The region's layout tag (`TDESC_LAYOUT_*`).
    pub layout_tag: u8,
    /// region_flags as on the wire (`TDESC_REGION_HAS_QUANTIZATION`).
    pub flags: u8,
    /// The tensor's rank: the length of `origin`'s meaningful part, `global_origin` and `shape`.
    pub rank: u8,
    /// First effective buffer of the region (of its whole subtree for a subpaving region).
    pub first_buffer: u32,
    /// Sub-table size (effective buffers of the subtree for a subpaving region).
    pub buffer_count: u32,
    /// byte_offset of the region body.
    pub byte_offset: u64,
    /// Origin in tensor coordinates (`rank` entries, borrowed).
    pub global_origin: *const u64,
    /// Extent (`rank` entries, borrowed).
    pub shape: *const u64,
    /// Origin as on the wire: relative to the parent region (to the tensor at depth 1);
    /// entries `[0, rank)`.
    pub origin: [u64; TDESC_MAX_RANK],
}

/// Where an element lives (`tdesc_descriptor_locate`): check `tag`
/// (`TDESC_LOCATION_DENSE` or `TDESC_LOCATION_LOOKUP`), then read the member of the
/// same name (`DENSE` or `LOOKUP`).
///
/// cbindgen:rename-all=QualifiedScreamingSnakeCase
#[repr(C, u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)] // the C layout: one union, no boxing
pub enum tdesc_location {
    /// A dense element: its bytes are at `byte_offset` inside effective buffer `buffer`;
    /// for 4-bit types at bit `bit_shift` (0 or 4) of that byte.
    Dense {
        /// The leaf region, or `TDESC_NO_REGION` for a non-subpaving tensor.
        region: u32,
        /// Effective buffer index.
        buffer: u32,
        /// Byte offset inside that buffer.
        byte_offset: u64,
        /// 0, or 4 for the high nibble of a packed 4-bit element.
        bit_shift: u8,
    },
    /// A sparse, block-paged or extension element: the listed buffers must be read to find it.
    Lookup {
        /// The leaf region, or `TDESC_NO_REGION` for a non-subpaving tensor.
        region: u32,
        /// Layout tag of that region (or of the tensor).
        layout_tag: u8,
        /// First effective buffer of its sub-table.
        first_buffer: u32,
        /// Sub-table size.
        buffer_count: u32,
        /// The index relative to the region origin: entries `[0, rank)` are written,
        /// later entries are left untouched.
        local_index: [u64; TDESC_MAX_RANK],
    },
}

/// A quantization section, both as the builder takes it and as the descriptor reports it.
/// Fields a scheme does not use are ignored on input and 0 on output.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct tdesc_quantization {
    /// `TDESC_QUANT_*` (an unknown scheme kept by permissive decoding reports its code).
    pub scheme: u8,
    /// Type dequantized values are expressed in: FLOAT16, BFLOAT16, FLOAT32 or FLOAT64.
    pub expressed_type: u8,
    /// 1 when zero points are present (HAS_ZERO_POINT), else 0.
    pub has_zero_point: u8,
    /// PER_AXIS_AFFINE / BLOCKWISE: the axis.
    pub axis: u8,
    /// PER_AXIS_AFFINE / BLOCKWISE: element type of the scales buffer.
    pub scale_type: u8,
    /// BLOCKWISE: elements per block along `axis`.
    pub block_size: u32,
    /// CODEBOOK: entries in the codebook.
    pub codebook_size: u32,
    /// PER_TENSOR_AFFINE: the scale.
    pub scale: f64,
    /// PER_TENSOR_AFFINE: the zero point (0 unless `has_zero_point`).
    pub zero_point: i64,
}

/// An element type code given by the caller (INVALID_ARGUMENT when unassigned).
pub(crate) fn element_type_arg(code: u8, what: &str) -> Result<ElementType> {
    ElementType::from_code(code)
        .map_err(|_| invalid(format!("{what} 0x{code:02X} is not an element type code")))
}

impl tdesc_quantization {
    pub(crate) fn from_rust(q: &Quantization) -> tdesc_quantization {
        let mut c = tdesc_quantization {
            scheme: q.scheme_code(),
            expressed_type: q.expressed_type.code(),
            has_zero_point: q.has_zero_point as u8,
            axis: 0,
            scale_type: 0,
            block_size: 0,
            codebook_size: 0,
            scale: 0.0,
            zero_point: 0,
        };
        match q.scheme {
            QuantScheme::PerTensorAffine { scale, zero_point } => {
                c.scale = scale;
                c.zero_point = zero_point;
            }
            QuantScheme::PerAxisAffine { axis, scale_type } => {
                c.axis = axis;
                c.scale_type = scale_type.code();
            }
            QuantScheme::Blockwise {
                axis,
                block_size,
                scale_type,
            } => {
                c.axis = axis;
                c.block_size = block_size;
                c.scale_type = scale_type.code();
            }
            QuantScheme::Blockwise2D {
                axis_a,
                block_a,
                scale_type,
                ..
            } => {
                c.axis = axis_a;
                c.block_size = block_a;
                c.scale_type = scale_type.code();
            }
            QuantScheme::Codebook { codebook_size } => c.codebook_size = codebook_size,
            QuantScheme::Opaque { .. } => {}
        }
        c
    }

    /// Validate the integer fields and convert; the scheme's own rules are checked when
    /// the descriptor is built (QUANTIZATION_INVALID). BLOCKWISE_2D and a global scale
    /// need the 1.1 fields of `ext`.
    pub(crate) fn to_rust(self, ext: Option<&tdesc_quantization_ext>) -> Result<Quantization> {
        let expressed_type = element_type_arg(self.expressed_type, "quantization expressed_type")?;
        if self.has_zero_point > 1 {
            return Err(invalid(format!(
                "quantization has_zero_point is {}; use 0 or 1",
                self.has_zero_point
            )));
        }
        let scheme = match self.scheme {
            TDESC_QUANT_PER_TENSOR_AFFINE => QuantScheme::PerTensorAffine {
                scale: self.scale,
                zero_point: self.zero_point,
            },
            TDESC_QUANT_PER_AXIS_AFFINE => QuantScheme::PerAxisAffine {
                axis: self.axis,
                scale_type: element_type_arg(self.scale_type, "quantization scale_type")?,
            },
            TDESC_QUANT_BLOCKWISE => QuantScheme::Blockwise {
                axis: self.axis,
                block_size: self.block_size,
                scale_type: element_type_arg(self.scale_type, "quantization scale_type")?,
            },
            TDESC_QUANT_CODEBOOK => QuantScheme::Codebook {
                codebook_size: self.codebook_size,
            },
            TDESC_QUANT_BLOCKWISE_2D => {
                let e = ext.ok_or_else(|| {
                    invalid(
                        "TDESC_QUANT_BLOCKWISE_2D needs its second axis and block: use \
                         tdesc_node_set_quantization_ext",
                    )
                })?;
                QuantScheme::Blockwise2D {
                    axis_a: self.axis,
                    block_a: self.block_size,
                    axis_b: e.axis_b,
                    block_b: e.block_b,
                    scale_type: element_type_arg(self.scale_type, "quantization scale_type")?,
                }
            }
            s => {
                return Err(invalid(format!(
                    "quantization scheme {s} is not a TDESC_QUANT_* value"
                )))
            }
        };
        let global_scale = match ext {
            None => None,
            Some(e) => e.global_scale()?,
        };
        Ok(Quantization {
            scheme,
            expressed_type,
            has_zero_point: self.has_zero_point == 1,
            global_scale,
        })
    }
}

/// The format 1.1 fields of a quantization section (`tdesc_node_set_quantization_ext`,
/// `tdesc_descriptor_quantization_ext`), beside a `tdesc_quantization` whose `axis`,
/// `block_size` and `scale_type` are BLOCKWISE_2D's `axis_a`, `block_a` and scale type.
/// All 0 describes a 1.0 section.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct tdesc_quantization_ext {
    /// BLOCKWISE_2D: the second blocked axis (above `axis`).
    pub axis_b: u8,
    /// 1 when a FLOAT32 global scale buffer follows the scales and zero points.
    pub has_global_scale: u8,
    /// 1 when the global scale divides (`(q − zp) · s / g`), 0 when it multiplies.
    pub global_scale_divides: u8,
    /// Reserved; 0.
    pub reserved: u8,
    /// BLOCKWISE_2D: elements per block along `axis_b`.
    pub block_b: u32,
}

impl tdesc_quantization_ext {
    pub(crate) fn from_rust(q: &Quantization) -> tdesc_quantization_ext {
        let mut e = tdesc_quantization_ext::default();
        if let QuantScheme::Blockwise2D {
            axis_b, block_b, ..
        } = q.scheme
        {
            e.axis_b = axis_b;
            e.block_b = block_b;
        }
        e.has_global_scale = q.global_scale.is_some() as u8;
        e.global_scale_divides = (q.global_scale == Some(GlobalScale::Divides)) as u8;
        e
    }

    fn global_scale(&self) -> Result<Option<GlobalScale>> {
        if self.has_global_scale > 1 || self.global_scale_divides > 1 || self.reserved != 0 {
            return Err(invalid(format!(
                "quantization ext has_global_scale {}, global_scale_divides {}, reserved {}: \
                 use 0 or 1 (reserved 0)",
                self.has_global_scale, self.global_scale_divides, self.reserved
            )));
        }
        Ok(match (self.has_global_scale, self.global_scale_divides) {
            (0, 0) => None,
            (1, 0) => Some(GlobalScale::Multiplies),
            (1, _) => Some(GlobalScale::Divides),
            _ => {
                return Err(invalid(
                    "quantization ext sets global_scale_divides without has_global_scale",
                ))
            }
        })
    }
}

/// The shard section (`tdesc_descriptor_shard`); arrays borrowed from the descriptor.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tdesc_shard {
    /// The parent tensor's shape (`rank` entries).
    pub parent_shape: *const u64,
    /// Where this shard starts in the parent (`rank` entries).
    pub shard_origin: *const u64,
    /// The rank (length of both arrays).
    pub rank: u8,
    /// This shard's ordinal.
    pub shard_index: u32,
    /// Number of shards.
    pub shard_count: u32,
}

/// The statistics section, as the builder takes it and the descriptor reports it.
/// A `has_*` of 0 means the value is absent (and ignored on input).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct tdesc_statistics {
    /// 1 when `nnz` is present.
    pub has_nnz: u8,
    /// 1 when `min` and `max` are present.
    pub has_min_max: u8,
    /// 1 when `nan_count` is present.
    pub has_nan_count: u8,
    /// Number of non-zero elements.
    pub nnz: u64,
    /// Minimum value.
    pub min: f64,
    /// Maximum value.
    pub max: f64,
    /// Number of NaN elements.
    pub nan_count: u64,
}

/// The extension_type section (`tdesc_descriptor_extension_type`); borrowed from the
/// descriptor handle.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tdesc_extension_type {
    /// The UTF-8 name, NUL-terminated for convenience; a name may itself contain NUL
    /// bytes, so `name_len` is authoritative.
    pub name: *const u8,
    /// Bytes of the name, without the terminating NUL.
    pub name_len: usize,
    /// Opaque metadata (may be NULL when `metadata_len` is 0).
    pub metadata: *const u8,
    /// Bytes of metadata.
    pub metadata_len: usize,
}

/// Layout-specific fields of the tensor or of one region (`tdesc_descriptor_layout_info`).
/// Fields that the layout does not have are 0 / NULL. Arrays are borrowed from the
/// descriptor and hold `rank` entries.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tdesc_layout_info {
    /// The layout tag.
    pub tag: u8,
    /// COO/CSR/CSC: SORTED / UNIQUE bits.
    pub sparse_flags: u8,
    /// BLOCK_PAGED: number of page pools.
    pub pool_count: u8,
    /// TILED: number of tiling levels (see `tdesc_descriptor_tile_level`).
    pub tile_levels: u8,
    /// SUBPAVING: number of direct child regions.
    pub region_count: u32,
    /// COO/CSR/CSC/CSF: stored entries.
    pub nnz: u64,
    /// BLOCK_PAGED: positions per block.
    pub block_size: u64,
    /// byte_offset of the node.
    pub byte_offset: u64,
    /// STRIDED: one stride per axis, in elements.
    pub strides: *const i64,
    /// DIM_ORDER: the permutation (outermost axis first); CSF: the axis of each level.
    pub axis_order: *const u8,
    /// Private extension or unknown (opaque) layout: its bytes.
    pub data: *const u8,
    /// Length of `data`.
    pub data_len: usize,
}

/// One ggml block type (`tdesc_ggml_type_info`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tdesc_ggml_block_type {
    /// ggml's name of the type, e.g. `"Q4_K"` (NUL-terminated, static storage).
    pub name: *const c_char,
    /// ggml's type number (`GGML_TYPE_Q4_K` = 12), the GGML_BLOCKS field.
    pub number: u32,
    /// Values per block (QK): 32, 64 or 256.
    pub block_elems: u32,
    /// Bytes per block.
    pub block_bytes: u32,
}

/// One level of a TILED layout (`tdesc_descriptor_tile_level`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tdesc_tile_level {
    /// Tile extents (`rank` entries, borrowed).
    pub tile_shape: *const u64,
    /// `TDESC_TILE_ORDER_*`.
    pub tile_order: u8,
    /// ROW_MAJOR, COL_MAJOR, or TILED when another level follows.
    pub inner_tag: u8,
}

#[cfg(test)]
mod tests;
