"""Type stubs of ``tensordesc._native``, the compiled half of the package (python/src/*.rs).

The public classes (``Tensor``, ``Region``, ``File``) are re-exported by ``tensordesc``;
the functions whose names start with ``_`` are called by the pure-Python layer
(``tensordesc/__init__.py``), which converts and checks the arguments first.

Classes decorated with ``@type_check_only`` and the ``TypeAlias`` assignments exist only
here, for type checking (the dicts the properties return, the protocols arguments must
follow); ``python/tests/test_typing.py`` checks every other name against the module.
"""

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import EllipsisType, TracebackType
from typing import (
    Any,
    Literal,
    Protocol,
    SupportsIndex,
    TypeAlias,
    TypedDict,
    TypeVar,
    final,
    overload,
    type_check_only,
)

import numpy as np

__version__: str
from numpy.typing import DTypeLike, NDArray
from scipy.sparse import coo_array, csc_array, csr_array
from typing_extensions import CapsuleType, NotRequired, Self

_T = TypeVar("_T")

# ---------------------------------------------------------------------------------------
# Type-only names
# ---------------------------------------------------------------------------------------

#: The format's element type names (``Tensor.element_type``).
_ElementTypeName: TypeAlias = Literal[
    "BOOL",
    "INT8",
    "UINT8",
    "INT16",
    "UINT16",
    "INT32",
    "UINT32",
    "INT64",
    "UINT64",
    "FLOAT16",
    "BFLOAT16",
    "FLOAT32",
    "FLOAT64",
    "COMPLEX64",
    "COMPLEX128",
    "FLOAT8_E4M3FN",
    "FLOAT8_E5M2",
    "FLOAT8_E8M0FNU",
    "INT4",
    "UINT4",
    "FLOAT4_E2M1FN",
]

#: A path argument: ``str`` or ``os.PathLike[str]`` (pathlib paths).
_Path: TypeAlias = str | os.PathLike[str]

# A value of a file's metadata map (File.metadata).
MetaValue: TypeAlias = str | int | float | bool | list["MetaValue"]

#: One element's index: an integer (rank 1) or one integer per axis; negative ones count
#: from the end.
_ElementIndex: TypeAlias = SupportsIndex | Sequence[SupportsIndex]

#: ``read``'s box: None (everything), a slice, or one slice (step 1) per axis.
_Box: TypeAlias = slice | Iterable[slice] | None

#: An entry of a basic index (``t[0:128, ..., None, 5]``).
_IndexEntry: TypeAlias = SupportsIndex | slice | EllipsisType | None

#: What ``to_scipy`` returns: the scipy.sparse array of the node's format.
_SparseArray: TypeAlias = coo_array | csr_array | csc_array

@type_check_only
class _TiledLevel(TypedDict):
    tile_shape: list[int]
    tile_order: Literal["ROW_MAJOR", "COL_MAJOR"]
    inner: Literal["ROW_MAJOR", "COL_MAJOR", "TILED"]

@type_check_only
class _LayoutParams(TypedDict, total=False):
    """``layout_params``: the fields of the node's layout (empty for ROW_MAJOR, COL_MAJOR
    and SPLAT)."""

    strides: list[int]  # STRIDED
    order: list[int]  # DIM_ORDER
    levels: list[_TiledLevel]  # TILED
    region_count: int  # SUBPAVING
    nnz: int  # COO, CSR, CSC, CSF
    flags: list[Literal["SORTED", "UNIQUE"]]  # COO, CSR, CSC
    axis_order: list[int]  # CSF
    block_size: int  # BLOCK_PAGED
    pool_count: int  # BLOCK_PAGED
    ggml_type: int  # GGML_BLOCKS: ggml's type number
    ggml_type_name: str  # GGML_BLOCKS: ggml's name of it, e.g. "Q4_K"
    block_elems: int  # GGML_BLOCKS: values per block
    block_bytes: int  # GGML_BLOCKS: bytes per block
    tag: int  # extension and unknown layouts
    data: bytes  # extension and unknown layouts

