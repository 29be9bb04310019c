"""tensordesc: compact binary tensor descriptors — dense, sparse (COO, CSR, CSC, CSF),
block-paged, ggml's quantized blocks and subpavings of regions with their own layouts and
quantization — with numpy, scipy, DLPack and Dask.

Reading::

    f = tensordesc.open("model.tdf")        # the file is mapped, read-only
    t = f["weights"]
    t.shape, t.dtype, t.layout, t.regions
    a = t.region(0).numpy()                  # zero-copy view of a dense region
    m = t.region(4).to_scipy()               # scipy.sparse over the CSR buffers
    w = t[0:128, 64:96]                      # a window of any layout (values), a new array
    c = t.read(t.region(2).box, dtype="raw") # a box, stored codes

Dask (``import tensordesc.dask``)::

    x = tensordesc.dask.from_tdf("model.tdf", "weights")   # chunks follow the regions

Writing::

    tensordesc.write("out.tdf", {"w": numpy_array, "m": scipy_csr, "q": tensor})
    tensordesc.convert("model.safetensors", "model.tdf")     # what `tensordesc convert` does

The command line comes with the package: ``tensordesc --help`` (or ``python -m
tensordesc --help``).

The API reference is docs/python.md in the repository.
"""

from __future__ import annotations

import collections.abc as _abc
import operator as _operator
import os as _os
from dataclasses import dataclass as _dataclass
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any
from typing import Literal as _Literal
from typing import SupportsIndex as _SupportsIndex
from typing import cast as _cast
from typing import overload as _overload

import numpy as _np
from numpy.typing import ArrayLike as _ArrayLike
from numpy.typing import DTypeLike as _DTypeLike
from numpy.typing import NDArray as _NDArray

from . import errors
from ._dtypes import CODES as _CODES
from ._dtypes import PACKED as _PACKED
from ._dtypes import element_type as _element_type
from ._dtypes import numpy_dtype as _numpy_dtype
from ._dtypes import pack4 as _pack4
from ._native import File, Region, Tensor
from . import _native
from . import _sparse
from .errors import *  # noqa: F401,F403  (the status classes)
from .errors import Error

if _TYPE_CHECKING:
    from collections.abc import Iterable as _Iterable

    from scipy.sparse import sparray as _sparray
    from scipy.sparse import spmatrix as _spmatrix
    from typing_extensions import Buffer as _Buffer
    from typing_extensions import TypeAlias as _TypeAlias

    from ._native import _DLPackProducer, _DLPackSource, _Path, _QuantSpec, _Writable

#: The package version: the library's (one version for the crate, the C library and this package).
__version__: str = _native.__version__

_abc.Mapping.register(File)

#: The format's element type names.
ELEMENT_TYPES = tuple(_CODES)

#: The ggml block types GGML_BLOCKS reads: ggml's name (``"Q4_K"``) to its type number.
GGML_TYPES: dict[str, int] = {name: number for name, number, _, _ in _native._ggml_types()}


# ---------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------


def open(path: _Path, *, strict: bool = True, group: bool = True) -> File:  # noqa: A001
    """Map the file at ``path``: a read-only mapping of names to tensors.

    The container is told from the first bytes: a ``.tdf`` file, or a safetensors file
    whose tensors are described where they lie (nothing is copied; ``File.container``
    says which, ``File.metadata`` holds its metadata map). Anything else raises
    ``tensordesc.BadMagic``.

    The file stays mapped while the ``File``, any of its tensors, or any array or DLPack
    export viewing them is alive. The file must not be modified or truncated meanwhile
    (``write`` replaces files atomically, so rewriting a mapped file with it is safe).
    A quantized checkpoint's pieces (NVFP4 codes, scales and global scale; FP8 weights and
    their block scales; MXFP4 blocks and scales) are grouped into one tensor each whose
    buffers are the checkpoint's own bytes; ``group=False`` lists the file's own tensors,
    and ``File.grouping_notes`` says why pieces that look like a convention were left as
    they are.
    ``strict=False`` reads permissively: tensors the library cannot interpret are kept as
    opaque entries whose properties raise the reason.
    """
    return _native._open(_os.path.abspath(_os.fspath(path)), strict, group)


