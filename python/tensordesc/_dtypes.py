"""Element types of the format and numpy dtypes.

The format's 21 element types map to numpy dtypes; BFLOAT16, the FLOAT8 types and the
4-bit types have numpy dtypes only through the ``ml_dtypes`` package. Without it, asking
for those dtypes raises ``TypeError`` naming the package (descriptors, shapes, layouts,
``get`` and DLPack exports work without it).

4-bit types are stored packed, two elements per byte (low nibble first); numpy (and
ml_dtypes) hold one element per byte, so numpy arrays of 4-bit types are unpacked copies,
and writing them packs a copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._native import _element_types

if TYPE_CHECKING:
    from collections.abc import Iterable
    from types import ModuleType
    from typing import Any, SupportsIndex

    from numpy.typing import ArrayLike, DTypeLike, NDArray

ml_dtypes: ModuleType | None
try:  # optional: BFLOAT16, FLOAT8_*, INT4, UINT4, FLOAT4_E2M1FN
    import ml_dtypes
except ImportError:  # pragma: no cover - exercised only where ml_dtypes is absent
    ml_dtypes = None

#: Element type code -> name in the format (the library's own table).
NAMES: dict[int, str] = dict(_element_types())
CODES = {v: k for k, v in NAMES.items()}

_NUMPY: dict[int, np.dtype[Any]] = {
    0x01: np.dtype(np.bool_),
    0x02: np.dtype("<i1"),
    0x03: np.dtype("<u1"),
    0x04: np.dtype("<i2"),
    0x05: np.dtype("<u2"),
    0x06: np.dtype("<i4"),
    0x07: np.dtype("<u4"),
    0x08: np.dtype("<i8"),
    0x09: np.dtype("<u8"),
    0x0A: np.dtype("<f2"),
    0x0C: np.dtype("<f4"),
    0x0D: np.dtype("<f8"),
    0x0E: np.dtype("<c8"),
    0x0F: np.dtype("<c16"),
}
_ML_DTYPES = {
    0x0B: "bfloat16",
    0x10: "float8_e4m3fn",
    0x11: "float8_e5m2",
    0x12: "float8_e8m0fnu",
    0x13: "int4",
    0x14: "uint4",
    0x15: "float4_e2m1fn",
}
PACKED = {0x13, 0x14, 0x15}
if ml_dtypes is not None:
    for _code, _name in _ML_DTYPES.items():
        _NUMPY[_code] = np.dtype(getattr(ml_dtypes, _name))


def numpy_dtype(code: int) -> np.dtype[Any]:
    """The numpy dtype of element type ``code``."""
    try:
        return _NUMPY[code]
    except KeyError:
        pass
    if code in _ML_DTYPES:
        raise TypeError(
            f"{NAMES[code]} elements have a numpy dtype only through the ml_dtypes package "
            "(pip install ml_dtypes)"
        )
    raise ValueError(f"element type code {code} is not assigned")


#: The CLI's short spellings of the float types (``--dtype f32``), accepted here too.
_SHORT = {"f16": "FLOAT16", "bf16": "BFLOAT16", "f32": "FLOAT32", "f64": "FLOAT64"}


def element_type(dtype: DTypeLike) -> int:
    """The element type code of a numpy dtype (or anything ``numpy.dtype`` accepts, or an
    element type name such as ``"bfloat16"`` / ``"FLOAT8_E4M3FN"``)."""
    if isinstance(dtype, str) and dtype.upper() in CODES:
        return CODES[dtype.upper()]
    if isinstance(dtype, str) and dtype.lower() in _SHORT:
        return CODES[_SHORT[dtype.lower()]]
    if isinstance(dtype, str) and dtype in _ML_DTYPES.values() and ml_dtypes is None:
        raise TypeError(f"{dtype} needs the ml_dtypes package (pip install ml_dtypes)")
    dt = np.dtype(dtype)
    if dt.byteorder == ">":
        raise TypeError(f"{dt}: big-endian data; convert with .astype('{dt.newbyteorder('<').str}')")
    for code, known in _NUMPY.items():
        if dt == known:
            return code
    raise TypeError(f"numpy dtype {dt} has no element type in this format")


def name(code: int) -> str:
    return NAMES[code]


def arrange_unpacked(
    codes: ArrayLike,
    code: int,
    shape: Iterable[SupportsIndex],
    order: Iterable[int] | None,
    splat: bool,
) -> NDArray[Any]:
    """Unpacked 4-bit codes (one per byte, storage order) as an array of ``shape`` with the
    ml_dtypes type: storage is compact in axis ``order`` (outermost first); a splat's one
    code fills the shape (a read-only broadcast view)."""
    a = np.asarray(codes, dtype=np.uint8).view(numpy_dtype(code))
    extents = tuple(int(e) for e in shape)
    if splat:
        return np.broadcast_to(a[:1].reshape(()), extents)
    if order is None:
        raise TypeError("only a splat's codes are arranged without an axis order")
    axes = list(order)
    stored = a.reshape(tuple(extents[k] for k in axes))
    return np.transpose(stored, np.argsort(axes))


def pack4(array: ArrayLike) -> NDArray[np.uint8]:
    """Elements of a 4-bit ml_dtypes array in C order, packed two per byte (low nibble
    first): a new uint8 array of ceil(n / 2) bytes."""
    codes = np.ascontiguousarray(array).reshape(-1).view(np.uint8) & 0x0F
    if codes.size % 2:
        codes = np.concatenate([codes, np.zeros(1, np.uint8)])
    return (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8)

