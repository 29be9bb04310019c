"""Windowed reads: t[...], t.read(box, dtype) and region reads agree with numpy indexing of
the densified array, for every layout (DIM_ORDER and CSF included) and quantization
scheme, over many random boxes."""

import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
import scipy.sparse as sp

import tensordesc as td
from conftest import DTYPES, PACKED, bits, random_array

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG_SEEDS = range(4)


# ---------------------------------------------------------------------------------------
# Cases: a tensor and the array its default read must equal (values and dtype)
# ---------------------------------------------------------------------------------------


def dequantized(values_f64, expressed):
    """Values computed in float64 and rounded once to the expressed type, as the library
    dequantizes (test data keep bfloat16 results exact, so numpy's rounding path does not
    matter there)."""
    return np.asarray(values_f64, np.float64).astype(expressed)


def pow2(rng, shape, lo=-3, hi=2):
    """Random powers of two: scales whose products with small codes are exact in every
    float type."""
    return np.exp2(rng.integers(lo, hi, shape)).astype(np.float64)


def sparse_codes(rng, shape, dtype, density=0.2, lo=-9, hi=9):
    m = rng.integers(lo, hi, shape).astype(dtype)
    return np.where(rng.random(shape) < density, m, 0).astype(dtype)


def paged(rng, rows, positions, inner, block, dtype, values=None):
    """A block-paged tensor's parts and the dense array they describe."""
    nb = -(-positions // block)
    shape_page = (block,) + tuple(inner)
    n_pages = rows * nb
    if values is None:
        pages = rng.standard_normal((n_pages,) + shape_page).astype(dtype)
    else:
        pages = values((n_pages,) + shape_page)
    table = np.arange(n_pages).reshape(rows, nb)
    table[rng.random(table.shape) < 0.2] = -1
    lengths = rng.integers(0, positions + 1, rows)
    lengths[0] = positions
    dense = np.zeros((rows, positions) + tuple(inner), pages.dtype)
    for r in range(rows):
        for p in range(lengths[r]):
            g = table[r, p // block]
            if g >= 0:
                dense[r, p] = pages[g, p % block]
    return pages, table, lengths, dense


def leaf(values_dtype, shape, layout, params, buffers, quantization=None):
    """A leaf built directly from its buffers (layouts the building functions do not make
    from numpy arrays: DIM_ORDER, CSF)."""
    code = td._CODES[{v: k for k, v in DTYPES.items()}[np.dtype(values_dtype)]]
    q = None if quantization is None else quantization._native(code)
    return td._native._leaf(code, list(shape), layout, params, buffers, q)


def csf_parts(dense, axis_order):
    """The CSF buffers of ``dense``: one tree level per axis in ``axis_order``."""
    perm = np.transpose(dense, axis_order)
    coords = np.argwhere(perm != 0)  # lexicographic in the stored axis order
    indptr, indices, level_nodes = [], [], []
    prev = 1
    for lvl in range(dense.ndim):
        prefix = coords[:, : lvl + 1]
        new = np.ones(len(prefix), bool)
        new[1:] = (prefix[1:] != prefix[:-1]).any(axis=1)
        nodes = prefix[new]
        parent_new = np.ones(len(nodes), bool)
        parent_new[1:] = (nodes[1:, :lvl] != nodes[:-1, :lvl]).any(axis=1)
        parent = np.cumsum(parent_new) - 1
        indptr.append(np.searchsorted(parent, np.arange(prev + 1)).astype(np.uint64))
        indices.append(nodes[:, lvl].astype(np.uint64))
        level_nodes.append(len(nodes))
        prev = len(nodes)
    values = np.ascontiguousarray(perm[tuple(coords.T)])
    params = {"axis_order": list(axis_order), "level_nodes": level_nodes}
    return params, indptr + indices + [values]


def case_dense_layouts(rng):
    a = rng.standard_normal((23, 37)).astype(np.float32)
    i16 = rng.integers(-30000, 30000, (23, 37)).astype(np.int16)
    f64 = rng.standard_normal((31, 40))
    cube = rng.integers(0, 255, (5, 6, 7)).astype(np.uint8)
    line = rng.integers(-(2**31), 2**31 - 1, 97).astype(np.int32)
    yield "row_major", td.dense(a), a, "ROW_MAJOR"
    yield "col_major", td.dense(np.asfortranarray(i16)), i16, "COL_MAJOR"
    v = f64[::-1, ::3]
    yield "strided", td.dense(v), v, "STRIDED"
    yield "rank3", td.dense(cube), cube, "ROW_MAJOR"
    yield "rank1", td.dense(line), line, "ROW_MAJOR"
    yield "splat", td.splat(np.float16(-1.5), (23, 37)), np.full((23, 37), -1.5, np.float16), "SPLAT"
    t32 = rng.integers(-1000, 1000, (23, 37)).astype(np.int32)
    yield "tiled", td.tiled(t32, (4, 5)), t32, "TILED"
    c3 = rng.integers(0, 100, (7, 9, 11)).astype(np.uint16)
    yield "tiled3", td.tiled(c3, (2, 4, 3)), c3, "TILED"
    order = (2, 0, 1)
    buf = np.ascontiguousarray(c3.transpose(order))
    yield "dim_order", leaf(np.uint16, c3.shape, "DIM_ORDER", {"order": list(order)}, [buf]), c3, "DIM_ORDER"


def case_sparse(rng):
    m = sparse_codes(rng, (29, 41), np.float32) * np.float32(0.5)
    yield "csr", td.from_scipy(sp.csr_array(m)), m, "CSR"
    m64 = sparse_codes(rng, (29, 41), np.float64)
    yield "csc", td.from_scipy(sp.csc_array(m64)), m64, "CSC"
    m8 = sparse_codes(rng, (29, 41), np.int8)
    yield "coo", td.from_scipy(sp.coo_array(m8)), m8, "COO"
    m3 = sparse_codes(rng, (6, 7, 8), np.int16)
    yield "coo3", td.from_scipy(sp.coo_array(m3)), m3, "COO"
    # Unsorted, duplicate-free COO entries (no SORTED flag): scattered, not searched.
    coo = sp.coo_array(m8)
    perm = rng.permutation(coo.nnz)
    shuffled = sp.coo_array((coo.data[perm], (coo.coords[0][perm], coo.coords[1][perm])), shape=m8.shape)
    yield "coo_unsorted", td.from_scipy(shuffled), m8, "COO"
    c = sparse_codes(rng, (6, 7, 8), np.float32, density=0.15)
    for order in [(0, 1, 2), (2, 0, 1)]:
        params, bufs = csf_parts(c, order)
        yield f"csf{''.join(map(str, order))}", leaf(np.float32, c.shape, "CSF", params, bufs), c, "CSF"
    pages, table, lengths, dense = paged(rng, 5, 37, (3,), 8, np.float32)
    t = td.block_paged([pages[:7], pages[7:]], table, lengths, dense.shape, block_size=8)
    yield "paged", t, dense, "BLOCK_PAGED"
    pages, table, lengths, dense = paged(rng, 9, 30, (), 4, np.int32, values=lambda s: rng.integers(-99, 99, s).astype(np.int32))
    yield "paged2d", td.block_paged([pages], table, lengths, dense.shape, block_size=4), dense, "BLOCK_PAGED"


def case_quantized(rng):
    shape = (23, 37)
    c8 = rng.integers(-100, 100, shape).astype(np.int8)
    # PER_TENSOR_AFFINE, float32 and float16 results.
    t = td.dense(c8, quantization=td.PerTensorAffine(0.0375, 3))
    q = t.quantization
    yield "per_tensor_f32", t, dequantized((c8 - 3.0) * q["scale"], np.float32), "ROW_MAJOR"
    u8 = rng.integers(0, 255, shape).astype(np.uint8)
    t = td.dense(u8, quantization=td.PerTensorAffine(0.01, 128, expressed="float16"))
    yield "per_tensor_f16", t, dequantized((u8 - 128.0) * t.quantization["scale"], np.float16), "ROW_MAJOR"
    # PER_AXIS_AFFINE on each axis; bfloat16 results from power-of-two scales.
    s0 = pow2(rng, shape[0]).astype(ml_dtypes.bfloat16)
    z0 = rng.integers(-4, 4, shape[0]).astype(np.int8)
    t = td.dense(c8, quantization=td.PerAxisAffine(0, s0, z0, expressed="bfloat16"))
    ref = (c8.astype(np.float64) - z0[:, None]) * s0.astype(np.float64)[:, None]
    yield "per_axis0_bf16", t, dequantized(ref, BF16), "ROW_MAJOR"
    c4 = rng.integers(-8, 8, shape).astype(ml_dtypes.int4)
    s1 = (rng.random(shape[1]) + 0.25).astype(np.float16)
    z1 = rng.integers(-2, 3, shape[1])
    t = td.dense(c4, quantization=td.PerAxisAffine(1, s1, z1))
    ref = (c4.astype(np.float64) - z1[None, :]) * s1.astype(np.float64)[None, :]
    yield "per_axis1_int4", t, dequantized(ref, np.float32), "ROW_MAJOR"
    # BLOCKWISE with a ragged last block, along each axis.
    sb = (rng.random((23, 5)) + 0.5).astype(np.float32)
    zb = rng.integers(-3, 3, (23, 5)).astype(np.int8)
    t = td.dense(c8, quantization=td.Blockwise(1, 8, sb, zb, expressed="float64"))
    cols = np.arange(37) // 8
    ref = (c8.astype(np.float64) - zb[:, cols]) * sb.astype(np.float64)[:, cols]
    yield "blockwise1_f64", t, dequantized(ref, np.float64), "ROW_MAJOR"
    u4 = rng.integers(0, 16, shape).astype(ml_dtypes.uint4)
    sa = (rng.random((6, 37)) + 0.5).astype(np.float64)
    t = td.dense(u4, quantization=td.Blockwise(0, 4, sa, expressed="float16"))
    rows = np.arange(23) // 4
    yield "blockwise0_uint4", t, dequantized(u4.astype(np.float64) * sa[rows, :], np.float16), "ROW_MAJOR"
    # CODEBOOK: the codebook's dtype is the expressed type.
    cb = rng.standard_normal(256).astype(np.float32)
    k = rng.integers(0, 256, shape).astype(np.uint8)
    yield "codebook_u8", td.dense(k, quantization=td.Codebook(cb)), cb[k], "ROW_MAJOR"
    cb16 = pow2(rng, 16).astype(ml_dtypes.bfloat16)
    k4 = rng.integers(0, 16, shape).astype(ml_dtypes.uint4)
    yield "codebook_uint4_bf16", td.dense(k4, quantization=td.Codebook(cb16)), cb16[k4.astype(np.int64)], "ROW_MAJOR"
    # Quantized non-dense layouts: implicit zeros and unallocated pages are the code 0,
    # dequantized like any code.
    m = sparse_codes(rng, shape, np.int8)
    t = td.from_scipy(sp.csr_array(m), quantization=td.PerTensorAffine(0.5, 2))
    yield "quantized_csr", t, dequantized((m - 2.0) * 0.5, np.float32), "CSR"
    t = td.tiled(c8, (5, 4), quantization=td.PerAxisAffine(0, s0.astype(np.float32)))
    yield "quantized_tiled", t, dequantized(c8 * s0.astype(np.float64)[:, None], np.float32), "TILED"
    pages, table, lengths, dense = paged(rng, 4, 19, (5,), 4, np.int8, values=lambda s: rng.integers(-50, 50, s).astype(np.int8))
    t = td.block_paged([pages], table, lengths, dense.shape, 4, quantization=td.PerTensorAffine(0.25, -1))
    yield "quantized_paged", t, dequantized((dense + 1.0) * 0.25, np.float32), "BLOCK_PAGED"
    m3 = sparse_codes(rng, (5, 9, 4), np.int8)
    params, bufs = csf_parts(m3, (1, 2, 0))
    t = leaf(np.int8, m3.shape, "CSF", params, bufs, td.PerTensorAffine(0.5, 1))
    yield "quantized_csf", t, dequantized((m3 - 1.0) * 0.5, np.float32), "CSF"
    t = td.splat(np.int8(7), shape, quantization=td.PerTensorAffine(0.125, 1, expressed="float16"))
    yield "quantized_splat", t, np.full(shape, 0.75, np.float16), "SPLAT"


def case_subpavings(rng):
    # Nested: a subpaving region holding a quantized CSR and another subpaving (dense +
    # splat), beside a blockwise-quantized dense region. INT8 codes everywhere; the
    # default read is float32 (the expressed type, which holds every int8 too).
    csr = sparse_codes(rng, (10, 20), np.int8)
    dense = rng.integers(-100, 100, (13, 7)).astype(np.int8)
    right = rng.integers(-100, 100, (23, 17)).astype(np.int8)
    bs = pow2(rng, (6, 17)).astype(np.float32)
    inner = td.subpaving((13, 20), [((0, 0), dense), ((0, 7), td.splat(np.int8(-5), (13, 13)))])
    left = td.subpaving(
        (23, 20),
        [((0, 0), td.from_scipy(sp.csr_array(csr), quantization=td.PerTensorAffine(0.25))), ((10, 0), inner)],
    )
    t = td.subpaving((23, 37), [((0, 0), left), ((0, 20), td.dense(right, quantization=td.Blockwise(0, 4, bs)))])
    ref = np.zeros((23, 37), np.float64)
    ref[:10, :20] = csr * 0.25
    ref[10:, :7] = dense
    ref[10:, 7:20] = -5
    ref[:, 20:] = right * bs.astype(np.float64)[np.arange(23) // 4, :]
    yield "nested", t, ref.astype(np.float32), "SUBPAVING"
    # Heterogeneous INT16 grid, no quantization: the default read is int16.
    a = rng.integers(-3000, 3000, (30, 40)).astype(np.int16)
    m = sparse_codes(rng, (15, 25), np.int16)
    pages, table, lengths, pd = paged(rng, 15, 15, (), 4, np.int16, values=lambda s: rng.integers(-9, 9, s).astype(np.int16))
    t = td.subpaving(
        (30, 40),
        [
            ((0, 0), a[:15, :25]),
            ((0, 25), td.block_paged([pages], table, lengths, pd.shape, 4)),
            ((15, 0), td.from_scipy(sp.csc_array(m))),
            ((15, 25), td.tiled(a[15:, 25:], (4, 4))),
        ],
    )
    ref = a.copy()
    ref[:15, 25:] = pd
    ref[15:, :25] = m
    yield "grid_int16", t, ref, "SUBPAVING"


def all_cases():
    rng = np.random.default_rng(2024)
    out = {}
    for gen in (case_dense_layouts, case_sparse, case_quantized, case_subpavings):
        for name, t, ref, layout in gen(rng):
            out[name] = (t, ref, layout)
    return out


CASES = all_cases()


@pytest.fixture(scope="module")
def from_file(tmp_path_factory):
    """Every case written to one file and opened (reads go through the mapping)."""
    path = tmp_path_factory.mktemp("read") / "cases.tdf"
    td.write(path, {name: t for name, (t, _, _) in CASES.items()})
    return td.open(path)


def same(got, want):
    """Equal dtype, shape and element bits (NaNs included; 4-bit types by their codes)."""
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    assert g.shape == w.shape, (g.shape, w.shape)
    assert np.array_equal(bits(g), bits(w))


def random_key(rng, shape):
    """A random basic index: integers (negative too), slices (open, negative and
    out-of-range bounds; mostly step 1, sometimes another step), at most one `...`, and
    sometimes None."""
    parts = []
    for n in shape:
        r = rng.random()
        if r < 0.15 and n > 0:
            i = int(rng.integers(0, n))
            parts.append(i - n if rng.random() < 0.5 else i)
        else:
            def bound():
                c = rng.random()
                if c < 0.2:
                    return None
                v = int(rng.integers(-n - 3, n + 4))
                return v
            step = None
            if rng.random() < 0.2:
                step = int(rng.choice([2, 3, -1, -2, 5]))
            a, b = bound(), bound()
            if a is not None and b is not None and rng.random() < 0.8:
                # Mostly non-empty: bounds in the step's direction (as positions).
                a, b = sorted((a, b), key=lambda v: v % n if n else 0)
                if step is not None and step < 0:
                    a, b = b, a
            parts.append(slice(a, b, step))
    if rng.random() < 0.3 and parts:
        # Replace a run of full slices by `...` (or insert one that stands for nothing).
        i = int(rng.integers(0, len(parts) + 1))
        j = int(rng.integers(i, len(parts) + 1))
        parts = parts[:i] + [Ellipsis] + parts[j:]
    elif rng.random() < 0.3:
        # Trailing axes left out.
        parts = parts[: int(rng.integers(0, len(parts) + 1))]
    if rng.random() < 0.15:
        parts.insert(int(rng.integers(0, len(parts) + 1)), None)
    if len(parts) == 1 and rng.random() < 0.5:
        return parts[0]
    return tuple(parts)


# ---------------------------------------------------------------------------------------
# Slicing equals numpy
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_read_everything_equals_the_densified_array(name, from_file):
    t, ref, layout = CASES[name]
    back = from_file[name]
    assert back.layout == layout
    back.validate()  # the test's own buffers are valid contents
    for x in (t, back):
        assert x.read_dtype() == ref.dtype
        same(x.read(), ref)
        same(x[...], ref)
        same(np.asarray(x), ref)


@pytest.mark.parametrize("name", list(CASES))
def test_random_boxes_equal_numpy_indexing(name, from_file):
    _, ref, _ = CASES[name]
    t = from_file[name]
    for seed in RNG_SEEDS:
        rng = np.random.default_rng([seed, len(name)])
        for _ in range(60):
            key = random_key(rng, ref.shape)
            want = ref[key]
            got = t[key]
            assert type(got) is type(want), (key, type(got), type(want))
            same(got, want)


@pytest.mark.parametrize("name", ["tiled", "coo", "paged", "per_axis0_bf16", "nested"])
def test_in_memory_tensors_read_the_same(name):
    t, ref, _ = CASES[name]
    rng = np.random.default_rng(5)
    for _ in range(100):
        key = random_key(rng, ref.shape)
        same(t[key], ref[key])


def test_read_boxes_and_region_boxes(from_file):
    t = from_file["nested"]
    _, ref, _ = CASES["nested"]
    same(t.read(np.s_[3:9, -10:]), ref[3:9, -10:])
    same(t.read((slice(3, 9),)), ref[3:9])
    same(t.read(slice(None, 4)), ref[:4])
    same(t.read(np.s_[5:5, 0:100]), ref[5:5, 0:100])
    for r in t.regions:
        same(t.read(r.box), ref[r.box].astype(t.read_dtype()))


def test_scalars_and_rank_zero():
    t = td.dense(np.arange(12, dtype=np.int64).reshape(3, 4))
    v = t[2, -1]
    assert isinstance(v, np.int64) and v == 11
    z = td.dense(np.float32(2.5))
    assert z.shape == ()
    assert isinstance(z[()], np.float32) and z[()] == 2.5
    assert isinstance(z[...], np.ndarray) and z[...].shape == ()
    assert z[None].shape == (1,)
    q = td.dense(np.int8(-3), quantization=td.PerTensorAffine(0.5))
    assert isinstance(q[()], np.float32) and q[()] == -1.5


def test_rank_four_subpaving_cut_along_three_axes_reads_as_numpy():
    """A rank-4 tensor cut along its last three axes only (the first spans every region):
    1 x 1 columns of a 6 x 6 grid split along axis 3 where (x, y) says, 72 regions, no
    grid. Windows, which find their regions through the box query of such levels (the
    rank-3 sweep on the cut axes), read as numpy indexes the whole array."""
    full = np.arange(2 * 6 * 6 * 8, dtype=np.float32).reshape(2, 6, 6, 8)
    parts = []
    for x in range(6):
        for y in range(6):
            cut = 2 + (x * 5 + y * 3) % 5
            for z0, z1 in ((0, cut), (cut, 8)):
                part = np.ascontiguousarray(full[:, x : x + 1, y : y + 1, z0:z1])
                parts.append(((0, x, y, z0), part))
    t = td.subpaving(full.shape, parts)
    assert len(t.regions) == 72
    rng = np.random.default_rng(4)
    for _ in range(300):
        lo = [int(rng.integers(0, e)) for e in full.shape]
        hi = [int(rng.integers(a + 1, e + 1)) for a, e in zip(lo, full.shape)]
        key = tuple(slice(a, b) for a, b in zip(lo, hi))
        np.testing.assert_array_equal(t[key], full[key])


def python_calls_of_the_package(fn):
    """The functions of the package's Python modules that run while ``fn()`` runs."""
    package = os.path.dirname(td.__file__)
    called = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            called.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return called


def test_indexing_and_reads_are_one_native_call():
    # t[key] parses the key and reads its box natively: no Python code of the package runs
    # (before: the key was parsed in Python, which called back into read(), which called
    # Python again for the box and the dtype).
    a = np.arange(40, dtype=np.float32).reshape(5, 8)
    t = td.dense(a)
    r = td.subpaving((5, 8), [((0, 0), a[:, :3]), ((0, 3), a[:, 3:])]).region(1)
    for key in [np.s_[1:3, 2:4], 2, (1, 2), np.s_[..., ::-2], np.s_[None, 4, 1:7:3], ()]:
        assert python_calls_of_the_package(lambda: t[key]) == []
        same(t[key], a[key])
        assert python_calls_of_the_package(lambda: r[key]) == []
        same(r[key], a[:, 3:][key])
    assert python_calls_of_the_package(lambda: t.read(np.s_[1:3, 2:4])) == []
    assert python_calls_of_the_package(lambda: np.asarray(r)) == []


def test_index_entries_numpy_accepts():
    a = np.arange(20, dtype=np.int32).reshape(4, 5)
    t = td.dense(a)
    assert t[np.int64(-1), np.uint8(2)] == a[-1, 2]
    same(t[np.array(1)], a[1])  # a rank-0 integer array is an integer (__index__)
    same(t[np.s_[np.int16(1) : np.int64(3)]], a[1:3])
    with pytest.raises(td.IndexOutOfBounds, match="out of bounds for axis 0 with size 4"):
        t[2**70]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., 0, ...]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, None, 0]
    with pytest.raises(ValueError, match="step cannot be zero"):
        t[::0]
    same(t.read([slice(1, 3)]), a[1:3])  # any sequence of slices is a box
    same(t.read(iter([slice(None), slice(-2, None)])), a[:, -2:])


def test_iteration_yields_rows_as_numpy_does():
    a = np.arange(12, dtype=np.int16).reshape(3, 4)
    rows = list(td.dense(a))
    assert len(rows) == 3 and all(np.array_equal(r, a[i]) for i, r in enumerate(rows))


# ---------------------------------------------------------------------------------------
# Regions
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nested", "grid_int16"])
def test_region_indexing_is_relative_to_the_region(name, from_file):
    t = from_file[name]
    _, ref, _ = CASES[name]
    rng = np.random.default_rng(11)
    for r in t.regions:
        region_ref = ref[r.box].astype(r.read_dtype())
        assert np.array_equal(region_ref.astype(np.float64), ref[r.box].astype(np.float64))
        same(r.read(), region_ref)
        same(np.asarray(r), region_ref)
        for _ in range(40):
            key = random_key(rng, region_ref.shape)
            same(r[key], region_ref[key])


def test_region_default_dtype_follows_its_own_leaves(from_file):
    t = from_file["nested"]
    assert t.read_dtype() == np.float32
    kinds = {r.index: (r.layout, r.quantization is not None, r.read_dtype()) for r in t.regions}
    # 0: left (subpaving with a quantized CSR), 1: the quantized CSR, 2: inner subpaving
    # (int8 dense + splat), 3: int8 dense, 4: splat, 5: blockwise-quantized dense.
    assert kinds == {
        0: ("SUBPAVING", False, np.float32),
        1: ("CSR", True, np.float32),
        2: ("SUBPAVING", False, np.int8),
        3: ("ROW_MAJOR", False, np.int8),
        4: ("SPLAT", False, np.int8),
        5: ("ROW_MAJOR", True, np.float32),
    }
    same(t.region(2)[1:3, 5:9], CASES["nested"][1][11:13, 5:9].astype(np.int8))
    same(t.region(-1).read(dtype="raw"), t.read(np.s_[:, 20:], dtype="raw"))


# ---------------------------------------------------------------------------------------
# Output types
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(DTYPES))
def test_unquantized_default_is_the_element_dtype(tmp_path, name):
    a = random_array(name, (6, 9), seed=3)
    td.write(tmp_path / "a.tdf", {"a": a})
    t = td.open(tmp_path / "a.tdf")["a"]
    assert t.read_dtype() == DTYPES[name] == t.read_dtype("raw")
    same(t[1:5, 2:], a[1:5, 2:])
    same(t.read(dtype="raw"), a)
    same(t.read(dtype=DTYPES[name]), a)  # the element type's own dtype is the raw read