def _bytes_of(data: _Buffer, what: str) -> bytes:
    """The bytes of a bytes-like object (anything with the buffer protocol: bytes,
    bytearray, memoryview, numpy arrays, array.array); anything else is a TypeError —
    ``bytes(12)`` would be twelve zero bytes, ``bytes([1, 2])`` a conversion."""
    if isinstance(data, bytes):
        return data
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(
            f"{what} must be a bytes-like object (bytes, bytearray, memoryview, ...), "
            f"not {type(data).__name__}"
        ) from None
    with view:
        return view.tobytes()


def decode(data: _Buffer, *, strict: bool = True) -> Tensor:
    """A descriptor decoded from its bytes (a bytes-like object): a tensor without
    buffers (shape, dtype, layout, regions, buffers' sizes, ``locate``), not readable."""
    return _native._decode(_bytes_of(data, "decode's data"), strict)


def read_stream(source: _Path | _Buffer, *, strict: bool = True) -> dict[str, Tensor]:
    """The tensors of a frame stream (a path, or the stream's bytes as a bytes-like
    object), in stream order."""
    if isinstance(source, _os.PathLike):
        source = _os.fspath(source)
    if not isinstance(source, (bytes, str)):
        source = _bytes_of(source, "read_stream's source (a path or the stream's bytes)")
    return dict(_native._read_stream(source, strict))


# ---------------------------------------------------------------------------------------
# Quantization
# ---------------------------------------------------------------------------------------


def _float_code(dtype: _DTypeLike, what: str) -> int:
    code = _element_type(dtype)
    if code not in (_CODES["FLOAT16"], _CODES["BFLOAT16"], _CODES["FLOAT32"], _CODES["FLOAT64"]):
        raise TypeError(f"{what} must be float16, bfloat16, float32 or float64, not {_np.dtype(dtype)}")
    return code


def _param_array(a: _ArrayLike, element_code: int | None = None) -> _NDArray[_Any]:
    a = _np.asarray(a)
    if element_code is not None and element_code in _PACKED:
        return _pack4(a.astype(_numpy_dtype(element_code)))
    if element_code is not None:
        a = a.astype(_numpy_dtype(element_code), copy=False)
    return _np.ascontiguousarray(a)


@_dataclass(frozen=True)
class PerTensorAffine:
    """``value = (code - zero_point) * scale``, rounded to ``expressed``."""

    scale: float
    zero_point: int = 0
    expressed: _DTypeLike = "float32"

    def _native(self, element_code: int) -> _QuantSpec:
        return {
            "scheme": "PER_TENSOR_AFFINE",
            "scale": float(self.scale),
            "zero_point": int(self.zero_point),
            "has_zero_point": int(self.zero_point) != 0,
            "expressed": _float_code(self.expressed, "expressed"),
        }


def _affine(
    scheme: str,
    fields: dict[str, _Any],
    element_code: int,
    scales: _ArrayLike,
    scale_type: _DTypeLike | None,
    zero_points: _ArrayLike | None,
    global_scale: _ArrayLike | float | None,
    global_divides: bool,
    expressed: _DTypeLike,
) -> _QuantSpec:
    """The native form of the affine schemes with scales (the fields every one shares)."""
    s = _param_array(scales, None if scale_type is None else _element_type(scale_type))
    g = None
    if global_scale is not None:
        g = _np.ascontiguousarray(_np.asarray(global_scale, dtype=_np.float32).reshape(-1))
        if g.size != 1:
            raise ValueError(f"global_scale must be one value, not {g.size}")
    elif global_divides:
        raise ValueError("global_divides=True needs a global_scale")
    spec: _QuantSpec = {
        "scheme": scheme,  # type: ignore[typeddict-item]
        "scale_type": _element_type(s.dtype),
        "scales": s,
        "zero_points": None if zero_points is None else _param_array(zero_points, element_code),
        "global_scale": g,
        "global_divides": bool(global_divides),
        "expressed": _float_code(expressed, "expressed"),
    }
    spec.update(fields)  # type: ignore[typeddict-item]
    return spec


