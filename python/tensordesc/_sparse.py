"""scipy.sparse arrays over a tensor's sparse buffers (reading) and sparse buffers from
scipy.sparse arrays (writing).

Reading (``to_scipy``): the values are a view of the VALUES buffer; the index arrays are
int64 views of the u64 INDICES / INDPTR buffers — the same bytes, reinterpreted, which is
exact because content validation (run first) proved every index is below an extent that
fits in int64. scipy's constructors would convert int64 indices whose values fit in int32
to int32 copies, so the arrays are set on the result after construction. COO indices are
stored interleaved (entry-major) on the wire: each coordinate array is a strided view.

Writing (``from_scipy``): values are used in place; int64 index arrays without negative
entries are reinterpreted as u64 in place; int32 index arrays (scipy's default for small
matrices) are converted, which copies them; COO coordinates are interleaved into one new
array.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, SupportsIndex

    from numpy.typing import ArrayLike, NDArray
    from scipy.sparse import coo_array, csc_array, csr_array

SORTED = 1
UNIQUE = 2


def _i64(a: NDArray[Any]) -> NDArray[np.int64]:
    return a.view(np.int64)


def build(
    fmt: str,
    shape: Iterable[SupportsIndex],
    values: NDArray[Any],
    indices: NDArray[Any],
    indptr: NDArray[Any] | None,
    flags: int,
) -> coo_array | csr_array | csc_array:
    """The scipy.sparse array of a COO/CSR/CSC node (called by ``to_scipy``; ``indptr``
    is None for COO)."""
    import scipy.sparse as sp

    extents = tuple(int(e) for e in shape)
    if fmt in ("csr", "csc"):
        assert indptr is not None, "CSR and CSC nodes have an INDPTR buffer"
        cls = sp.csr_array if fmt == "csr" else sp.csc_array
        # An empty array of the right shape, then the views: no conversion of the indices.
        m = cls(extents, dtype=values.dtype)
        m.data = values
        m.indices = _i64(indices)
        m.indptr = _i64(indptr)
        m.check_format(full_check=False)
        if flags & SORTED:
            m.has_sorted_indices = True
            if flags & UNIQUE:
                m.has_canonical_format = True
        return m
    if fmt == "coo":
        rank = len(extents)
        coords = _i64(indices).reshape(-1, rank) if rank else _i64(indices).reshape(-1, 0)
        m = sp.coo_array(extents, dtype=values.dtype)
        m.data = values
        m.coords = tuple(coords[:, k] for k in range(rank))
        if flags & SORTED and flags & UNIQUE:
            m.has_canonical_format = True
        return m
    raise ValueError(f"unknown sparse format {fmt!r}")


def u64_indices(a: ArrayLike) -> NDArray[np.uint64]:
    """An index array as contiguous u64: int64 without negatives is reinterpreted in place,
    anything else converted (a copy)."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"index array of dtype {arr.dtype}: integers expected")
    if arr.size and arr.min() < 0:
        raise ValueError("negative index in a sparse index array")
    if arr.dtype == np.dtype("<i8") or arr.dtype == np.dtype("<u8"):
        return np.ascontiguousarray(arr).view(np.uint64)
    return arr.astype(np.uint64)


def coo_flags(coords: Sequence[NDArray[Any]], shape: tuple[int, ...]) -> int:
    """SORTED (lexicographic, axis 0 most significant) and UNIQUE as they hold."""
    nnz = len(coords[0]) if coords else 0
    if nnz < 2:
        return SORTED | UNIQUE
    try:
        lin = np.ravel_multi_index(tuple(np.asarray(c, dtype=np.int64) for c in coords), shape)
    except ValueError:  # the linear index overflows int64: claim nothing
        return 0
    d = np.diff(lin)
    if np.all(d > 0):
        return SORTED | UNIQUE
    flags = SORTED if np.all(d >= 0) else 0
    if np.unique(lin).size == nnz:
        flags |= UNIQUE
    return flags
