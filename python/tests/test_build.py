"""Building tensors from Python: subpavings of regions with their own layouts and
quantization, inspected and read back through a file."""

import ml_dtypes
import numpy as np
import pytest
import scipy.sparse as sp

import tensordesc as td


def paged_parts(rows=3, positions=10, inner=4, block=4, seed=0):
    """A block-paged [rows, positions, inner] tensor: pages, table, lengths and the dense
    array they describe (unallocated blocks and positions past a row's length are 0)."""
    rng = np.random.default_rng(seed)
    max_blocks = -(-positions // block)
    pages = rng.standard_normal((rows * max_blocks, block, inner)).astype(np.float32)
    table = np.arange(rows * max_blocks).reshape(rows, max_blocks)
    table[1, 1] = -1  # unallocated
    lengths = np.array([positions, positions - 3, 5])
    dense = np.zeros((rows, positions, inner), np.float32)
    for r in range(rows):
        for p in range(lengths[r]):
            g = table[r, p // block]
            if g >= 0:
                dense[r, p] = pages[g, p % block]
    return [pages[:5], pages[5:]], table, lengths, dense


def test_heterogeneous_subpaving(tmp_path):
    # One element type per tensor (INT8 codes); layouts and quantization per region.
    rng = np.random.default_rng(1)
    dense_part = rng.integers(-100, 100, (4, 6)).astype(np.int8)
    sparse_part = sp.csr_array(
        np.where(rng.random((4, 6)) < 0.3, rng.integers(-9, 9, (4, 6)), 0).astype(np.int8)
    )
    codes = rng.integers(-100, 100, (4, 6)).astype(np.int8)
    t = td.subpaving(
        (8, 12),
        [
            ((0, 0), dense_part),
            ((0, 6), td.from_scipy(sparse_part, quantization=td.PerTensorAffine(0.5))),
            ((4, 0), td.splat(np.int8(-3), (4, 3))),
            ((4, 3), td.tiled(dense_part[:, :3], (3, 2))),
            ((4, 6), td.dense(codes, quantization=td.PerTensorAffine(0.25, 3))),
        ],
    )
    assert t.layout == "SUBPAVING"
    assert [r.layout for r in t.regions] == ["ROW_MAJOR", "CSR", "SPLAT", "TILED", "ROW_MAJOR"]
    assert t.region(4).quantization == {
        "scheme": "PER_TENSOR_AFFINE",
        "scale": 0.25,
        "zero_point": 3,
        "has_zero_point": True,
        "expressed_type": "float32",
    }
    assert "SUBPAVING of 5 regions" in repr(t)
    assert "PER_TENSOR_AFFINE" in repr(t.region(4))
    expected = np.zeros((8, 12), np.float64)
    expected[:4, :6] = dense_part
    expected[:4, 6:] = sparse_part.toarray() * 0.5
    expected[4:, :3] = -3
    expected[4:, 3:6] = dense_part[:, :3]
    expected[4:, 6:] = (codes.astype(np.float64) - 3) * 0.25
    td.write(tmp_path / "h.tdf", {"h": t})
    back = td.open(tmp_path / "h.tdf")["h"]
    back.validate()
    for idx in np.ndindex(8, 12):
        assert back.get(idx) == expected[idx], idx
    assert back.region(0).box == (slice(0, 4), slice(0, 6))
    assert back.region(3).origin == (4, 3) and back.region(3).shape == (4, 3)
    assert back.region(3).layout_params["levels"][0]["tile_shape"] == [3, 2]
    assert np.array_equal(back.region(2).numpy(), np.full((4, 3), -3, np.int8))
    assert np.array_equal(back.region(4).numpy(raw=True), codes)
    with pytest.raises(td.NotBindable):
        back.region(4).numpy()
    # Regions keep their buffers: the file holds exactly these roles.
    roles = [b["role"] for b in back.buffers]
    assert roles == ["DATA", "INDPTR", "INDICES", "VALUES", "DATA", "DATA", "DATA"]
    assert all("file_offset" in b for b in back.buffers)


def test_nested_subpaving_and_region_tree():
    inner = td.subpaving((2, 4), [((0, 0), np.ones((2, 2), np.int32)), ((0, 2), np.zeros((2, 2), np.int32))])
    t = td.subpaving((4, 4), [((0, 0), inner), ((2, 0), np.full((2, 4), 7, np.int32))])
    rs = t.regions
    assert [(r.index, r.parent, r.depth, r.is_leaf) for r in rs] == [
        (0, None, 1, False),
        (1, 0, 2, True),
        (2, 0, 2, True),
        (3, None, 1, True),
    ]
    assert rs[2].origin == (0, 2)
    assert t.get((1, 1)) == 1 and t.get((1, 3)) == 0 and t.get((3, 3)) == 7
    assert rs[1].get((1, 1)) == 1
    assert np.array_equal(rs[3].numpy(), np.full((2, 4), 7))


def test_block_paged(tmp_path):
    pools, table, lengths, dense = paged_parts()
    t = td.block_paged(pools, table, lengths, dense.shape, block_size=4)
    assert t.layout == "BLOCK_PAGED"
    assert t.layout_params == {"block_size": 4, "pool_count": 2}
    t.validate()
    td.write(tmp_path / "p.tdf", {"kv": t})
    back = td.open(tmp_path / "p.tdf")["kv"]
    for idx in np.ndindex(dense.shape):
        assert back.get(idx) == dense[idx]
    with pytest.raises(td.NotBindable, match="paged"):
        back.numpy()


@pytest.mark.parametrize("scale_dtype", [np.float16, np.float32, ml_dtypes.bfloat16])
def test_per_axis_and_blockwise_and_codebook(scale_dtype):
    rng = np.random.default_rng(3)
    codes = rng.integers(-8, 8, (4, 64)).astype(np.int8)
    scales = (rng.random(4) + 0.5).astype(scale_dtype)
    zps = np.array([0, 1, -1, 2], np.int8)
    t = td.dense(codes, quantization=td.PerAxisAffine(0, scales, zps))
    q = t.quantization
    assert q["scheme"] == "PER_AXIS_AFFINE" and q["axis"] == 0
    for i, j in [(0, 0), (1, 5), (3, 63), (2, 10)]:
        expected = np.float32((float(codes[i, j]) - float(zps[i])) * float(scales[i]))
        assert t.get((i, j)) == float(expected)
    block_scales = (rng.random((4, 2)) + 0.5).astype(scale_dtype)
    b = td.dense(codes, quantization=td.Blockwise(axis=1, block_size=32, scales=block_scales))
    assert b.quantization["block_size"] == 32
    for i, j in [(0, 0), (1, 40), (3, 63)]:
        expected = np.float32(float(codes[i, j]) * float(block_scales[i, j // 32]))
        assert b.get((i, j)) == float(expected)
    cb = np.linspace(-1, 1, 16).astype(np.float32)
    c = td.dense(rng.integers(0, 16, (3, 3)).astype(np.uint8), quantization=td.Codebook(cb))
    assert c.quantization["codebook_size"] == 16
    c.validate()
    k = c.numpy(raw=True)
    assert c.get((1, 2)) == float(cb[k[1, 2]])


def test_codebook_code_out_of_range_is_content_invalid():
    c = td.dense(np.array([0, 1, 9], np.uint8), quantization=td.Codebook(np.zeros(4, np.float32)))
    with pytest.raises(td.ContentInvalid):
        c.validate()


def test_int4_quantized_with_packed_zero_points():
    codes = np.array([[-8, 7, 3], [1, -2, 0]], dtype=ml_dtypes.int4)
    t = td.dense(codes, quantization=td.PerAxisAffine(0, np.array([0.5, 2.0], np.float32), np.array([1, -1])))
    assert t.buffers[0]["size"] == 3 and t.buffers[2]["size"] == 1  # packed nibbles
    assert t.get((0, 0)) == (-8 - 1) * 0.5
    assert t.get((1, 1)) == (-2 + 1) * 2.0


def test_regions_taken_from_a_file(tmp_path):
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    td.write(tmp_path / "a.tdf", {"a": a, "b": a + 100})
    f = td.open(tmp_path / "a.tdf")
    t = td.subpaving((3, 8), [((0, 0), f["a"]), ((0, 4), f["b"])])
    assert t.region(1).buffers[0]["address"] == f["b"].buffers[0]["address"]
    del f
    assert t.get((2, 7)) == 111.0
    td.write(tmp_path / "c.tdf", {"c": t})
    assert td.open(tmp_path / "c.tdf")["c"].get((2, 7)) == 111.0


def test_locate_and_descriptor_bytes():
    t = td.subpaving((2, 4), [((0, 0), np.zeros((2, 2), np.float32)), ((0, 2), sp.csr_array(np.eye(2, dtype=np.float32)))])
    loc = t.locate((1, 1))
    assert loc["kind"] == "dense" and loc["region"] == 0 and loc["byte_offset"] == 12
    loc = t.locate((1, 3))
    assert loc["kind"] == "lookup" and loc["layout_tag"] == 0x08 and loc["local_index"] == [1, 1]
    d = td.decode(t.descriptor_bytes())
    assert d.shape == (2, 4) and len(d.regions) == 2
    assert [b["size"] for b in d.buffers] == [b["size"] for b in t.buffers]