@_dataclass(frozen=True)
class PerAxisAffine:
    """One scale (and zero point) per index along ``axis``: ``scales`` is a 1-D array of
    float16/bfloat16/float32/float64, float8_e8m0fnu or float8_e4m3fn (``scale_type``
    converts it); ``zero_points`` (optional) is of the element type. ``global_scale``
    (format 1.1): one more float32 factor ``g``, ``value = (code - zp) * s * g`` (``/ g``
    with ``global_divides=True``)."""

    axis: int
    scales: _ArrayLike
    zero_points: _ArrayLike | None = None
    expressed: _DTypeLike = "float32"
    scale_type: _DTypeLike | None = None
    global_scale: _ArrayLike | float | None = None
    global_divides: bool = False

    def _native(self, element_code: int) -> _QuantSpec:
        return _affine(
            "PER_AXIS_AFFINE",
            {"axis": int(self.axis)},
            element_code,
            self.scales,
            self.scale_type,
            self.zero_points,
            self.global_scale,
            self.global_divides,
            self.expressed,
        )


@_dataclass(frozen=True)
class Blockwise:
    """One scale (and zero point) per block of ``block_size`` elements along ``axis``
    (GGUF Q8_0/Q4_0, MX and NVFP4 style): ``scales`` holds the block-reduced shape's
    entries in row-major order (the shape with ``ceil(shape[axis] / block_size)`` on
    ``axis``). ``scale_type`` converts the scales (e.g. ``"float8_e4m3fn"``);
    ``global_scale`` and ``global_divides`` as for :class:`PerAxisAffine` (NVFP4: E2M1
    codes, float8_e4m3fn scales per 16, one float32 global scale)."""

    axis: int
    block_size: int
    scales: _ArrayLike
    zero_points: _ArrayLike | None = None
    expressed: _DTypeLike = "float32"
    scale_type: _DTypeLike | None = None
    global_scale: _ArrayLike | float | None = None
    global_divides: bool = False

    def _native(self, element_code: int) -> _QuantSpec:
        return _affine(
            "BLOCKWISE",
            {"axis": int(self.axis), "block_size": int(self.block_size)},
            element_code,
            self.scales,
            self.scale_type,
            self.zero_points,
            self.global_scale,
            self.global_divides,
            self.expressed,
        )


@_dataclass(frozen=True)
class Blockwise2D:
    """One scale (and zero point) per ``block[0]`` × ``block[1]`` block over ``axes``
    (format 1.1; DeepSeek-V3 style FP8 weights with 128×128 ``weight_scale_inv``):
    ``scales`` holds the reduced shape's entries in row-major order (the shape with
    ``ceil(shape[a] / block[i])`` on ``axes[i]``). ``axes[0] < axes[1]``. Other fields as
    for :class:`Blockwise`."""

    axes: tuple[int, int]
    block: tuple[int, int]
    scales: _ArrayLike
    zero_points: _ArrayLike | None = None
    expressed: _DTypeLike = "float32"
    scale_type: _DTypeLike | None = None
    global_scale: _ArrayLike | float | None = None
    global_divides: bool = False

    def _native(self, element_code: int) -> _QuantSpec:
        axes = tuple(int(a) for a in self.axes)
        block = tuple(int(b) for b in self.block)
        if len(axes) != 2 or len(block) != 2:
            raise ValueError(f"Blockwise2D takes two axes and two block lengths, not {axes} and {block}")
        return _affine(
            "BLOCKWISE_2D",
            {"axes": axes, "block": block},
            element_code,
            self.scales,
            self.scale_type,
            self.zero_points,
            self.global_scale,
            self.global_divides,
            self.expressed,
        )


@_dataclass(frozen=True)
class Codebook:
    """``value = codebook[code]``: elements (unsigned integers) index ``codebook``, whose
    dtype (float16/bfloat16/float32/float64) is the expressed type."""

    codebook: _ArrayLike

    def _native(self, element_code: int) -> _QuantSpec:
        cb = _param_array(self.codebook)
        return {
            "scheme": "CODEBOOK",
            "codebook": cb,
            "expressed": _float_code(cb.dtype, "the codebook's dtype"),
        }