@type_check_only
class _QuantizationInfo(TypedDict):
    """``quantization``: the scheme and its fields."""

    scheme: str  # "PER_TENSOR_AFFINE", "PER_AXIS_AFFINE", "BLOCKWISE", "BLOCKWISE_2D", "CODEBOOK", "OPAQUE_0x.."
    expressed_type: str  # "float32", "bfloat16", ...
    has_zero_point: bool
    global_scale: NotRequired[str]  # "multiplies" or "divides" (format 1.1)
    scale: NotRequired[float]  # PER_TENSOR_AFFINE
    zero_point: NotRequired[int]  # PER_TENSOR_AFFINE
    axis: NotRequired[int]  # PER_AXIS_AFFINE, BLOCKWISE
    scale_type: NotRequired[str]  # PER_AXIS_AFFINE, BLOCKWISE, BLOCKWISE_2D
    block_size: NotRequired[int]  # BLOCKWISE
    axis_a: NotRequired[int]  # BLOCKWISE_2D
    block_a: NotRequired[int]  # BLOCKWISE_2D
    axis_b: NotRequired[int]  # BLOCKWISE_2D
    block_b: NotRequired[int]  # BLOCKWISE_2D
    codebook_size: NotRequired[int]  # CODEBOOK
    fields: NotRequired[bytes]  # opaque schemes

@type_check_only
class _BufferInfo(TypedDict):
    """An entry of ``buffers``."""

    index: int
    role: str
    level: int
    region: int | None
    size: int
    device: str
    device_id: int
    memory_class: str
    alignment: int
    read_only: bool
    file_offset: NotRequired[int]  # tensors of a file
    address: NotRequired[int]  # tensors with buffers

@type_check_only
class _DenseLocation(TypedDict):
    kind: Literal["dense"]
    region: int | None
    buffer: int
    byte_offset: int
    bit_shift: int

@type_check_only
class _LookupLocation(TypedDict):
    kind: Literal["lookup"]
    region: int | None
    layout_tag: int
    first_buffer: int
    buffer_count: int
    local_index: list[int]

#: ``locate``: where an element lives (narrow on ``loc["kind"]``).
_Location: TypeAlias = _DenseLocation | _LookupLocation

@type_check_only
class _QuantSpec(TypedDict, total=False):
    """A quantization as the quantization classes of ``tensordesc`` hand it to the
    constructors (``PerTensorAffine._native(...)``, ...)."""

    scheme: Literal["PER_TENSOR_AFFINE", "PER_AXIS_AFFINE", "BLOCKWISE", "BLOCKWISE_2D", "CODEBOOK"]
    expressed: int
    scale: float
    zero_point: int
    has_zero_point: bool
    axis: int
    block_size: int
    scale_type: int
    scales: NDArray[Any]
    zero_points: NDArray[Any] | None
    global_scale: NDArray[Any] | None
    global_divides: bool
    axes: tuple[int, ...]
    block: tuple[int, ...]
    codebook: NDArray[Any]

@type_check_only
class _LeafParams(TypedDict, total=False):
    """The layout fields ``_leaf`` takes."""

    strides: Iterable[SupportsIndex]
    order: Iterable[SupportsIndex]
    tile_shape: Iterable[SupportsIndex]
    nnz: SupportsIndex
    flags: SupportsIndex
    level_nodes: Iterable[SupportsIndex]
    axis_order: Iterable[SupportsIndex]
    block_size: SupportsIndex
    pool_count: SupportsIndex
    ggml_type: SupportsIndex
    byte_offset: SupportsIndex

#: The layouts ``_leaf`` builds.
_LeafLayout: TypeAlias = Literal[
    "ROW_MAJOR",
    "COL_MAJOR",
    "STRIDED",
    "DIM_ORDER",
    "TILED",
    "SPLAT",
    "COO",
    "CSR",
    "CSC",
    "CSF",
    "BLOCK_PAGED",
    "GGML_BLOCKS",
]

@type_check_only
class _DLPackProducer(Protocol):
    """Anything with ``__dlpack__`` (numpy arrays, torch tensors, tensordesc tensors, ...),
    as ``numpy.from_dlpack`` takes it."""

    def __dlpack__(self, /, *, stream: None = None) -> CapsuleType: ...

