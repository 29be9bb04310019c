"""scipy.sparse: to_scipy over the bound buffers, from_scipy over scipy's arrays."""

import numpy as np
import pytest
import scipy.sparse as sp

import tensordesc as td
from conftest import address


def random_csr(shape=(60, 50), density=0.1, dtype=np.float32, seed=0):
    return sp.random_array(shape, density=density, format="csr", dtype=dtype, rng=seed)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_round_trip_through_a_file_with_views(tmp_path, fmt):
    m = random_csr().asformat(fmt)
    td.write(tmp_path / "s.tdf", {"m": m})
    t = td.open(tmp_path / "s.tdf")["m"]
    assert t.layout == fmt.upper()
    assert t.layout_params["nnz"] == m.nnz
    back = t.to_scipy()
    assert back.format == fmt
    assert back.shape == m.shape
    assert (abs(back - m)).nnz == 0
    assert np.array_equal(back.toarray(), m.toarray())
    # Zero copy: values and index arrays are views of the file's buffers.
    bufs = t.buffers
    if fmt == "coo":
        assert address(back.data) == bufs[1]["address"]
        assert address(back.coords[0]) == bufs[0]["address"]
        assert address(back.coords[1]) == bufs[0]["address"] + 8
        assert back.coords[0].dtype == np.int64
    else:
        assert address(back.indptr) == bufs[0]["address"]
        assert address(back.indices) == bufs[1]["address"]
        assert address(back.data) == bufs[2]["address"]
        assert back.indices.dtype == np.int64 and back.indptr.dtype == np.int64
        assert back.has_sorted_indices
    assert not back.data.flags.writeable
    # scipy computes with the views.
    v = np.arange(m.shape[1], dtype=np.float32)
    assert np.allclose(back @ v, m @ v)


def test_from_scipy_uses_values_in_place_and_int64_indices_in_place():
    m = random_csr()
    m.indices = m.indices.astype(np.int64)
    m.indptr = m.indptr.astype(np.int64)
    t = td.from_scipy(m)
    bufs = t.buffers
    assert bufs[2]["address"] == address(m.data)
    assert bufs[1]["address"] == address(m.indices)
    assert bufs[0]["address"] == address(m.indptr)
    small = random_csr()  # int32 indices: converted (copied)
    assert small.indices.dtype == np.int32
    t2 = td.from_scipy(small)
    assert t2.buffers[1]["address"] != address(small.indices)
    assert t2.buffers[2]["address"] == address(small.data)


def test_flags_follow_the_matrix():
    m = sp.csr_array((np.array([1.0, 2.0]), np.array([2, 0]), np.array([0, 2])), shape=(1, 3))
    assert td.from_scipy(m).layout_params["flags"] == []
    m.sort_indices()
    assert td.from_scipy(m).layout_params["flags"] == ["SORTED", "UNIQUE"]
    dup = sp.coo_array((np.ones(3), (np.array([0, 0, 1]), np.array([1, 1, 0]))), shape=(2, 2))
    assert td.from_scipy(dup).layout_params["flags"] == ["SORTED"]
    unsorted = sp.coo_array((np.ones(2), (np.array([1, 0]), np.array([0, 1]))), shape=(2, 2))
    assert td.from_scipy(unsorted).layout_params["flags"] == ["UNIQUE"]


def test_get_reads_sparse_elements():
    m = random_csr(density=0.3, dtype=np.float64, seed=4)
    dense = m.toarray()
    for fmt in ("csr", "csc", "coo"):
        t = td.from_scipy(m.asformat(fmt))
        for idx in [(0, 0), (10, 3), (59, 49), (33, 17)]:
            assert t.get(idx) == dense[idx]


def test_coo_of_rank_three():
    a = np.zeros((3, 4, 5), np.float32)
    a[0, 1, 2] = 1
    a[2, 3, 4] = 5
    m = sp.coo_array(a)
    t = td.from_scipy(m)
    assert t.shape == (3, 4, 5)
    assert t.get((2, 3, 4)) == 5.0
    back = t.to_scipy()
    assert np.array_equal(back.toarray(), a)


def test_sparse_region_of_a_subpaving(tmp_path):
    m = random_csr((8, 4), density=0.5)
    t = td.subpaving((8, 8), [((0, 0), np.ones((8, 4), np.float32)), ((0, 4), m)])
    td.write(tmp_path / "r.tdf", {"t": t})
    r = td.open(tmp_path / "r.tdf")["t"].region(1)
    assert r.layout == "CSR"
    assert np.array_equal(r.to_scipy().toarray(), m.toarray())
    with pytest.raises(td.NotBindable):
        td.open(tmp_path / "r.tdf")["t"].region(0).to_scipy()


def test_quantized_sparse_gives_codes_on_request():
    codes = sp.csr_array(np.array([[0, 3], [-2, 0]], dtype=np.int8))
    t = td.from_scipy(codes, quantization=td.PerTensorAffine(0.5, 1))
    with pytest.raises(td.NotBindable, match="quantized"):
        t.to_scipy()
    raw = t.to_scipy(raw=True)
    assert raw.dtype == np.int8 and np.array_equal(raw.toarray(), codes.toarray())
    assert t.get((0, 1)) == (3 - 1) * 0.5
    assert t.get((0, 0)) == (0 - 1) * 0.5  # an implicit zero is the code 0
