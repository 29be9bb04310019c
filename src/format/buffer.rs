//! Buffer handles (FORMAT §3): size, device, memory class, alignment and flags.

use crate::error::{Error, ErrorKind, Result};
use crate::format::wire::{Reader, Writer};

/// Device types, numbered as DLPack's `DLDeviceType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
#[allow(missing_docs)]
pub enum DeviceType {
    Cpu = 1,
    Cuda = 2,
    CudaHost = 3,
    OpenCl = 4,
    Vulkan = 7,
    Metal = 8,
    Vpi = 9,
    Rocm = 10,
    RocmHost = 11,
    ExtDev = 12,
    CudaManaged = 13,
    OneApi = 14,
    WebGpu = 15,
    Hexagon = 16,
    Maia = 17,
    Trn = 18,
}

impl DeviceType {
    /// The device type for a wire value; 0 and unassigned values are `DEVICE_INVALID`.
    #[inline]
    pub fn from_code(v: u16) -> Result<DeviceType> {
        use DeviceType::*;
        Ok(match v {
            1 => Cpu,
            2 => Cuda,
            3 => CudaHost,
            4 => OpenCl,
            7 => Vulkan,
            8 => Metal,
            9 => Vpi,
            10 => Rocm,
            11 => RocmHost,
            12 => ExtDev,
            13 => CudaManaged,
            14 => OneApi,
            15 => WebGpu,
            16 => Hexagon,
            17 => Maia,
            18 => Trn,
            _ => {
                return Err(Error::new(
                    ErrorKind::DeviceInvalid,
                    format!("device_type {v} is not assigned"),
                ))
            }
        })
    }

    /// The wire value.
    pub fn code(self) -> u16 {
        self as u16
    }

    /// True when the host CPU can read memory of this device type directly.
    pub fn is_host_accessible(self) -> bool {
        matches!(
            self,
            DeviceType::Cpu | DeviceType::CudaHost | DeviceType::RocmHost | DeviceType::CudaManaged
        )
    }

    /// Upper-case name, e.g. `"CUDA_HOST"`.
    pub fn name(self) -> &'static str {
        use DeviceType::*;
        match self {
            Cpu => "CPU",
            Cuda => "CUDA",
            CudaHost => "CUDA_HOST",
            OpenCl => "OPENCL",
            Vulkan => "VULKAN",
            Metal => "METAL",
            Vpi => "VPI",
            Rocm => "ROCM",
            RocmHost => "ROCM_HOST",
            ExtDev => "EXT_DEV",
            CudaManaged => "CUDA_MANAGED",
            OneApi => "ONEAPI",
            WebGpu => "WEBGPU",
            Hexagon => "HEXAGON",
            Maia => "MAIA",
            Trn => "TRN",
        }
    }
}

/// The memory class of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum MemoryClass {
    Default = 0,
    Pageable = 1,
    Pinned = 2,
    DeviceLocal = 3,
    Unified = 4,
}

impl MemoryClass {
    /// The memory class for a wire value; others are `DEVICE_INVALID`.
    #[inline]
    pub fn from_code(v: u8) -> Result<MemoryClass> {
        use MemoryClass::*;
        Ok(match v {
            0 => Default,
            1 => Pageable,
            2 => Pinned,
            3 => DeviceLocal,
            4 => Unified,
            _ => {
                return Err(Error::new(
                    ErrorKind::DeviceInvalid,
                    format!("memory_class {v} is not assigned"),
                ))
            }
        })
    }

    /// The wire value.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Upper-case name.
    pub fn name(self) -> &'static str {
        use MemoryClass::*;
        match self {
            Default => "DEFAULT",
            Pageable => "PAGEABLE",
            Pinned => "PINNED",
            DeviceLocal => "DEVICE_LOCAL",
            Unified => "UNIFIED",
        }
    }
}