if _TYPE_CHECKING:
    #: The quantization schemes ``quantization=`` takes.
    _Quantization: _TypeAlias = PerTensorAffine | PerAxisAffine | Blockwise | Blockwise2D | Codebook
    #: What ``as_tensor`` takes.
    _TensorLike: _TypeAlias = Tensor | _sparray | _spmatrix | _DLPackProducer | _ArrayLike
    #: What ``write``, ``to_bytes`` and ``write_stream`` take.
    _Tensors: _TypeAlias = (
        _abc.Mapping[str, _TensorLike] | File | _Iterable[tuple[str, _TensorLike]]
    )


def _quant(q: _Quantization | None, element_code: int) -> _QuantSpec | None:
    if q is None:
        return None
    if not hasattr(q, "_native"):
        raise TypeError(
            "quantization must be PerTensorAffine, PerAxisAffine, Blockwise, Blockwise2D or Codebook"
        )
    return q._native(element_code)


# ---------------------------------------------------------------------------------------
# Building tensors
# ---------------------------------------------------------------------------------------


def dense(
    array: _ArrayLike, *, quantization: _Quantization | None = None, alignment: int = 64
) -> Tensor:
    """A dense tensor over ``array``'s memory (no copy): ROW_MAJOR for C-contiguous
    arrays, COL_MAJOR for Fortran-contiguous ones, STRIDED otherwise (negative and zero
    strides included). Anything ``numpy.asarray`` accepts works; arrays whose strides are
    not whole elements are copied first, and so are big-endian arrays (converted) and
    4-bit ml_dtypes arrays (packed two per byte). With ``quantization`` the array holds
    the stored codes. ``alignment`` (bytes, a power of two from 1 to 2**30) is what the
    buffer handles promise; below 64 the descriptor is format 1.1, and a buffer aligned
    to it is read where it lies (else an aligned copy is made on first read)."""
    a = _np.asarray(array)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    code = _element_type(a.dtype)
    q = _quant(quantization, code)
    if code in _PACKED:
        return _native._leaf(code, list(a.shape), "ROW_MAJOR", {}, [_pack4(a)], q, alignment)
    if any(s % a.itemsize for s in a.strides):
        a = _np.ascontiguousarray(a)
    return _native._from_array(a, code, q, alignment)


def splat(
    value: _ArrayLike,
    shape: _Iterable[_SupportsIndex],
    dtype: _DTypeLike | None = None,
    *,
    quantization: _Quantization | None = None,
    alignment: int = 64,
) -> Tensor:
    """A tensor of ``shape`` whose every element is ``value`` (one stored element);
    ``alignment`` as for ``dense``."""
    v = _np.asarray(value, dtype=dtype)
    code = _element_type(v.dtype)
    buf = _pack4(v.reshape(1)) if code in _PACKED else _np.ascontiguousarray(v.reshape(1))
    return _native._leaf(
        code, [int(e) for e in shape], "SPLAT", {}, [buf], _quant(quantization, code), alignment
    )