#: What ``tensordesc.from_dlpack`` imports: a producer, or a bare DLPack capsule.
_DLPackSource: TypeAlias = _DLPackProducer | CapsuleType

@type_check_only
class _Writable(Protocol):
    """A binary file object as ``write_stream`` writes to it: ``write(b)`` returns the
    count it wrote, or None when it would block (``io.RawIOBase.write``)."""

    def write(self, data: bytes, /) -> int | None: ...

# ---------------------------------------------------------------------------------------
# Classes
# ---------------------------------------------------------------------------------------

@final
class Tensor:
    """A tensor: its descriptor and (unless decoded from bare bytes) its buffers."""

    @property
    def name(self) -> str | None: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def element_type(self) -> _ElementTypeName: ...
    @property
    def layout(self) -> str: ...
    @property
    def layout_params(self) -> _LayoutParams: ...
    @property
    def quantization(self) -> _QuantizationInfo | None: ...
    @property
    def regions(self) -> list[Region]: ...
    def region(self, i: SupportsIndex) -> Region: ...
    @property
    def buffers(self) -> list[_BufferInfo]: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def has_buffers(self) -> bool: ...
    def descriptor_bytes(self) -> bytes: ...
    def validate(self) -> None: ...
    def get(self, index: _ElementIndex) -> bool | int | float | complex: ...
    def locate(self, index: _ElementIndex) -> _Location: ...
    def numpy(self, raw: bool = False) -> NDArray[Any]: ...
    def read(self, box: _Box = None, dtype: DTypeLike | None = None) -> NDArray[Any]: ...
    def read_dtype(self, dtype: DTypeLike | None = None) -> np.dtype[Any]: ...
    # Integers alone select one element of a tensor of their rank (a numpy scalar) or a
    # sub-array of a tensor of higher rank: which one depends on the rank, not a static
    # type. A key with a slice, `...` or None always gives an array.
    @overload
    def __getitem__(self, key: SupportsIndex | tuple[SupportsIndex, ...], /) -> Any: ...
    @overload
    def __getitem__(self, key: _IndexEntry | tuple[_IndexEntry, ...], /) -> NDArray[Any]: ...
    def __array__(
        self, dtype: DTypeLike | None = None, copy: bool | None = None
    ) -> NDArray[Any]: ...
    def to_scipy(self, raw: bool = False) -> _SparseArray: ...
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> CapsuleType: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __reduce__(self) -> tuple[Callable[[str, str], Tensor], tuple[str, str]]: ...
    def __repr__(self) -> str: ...

@final
class Region:
    """One region of a subpaving (at any depth)."""

    @property
    def index(self) -> int: ...
    @property
    def stored_dtype(self) -> np.dtype[Any]: ...
    @property
    def parent(self) -> int | None: ...
    @property
    def depth(self) -> int: ...
    @property
    def tensor(self) -> Tensor: ...
    @property
    def origin(self) -> tuple[int, ...]: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def box(self) -> tuple[slice[int, int, None], ...]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def layout(self) -> str: ...
    @property
    def layout_params(self) -> _LayoutParams: ...
    @property
    def quantization(self) -> _QuantizationInfo | None: ...
    @property
    def buffers(self) -> list[_BufferInfo]: ...
    @property
    def is_leaf(self) -> bool: ...
    def get(self, index: _ElementIndex) -> bool | int | float | complex: ...
    def numpy(self, raw: bool = False) -> NDArray[Any]: ...
    def read(self, box: _Box = None, dtype: DTypeLike | None = None) -> NDArray[Any]: ...
    def read_dtype(self, dtype: DTypeLike | None = None) -> np.dtype[Any]: ...
    @overload
    def __getitem__(self, key: SupportsIndex | tuple[SupportsIndex, ...], /) -> Any: ...
    @overload
    def __getitem__(self, key: _IndexEntry | tuple[_IndexEntry, ...], /) -> NDArray[Any]: ...
    def __array__(
        self, dtype: DTypeLike | None = None, copy: bool | None = None
    ) -> NDArray[Any]: ...
    def to_scipy(self, raw: bool = False) -> _SparseArray: ...
    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> CapsuleType: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __reduce__(self) -> tuple[Callable[[Tensor, int], Region], tuple[Tensor, int]]: ...
    def __repr__(self) -> str: ...