/// Smallest alignment_log2 of format 1.0 (64 bytes): the alignment of every handle this
/// library makes unless told otherwise ([`BufferHandle::cpu`], the builders' default), and
/// the least a `.tdf` or stream writer stores. A value below it is a 1.1 feature.
pub const MIN_ALIGNMENT_LOG2: u8 = 6;
/// Smallest alignment_log2 of format 1.1 (1 byte).
pub const MIN_ALIGNMENT_LOG2_1_1: u8 = 0;
/// Largest allowed alignment_log2 (1 GiB).
pub const MAX_ALIGNMENT_LOG2: u8 = 30;

/// The smallest alignment_log2 a descriptor of minor version `minor` may declare: 6 in
/// minor 0 (a 1.0 descriptor), 0 from minor 1 on.
#[inline]
pub fn min_alignment_log2(minor: u8) -> u8 {
    if minor >= 1 {
        MIN_ALIGNMENT_LOG2_1_1
    } else {
        MIN_ALIGNMENT_LOG2
    }
}
/// Size of a buffer handle on the wire.
pub const HANDLE_BYTES: u64 = 16;

/// The properties of one buffer; its location is supplied by the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BufferHandle {
    /// Byte length of the buffer.
    pub size_bytes: u64,
    /// Device type.
    pub device_type: DeviceType,
    /// Ordinal on that device type.
    pub device_id: u16,
    /// Memory class.
    pub memory_class: MemoryClass,
    /// log2 of the start alignment: 6..=30 in format 1.0, 0..=30 in 1.1 (below 6 the
    /// descriptor needs minor version 1).
    pub alignment_log2: u8,
    /// The READ_ONLY flag.
    pub read_only: bool,
}

impl BufferHandle {
    /// A CPU, default-class, 64-byte aligned, writable buffer of `size_bytes`.
    pub fn cpu(size_bytes: u64) -> BufferHandle {
        BufferHandle {
            size_bytes,
            device_type: DeviceType::Cpu,
            device_id: 0,
            memory_class: MemoryClass::Default,
            alignment_log2: MIN_ALIGNMENT_LOG2,
            read_only: false,
        }
    }

    /// The same handle with another size.
    pub fn with_size(mut self, size_bytes: u64) -> BufferHandle {
        self.size_bytes = size_bytes;
        self
    }

    /// The same handle aligned to `2^alignment_log2` bytes (0..=30; below 6 the
    /// descriptor needs format 1.1, see [`required_minor`](Self::required_minor)). Not
    /// checked here: decoding and building refuse a value past 30 (ALIGNMENT_INVALID).
    pub fn with_alignment(mut self, alignment_log2: u8) -> BufferHandle {
        self.alignment_log2 = alignment_log2;
        self
    }

    /// The start alignment in bytes.
    pub fn alignment(&self) -> u64 {
        1u64 << self.alignment_log2
    }

    /// True when the host CPU may read this buffer (host device types, or pinned,
    /// unified or pageable memory).
    pub fn is_host_readable(&self) -> bool {
        self.device_type.is_host_accessible()
            || matches!(
                self.memory_class,
                MemoryClass::Pinned | MemoryClass::Unified | MemoryClass::Pageable
            )
    }

    /// True when `other` shares device type, id and memory class.
    pub fn colocated_with(&self, other: &BufferHandle) -> bool {
        self.device_type == other.device_type
            && self.device_id == other.device_id
            && self.memory_class == other.memory_class
    }

    /// Whether this handle needs format 1.1: an alignment below 64 bytes.
    pub fn required_minor(&self) -> u8 {
        u8::from(self.alignment_log2 < MIN_ALIGNMENT_LOG2)
    }

    /// Decode one 16-byte handle of a descriptor of minor version `minor`.
    #[inline]
    pub fn read(r: &mut Reader<'_>, minor: u8) -> Result<BufferHandle> {
        let at = r.pos();
        let b = r.bytes(16, "buffer_handle")?;
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        BufferHandle::from_bytes(&a, at, minor)
    }

