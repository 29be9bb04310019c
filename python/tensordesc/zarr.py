"""A read-only Zarr v3 store over a file tensordesc opens, for zarr-python, xarray, Dask and
every other client of ``zarr.abc.store.Store``::

    import zarr, tensordesc.zarr
    store = tensordesc.zarr.Store("model.tdf")        # or a File from tensordesc.open
    g = zarr.open_group(store, mode="r")              # one array per tensor
    g["weights"][0:128, 64:96]                        # values, dequantized where quantized

    import xarray
    ds = xarray.open_zarr(store, consolidated=False)  # a Dataset of dask-backed variables

The file is presented as a Zarr v3 group: one array per tensor, its name the array's path
(a name with ``/`` in it is an array in nested groups). Every ``zarr.json`` is generated
from the descriptors (shape, data type, chunk grid, the ``bytes`` codec, attributes); every
chunk is read on request by one windowed read of the tensor (``Tensor.read``), so nothing
is copied or converted ahead of time and no file is written. docs/python.md, *Zarr*, and
decision record 137 describe the mapping: data types, chunk shapes, attributes, names.

Needs ``zarr`` (3.1 or newer).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    SuffixByteRequest,
)
from zarr.abc.store import Store as _ZarrStore

import tensordesc as _td
from tensordesc.dask import region_chunks as _region_chunks

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator

    from numpy.typing import NDArray
    from typing_extensions import Self
    from zarr.core.buffer import Buffer, BufferPrototype

    from tensordesc._native import _QuantizationInfo

#: The chunk size aimed at when the chunk shape is chosen (bytes of one chunk's values).
TARGET_CHUNK_BYTES = 4 * 2**20

#: A subpaving whose regions form a regular grid gets one chunk per region when a region's
#: values take at most this many times the target; larger regions are cut evenly.
FOLLOW_REGIONS_FACTOR = 16

#: The Zarr v3 data types (the core specification's names) of the numpy dtypes reads give;
#: anything else (bfloat16, the float8 and 4-bit types) is read as float32.
_ZARR_TYPES: dict[np.dtype[Any], str] = {
    np.dtype(t): t
    for t in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
}


def zarr_data_type(values: np.dtype[Any]) -> tuple[str, str | None]:
    """The Zarr v3 ``data_type`` of a tensor whose values (``Tensor.read_dtype()``) have
    numpy dtype ``values``, and the ``dtype`` argument its chunks are read with (``None``:
    the default, whose values already have that type; ``"float32"``: a type Zarr has no
    name for — bfloat16, FLOAT8_*, INT4, UINT4, FLOAT4_E2M1FN — read as float32, which
    holds each of their values exactly)."""
    name = _ZARR_TYPES.get(np.dtype(values).newbyteorder("="))
    if name is not None:
        return name, None
    return "float32", "float32"


def _fill_value(data_type: str) -> bool | int | float | list[float]:
    if data_type == "bool":
        return False
    if data_type.startswith("complex"):
        return [0.0, 0.0]
    if data_type.startswith("float"):
        return 0.0
    return 0


# ---------------------------------------------------------------------------------------
# Chunk shapes
# ---------------------------------------------------------------------------------------


def _largest_divisor_at_most(n: int, m: int) -> int:
    """The largest divisor of ``n`` (>= 1) that is at most ``m`` (>= 1)."""
    if m >= n:
        return n
    best = 1
    i = 1
    while i * i <= n:
        if n % i == 0:
            for d in (i, n // i):
                if best < d <= m:
                    best = d
        i += 1
    return best


def choose_chunks(
    shape: tuple[int, ...],
    itemsize: int,
    lattice: tuple[int, ...] | None = None,
    *,
    target_bytes: int = TARGET_CHUNK_BYTES,
    innermost_first: tuple[int, ...] | None = None,
) -> tuple[int, ...]:
    """A chunk shape for an array of ``shape`` whose elements take ``itemsize`` bytes,
    about ``target_bytes`` a chunk, with chunk boundaries on ``lattice`` where it can.

    ``lattice`` (default all 1: no constraint) gives per axis the spacing of the
    boundaries the chunks should respect — the regions' common divisor, a tile's extent.
    Starting from one lattice cell, a cell larger than the target is cut along the
    outermost axes first, into the largest divisor of its extent that is within half of
    the ideal extent (otherwise the ideal extent itself); a smaller cell is grown by whole
    cells along the innermost axes first (whole rows of a row-major array before more of
    them), up to the target. ``innermost_first`` orders the axes from the fastest-varying
    (default: the last axis first, row-major). Rank 0 gives ``()``; an axis of extent 0
    gets chunks of 1 (and no chunk along it)."""
    n = len(shape)
    if n == 0:
        return ()
    ext = [max(1, int(s)) for s in shape]
    cells = [1] * n if lattice is None else [max(1, int(g)) for g in lattice]
    order = list(range(n - 1, -1, -1)) if innermost_first is None else list(innermost_first)
    if sorted(order) != list(range(n)):
        raise ValueError(f"innermost_first must order the axes 0..{n - 1}, not {order}")
    limit = max(1, int(target_bytes) // max(1, int(itemsize)))
    c = [min(g, e) for g, e in zip(cells, ext)]
    cut = False
    for a in reversed(order):  # outermost axes first
        volume = math.prod(c)
        if volume <= limit:
            break
        ideal = max(1, limit // (volume // c[a]))
        if ideal < c[a]:
            d = _largest_divisor_at_most(c[a], ideal)
            c[a] = d if 2 * d > ideal else ideal
            cut = True
    if not cut:
        for a in order:  # innermost axes first, by whole cells
            room = limit // (math.prod(c) // c[a])
            if room >= ext[a]:
                c[a] = ext[a]
                continue
            c[a] *= max(1, room // c[a])
            break
    return tuple(c)


def _gcd_lattice(shape: tuple[int, ...], regions: Iterable[_td.Region]) -> tuple[int, ...]:
    """Per axis, the greatest common divisor of every region boundary (origins and ends,
    regions at every depth) and the extent: chunks whose extents divide it never straddle
    a region boundary."""
    g = [int(s) for s in shape]
    for r in regions:
        for a, (o, e) in enumerate(zip(r.origin, r.shape)):
            g[a] = math.gcd(g[a], int(o), int(o) + int(e))
    return tuple(max(1, x) for x in g)


@dataclass(frozen=True)
class _Grid:
    chunks: tuple[int, ...]
    #: How the chunks were chosen: "regions" (one chunk per region of a regular grid of
    #: regions) or "chosen" (choose_chunks).
    basis: str
    #: Chunk index -> region index, where the chunk is exactly a dense region whose stored
    #: elements are the chunk's values (read in place, without a copy).
    in_place: dict[tuple[int, ...], int]


def _grid(t: _td.Tensor, itemsize: int, zarr_dtype: np.dtype[Any], target: int) -> _Grid:
    shape = tuple(t.shape)
    layout = t.layout
    innermost: tuple[int, ...] | None = None
    if layout == "COL_MAJOR":
        innermost = tuple(range(len(shape)))
    lattice: tuple[int, ...] | None = None
    if layout == "SUBPAVING":
        regions = t.regions
        grid = _region_chunks(t)
        regular = grid is not None and all(
            len(set(sizes[:-1])) <= 1 and sizes[-1] <= sizes[0] for sizes in grid
        )
        if grid is not None and regular:
            extent = tuple(sizes[0] for sizes in grid)
            if math.prod(extent) * itemsize <= FOLLOW_REGIONS_FACTOR * target:
                in_place: dict[tuple[int, ...], int] = {}
                for r in regions:
                    if (
                        r.parent is None
                        and r.is_leaf
                        and r.layout == "ROW_MAJOR"
                        and r.quantization is None
                        and tuple(r.shape) == extent
                        and r.stored_dtype == zarr_dtype
                    ):
                        in_place[tuple(o // e for o, e in zip(r.origin, extent))] = r.index
                return _Grid(extent, "regions", in_place)
            lattice = extent
        else:
            lattice = _gcd_lattice(shape, regions)
    elif layout == "TILED":
        levels = t.layout_params.get("levels") or []
        if levels:
            lattice = tuple(int(e) for e in levels[0]["tile_shape"])
    elif layout == "BLOCK_PAGED" and len(shape) >= 2:
        lattice = (1, int(t.layout_params.get("block_size", 1))) + (1,) * (len(shape) - 2)
    elif layout == "GGML_BLOCKS" and shape:
        block = int(t.layout_params.get("block_elems", 1))
        lattice = (1,) * (len(shape) - 1) + (block,)
    chunks = choose_chunks(shape, itemsize, lattice, target_bytes=target, innermost_first=innermost)
    return _Grid(chunks, "chosen", {})


# ---------------------------------------------------------------------------------------
# Metadata
# ---------------------------------------------------------------------------------------


def _jsonable(value: object) -> Any:
    """``value`` as JSON values: bytes as hex strings, tuples as lists, numpy scalars as
    Python numbers, non-finite floats as Zarr spells them ("NaN", "Infinity")."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _region_summary(t: _td.Tensor) -> dict[str, Any]:
    layouts: dict[str, int] = {}
    schemes: dict[str, int] = {}
    leaves = 0
    for r in t.regions:
        if not r.is_leaf:
            continue
        leaves += 1
        layouts[r.layout] = layouts.get(r.layout, 0) + 1
        q = r.quantization
        if q is not None:
            schemes[q["scheme"]] = schemes.get(q["scheme"], 0) + 1
    return {"count": len(t.regions), "leaves": leaves, "layouts": layouts, "quantization": schemes}