FLOAT_OUTPUTS = {
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float16": np.dtype(np.float16),
    "bfloat16": BF16,
}


@pytest.mark.parametrize("out", list(FLOAT_OUTPUTS))
@pytest.mark.parametrize("name", ["INT8", "UINT16", "FLOAT32", "FLOAT8_E4M3FN", "INT4", "BOOL"])
def test_float_outputs_convert_each_value_once(name, out):
    a = random_array(name, (7, 8), seed=9)
    t = td.dense(a)
    want = FLOAT_OUTPUTS[out]
    assert t.read_dtype(out) == want
    # float32 sources convert with one rounding either way; the others are exact in float64.
    exact = a.astype(np.float32) if name == "FLOAT32" else a.astype(np.float64)
    with np.errstate(over="ignore"):  # values past float16's range become inf
        ref = exact.astype(want)
    for got, w in [(t.read(dtype=out), ref), (t.read(np.s_[2:5, 1:7], dtype=want), ref[2:5, 1:7])]:
        # Values, NaNs where numpy has them (a NaN's payload is not a value).
        assert got.dtype == want and got.shape == w.shape
        assert np.array_equal(got.astype(np.float64), w.astype(np.float64), equal_nan=True)


def test_raw_reads_the_codes_of_quantized_tensors(from_file):
    for name in ["per_tensor_f32", "per_axis1_int4", "blockwise0_uint4", "codebook_u8", "quantized_csr"]:
        t = from_file[name]
        codes = CASES[name][0]
        raw = t.read(dtype="raw")
        assert raw.dtype == t.dtype
        if t.layout == "CSR":
            same(raw, codes.to_scipy(raw=True).toarray())
        else:
            same(raw, codes.numpy(raw=True))
        same(t[3:9, ::2], t.read(dtype="float32")[3:9, ::2].astype(t.read_dtype()))


