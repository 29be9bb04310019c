"""Indexing tensors and regions: ``t[0:128, 64:96]`` and the boxes of ``read``.

Basic indexing as numpy has it — integers (negative ones count from the end), slices,
``...`` and ``None`` — becomes one windowed read of a box followed, where needed, by numpy
indexing of the result: integers drop their axis, ``None`` adds one, and a slice whose
step is not 1 reads the bounding box of the elements it selects and takes every
``step``-th of them (a copy of those elements). Integer and boolean arrays (numpy's
advanced indexing) are not windows: read the box and index the numpy array.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import numpy as np

from .errors import IndexOutOfBounds

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, SupportsIndex

    from numpy.typing import NDArray
    from typing_extensions import TypeAlias

    from ._native import Region, Tensor

    #: What a key becomes after the box is read: the numpy index of the box's array.
    _Post: TypeAlias = tuple[int | slice | None, ...]


def _integer(k: object) -> int | None:
    """``k`` as a Python int if it is an integer index (not a bool), else None."""
    if isinstance(k, (bool, np.bool_)):
        return None
    try:
        # Any object: the TypeError of one without __index__ is the answer "not an integer".
        return operator.index(k)  # type: ignore[arg-type]
    except TypeError:
        return None


def _not_an_index(k: object) -> IndexError:
    return IndexError(
        "only integers, slices (`:`), ellipsis (`...`) and None index a tensor, not "
        f"{type(k).__name__}; for integer or boolean array indices read the box "
        "(t.read(box)) and index the numpy array"
    )


def _expand(key: object, rank: int) -> list[object]:
    """``key`` as a list with ``...`` replaced by full slices, padded with full slices to
    ``rank`` axes (``None`` entries do not count as axes)."""
    if not isinstance(key, tuple):
        key = (key,)
    key = list(key)
    ellipses = [i for i, k in enumerate(key) if k is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    axes = sum(1 for k in key if k is not None and k is not Ellipsis)
    if axes > rank:
        raise IndexError(
            f"too many indices: the tensor has rank {rank}, {axes} were indexed"
        )
    fill: list[object] = [slice(None)] * (rank - axes)
    if ellipses:
        i = ellipses[0]
        return key[:i] + fill + key[i + 1 :]
    return key + fill


def key_box(
    key: object, shape: Iterable[SupportsIndex]
) -> tuple[list[int], list[int], _Post | None]:
    """A basic index as ``(lo, hi, post)``: the box ``[lo, hi)`` to read and the numpy
    index to apply to the box's array (``None`` when it is the array itself)."""
    extents = tuple(int(e) for e in shape)
    lo: list[int] = []
    hi: list[int] = []
    post: list[int | slice | None] = []
    trivial = True
    axis = 0
    for k in _expand(key, len(extents)):
        if k is None:
            post.append(None)
            trivial = False
            continue
        n = extents[axis]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            if count == 0:
                # Clipped to the extent, so start is a valid (empty) corner.
                b = max(0, min(start, n))
                lo.append(b)
                hi.append(b)
                post.append(slice(None))
            elif step > 0:
                lo.append(start)
                hi.append(start + (count - 1) * step + 1)
                post.append(slice(None, None, step) if step != 1 else slice(None))
            else:
                lo.append(start + (count - 1) * step)
                hi.append(start + 1)
                post.append(slice(None, None, step))
            trivial = trivial and step == 1
        else:
            i = _integer(k)
            if i is None:
                raise _not_an_index(k)
            if i < -n or i >= n:
                raise IndexOutOfBounds(
                    f"index {i} is out of bounds for axis {axis} with size {n}"
                )
            i %= n
            lo.append(i)
            hi.append(i + 1)
            post.append(0)
            trivial = False
        axis += 1
    return lo, hi, (None if trivial else tuple(post))


def getitem(obj: Tensor | Region, key: object) -> NDArray[Any] | np.generic:
    """``obj[key]`` for a Tensor or Region: one windowed read of the box the key selects
    (values as ``obj.read()`` gives them), then numpy indexing for integers, ``None`` and
    steps other than 1."""
    lo, hi, post = key_box(key, obj.shape)
    a = obj.read(tuple(slice(a, b) for a, b in zip(lo, hi)))
    has_ellipsis = any(k is Ellipsis for k in (key if isinstance(key, tuple) else (key,)))
    if post is None:
        # numpy: a rank-0 result indexed without `...` is a scalar (a[()]).
        return a if a.ndim or has_ellipsis else a[()]
    # numpy: with `...`, integers on every axis still give a rank-0 array, not a scalar.
    r = a[post + (Ellipsis,)] if has_ellipsis else a[post]
    if isinstance(r, np.ndarray) and any(
        isinstance(p, slice) and p.step not in (None, 1, -1) for p in post
    ):
        # A strided view would keep the whole bounding box alive: keep only the elements.
        r = r.copy()
    return r


def box_bounds(
    box: slice | Iterable[object] | None, shape: Iterable[SupportsIndex]
) -> tuple[list[int], list[int]]:
    """The ``box`` argument of ``read`` as ``(lo, hi)``: ``None`` (everything), a slice, or
    a sequence of slices with step 1, one per axis (fewer: the remaining axes whole), as
    ``numpy.s_[0:128, 64:96]`` or ``Region.box`` give them. Bounds follow numpy's rules:
    negative ones count from the end, and they clip to the extent."""
    extents = tuple(int(e) for e in shape)
    if box is None:
        return [0] * len(extents), list(extents)
    entries = [box] if isinstance(box, slice) else list(box)
    if len(entries) > len(extents):
        raise IndexError(f"a box of {len(entries)} axes for a tensor of rank {len(extents)}")
    lo: list[int] = []
    hi: list[int] = []
    for axis, n in enumerate(extents):
        e = entries[axis] if axis < len(entries) else slice(None)
        if not isinstance(e, slice):
            raise TypeError(
                f"axis {axis}: a box is made of slices (numpy.s_[0:128, 64:96]), not "
                f"{type(e).__name__}; index the tensor (t[...]) for integers"
            )
        start, stop, step = e.indices(n)
        if step != 1:
            raise ValueError(
                f"axis {axis}: a box's slices have step 1 (index the tensor, t[...], for "
                "other steps)"
            )
        lo.append(start)
        hi.append(max(start, stop))
    return lo, hi
