use std::ffi::c_void;

/// `DLPACK_MAJOR_VERSION` of the header these layouts follow.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// `DLPACK_MINOR_VERSION` of the header these layouts follow.
pub const DLPACK_MINOR_VERSION: u32 = 1;
/// The tensor must not be written.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// The producer made a copy the consumer owns alone.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;
/// Sub-byte elements are padded to a byte each (default: packed).
pub const DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;

/// `DLDataTypeCode` values.
pub mod code {
    /// Signed integer.
    pub const kDLInt: u8 = 0;
    /// Unsigned integer.
    pub const kDLUInt: u8 = 1;
    /// IEEE floating point.
    pub const kDLFloat: u8 = 2;
    /// Opaque handle.
    pub const kDLOpaqueHandle: u8 = 3;
    /// bfloat16.
    pub const kDLBfloat: u8 = 4;
    /// Complex (a compact pair of floats).
    pub const kDLComplex: u8 = 5;
    /// Boolean (8 bits).
    pub const kDLBool: u8 = 6;
    /// FP8 E3M4.
    pub const kDLFloat8_e3m4: u8 = 7;
    /// FP8 E4M3.
    pub const kDLFloat8_e4m3: u8 = 8;
    /// FP8 E4M3 B11 FNUZ.
    pub const kDLFloat8_e4m3b11fnuz: u8 = 9;
    /// FP8 E4M3 FN.
    pub const kDLFloat8_e4m3fn: u8 = 10;
    /// FP8 E4M3 FNUZ.
    pub const kDLFloat8_e4m3fnuz: u8 = 11;
    /// FP8 E5M2.
    pub const kDLFloat8_e5m2: u8 = 12;
    /// FP8 E5M2 FNUZ.
    pub const kDLFloat8_e5m2fnuz: u8 = 13;
    /// FP8 E8M0 FNU (an exponent-only scale type).
    pub const kDLFloat8_e8m0fnu: u8 = 14;
    /// FP6 E2M3 FN.
    pub const kDLFloat6_e2m3fn: u8 = 15;
    /// FP6 E3M2 FN.
    pub const kDLFloat6_e3m2fn: u8 = 16;
    /// FP4 E2M1 FN.
    pub const kDLFloat4_e2m1fn: u8 = 17;
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version (1).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLDevice`: `device_type` is a `DLDeviceType` (the numbering of tensordesc).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    /// `DLDeviceType` (a C enum of `int32_t` size).
    pub device_type: i32,
    /// Device ordinal.
    pub device_id: i32,
}

/// `DLDataType`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDataType {
    /// A `DLDataTypeCode`.
    pub code: u8,
    /// Bits per element (4 for packed 4-bit types).
    pub bits: u8,
    /// Vector lanes (1).
    pub lanes: u16,
}

/// `DLTensor`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DLTensor {
    /// Start of the memory (a device pointer or handle for device tensors).
    pub data: *mut c_void,
    /// Where the memory lives.
    pub device: DLDevice,
    /// Rank.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements (NULL: compact row-major, before DLPack 1.2).
    pub strides: *mut i64,
    /// Bytes from `data` to element [0, …, 0].
    pub byte_offset: u64,
}

/// `DLManagedTensor` (legacy, unversioned).
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Releases the tensor (and `self`); may be NULL.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLManagedTensorVersioned`.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// ABI version of this struct.
    pub version: DLPackVersion,
    /// The producer's context.
    pub manager_ctx: *mut c_void,
    /// Releases the tensor (and `self`); may be NULL.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// `DLPACK_FLAG_BITMASK_*` bits.
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}