def test_default_of_mixed_quantization():
    c = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    big = np.array([[30000, -30000, 7, 1]] * 3, np.int16)

    def pav(*parts):
        return td.subpaving((3, 4 * len(parts)), [((0, 4 * i), p) for i, p in enumerate(parts)])

    f16 = td.dense(c, quantization=td.PerTensorAffine(0.5, expressed="float16"))
    b16 = td.dense(c, quantization=td.PerTensorAffine(0.5, expressed="bfloat16"))
    f64 = td.dense(c, quantization=td.PerTensorAffine(0.5, expressed="float64"))
    # All quantized with one expressed type: that type.
    assert pav(f16, f16).read_dtype() == np.float16
    # float16 and bfloat16 hold each other's values only in float32.
    assert pav(f16, b16).read_dtype() == np.float32
    assert pav(f16, b16, f64).read_dtype() == np.float64
    # Unquantized INT8 regions beside float16 values: float16 holds every int8.
    t = pav(f16, c)
    assert t.read_dtype() == np.float16
    same(t.read(), np.concatenate([c * 0.5, c], axis=1).astype(np.float16))
    # INT16 does not fit float16 (30000 would round): float32.
    q16 = td.dense(big, quantization=td.PerTensorAffine(0.5, expressed="float16"))
    t = pav(q16, big)
    assert t.read_dtype() == np.float32
    assert t[0, 4] == 30000 and t[0, 5] == -30000
    # INT32 needs float64 beside float32 values.
    q32 = td.dense(big.astype(np.int32), quantization=td.PerTensorAffine(0.5))
    t = pav(q32, np.full((3, 4), 2**30 + 1, np.int32))
    assert t.read_dtype() == np.float64 and t[2, 7] == 2**30 + 1