def tiled(
    array: _ArrayLike,
    tile_shape: _Iterable[_SupportsIndex],
    *,
    quantization: _Quantization | None = None,
    alignment: int = 64,
) -> Tensor:
    """A TILED tensor: ``array`` cut into tiles of ``tile_shape`` (edge tiles padded with
    zeros), tiles in row-major grid order, elements row-major inside each tile. The tiles
    are a new array (a copy). ``alignment`` as for ``dense``."""
    a = _np.asarray(array)
    code = _element_type(a.dtype)
    t = tuple(int(x) for x in tile_shape)
    if len(t) != a.ndim:
        raise errors.InvalidArgument(f"tile_shape {t} does not fit an array of rank {a.ndim}")
    for k, x in enumerate(t):
        if not 1 <= x <= _U64_MAX:
            raise errors.InvalidArgument(
                f"tile_shape[{k}] must be an integer from 1 to 2**64 - 1, not {x}"
            )
    grid = tuple(-(-e // x) for e, x in zip(a.shape, t))
    padded = _np.zeros(tuple(g * x for g, x in zip(grid, t)), dtype=a.dtype)
    padded[tuple(slice(0, e) for e in a.shape)] = a
    inter = padded.reshape(tuple(v for g, x in zip(grid, t) for v in (g, x)))
    r = a.ndim
    tiles = _np.ascontiguousarray(inter.transpose(tuple(range(0, 2 * r, 2)) + tuple(range(1, 2 * r, 2))))
    buf = _pack4(tiles) if code in _PACKED else tiles
    return _native._leaf(
        code, list(a.shape), "TILED", {"tile_shape": list(t)}, [buf], _quant(quantization, code), alignment
    )


def _values(data: _ArrayLike, dtype: _DTypeLike | None = None) -> tuple[int, _NDArray[_Any]]:
    v = _np.asarray(data)
    if dtype is not None:
        v = v.astype(_numpy_dtype(_element_type(dtype)), copy=False)
    code = _element_type(v.dtype)
    if code in _PACKED:
        return code, _pack4(v)
    return code, _np.ascontiguousarray(v)


def from_scipy(
    m: _sparray | _spmatrix,
    *,
    quantization: _Quantization | None = None,
    alignment: int = 64,
    dtype: _DTypeLike | None = None,
) -> Tensor:
    """A COO, CSR or CSC tensor over a scipy.sparse array or matrix (other formats are
    converted to CSR first). Values are used in place; see tensordesc._sparse for when
    index arrays are copied. SORTED and UNIQUE are set when they hold. ``alignment`` as
    for ``dense``. ``dtype`` stores the values as that type (a converted copy), e.g.
    float16, which scipy.sparse itself cannot hold."""
    import scipy.sparse as sp

    if not sp.issparse(m):
        raise TypeError(f"{type(m).__name__} is not a scipy.sparse array or matrix")
    fmt = m.format
    if fmt not in ("csr", "csc", "coo"):
        m = m.tocsr()
        fmt = "csr"
    shape = [int(e) for e in m.shape]
    if fmt in ("csr", "csc"):
        nnz = int(m.indptr[-1]) if len(m.indptr) else 0
        code, values = _values(m.data[:nnz], dtype)
        flags = 0
        if m.has_sorted_indices:
            flags |= _sparse.SORTED
            if m.has_canonical_format:
                flags |= _sparse.UNIQUE
        bufs = [_sparse.u64_indices(m.indptr), _sparse.u64_indices(m.indices[:nnz]), values]
        layout: _Literal["CSR", "CSC"] = "CSR" if fmt == "csr" else "CSC"
        return _native._leaf(
            code, shape, layout, {"nnz": nnz, "flags": flags}, bufs, _quant(quantization, code), alignment
        )
    coords = tuple(_np.asarray(c) for c in m.coords)
    nnz = int(m.nnz)
    code, values = _values(m.data, dtype)
    flags = _sparse.coo_flags(coords, tuple(shape))
    idx = _np.stack([_sparse.u64_indices(c) for c in coords], axis=1) if coords else _np.zeros((nnz, 0), _np.uint64)
    idx = _np.ascontiguousarray(idx, dtype=_np.uint64)
    return _native._leaf(
        code, shape, "COO", {"nnz": nnz, "flags": flags}, [idx, values], _quant(quantization, code), alignment
    )


def block_paged(
    pools: _Iterable[_ArrayLike],
    block_table: _ArrayLike,
    row_lengths: _ArrayLike,
    shape: _Iterable[_SupportsIndex],
    block_size: int,
    *,
    quantization: _Quantization | None = None,
    alignment: int = 64,
) -> Tensor:
    """A BLOCK_PAGED tensor (paged KV cache): ``shape`` is ``[rows, positions, inner...]``;
    ``pools`` is a list of arrays of pages (each a whole number of pages of
    ``block_size * prod(inner)`` elements, one dtype); ``block_table`` is
    ``rows x ceil(positions / block_size)`` page numbers (numbered across pools in order;
    negative or 2**64-1 for an unallocated block); ``row_lengths`` the valid positions per
    row. Pools are used in place. ``alignment`` as for ``dense``."""
    arrays = [_np.asarray(p) for p in pools]
    if not arrays:
        raise ValueError("block_paged needs at least one pool")
    code = _element_type(arrays[0].dtype)
    bufs: list[_NDArray[_Any]] = []
    for p in arrays:
        if _element_type(p.dtype) != code:
            raise TypeError("every pool must have the same dtype")
        bufs.append(_pack4(p) if code in _PACKED else _np.ascontiguousarray(p))
    bt = _u64_array(block_table, "block_table", negative=_U64_MAX)
    rl = _u64_array(row_lengths, "row_lengths")
    return _native._leaf(
        code,
        [int(e) for e in shape],
        "BLOCK_PAGED",
        {"block_size": int(block_size), "pool_count": len(arrays)},
        [bt, rl] + bufs,
        _quant(quantization, code),
        alignment,
    )


def ggml_blocks(
    data: _Buffer | _ArrayLike,
    ggml_type: int | str,
    shape: _Iterable[_SupportsIndex],
    dtype: _DTypeLike = "float32",
    *,
    alignment: int = 1,
) -> Tensor:
    """A GGML_BLOCKS tensor (format 1.1): ggml's quantized blocks, used in place (no copy).

    ``data`` holds the blocks: a bytes-like object or a numpy array of them (a uint8 array,
    as ``gguf.quants.quantize`` and gguf's reader give a tensor's data; any C-contiguous
    array is taken as its bytes). ``ggml_type`` is ggml's type number or name (``8``,
    ``"Q4_K"``; ``GGML_TYPES`` lists them). ``shape`` is the tensor's in numpy order (ggml's
    ``ne`` reversed): elements are row-major, each run of a block's values along the last
    axis is one block, so the last extent is a whole number of blocks. ``dtype`` is the
    value type: ``float32`` (ggml's dequantized values), ``float16`` or ``bfloat16`` (those
    rounded once). Reading (``t[...]``, ``read``, ``get``) gives the dequantized values.
    ``alignment`` is what the buffer promises (bytes, a power of two from 1 to 2**30): blocks
    are read byte by byte, so the default 1 promises nothing and blocks inside a GGUF
    file's mapping (32-byte aligned) or any bytes object are read where they lie."""
    if isinstance(ggml_type, str):
        number = GGML_TYPES.get(ggml_type.upper())
        if number is None:
            raise errors.InvalidArgument(
                f"{ggml_type!r} is not a ggml block type this library reads "
                f"(one of {', '.join(GGML_TYPES)})"
            )
    else:
        number = _operator.index(ggml_type)
    if isinstance(data, _np.ndarray):
        a = data
    else:
        try:
            a = _np.frombuffer(memoryview(_cast("_Buffer", data)), dtype=_np.uint8)
        except (TypeError, ValueError):
            a = _np.asarray(data)
    a = _np.ascontiguousarray(a).reshape(-1).view(_np.uint8)
    code = _element_type(dtype)
    return _native._leaf(
        code, [int(e) for e in shape], "GGML_BLOCKS", {"ggml_type": number}, [a], None, alignment
    )


_U64_MAX = 2**64 - 1


def _u64_array(x: _ArrayLike, what: str, *, negative: int | None = None) -> _NDArray[_np.uint64]:
    """``x`` as a C-contiguous uint64 array. Integers outside 0 .. 2**64 - 1 are
    ``InvalidArgument`` naming ``what`` — except negative ones when ``negative`` is given,
    which become it — rather than numpy's OverflowError or a silent wrap-around."""
    a = _np.asarray(x)
    if a.dtype.kind == "O":
        vals = [int(v) for v in a.reshape(-1)]
        for v in vals:
            if v > _U64_MAX or (v < 0 and negative is None):
                raise errors.InvalidArgument(
                    f"{what} must hold integers from 0 to 2**64 - 1, not {v}"
                )
        fill = 0 if negative is None else negative  # (None: negative values raised above)
        vals = [fill if v < 0 else v for v in vals]
        a = _np.array(vals, dtype=_np.uint64).reshape(a.shape)
    elif a.dtype.kind == "i":
        neg = a < 0
        if neg.any():
            if negative is None:
                raise errors.InvalidArgument(
                    f"{what} must hold integers from 0 to 2**64 - 1, not {a[neg].flat[0]}"
                )
            a = _np.where(neg, _np.uint64(negative), a.astype(_np.uint64))
    return _np.ascontiguousarray(a, dtype=_np.uint64)


def from_dlpack(x: _DLPackSource) -> Tensor:
    """A tensor over the memory of any DLPack producer (numpy, torch, jax, cupy-on-host,
    another tensordesc tensor) or of a DLPack capsule — no copy. The producer's deleter runs
    once, when the last object using the memory is gone. Compact row-major tensors become
    ROW_MAJOR, others STRIDED with the producer's strides."""
    return _native._from_dlpack(x)


def as_tensor(x: _TensorLike) -> Tensor:
    """``x`` as a Tensor: tensors as they are, scipy.sparse via ``from_scipy``, DLPack
    producers other than numpy arrays via ``from_dlpack``, anything else via ``dense``."""
    if isinstance(x, Tensor):
        return x
    if type(x).__module__.startswith("scipy.sparse"):
        return from_scipy(x)
    if hasattr(x, "__dlpack__") and not isinstance(x, _np.ndarray):
        return from_dlpack(_cast("_DLPackProducer", x))
    return dense(_cast("_ArrayLike", x))


def subpaving(
    shape: _Iterable[_SupportsIndex],
    regions: _Iterable[tuple[_Iterable[_SupportsIndex], _TensorLike]],
    dtype: _DTypeLike | None = None,
) -> Tensor:
    """A subpaving of ``shape``: ``regions`` is a list of ``(origin, part)`` where ``part``
    is a tensor (or anything ``as_tensor`` accepts: numpy arrays, scipy matrices, ...)
    whose shape is the region's extent; regions must not overlap and must cover ``shape``.
    Each region keeps its layout, buffers and quantization; nothing is copied. Nest
    subpavings by passing one as a part. ``dtype`` (default: the first part's) is the
    tensor's value type; a part of another dtype stores its own type (format 1.1) and must
    yield values of ``dtype``: quantized with ``expressed=dtype``, or of a type that
    converts exactly (float8 or int8 parts in a float16 tensor, float16 in float32, ...);
    otherwise ``RegionTypeMismatch``."""
    parts = [(list(int(o) for o in origin), as_tensor(p)) for origin, p in regions]
    if not parts:
        raise ValueError("a subpaving needs at least one region")
    code = _element_type(dtype) if dtype is not None else _CODES[parts[0][1].element_type]
    return _native._subpaving(code, [int(e) for e in shape], parts)


# ---------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------


def _items(tensors: _Tensors) -> list[tuple[str, Tensor]]:
    # File is registered as a Mapping: naming it as well tells type checkers so.
    pairs: _Iterable[tuple[str, _TensorLike]]
    if isinstance(tensors, (_abc.Mapping, File)):
        pairs = tensors.items()
    else:
        pairs = tensors
    items = []
    for name, value in pairs:
        if not isinstance(name, str):
            raise TypeError(f"tensor names are str, not {type(name).__name__} ({name!r})")
        items.append((name, as_tensor(value)))
    return items


def write(
    path: _Path,
    tensors: _Tensors,
    *,
    alignment: int = 64,
    metadata: _abc.Mapping[str, _native.MetaValue] | None = None,
) -> None:
    """Write ``tensors`` (a mapping, or (name, value) pairs; values as ``as_tensor``
    takes them) to a ``.tdf`` file. Buffers are written from where they are (numpy
    arrays, file mappings) without an intermediate copy. The file is written under a
    temporary name and renamed into place, so readers that have the old file mapped are
    not disturbed; a path that is a device or a FIFO is written in place instead (see
    docs/python.md, *Writing*). ``alignment``: the data buffer alignment (a power of two,
    64 .. 1 MiB). ``metadata``: the file's metadata map (``File.metadata`` when read
    back): ``str`` keys, values ``bool``, ``int``, ``float``, ``str`` or lists of them
    nested at most 8 deep."""
    _native._write(_os.fspath(path), _items(tensors), int(alignment), metadata)


def to_bytes(
    tensors: _Tensors, *, alignment: int = 64, metadata: _abc.Mapping[str, _native.MetaValue] | None = None
) -> bytes:
    """The bytes of a ``.tdf`` file holding ``tensors`` (and ``metadata``, as ``write``
    takes it)."""
    return _native._encode_file(_items(tensors), int(alignment), metadata)


@_overload
def write_stream(target: None, tensors: _Tensors) -> bytes: ...
@_overload
def write_stream(target: _Path | _Writable, tensors: _Tensors) -> None: ...
def write_stream(target: _Path | _Writable | None, tensors: _Tensors) -> bytes | None:
    """Write ``tensors`` as a frame stream to ``target``: a path (a regular file is
    replaced atomically, a device or FIFO written in place), a binary file object
    (anything with ``write``: a socket file, a pipe), or ``None`` to get the stream's
    bytes. A file object's ``write()`` must return the count it wrote; ``None`` means it
    would block and raises ``BlockingIOError`` (docs/python.md, *What a file object's
    write() may return*)."""
    if isinstance(target, _os.PathLike):
        target = _os.fspath(target)
    return _native._write_stream(target, _items(tensors))


def convert(
    src: _Path,
    dst: _Path,
    *,
    raw: bool = False,
    alignment: int | None = None,
    permissive: bool = False,
) -> None:
    """Convert the file at ``src`` into the ``.tdf`` file ``dst``, as the command
    ``tensordesc convert -q SRC DST`` does, printing nothing.

    ``src`` is a safetensors file (every tensor becomes a dense ROW_MAJOR tensor with its
    bytes; the ``__metadata__`` becomes the file's metadata map), a sharded checkpoint (its
    ``*.safetensors.index.json``, or the directory holding it), a GGUF file (ggml blocks
    stay blocks) or a ``.tdf`` file (rewritten as container version 2, its metadata
    carried over). The pieces of quantized weights (NVFP4, FP8 blocks, MXFP4) are written
    as one tensor of codes and scales each, as ``open`` groups them; ``raw=True`` writes the
    checkpoint's own tensors. ``alignment``: the data buffer alignment (a power of two,
    64 .. 1 MiB; default 64, or a ``.tdf`` input's own). ``permissive=True`` reads a
    ``.tdf`` input permissively, copying tensors it cannot interpret as they are.

    The data is streamed: memory stays at a few MB whatever the tensors' sizes, and the GIL
    is released meanwhile. ``dst`` is written under a temporary name beside it and renamed
    when complete; it must not be ``src``. Failures raise the package's exceptions, e.g.
    ``tensordesc.Io`` for a missing input, ``tensordesc.AlignmentInvalid`` for an
    alignment that is not a power of two in 64 .. 1 MiB, ``tensordesc.InvalidArgument``
    for ``dst`` naming ``src``, ``tensordesc.ContentInvalid`` for an input that is not one
    of these files.
    """
    _native._convert(
        _os.fspath(src), _os.fspath(dst), raw=raw, alignment=alignment, permissive=permissive
    )


_OPEN_FILES: dict[tuple[str, int, int, int, bool], File] = {}


def _reopen_file(path: str, strict: bool = True) -> File:
    """The file at ``path`` opened (mapped) once per process, version of the file (path,
    inode, size, modification time) and mode: what unpickled tensors and
    ``tensordesc.zarr`` stores read from."""
    st = _os.stat(path)
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns, strict)
    f = _OPEN_FILES.get(key)
    if f is None:
        for k in [k for k in _OPEN_FILES if k[0] == path and k[1:4] != key[1:4]]:
            del _OPEN_FILES[k]  # an older version of the file
        f = _OPEN_FILES[key] = open(path, strict=strict)
    return f


def _reopen(path: str, name: str) -> Tensor:
    """Unpickling a tensor of a file: the file opened once per process and version of
    the file (``_reopen_file``)."""
    return _reopen_file(path)[name]


def _region_of(tensor: Tensor, index: int) -> Region:
    return tensor.region(index)


def live_exports() -> int:
    """DLPack exports made by this package whose deleter has not run yet."""
    return _native._live_exports()


__all__ = [
    "errors",
    "File",
    "Tensor",
    "Region",
    "ELEMENT_TYPES",
    "open",
    "decode",
    "read_stream",
    "dense",
    "splat",
    "tiled",
    "from_scipy",
    "block_paged",
    "ggml_blocks",
    "GGML_TYPES",
    "from_dlpack",
    "as_tensor",
    "subpaving",
    "write",
    "to_bytes",
    "write_stream",
    "convert",
    "PerTensorAffine",
    "PerAxisAffine",
    "Blockwise",
    "Blockwise2D",
    "Codebook",
    "live_exports",
]
# The error classes, STATUS_CLASSES and BY_CODE: errors.__all__, which type checkers
# follow through `+=`.
__all__ += errors.__all__