# At run time File is registered as a virtual subclass of collections.abc.Mapping
# (isinstance(f, Mapping) is True); it is typed by its own methods because keys(), values()
# and items() return lists, not views. dict(f) type-checks (keys() and __getitem__).
@final
class File:
    """The tensors of a mapped file (``.tdf`` or safetensors), by name (read-only)."""

    @property
    def path(self) -> str: ...
    @property
    def alignment(self) -> int: ...
    @property
    def container(self) -> Literal["tdf", "safetensors", "sharded-safetensors", "gguf"]: ...
    @property
    def metadata(self) -> dict[str, MetaValue]: ...
    @property
    def grouping_notes(self) -> list[str]: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: str, /) -> bool: ...
    def __getitem__(self, key: str, /) -> Tensor: ...
    def __iter__(self) -> Iterator[str]: ...
    @overload
    def get(self, name: str, default: None = None) -> Tensor | None: ...
    @overload
    def get(self, name: str, default: _T) -> Tensor | _T: ...
    def keys(self) -> list[str]: ...
    def values(self) -> list[Tensor]: ...
    def items(self) -> list[tuple[str, Tensor]]: ...
    def validate(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        _t: type[BaseException] | None,
        _v: BaseException | None,
        _tb: TracebackType | None,
    ) -> Literal[False]: ...
    def __repr__(self) -> str: ...

@final
class _Memory:
    """The ``base`` of numpy arrays viewing a tensor's memory (keeps it alive)."""

# ---------------------------------------------------------------------------------------
# Functions (called by tensordesc/__init__.py)
# ---------------------------------------------------------------------------------------

def _open(path: _Path, strict: bool = True, group: bool = True) -> File: ...
def _decode(data: bytes, strict: bool = True) -> Tensor: ...
def _read_stream(source: bytes | _Path, strict: bool = True) -> list[tuple[str, Tensor]]: ...
def _from_array(
    array: NDArray[Any],
    element_type: int,
    quantization: _QuantSpec | None = None,
    alignment: int | None = None,
) -> Tensor: ...
def _leaf(
    element_type: int,
    shape: Iterable[SupportsIndex],
    layout: _LeafLayout,
    params: _LeafParams,
    buffers: list[NDArray[Any]],
    quantization: _QuantSpec | None = None,
    alignment: int | None = None,
) -> Tensor: ...
def _subpaving(
    element_type: int,
    shape: Iterable[SupportsIndex],
    regions: Sequence[tuple[Iterable[SupportsIndex], Tensor]],
) -> Tensor: ...
def _from_dlpack(obj: _DLPackSource) -> Tensor: ...
def _write(
    path: _Path,
    tensors: Sequence[tuple[str, Tensor]],
    alignment: SupportsIndex | None = None,
    metadata: Mapping[str, MetaValue] | None = None,
) -> None: ...
def _encode_file(
    tensors: Sequence[tuple[str, Tensor]],
    alignment: SupportsIndex | None = None,
    metadata: Mapping[str, MetaValue] | None = None,
) -> bytes: ...
@overload
def _write_stream(target: None, tensors: Sequence[tuple[str, Tensor]]) -> bytes: ...
@overload
def _write_stream(target: _Path | _Writable, tensors: Sequence[tuple[str, Tensor]]) -> None: ...
def _run_cli(argv: Sequence[str]) -> int: ...
def _report_panics_as_errors() -> None: ...
def _convert(
    src: _Path,
    dst: _Path,
    *,
    raw: bool = False,
    alignment: SupportsIndex | None = None,
    permissive: bool = False,
) -> None: ...
def _live_exports() -> int: ...
def _status_codes() -> list[tuple[int, str, str]]: ...
def _ggml_types() -> list[tuple[str, int, int, int]]: ...
def _element_types() -> list[tuple[int, str]]: ...