def test_without_ml_dtypes_the_default_is_float32(tmp_path):
    bf = (np.arange(12, dtype=np.float32).reshape(3, 4) / 8).astype(ml_dtypes.bfloat16)
    i4 = np.arange(-6, 6).reshape(3, 4).astype(ml_dtypes.int4)
    q = td.dense(np.arange(12, dtype=np.int8).reshape(3, 4), quantization=td.PerTensorAffine(0.25, expressed="bfloat16"))
    path = tmp_path / "m.tdf"
    td.write(path, {"bf": bf, "i4": i4, "q": q})
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["ml_dtypes"] = None  # as if not installed
        import numpy as np
        import tensordesc as td
        f = td.open({str(path)!r})
        for name, want in [("bf", np.arange(12) / 8), ("i4", np.arange(-6, 6)), ("q", np.arange(12) * 0.25)]:
            t = f[name]
            got = t[:, :]
            assert got.dtype == np.float32 == t.read_dtype(), (name, got.dtype)
            assert np.array_equal(got, want.reshape(3, 4)), (name, got)
            assert t.read(dtype="float16").dtype == np.float16
        for args in [dict(dtype="raw"), dict(dtype="bfloat16")]:
            try:
                f["bf"].read(**args)
            except TypeError as e:
                assert "ml_dtypes" in str(e), e
            else:
                raise AssertionError(args)
        print("ok")
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