@dataclass(frozen=True)
class ArrayInfo:
    """What a store presents of one tensor (``Store.array_info``)."""

    #: The tensor.
    tensor: _td.Tensor
    #: Its shape.
    shape: tuple[int, ...]
    #: The chunks' element type (little-endian): the Zarr array's dtype.
    dtype: np.dtype[Any]
    #: The ``dtype`` argument of the chunks' reads (``Tensor.read``): None for the
    #: tensor's default, "float32" for value types Zarr has no name for.
    read_as: str | None
    #: The chunk shape.
    chunks: tuple[int, ...]
    #: How it was chosen: "regions" (one chunk per region of a regular grid of regions)
    #: or "chosen" (``choose_chunks``).
    basis: str
    #: The number of chunks along each axis.
    counts: tuple[int, ...]
    #: The array's ``zarr.json``.
    metadata: bytes
    #: Chunk index -> index of the dense region that is exactly the chunk and whose
    #: stored elements are its values (served from the file's mapping, without a copy).
    in_place: dict[tuple[int, ...], int]

    @property
    def chunk_nbytes(self) -> int:
        """The bytes of one chunk (every chunk has the full chunk shape)."""
        return math.prod(self.chunks) * self.dtype.itemsize


def _array(t: _td.Tensor, basename: str, siblings: set[str], target: int) -> ArrayInfo:
    shape = tuple(int(e) for e in t.shape)
    values = np.dtype(t.read_dtype(None))
    data_type, read_as = zarr_data_type(values)
    dtype = np.dtype(data_type).newbyteorder("<")
    grid = _grid(t, dtype.itemsize, dtype, target)
    counts = tuple(-(-n // c) for n, c in zip(shape, grid.chunks))
    info: dict[str, Any] = {
        "element_type": t.element_type,
        "value_type": str(values),
        "layout": t.layout,
        "layout_params": _jsonable(t.layout_params),
        "quantization": _jsonable(t.quantization),
        "chunks": grid.basis,
    }
    if read_as is not None:
        info["read_as"] = read_as
    if t.layout == "SUBPAVING":
        info["regions"] = _region_summary(t)
    # xarray needs dimension names; each tensor has its own (sizes differ), kept apart from
    # the names of the arrays beside it.
    stem = basename
    while any(f"{stem}_dim{i}" in siblings for i in range(len(shape))):
        stem = "_" + stem
    codec: dict[str, Any] = {"name": "bytes"}
    if dtype.itemsize > 1:
        codec["configuration"] = {"endian": "little"}
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": list(shape),
        "data_type": data_type,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(grid.chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": _fill_value(data_type),
        "codecs": [codec],
        "attributes": {"tensordesc": info},
        "dimension_names": [f"{stem}_dim{i}" for i in range(len(shape))],
    }
    return ArrayInfo(
        t,
        shape,
        dtype,
        read_as,
        grid.chunks,
        grid.basis,
        counts,
        json.dumps(doc, indent=2).encode(),
        grid.in_place,
    )


def _name_problem(name: str) -> str | None:
    """Why tensor ``name`` cannot be a Zarr node path, or None."""
    if name == "":
        return "an empty name is the root group's path"
    for segment in name.split("/"):
        if segment == "":
            return "a path segment is empty (a leading, trailing or doubled '/')"
        if segment in (".", ".."):
            return f"a path segment is {segment!r}"
        if segment.startswith("__"):
            return "a path segment starts with '__' (reserved by Zarr v3)"
        if segment == "zarr.json":
            return "a path segment is 'zarr.json' (Zarr's metadata key)"
    return None


def _unreadable(t: _td.Tensor) -> str | None:
    """Why the chunks of tensor ``t`` could not be read (raises the library's error where
    the descriptor itself cannot be looked at), or None. Layouts and quantization schemes
    the library keeps opaque (permissive reads, extension layouts) are found in the
    descriptor; a read of the first element catches the rest."""
    nodes: list[tuple[str, _QuantizationInfo | None]] = [(t.layout, t.quantization)]
    nodes += [(r.layout, r.quantization) for r in t.regions]
    for layout, q in nodes:
        if layout.startswith(("UNKNOWN", "EXTENSION")):
            return f"layout {layout} is not readable"
        if q is not None and q["scheme"].startswith("OPAQUE"):
            return f"quantization scheme {q['scheme']} is not readable as values"
    _, read_as = zarr_data_type(np.dtype(t.read_dtype(None)))
    if t.size:
        t.read(tuple(slice(0, 1) for _ in t.shape), dtype=read_as)
    return None


def _is_metadata_key(key: str) -> bool:
    return key == "zarr.json" or key.endswith("/zarr.json")


def _node_of(metadata_key: str) -> str | None:
    """The node path of a metadata key: "" for "zarr.json", "a/b" for "a/b/zarr.json";
    None for "/zarr.json" (no node has an empty name)."""
    if metadata_key == "zarr.json":
        return ""
    return metadata_key[: -len("/zarr.json")] or None


def _byte_span(n: int, byte_range: ByteRequest | None) -> tuple[int, int]:
    """The bytes ``[start, stop)`` of a value of ``n`` bytes that ``byte_range`` asks for."""
    if byte_range is None:
        return 0, n
    if isinstance(byte_range, RangeByteRequest):
        if byte_range.start < 0 or byte_range.end < byte_range.start:
            raise ValueError(f"invalid byte range {byte_range}")
        return min(byte_range.start, n), min(byte_range.end, n)
    if isinstance(byte_range, OffsetByteRequest):
        if byte_range.offset < 0:
            raise ValueError(f"invalid byte range {byte_range}")
        return min(byte_range.offset, n), n
    if isinstance(byte_range, SuffixByteRequest):
        if byte_range.suffix < 0:
            raise ValueError(f"invalid byte range {byte_range}")
        return max(0, n - byte_range.suffix), n
    raise TypeError(f"Unexpected byte_range, got {byte_range!r}.")


# ---------------------------------------------------------------------------------------
# The store
# ---------------------------------------------------------------------------------------


class Store(_ZarrStore):
    """A read-only Zarr v3 store presenting a file's tensors as a group of arrays.

    ``source`` is a path (``str`` or path-like: any file ``tensordesc.open`` opens) or a
    ``File``. ``strict`` is ``tensordesc.open``'s, for a path. ``chunk_bytes`` is the
    chunk size aimed at where the chunks are chosen (default 4 MiB; a subpaving whose
    regions form a regular grid gets one chunk per region instead, up to 16 times that).

    Tensors whose names cannot be Zarr paths (an empty segment, ``.``, ``..``, a segment
    starting with ``__`` or named ``zarr.json``), whose path lies inside another tensor's
    (``"a/b"`` beside ``"a"``) or that the library cannot describe (permissive reads'
    opaque entries) are left out; ``skipped`` maps each to the reason, and so does the
    root group's ``tensordesc`` attribute.

    The store pickles as (path, strict, chunk_bytes): unpickled, it maps the file again,
    once per process and version of the file, so Dask and ``distributed`` workers read
    chunks from their own mapping (the path must be readable there).
    """

    supports_writes: bool = False
    supports_deletes: bool = False
    supports_listing: bool = True

    def __init__(
        self,
        source: str | os.PathLike[str] | _td.File,
        *,
        strict: bool = True,
        chunk_bytes: int = TARGET_CHUNK_BYTES,
    ) -> None:
        super().__init__(read_only=True)
        self._setup(source, strict, chunk_bytes)

    def _setup(
        self, source: str | os.PathLike[str] | _td.File, strict: bool, chunk_bytes: int
    ) -> None:
        if isinstance(source, _td.File):
            self._file = source
        else:
            path = os.path.abspath(os.fspath(source))
            self._file = _td._reopen_file(path, strict)
        self._strict = bool(strict)
        if int(chunk_bytes) < 1:
            raise ValueError(f"chunk_bytes must be at least 1, not {chunk_bytes}")
        self._chunk_bytes = int(chunk_bytes)
        self._lock = threading.Lock()
        self._arrays: dict[str, ArrayInfo] = {}
        self._build()

    def _build(self) -> None:
        """The node tree from the names (cheap: descriptors are looked at, not data)."""
        skipped: dict[str, str] = {}
        names: list[str] = []
        for name in self._file.keys():
            problem = _name_problem(name)
            if problem is None:
                try:
                    problem = _unreadable(self._file[name])
                except _td.Error as e:
                    problem = f"not readable: {e.status}: {e.detail}"
            if problem is None:
                names.append(name)
            else:
                skipped[name] = problem
        arrays = set(names)
        self._tensors: list[str] = []
        groups: dict[str, None] = {"": None}
        for name in names:
            parts = name.split("/")
            parents = ["/".join(parts[:i]) for i in range(1, len(parts))]
            inside = next((p for p in parents if p in arrays), None)
            if inside is not None:
                skipped[name] = f"its path lies inside tensor {inside!r}"
                continue
            self._tensors.append(name)
            for p in parents:
                groups[p] = None
        self._groups = list(groups)
        self._names = set(self._tensors)
        self._children: dict[str, set[str]] = {g: set() for g in self._groups}
        for path in self._groups[1:] + self._tensors:
            parent, _, base = path.rpartition("/")
            self._children[parent].add(base)
        self.skipped = skipped
        root: dict[str, Any] = {"path": self.path, "skipped": skipped}
        container = getattr(self._file, "container", None)
        if isinstance(container, str):
            root["container"] = container
        attributes: dict[str, Any] = {"tensordesc": root}
        metadata = getattr(self._file, "metadata", None)
        if isinstance(metadata, dict):
            attributes["metadata"] = _jsonable(metadata)
        self._root = json.dumps(
            {"zarr_format": 3, "node_type": "group", "attributes": attributes}, indent=2
        ).encode()
        self._group = json.dumps(
            {"zarr_format": 3, "node_type": "group", "attributes": {}}, indent=2
        ).encode()

    # -- identity -------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The absolute path of the file."""
        return self._file.path

    @property
    def chunk_bytes(self) -> int:
        """The chunk size aimed at where chunk shapes are chosen."""
        return self._chunk_bytes

    @property
    def file(self) -> _td.File:
        """The file the store reads."""
        return self._file

    @property
    def tensors(self) -> list[str]:
        """The names of the tensors presented as arrays, in file order."""
        return list(self._tensors)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Store)
            and other.path == self.path
            and other._strict == self._strict
            and other._chunk_bytes == self._chunk_bytes
        )

    def __hash__(self) -> int:
        return hash((Store, self.path, self._strict, self._chunk_bytes))

    def __str__(self) -> str:
        return f"tensordesc://{self.path}"

    def __repr__(self) -> str:
        return f"tensordesc.zarr.Store({self.path!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "strict": self._strict, "chunk_bytes": self._chunk_bytes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        _ZarrStore.__init__(self, read_only=True)
        self._setup(str(state["path"]), bool(state["strict"]), int(state["chunk_bytes"]))

    def with_read_only(self, read_only: bool = False) -> Store:
        """A new store over the same file (not opened). There is no writable variant:
        ``read_only=False`` raises ``NotImplementedError``, as the ABC's default does for
        stores without one (zarr then reports the store as read-only)."""
        if not read_only:
            raise NotImplementedError(
                f"with_read_only is not implemented for the {type(self)} store type. "
                "(it is read-only: there is no writable variant)"
            )
        return Store(self._file, strict=self._strict, chunk_bytes=self._chunk_bytes)

    @property
    def supports_consolidated_metadata(self) -> bool:
        # Consolidating writes the metadata into the store, which cannot be written.
        return False

    # -- arrays ---------------------------------------------------------------------------

    def array_info(self, name: str) -> ArrayInfo:
        """What the store presents of tensor ``name``: dtype, chunks, ``zarr.json``
        (computed on first use; ``KeyError`` for a name it does not present)."""
        a = self._arrays.get(name)
        if a is not None:
            return a
        if name not in self._names:
            raise KeyError(name)
        with self._lock:
            a = self._arrays.get(name)
            if a is None:
                parent, _, base = name.rpartition("/")
                a = _array(self._file[name], base, self._children[parent], self._chunk_bytes)
                self._arrays[name] = a
        return a

    def _metadata(self, path: str | None) -> bytes | None:
        if path is None:
            return None
        if path == "":
            return self._root
        if path in self._names:
            return self.array_info(path).metadata
        if path in self._children:
            return self._group
        return None

    def _chunk_index(self, key: str) -> tuple[ArrayInfo, tuple[int, ...]] | None:
        """The array and chunk index of chunk key ``key``, or None when ``key`` names no
        chunk of a presented array (missing tensors, out-of-range or malformed indices)."""
        parts = key.split("/")
        for k, part in enumerate(parts):
            if part != "c":
                continue
            name = "/".join(parts[:k])
            if name not in self._names:
                continue
            a = self.array_info(name)
            coords = parts[k + 1 :]
            if len(coords) != len(a.shape):
                return None
            index = []
            for text, count in zip(coords, a.counts):
                if not text.isdigit() or not text.isascii() or str(int(text)) != text:
                    return None
                i = int(text)
                if i >= count:
                    return None
                index.append(i)
            return a, tuple(index)
        return None

    def _chunk(self, a: ArrayInfo, index: tuple[int, ...]) -> NDArray[np.uint8]:
        """The bytes of one chunk (full chunk shape; past the array's edge: zeros)."""
        chunks = a.chunks
        box = tuple(
            slice(i * c, min(i * c + c, n)) for i, c, n in zip(index, chunks, a.shape)
        )
        whole = all(s.stop - s.start == c for s, c in zip(box, chunks))
        region = a.in_place.get(index)
        values: NDArray[Any] | None = None
        if region is not None:
            values = a.tensor.region(region).numpy()  # a view of the mapping
        elif (
            whole
            and a.tensor.layout == "ROW_MAJOR"
            and a.tensor.quantization is None
            and a.read_as is None
            and a.tensor.dtype == a.dtype
        ):
            view = a.tensor.numpy()[box]
            if view.flags.c_contiguous:
                values = view
        if values is None:
            values = a.tensor.read(box, dtype=a.read_as)
            if not whole:
                padded = np.zeros(chunks, dtype=a.dtype)
                padded[tuple(slice(0, s.stop - s.start) for s in box)] = values
                values = padded
        values = values.astype(a.dtype, copy=False)
        return values.reshape(-1).view(np.uint8)

    # -- reading --------------------------------------------------------------------------

    def _get(self, key: str, byte_range: ByteRequest | None) -> NDArray[np.uint8] | None:
        if _is_metadata_key(key):
            doc = self._metadata(_node_of(key))
            if doc is None:
                return None
            data: NDArray[np.uint8] = np.frombuffer(doc, dtype=np.uint8)
        else:
            found = self._chunk_index(key)
            if found is None:
                return None
            data = self._chunk(*found)
        start, stop = _byte_span(len(data), byte_range)
        return data[start:stop]

    def get_sync(
        self,
        key: str,
        *,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        """``get`` without an event loop (zarr's ``SupportsGetSync``)."""
        if prototype is None:
            from zarr.core.buffer import default_buffer_prototype

            prototype = default_buffer_prototype()
        data = self._get(key, byte_range)
        return None if data is None else prototype.buffer.from_array_like(data)

    async def get(
        self,
        key: str,
        prototype: BufferPrototype,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        # docstring inherited
        if _is_metadata_key(key):
            data = self._get(key, byte_range)
        else:
            # Reads release the GIL: chunks asked for together are read in parallel.
            data = await asyncio.to_thread(self._get, key, byte_range)
        return None if data is None else prototype.buffer.from_array_like(data)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        # docstring inherited
        return list(
            await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges))
        )

    async def exists(self, key: str) -> bool:
        # docstring inherited
        if _is_metadata_key(key):
            return self._metadata(_node_of(key)) is not None
        return self._chunk_index(key) is not None

    async def getsize(self, key: str) -> int:
        # docstring inherited
        if _is_metadata_key(key):
            doc = self._metadata(_node_of(key))
            if doc is not None:
                return len(doc)
        else:
            found = self._chunk_index(key)
            if found is not None:
                return found[0].chunk_nbytes
        raise FileNotFoundError(key)

    # -- listing --------------------------------------------------------------------------

    def _chunk_keys(self, name: str) -> Iterator[str]:
        a = self.array_info(name)
        prefix = f"{name}/c" if name else "c"
        for index in np.ndindex(*a.counts):
            yield "/".join((prefix,) + tuple(str(i) for i in index))

    def _keys(self, prefix: str = "") -> Iterator[str]:
        for g in self._groups:
            key = f"{g}/zarr.json" if g else "zarr.json"
            if key.startswith(prefix):
                yield key
        for name in self._tensors:
            key = f"{name}/zarr.json"
            if key.startswith(prefix):
                yield key
            base = f"{name}/c"
            if base.startswith(prefix) or prefix.startswith(base):
                for key in self._chunk_keys(name):
                    if key.startswith(prefix):
                        yield key

    async def list(self) -> AsyncIterator[str]:
        # docstring inherited
        for key in self._keys():
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        # docstring inherited
        for key in self._keys(prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        # docstring inherited
        prefix = prefix.rstrip("/")
        if prefix in self._children:
            yield "zarr.json"
            for child in sorted(self._children[prefix]):
                yield child
            return
        if prefix in self._names:
            yield "zarr.json"
            if all(self.array_info(prefix).counts):
                yield "c"
            return
        # Inside an array's chunk keys: "<name>/c" and "<name>/c/i/...".
        parts = prefix.split("/")
        for k, part in enumerate(parts):
            name = "/".join(parts[:k])
            if part != "c" or name not in self._names:
                continue
            a = self.array_info(name)
            coords = parts[k + 1 :]
            if len(coords) >= len(a.shape):
                return
            for text, count in zip(coords, a.counts):
                if not text.isdigit() or str(int(text)) != text or int(text) >= count:
                    return
            for i in range(a.counts[len(coords)]):
                yield str(i)
            return

    # -- writing (refused) ----------------------------------------------------------------

    async def set(self, key: str, value: Buffer) -> None:
        # docstring inherited
        self._check_writable()

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        # docstring inherited
        self._check_writable()

    async def delete(self, key: str) -> None:
        # docstring inherited
        self._check_writable()

    async def delete_dir(self, prefix: str) -> None:
        # docstring inherited
        self._check_writable()

    async def clear(self) -> None:
        # docstring inherited
        self._check_writable()


__all__ = ["Store", "ArrayInfo", "choose_chunks", "zarr_data_type", "TARGET_CHUNK_BYTES"]
