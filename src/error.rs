//! Errors: one [`ErrorKind`] per stable status number of the C ABI, plus a detail message
//! that names the field, the region and the byte offset where the problem was found.

use std::fmt;

/// The kind of a failure. The discriminants are the stable status numbers of the C ABI
/// (`tdesc_status`); they are never reused or renumbered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ErrorKind {
    /// A caller-supplied argument is invalid (null pointer, wrong rank, bad enum value).
    InvalidArgument = 1,
    /// The input ends before the structure it announces.
    Truncated = 2,
    /// The descriptor (or file / stream) does not start with the expected magic.
    BadMagic = 3,
    /// The major version is not 1, or (strict) the minor version is newer than the
    /// reader's: above 1 for a descriptor (format 1.1) or a version 2 `.tdf` file (2.1), above
    /// 0 for a stream.
    UnsupportedVersion = 4,
    /// A reserved bit or byte is not zero.
    ReservedNonzero = 5,
    /// A declared length disagrees with what its fields consume.
    LengthMismatch = 6,
    /// An element type code is not assigned.
    InvalidElementType = 7,
    /// The rank exceeds 64.
    RankTooLarge = 8,
    /// Arithmetic on wire values overflowed.
    Overflow = 9,
    /// The layout tag is 0x00, 0xFF or (strict) unassigned.
    UnknownLayout = 10,
    /// A layout rule is violated (rank, permutation, zero tile/block size, ...).
    LayoutConstraint = 11,
    /// The buffer table holds a different number of handles than the layout requires.
    BufferCountMismatch = 12,
    /// The buffer table is empty where at least one buffer is required.
    EmptyBufferTable = 13,
    /// A buffer's size is not the exact size its role requires.
    BufferSizeMismatch = 14,
    /// A dense data buffer is smaller than the elements it must hold.
    BufferTooSmall = 15,
    /// An alignment is out of range or a pointer is not aligned as its handle says.
    AlignmentInvalid = 16,
    /// Buffers of one tensor do not share device type, id and memory class.
    DeviceMismatch = 17,
    /// A byte_offset breaks its layout's rule.
    ByteOffsetInvalid = 18,
    /// A subpaving region reaches outside its enclosing extent.
    RegionOutOfBounds = 19,
    /// Two subpaving regions overlap.
    RegionOverlap = 20,
    /// Subpaving regions leave part of the enclosing extent uncovered.
    RegionCoverageGap = 21,
    /// Subpaving nesting exceeds 8 levels.
    SubpavingTooDeep = 22,
    /// The quantization section is malformed or inconsistent.
    QuantizationInvalid = 23,
    /// The shard section is inconsistent.
    ShardInvalid = 24,
    /// The statistics section is inconsistent.
    StatisticsInvalid = 25,
    /// The extension_type section is malformed.
    ExtensionTypeInvalid = 26,
    /// An element index is outside the tensor's shape.
    IndexOutOfBounds = 27,
    /// The layout cannot address an element by arithmetic alone.
    LayoutRequiresMultiBuffer = 28,
    /// A lookup is ambiguous because the sparse data is not canonical (duplicates).
    NotCanonical = 29,
    /// Buffer contents are malformed.
    ContentInvalid = 30,
    /// Bound buffers do not match the descriptor (count, null, size, alias).
    BindingMismatch = 31,
    /// The tensor (or region) cannot be bound or read as asked.
    NotBindable = 32,
    /// The caller's output buffer is too small.
    OutputTooSmall = 33,
    /// An operating-system I/O operation failed.
    Io = 34,
    /// A named item does not exist.
    NotFound = 35,
    /// A name appears twice where names must be unique.
    DuplicateName = 36,
    /// Stream frames arrive out of order, with gaps or overruns.
    StreamOrder = 37,
    /// A device type or memory class value is not assigned.
    DeviceInvalid = 38,
    /// An internal error (a bug); never caused by input alone.
    Internal = 39,
    /// A region's stored element type does not yield the tensor's value type (1.1): it
    /// neither carries quantization expressed in it nor converts into it exactly.
    RegionTypeMismatch = 40,
}

impl ErrorKind {
    /// Every kind, in status-number order.
    pub const ALL: [ErrorKind; 40] = [
        ErrorKind::InvalidArgument,
        ErrorKind::Truncated,
        ErrorKind::BadMagic,
        ErrorKind::UnsupportedVersion,
        ErrorKind::ReservedNonzero,
        ErrorKind::LengthMismatch,
        ErrorKind::InvalidElementType,
        ErrorKind::RankTooLarge,
        ErrorKind::Overflow,
        ErrorKind::UnknownLayout,
        ErrorKind::LayoutConstraint,
        ErrorKind::BufferCountMismatch,
        ErrorKind::EmptyBufferTable,
        ErrorKind::BufferSizeMismatch,
        ErrorKind::BufferTooSmall,
        ErrorKind::AlignmentInvalid,
        ErrorKind::DeviceMismatch,
        ErrorKind::ByteOffsetInvalid,
        ErrorKind::RegionOutOfBounds,
        ErrorKind::RegionOverlap,
        ErrorKind::RegionCoverageGap,
        ErrorKind::SubpavingTooDeep,
        ErrorKind::QuantizationInvalid,
        ErrorKind::ShardInvalid,
        ErrorKind::StatisticsInvalid,
        ErrorKind::ExtensionTypeInvalid,
        ErrorKind::IndexOutOfBounds,
        ErrorKind::LayoutRequiresMultiBuffer,
        ErrorKind::NotCanonical,
        ErrorKind::ContentInvalid,
        ErrorKind::BindingMismatch,
        ErrorKind::NotBindable,
        ErrorKind::OutputTooSmall,
        ErrorKind::Io,
        ErrorKind::NotFound,
        ErrorKind::DuplicateName,
        ErrorKind::StreamOrder,
        ErrorKind::DeviceInvalid,
        ErrorKind::Internal,
        ErrorKind::RegionTypeMismatch,
    ];