# ---------------------------------------------------------------------------------------
# Sources other than files
# ---------------------------------------------------------------------------------------


def test_reads_of_streams_and_unaligned_memory():
    _, ref, _ = CASES["grid_int16"]
    data = td.write_stream(None, {"g": CASES["grid_int16"][0]})
    same(td.read_stream(data)["g"][4:20, 10:33], ref[4:20, 10:33])
    # A buffer one byte into an allocation: the first read makes an aligned copy.
    raw = np.zeros(8 * 41 + 1, np.uint8)
    a = raw[1:].view(np.float64)
    a[:] = np.arange(41)
    t = td.dense(a)
    same(t[3:17], np.arange(41, dtype=np.float64)[3:17])


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------


def test_index_errors():
    t = td.dense(np.zeros((4, 5), np.float32))
    for key in [4, -5, (0, 5), (1, -6), (Ellipsis, 7)]:
        with pytest.raises(td.IndexOutOfBounds) as e:
            t[key]
        assert isinstance(e.value, IndexError) and e.value.status == "INDEX_OUT_OF_BOUNDS"
    for key in [(0, 0, 0), (Ellipsis, Ellipsis), [0, 1], np.array([1, 2]), 1.5, True, "a", (slice(0, 2), [1])]:
        with pytest.raises(IndexError):
            t[key]
    assert t[10:20].shape == (0, 5)  # slices clip, as numpy's do
    r = td.subpaving((4, 5), [((0, 0), np.zeros((4, 2), np.float32)), ((0, 2), np.ones((4, 3), np.float32))]).region(1)
    with pytest.raises(td.IndexOutOfBounds):
        r[0, 3]
    assert r[:, -1].tolist() == [1, 1, 1, 1]


