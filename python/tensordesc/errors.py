"""The exceptions of tensordesc: one class per status of the library (the same names as
the C ABI's ``TDESC_ERR_*`` statuses and the command-line tool's messages), all subclasses
of :class:`Error`.

Every exception carries

- ``status``: the status name, e.g. ``"REGION_OVERLAP"``;
- ``code``: its stable number, e.g. ``20``;
- ``detail``: which field, region and byte offset, in words;
- ``offset``: the byte offset of the problem in the input (descriptor, file or stream) when
  the input's bytes locate it, else ``None``.

Three also derive from the matching built-in exception, so that ordinary Python code
catches them: ``InvalidArgument`` is a ``ValueError``, ``IndexOutOfBounds`` an
``IndexError`` and ``NotFound`` a ``KeyError``.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every error the library reports."""

    status: str = ""
    code: int = 0

    def __init__(self, detail: str = "", offset: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.offset = offset

    def __str__(self) -> str:
        at = "" if self.offset is None else f" (byte offset {self.offset})"
        return f"{self.status}: {self.detail}{at}"

    def __reduce__(self) -> tuple[type[Error], tuple[str, int | None]]:
        return (type(self), (self.detail, self.offset))


class InvalidArgument(Error, ValueError):
    """A caller-supplied argument is invalid (null pointer, wrong rank, bad enum value)."""

    status = "INVALID_ARGUMENT"
    code = 1


class Truncated(Error):
    """The input ends before the structure it announces."""

    status = "TRUNCATED"
    code = 2


class BadMagic(Error):
    """The descriptor (or file / stream) does not start with the expected magic."""

    status = "BAD_MAGIC"
    code = 3


class UnsupportedVersion(Error):
    """The major version is not 1, or (strict) the minor version is newer than the
    reader's: above 1 for a descriptor (format 1.1), above 0 for a file or stream."""

    status = "UNSUPPORTED_VERSION"
    code = 4


class ReservedNonzero(Error):
    """A reserved bit or byte is not zero."""

    status = "RESERVED_NONZERO"
    code = 5


class LengthMismatch(Error):
    """A declared length disagrees with what its fields consume."""

    status = "LENGTH_MISMATCH"
    code = 6


class InvalidElementType(Error):
    """An element type code is not assigned."""

    status = "INVALID_ELEMENT_TYPE"
    code = 7


class RankTooLarge(Error):
    """The rank exceeds 64."""

    status = "RANK_TOO_LARGE"
    code = 8


class Overflow(Error):
    """Arithmetic on wire values overflowed."""

    status = "OVERFLOW"
    code = 9


class UnknownLayout(Error):
    """The layout tag is 0x00, 0xFF or (strict) unassigned."""

    status = "UNKNOWN_LAYOUT"
    code = 10


class LayoutConstraint(Error):
    """A layout rule is violated (rank, permutation, zero tile/block size, ...)."""

    status = "LAYOUT_CONSTRAINT"
    code = 11


class BufferCountMismatch(Error):
    """The buffer table holds a different number of handles than the layout requires."""

    status = "BUFFER_COUNT_MISMATCH"
    code = 12


class EmptyBufferTable(Error):
    """The buffer table is empty where at least one buffer is required."""

    status = "EMPTY_BUFFER_TABLE"
    code = 13


class BufferSizeMismatch(Error):
    """A buffer's size is not the exact size its role requires."""

    status = "BUFFER_SIZE_MISMATCH"
    code = 14


class BufferTooSmall(Error):
    """A dense data buffer is smaller than the elements it must hold."""

    status = "BUFFER_TOO_SMALL"
    code = 15


class AlignmentInvalid(Error):
    """An alignment is out of range or a pointer is not aligned as its handle says."""

    status = "ALIGNMENT_INVALID"
    code = 16


class DeviceMismatch(Error):
    """Buffers of one tensor do not share device type, id and memory class."""

    status = "DEVICE_MISMATCH"
    code = 17


class ByteOffsetInvalid(Error):
    """A byte_offset breaks its layout's rule."""

    status = "BYTE_OFFSET_INVALID"
    code = 18


class RegionOutOfBounds(Error):
    """A subpaving region reaches outside its enclosing extent."""

    status = "REGION_OUT_OF_BOUNDS"
    code = 19


class RegionOverlap(Error):
    """Two subpaving regions overlap."""

    status = "REGION_OVERLAP"
    code = 20


class RegionCoverageGap(Error):
    """Subpaving regions leave part of the enclosing extent uncovered."""

    status = "REGION_COVERAGE_GAP"
    code = 21


class SubpavingTooDeep(Error):
    """Subpaving nesting exceeds 8 levels."""

    status = "SUBPAVING_TOO_DEEP"
    code = 22


class QuantizationInvalid(Error):
    """The quantization section is malformed or inconsistent."""

    status = "QUANTIZATION_INVALID"
    code = 23


class ShardInvalid(Error):
    """The shard section is inconsistent."""

    status = "SHARD_INVALID"
    code = 24


class StatisticsInvalid(Error):
    """The statistics section is inconsistent."""

    status = "STATISTICS_INVALID"
    code = 25


class ExtensionTypeInvalid(Error):
    """The extension_type section is malformed."""

    status = "EXTENSION_TYPE_INVALID"
    code = 26


class IndexOutOfBounds(Error, IndexError):
    """An element index is outside the tensor's shape."""

    status = "INDEX_OUT_OF_BOUNDS"
    code = 27


class LayoutRequiresMultiBuffer(Error):
    """The layout cannot address an element by arithmetic alone."""

    status = "LAYOUT_REQUIRES_MULTI_BUFFER"
    code = 28


class NotCanonical(Error):
    """A lookup is ambiguous because the sparse data is not canonical (duplicates)."""

    status = "NOT_CANONICAL"
    code = 29


class ContentInvalid(Error):
    """Buffer contents are malformed."""

    status = "CONTENT_INVALID"
    code = 30


class BindingMismatch(Error):
    """Bound buffers do not match the descriptor (count, null, size, alias)."""

    status = "BINDING_MISMATCH"
    code = 31


class NotBindable(Error):
    """The tensor (or region) cannot be bound or read as asked."""

    status = "NOT_BINDABLE"
    code = 32


class OutputTooSmall(Error):
    """The caller's output buffer is too small."""

    status = "OUTPUT_TOO_SMALL"
    code = 33


class Io(Error):
    """An operating-system I/O operation failed."""

    status = "IO"
    code = 34


class NotFound(Error, KeyError):
    """A named item does not exist."""

    status = "NOT_FOUND"
    code = 35


class DuplicateName(Error):
    """A name appears twice where names must be unique."""

    status = "DUPLICATE_NAME"
    code = 36


class StreamOrder(Error):
    """Stream frames arrive out of order, with gaps or overruns."""

    status = "STREAM_ORDER"
    code = 37


class DeviceInvalid(Error):
    """A device type or memory class value is not assigned."""

    status = "DEVICE_INVALID"
    code = 38


class Internal(Error):
    """An internal error (a bug); never caused by input alone."""

    status = "INTERNAL"
    code = 39


class RegionTypeMismatch(Error):
    """A region's stored element type does not yield the tensor's value type (format 1.1):
    it neither carries quantization expressed in it nor converts into it exactly."""

    status = "REGION_TYPE_MISMATCH"
    code = 40


#: Every status class, in status-number order.
STATUS_CLASSES: tuple[type[Error], ...] = (
    InvalidArgument,
    Truncated,
    BadMagic,
    UnsupportedVersion,
    ReservedNonzero,
    LengthMismatch,
    InvalidElementType,
    RankTooLarge,
    Overflow,
    UnknownLayout,
    LayoutConstraint,
    BufferCountMismatch,
    EmptyBufferTable,
    BufferSizeMismatch,
    BufferTooSmall,
    AlignmentInvalid,
    DeviceMismatch,
    ByteOffsetInvalid,
    RegionOutOfBounds,
    RegionOverlap,
    RegionCoverageGap,
    SubpavingTooDeep,
    QuantizationInvalid,
    ShardInvalid,
    StatisticsInvalid,
    ExtensionTypeInvalid,
    IndexOutOfBounds,
    LayoutRequiresMultiBuffer,
    NotCanonical,
    ContentInvalid,
    BindingMismatch,
    NotBindable,
    OutputTooSmall,
    Io,
    NotFound,
    DuplicateName,
    StreamOrder,
    DeviceInvalid,
    Internal,
    RegionTypeMismatch,
)

#: Status number -> class.
BY_CODE: dict[int, type[Error]] = {c.code: c for c in STATUS_CLASSES}

# Written out (not derived from STATUS_CLASSES) so that type checkers see the exports;
# tests/test_typing.py checks it against STATUS_CLASSES.
__all__ = [
    "Error",
    "STATUS_CLASSES",
    "BY_CODE",
    "InvalidArgument",
    "Truncated",
    "BadMagic",
    "UnsupportedVersion",
    "ReservedNonzero",
    "LengthMismatch",
    "InvalidElementType",
    "RankTooLarge",
    "Overflow",
    "UnknownLayout",
    "LayoutConstraint",
    "BufferCountMismatch",
    "EmptyBufferTable",
    "BufferSizeMismatch",
    "BufferTooSmall",
    "AlignmentInvalid",
    "DeviceMismatch",
    "ByteOffsetInvalid",
    "RegionOutOfBounds",
    "RegionOverlap",
    "RegionCoverageGap",
    "SubpavingTooDeep",
    "QuantizationInvalid",
    "ShardInvalid",
    "StatisticsInvalid",
    "ExtensionTypeInvalid",
    "IndexOutOfBounds",
    "LayoutRequiresMultiBuffer",
    "NotCanonical",
    "ContentInvalid",
    "BindingMismatch",
    "NotBindable",
    "OutputTooSmall",
    "Io",
    "NotFound",
    "DuplicateName",
    "StreamOrder",
    "DeviceInvalid",
    "Internal",
    "RegionTypeMismatch",
]