    /// The stable status number (as in the C ABI).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The kind for a stable status number; `None` for 0 (OK) and unassigned numbers.
    pub fn from_code(code: u32) -> Option<ErrorKind> {
        ErrorKind::ALL.get((code as usize).wrapping_sub(1)).copied()
    }

    /// The status name without prefix, e.g. `"REGION_OVERLAP"`.
    pub fn name(self) -> &'static str {
        use ErrorKind::*;
        match self {
            InvalidArgument => "INVALID_ARGUMENT",
            Truncated => "TRUNCATED",
            BadMagic => "BAD_MAGIC",
            UnsupportedVersion => "UNSUPPORTED_VERSION",
            ReservedNonzero => "RESERVED_NONZERO",
            LengthMismatch => "LENGTH_MISMATCH",
            InvalidElementType => "INVALID_ELEMENT_TYPE",
            RankTooLarge => "RANK_TOO_LARGE",
            Overflow => "OVERFLOW",
            UnknownLayout => "UNKNOWN_LAYOUT",
            LayoutConstraint => "LAYOUT_CONSTRAINT",
            BufferCountMismatch => "BUFFER_COUNT_MISMATCH",
            EmptyBufferTable => "EMPTY_BUFFER_TABLE",
            BufferSizeMismatch => "BUFFER_SIZE_MISMATCH",
            BufferTooSmall => "BUFFER_TOO_SMALL",
            AlignmentInvalid => "ALIGNMENT_INVALID",
            DeviceMismatch => "DEVICE_MISMATCH",
            ByteOffsetInvalid => "BYTE_OFFSET_INVALID",
            RegionOutOfBounds => "REGION_OUT_OF_BOUNDS",
            RegionOverlap => "REGION_OVERLAP",
            RegionCoverageGap => "REGION_COVERAGE_GAP",
            SubpavingTooDeep => "SUBPAVING_TOO_DEEP",
            QuantizationInvalid => "QUANTIZATION_INVALID",
            ShardInvalid => "SHARD_INVALID",
            StatisticsInvalid => "STATISTICS_INVALID",
            ExtensionTypeInvalid => "EXTENSION_TYPE_INVALID",
            IndexOutOfBounds => "INDEX_OUT_OF_BOUNDS",
            LayoutRequiresMultiBuffer => "LAYOUT_REQUIRES_MULTI_BUFFER",
            NotCanonical => "NOT_CANONICAL",
            ContentInvalid => "CONTENT_INVALID",
            BindingMismatch => "BINDING_MISMATCH",
            NotBindable => "NOT_BINDABLE",
            OutputTooSmall => "OUTPUT_TOO_SMALL",
            Io => "IO",
            NotFound => "NOT_FOUND",
            DuplicateName => "DUPLICATE_NAME",
            StreamOrder => "STREAM_ORDER",
            DeviceInvalid => "DEVICE_INVALID",
            Internal => "INTERNAL",
            RegionTypeMismatch => "REGION_TYPE_MISMATCH",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failure: its [`ErrorKind`], a human-readable detail and, where the input's bytes
/// locate it, the byte offset as a number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {detail}")]
pub struct Error {
    /// What went wrong, as a stable status.
    pub kind: ErrorKind,
    /// Where and why: field, region, byte offset.
    pub detail: String,
    /// The byte offset in the input (descriptor, file or stream) of the field found
    /// wrong, when one is known: the innermost position recorded wins.
    pub offset: Option<u64>,
}

impl Error {
    /// A new error of `kind` with `detail`.
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Error {
        Error {
            kind,
            detail: detail.into(),
            offset: None,
        }
    }

    /// Record the byte offset of the problem, unless a more precise (inner) one is
    /// already recorded.
    pub fn at(mut self, offset: impl TryInto<u64>) -> Error {
        if self.offset.is_none() {
            self.offset = offset.try_into().ok();
        }
        self
    }

    /// Make a recorded offset relative to an enclosing input in which this one starts at
    /// `base` (a descriptor inside a file or a stream).
    pub fn within(mut self, base: u64) -> Error {
        self.offset = self.offset.and_then(|o| o.checked_add(base));
        self
    }

    /// The byte offset of the problem in the input, when known.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Prefix the detail with context (e.g. `"region 12"`), keeping the kind.
    pub fn context(mut self, ctx: impl fmt::Display) -> Error {
        self.detail = format!("{ctx}: {}", self.detail);
        self
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::new(ErrorKind::Io, e.to_string())
    }
}

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_round_trip() {
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(k.code() as usize, i + 1);
            assert_eq!(ErrorKind::from_code(k.code()), Some(*k));
        }
        assert_eq!(ErrorKind::RegionOverlap.code(), 20);
        assert_eq!(ErrorKind::Internal.code(), 39);
        assert_eq!(ErrorKind::from_code(0), None);
        assert_eq!(ErrorKind::RegionTypeMismatch.code(), 40);
        assert_eq!(ErrorKind::from_code(41), None);
        assert_eq!(ErrorKind::RegionOverlap.name(), "REGION_OVERLAP");
    }
}