    /// Decode a handle from its 16 bytes; `at` (its byte offset) is used in error details.
    /// `minor` is the descriptor's minor version, which sets the smallest alignment_log2
    /// ([`min_alignment_log2`]).
    #[inline]
    pub fn from_bytes(b: &[u8; 16], at: usize, minor: u8) -> Result<BufferHandle> {
        let mut size = [0u8; 8];
        size.copy_from_slice(&b[..8]);
        let size_bytes = u64::from_le_bytes(size);
        let device_type = DeviceType::from_code(u16::from_le_bytes([b[8], b[9]]))
            .map_err(|e| e.context(format!("buffer handle at byte {at}")))?;
        let device_id = u16::from_le_bytes([b[10], b[11]]);
        let memory_class = MemoryClass::from_code(b[12])
            .map_err(|e| e.context(format!("buffer handle at byte {at}")))?;
        let alignment_log2 = b[13];
        let min = min_alignment_log2(minor);
        if !(min..=MAX_ALIGNMENT_LOG2).contains(&alignment_log2) {
            return Err(Error::new(
                ErrorKind::AlignmentInvalid,
                format!(
                    "buffer handle at byte {at}: alignment_log2 {alignment_log2} outside {min}..={MAX_ALIGNMENT_LOG2}"
                ),
            ));
        }
        let flags = b[14];
        if flags & !1 != 0 {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!(
                    "buffer handle at byte {at}: buffer_flags 0x{flags:02X} has reserved bits set"
                ),
            ));
        }
        if b[15] != 0 {
            return Err(Error::new(
                ErrorKind::ReservedNonzero,
                format!("buffer handle at byte {at}: reserved byte is {}", b[15]),
            ));
        }
        Ok(BufferHandle {
            size_bytes,
            device_type,
            device_id,
            memory_class,
            alignment_log2,
            read_only: flags & 1 != 0,
        })
    }

    /// Encode the 16-byte handle.
    pub fn write(&self, w: &mut Writer) {
        w.u64(self.size_bytes);
        w.u16(self.device_type.code());
        w.u16(self.device_id);
        w.u8(self.memory_class.code());
        w.u8(self.alignment_log2);
        w.u8(self.read_only as u8);
        w.u8(0);
    }
}

/// The role of a buffer in its node's sub-table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum BufferRole {
    /// Dense element data (also a splat's fill value).
    Data = 0,
    /// Sparse values.
    Values = 1,
    /// Sparse indices / coordinates.
    Indices = 2,
    /// Sparse pointers.
    Indptr = 3,
    /// Block table of a block-paged layout.
    BlockTable = 4,
    /// Row lengths of a block-paged layout.
    RowLengths = 5,
    /// A page pool.
    PagePool = 6,
    /// Quantization scales.
    QuantScales = 7,
    /// Quantization zero points.
    QuantZeroPoints = 8,
    /// Quantization codebook.
    QuantCodebook = 9,
    /// A private-extension buffer.
    Extension = 10,
    /// The FLOAT32 global scale of a quantization (1.1).
    QuantGlobalScale = 11,
}

impl BufferRole {
    /// Upper-case name.
    pub fn name(self) -> &'static str {
        use BufferRole::*;
        match self {
            Data => "DATA",
            Values => "VALUES",
            Indices => "INDICES",
            Indptr => "INDPTR",
            BlockTable => "BLOCK_TABLE",
            RowLengths => "ROW_LENGTHS",
            PagePool => "PAGE_POOL",
            QuantScales => "QUANT_SCALES",
            QuantZeroPoints => "QUANT_ZERO_POINTS",
            QuantCodebook => "QUANT_CODEBOOK",
            Extension => "EXTENSION",
            QuantGlobalScale => "QUANT_GLOBAL_SCALE",
        }
    }
}

/// Exact-size check shared by the sparse, paged and quantization rules.
pub(crate) fn expect_size(buf: &BufferHandle, need: u64, what: &str) -> Result<()> {
    if buf.size_bytes != need {
        return Err(Error::new(
            ErrorKind::BufferSizeMismatch,
            format!(
                "{what} is {} bytes, expected exactly {need}",
                buf.size_bytes
            ),
        ));
    }
    Ok(())
}