def test_read_argument_errors():
    t = td.dense(np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match="step 1"):
        t.read(np.s_[::2])
    with pytest.raises(TypeError, match="slices"):
        t.read((1, slice(None)))
    with pytest.raises(IndexError, match="rank 2"):
        t.read(np.s_[:, :, :])
    with pytest.raises(ValueError, match="not an output"):
        t.read(dtype="int32")
    with pytest.raises(TypeError):
        t.read(dtype="no such type")
    q = td.dense(np.zeros(3, np.int8), quantization=td.PerTensorAffine(0.5))
    with pytest.raises(ValueError, match="codes"):
        q.read(dtype="int8")  # a quantized tensor's own dtype is not its values
    assert td.dense(np.zeros(3, np.int8)).read(dtype="int8").dtype == np.int8
    c = td.dense(np.ones((2, 2), np.complex64))
    with pytest.raises(td.InvalidArgument, match="COMPLEX64"):
        c.read(dtype="float32")
    same(c[1], np.ones(2, np.complex64))
    with pytest.raises(ValueError, match="copy=False"):
        np.asarray(t, copy=False)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


def test_descriptor_without_buffers_is_not_readable():
    d = td.decode(td.dense(np.zeros((2, 2), np.float32)).descriptor_bytes())
    assert d.read_dtype() == np.float32  # the output type is known without buffers
    with pytest.raises(td.NotBindable):
        d[0]
    with pytest.raises(td.NotBindable):
        d.read()


