"""Dask arrays over tensors of ``.tdf`` files, for tensors beyond one machine's memory::

    import tensordesc.dask
    x = tensordesc.dask.from_tdf("model.tdf", "weights")   # chunks follow the regions
    x.sum().compute()                                      # on any dask scheduler

Each chunk is one windowed read (``Tensor.read``) run by the worker that computes it. The
graph carries the tensor as (path, name): a worker process maps the file the first time it
needs it and reads every later chunk from that mapping, so the file must be readable at
the same path on every worker (a shared or replicated file system). Needs
``dask[array]``; ``distributed`` for clusters.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from math import prod
from typing import TYPE_CHECKING

import numpy as np

import tensordesc as _td

if TYPE_CHECKING:
    from typing import Any

    import dask.array
    from numpy.typing import DTypeLike, NDArray
    from typing_extensions import TypeAlias

    #: A chunking as ``dask.array.from_array`` takes it: ``"auto"``, one chunk size for
    #: every axis, or per axis (a tuple, or a dict by axis) a size, ``"auto"``, ``-1`` or
    #: ``None`` (the whole axis), or the explicit sizes.
    _Chunk: TypeAlias = int | str | tuple[int, ...] | None
    _Chunks: TypeAlias = int | str | tuple[_Chunk, ...] | dict[int, _Chunk]


class TdfArray:
    """An array-like over one tensor of a file, as ``dask.array.from_array`` takes it:
    ``shape``, ``dtype``, ``ndim`` and ``__getitem__`` with a tuple of slices (one
    windowed read, values as ``Tensor.read(dtype=...)`` gives them). It pickles as the
    tensor's (path, name) and the output choice."""

    def __init__(self, tensor: _td.Tensor, dtype: DTypeLike | None = None) -> None:
        self.tensor = tensor
        self.out = dtype
        self.shape = tuple(tensor.shape)
        self.ndim = len(self.shape)
        self.dtype = np.dtype(tensor.read_dtype(dtype))

    def __getitem__(self, key: slice | tuple[slice, ...]) -> NDArray[Any]:
        if not isinstance(key, tuple):
            key = (key,)
        return self.tensor.read(key, dtype=self.out)

    def __repr__(self) -> str:
        return f"TdfArray({self.tensor.name!r}, shape={self.shape}, dtype={self.dtype})"


def region_chunks(tensor: _td.Tensor) -> tuple[tuple[int, ...], ...] | None:
    """The chunks of a subpaving whose top-level regions form a grid (every region is one
    cell of the product of the regions' boundaries along each axis): one chunk per
    region. ``None`` for other tensors (not a subpaving, or regions not on a grid)."""
    if tensor.layout != "SUBPAVING":
        return None
    shape = tuple(tensor.shape)
    if 0 in shape:
        return None
    tops = [(r.origin, r.shape) for r in tensor.regions if r.parent is None]
    bounds = [{0, n} for n in shape]
    for origin, extent in tops:
        for a, (o, e) in enumerate(zip(origin, extent)):
            bounds[a].update((o, o + e))
    cuts = [sorted(c) for c in bounds]
    for origin, extent in tops:
        for a, (o, e) in enumerate(zip(origin, extent)):
            i = bisect_left(cuts[a], o)
            if e == 0 or i + 1 >= len(cuts[a]) or cuts[a][i + 1] != o + e:
                return None
    if len(tops) != prod(len(c) - 1 for c in cuts):
        return None
    return tuple(tuple(b - a for a, b in zip(c[:-1], c[1:])) for c in cuts)


def from_tdf(
    path: str | os.PathLike[str],
    name: str,
    chunks: _Chunks | None = None,
    *,
    dtype: DTypeLike | None = None,
) -> dask.array.Array:
    """Tensor ``name`` of the ``.tdf`` file at ``path`` as a ``dask.array.Array``.

    ``chunks``: ``None`` gives one chunk per top-level region when the regions form a
    grid (``region_chunks``), and otherwise dask's ``"auto"`` chunking — regular chunks
    of about dask's ``array.chunk-size`` (128 MiB by default), whatever the regions; any
    other value is a chunk specification as ``dask.array.from_array`` takes it.

    ``dtype``: the output, as ``Tensor.read`` takes it (``None``: the stored elements,
    or the values — dequantized — when the tensor has quantized regions; ``"raw"``,
    ``"float32"``, ``"float64"``, ``"float16"``, ``"bfloat16"``).
    """
    import dask.array as da
    from dask.base import tokenize

    path = os.path.abspath(os.fspath(path))
    tensor = _td._reopen(path, name)
    src = TdfArray(tensor, dtype)
    if chunks is None:
        chunks = region_chunks(tensor) or "auto"
    st = os.stat(path)
    token = tokenize(path, name, str(dtype), st.st_ino, st.st_size, st.st_mtime_ns, chunks)
    # dask.array.from_array is not annotated: the variable gives the result its type.
    array: da.Array = da.from_array(
        src,
        chunks=chunks,
        name=f"tdf-{name}-{token}",
        asarray=False,
        fancy=False,
        lock=False,
        inline_array=True,
        meta=np.empty((0,) * src.ndim, dtype=src.dtype),
    )
    return array


__all__ = ["from_tdf", "region_chunks", "TdfArray"]