def csr_leaf(indptr, indices):
    """A 2 x 3 FLOAT32 CSR tensor over the given (unvalidated) index arrays."""
    bufs = [np.array(indptr, np.uint64), np.array(indices, np.uint64), np.array([1.0, 2.0], np.float32)]
    return td._native._leaf(td._CODES["FLOAT32"], [2, 3], "CSR", {"nnz": 2, "flags": 0}, bufs, None)


def test_reads_of_invalid_contents_stay_inside_the_buffers():
    # A row segment past the entries: the read refuses.
    with pytest.raises(td.ContentInvalid, match="INDPTR"):
        csr_leaf([0, 5, 2], [0, 1]).read()
    with pytest.raises(td.ContentInvalid):
        csr_leaf([0, 2, 1], [0, 1])[1, :]
    # A column index past the extent: reads do not validate contents (validate() does,
    # once); the stray entry is in no window, and nothing outside the buffers is read.
    t = csr_leaf([0, 1, 2], [0, 9])
    same(t.read(), np.array([[1, 0, 0], [0, 0, 0]], np.float32))
    with pytest.raises(td.ContentInvalid):
        t.validate()


def test_reads_from_threads(from_file):
    # Reads release the GIL: four threads read windows of the same tensors at once.
    from concurrent.futures import ThreadPoolExecutor

    names = ["nested", "paged", "csf201", "per_axis0_bf16", "tiled"]

    def work(i):
        name = names[i % len(names)]
        ref = CASES[name][1]
        key = random_key(np.random.default_rng([i, 99]), ref.shape)
        got, want = np.asarray(from_file[name][key]), np.asarray(ref[key])
        return got.dtype == want.dtype and np.array_equal(bits(got), bits(want))

    with ThreadPoolExecutor(4) as ex:
        assert all(ex.map(work, range(400)))
