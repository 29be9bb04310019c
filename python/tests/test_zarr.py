"""tensordesc.zarr: a read-only Zarr v3 store over a file, read by the real clients —
zarr-python (groups, arrays, windows), xarray (open_zarr, open_dataset) and Dask on a
distributed.LocalCluster of two worker processes — and compared element by element with
tensordesc's own reads, for every data-plane case (tests/test_read.py) and the types,
ranks, names and grids the mapping treats specially. Also: the generated metadata, the
chunk shapes, chunks served in place, byte ranges, missing keys, listing, pickling and
refused writes."""

import asyncio
import json
import math
import pickle

import ml_dtypes
import numpy as np
import pytest
import scipy.sparse as sp

import tensordesc as td

zarr = pytest.importorskip("zarr")
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest  # noqa: E402
from zarr.core.buffer import default_buffer_prototype  # noqa: E402

import tensordesc.zarr as tz  # noqa: E402
from test_read import CASES, paged, pow2, sparse_codes  # noqa: E402

PROTO = default_buffer_prototype()


def run(coro):
    return asyncio.run(coro)


def get(store, key, byte_range=None):
    """The bytes the store gives for ``key`` (None for a missing key)."""
    buf = run(store.get(key, PROTO, byte_range))
    return None if buf is None else buf.to_bytes()


async def _collect(agen):
    return [k async for k in agen]


def listed(agen):
    return run(_collect(agen))


def same_values(got, want):
    """Equal dtype and shape, NaN where NaN, every other element bit for bit."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "fc":
        gn, wn = np.isnan(got), np.isnan(want)
        assert np.array_equal(gn, wn), "NaN positions differ"
        got, want = np.where(gn, 0, got), np.where(wn, 0, want)
    assert np.array_equal(
        np.ascontiguousarray(got).reshape(-1).view(np.uint8),
        np.ascontiguousarray(want).reshape(-1).view(np.uint8),
    )


# ---------------------------------------------------------------------------------------
# The tensors: the data-plane cases and the ones the mapping treats specially
# ---------------------------------------------------------------------------------------


def extra_cases():
    rng = np.random.default_rng(42)
    out = {}
    # Value types Zarr has no name for: read as float32.
    raw = rng.integers(0, 256, (19, 23), dtype=np.uint8)
    out["bf16"] = td.dense(rng.standard_normal((19, 23)).astype(ml_dtypes.bfloat16))
    out["f8"] = td.dense(raw.view(ml_dtypes.float8_e4m3fn))  # every bit pattern, NaNs too
    out["f8e5"] = td.dense(raw.view(ml_dtypes.float8_e5m2))
    out["i4"] = td.dense(rng.integers(-8, 8, (9, 13)).astype(ml_dtypes.int4))
    out["fp4"] = td.dense(rng.integers(0, 16, (6, 10), dtype=np.uint8).view(ml_dtypes.float4_e2m1fn))
    # Types Zarr names, ranks 0, 1 and 4, an empty tensor.
    out["bool"] = td.dense(rng.random((17, 5)) < 0.5)
    out["c64"] = td.dense((rng.standard_normal((7, 9)) + 1j * rng.standard_normal((7, 9))).astype(np.complex64))
    out["u64"] = td.dense(rng.integers(0, 2**63, (33,), dtype=np.uint64) * np.uint64(2))
    out["scalar"] = td.dense(np.float64(-2.75))
    out["rank4"] = td.dense(rng.integers(-50, 50, (3, 4, 5, 6)).astype(np.int16))
    out["empty"] = td.dense(np.zeros((0, 7), np.float32))
    # Format 1.1 quantization and per-region element types.
    c8 = rng.integers(-100, 100, (23, 37)).astype(np.int8)
    s2 = pow2(rng, (6, 5)).astype(np.float32)
    out["blockwise2d"] = td.dense(c8, quantization=td.Blockwise2D((0, 1), (4, 8), s2))
    f16 = rng.standard_normal((8, 6)).astype(np.float16)
    f8 = rng.standard_normal((8, 6)).astype(ml_dtypes.float8_e4m3fn)
    out["region_types"] = td.subpaving((8, 12), [((0, 0), f16), ((0, 6), f8)], dtype="float16")
    # ggml's quantized blocks (gguf's own quantizer).
    gguf = pytest.importorskip("gguf")
    w = rng.standard_normal((4, 64)).astype(np.float32)
    q = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
    out["ggml_q8_0"] = td.ggml_blocks(q, "Q8_0", (4, 64))
    # A tiled subpaving (a regular grid of regions) of dense, quantized and sparse parts,
    # with ragged last regions.
    parts = []
    a = rng.standard_normal((40, 44)).astype(np.float32)
    for i, r0 in enumerate(range(0, 40, 16)):
        for j, c0 in enumerate(range(0, 44, 16)):
            block = np.ascontiguousarray(a[r0:r0 + 16, c0:c0 + 16])
            if j == 1:
                part = td.dense(np.round(block * 8).astype(np.int8), quantization=td.PerTensorAffine(0.125))
            elif (i, j) == (2, 0):
                part = sp.csr_array(np.where(block > 0.5, block, 0).astype(np.float32))
            elif (i, j) == (1, 2):
                part = td.dense(np.asfortranarray(block))
            else:
                part = block
            parts.append(((r0, c0), part))
    out["tiled_grid"] = td.subpaving((40, 44), parts)
    # Regions that form no grid: the right column is cut at row 3, the left at row 4.
    out["off_grid"] = td.subpaving(
        (8, 6),
        [
            ((0, 0), np.ones((4, 3), np.float32)),
            ((4, 0), np.zeros((4, 3), np.float32)),
            ((0, 3), np.full((3, 3), 2, np.float32)),
            ((3, 3), np.full((5, 3), 4, np.float32)),
        ],
    )
    # Names as paths: nested groups.
    out["layers/0/attn/w"] = td.dense(rng.standard_normal((5, 8)).astype(np.float32))
    out["layers/0/mlp"] = td.dense(rng.integers(0, 9, (6,)).astype(np.uint8))
    out["layers/1/attn/w"] = td.from_scipy(sp.coo_array(sparse_codes(rng, (5, 8), np.float64)))
    return out


EXTRA = extra_cases()
ALL = {**{name: t for name, (t, _, _) in CASES.items()}, **EXTRA}


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("zarr") / "cases.tdf"
    td.write(p, ALL)
    return p


@pytest.fixture(scope="module")
def tdf(path):
    return td.open(path)


@pytest.fixture(scope="module", params=[tz.TARGET_CHUNK_BYTES, 256], ids=["4MiB", "256B"])
def store(request, path):
    """Default chunks (most test tensors are one chunk) and 256-byte chunks (many chunks,
    edge chunks everywhere)."""
    return tz.Store(path, chunk_bytes=request.param)


def want(t, info, box=None):
    """What tensordesc reads for ``box``, in the Zarr array's dtype."""
    values = t.read(box)
    return values.astype(info.dtype)


# ---------------------------------------------------------------------------------------
# zarr-python
# ---------------------------------------------------------------------------------------


def test_group_lists_every_tensor(store, tdf):
    assert store.tensors == list(tdf) and store.skipped == {}
    g = zarr.open_group(store, mode="r")
    arrays = {name for name, node in g.members(max_depth=None) if isinstance(node, zarr.Array)}
    assert arrays == set(tdf)
    groups = {name for name, node in g.members(max_depth=None) if isinstance(node, zarr.Group)}
    assert groups == {"layers", "layers/0", "layers/0/attn", "layers/1", "layers/1/attn"}
    assert g.attrs["tensordesc"] == {"path": str(tdf.path), "skipped": {}, "container": "tdf"}
    assert g.attrs["metadata"] == {}


@pytest.mark.parametrize("name", list(ALL))
def test_every_tensor_equals_tensordesc_reads(store, tdf, name):
    t = tdf[name]
    info = store.array_info(name)
    z = zarr.open_array(store, path=name, mode="r")
    assert z.shape == t.shape and z.dtype == info.dtype and z.chunks == info.chunks
    same_values(z[...], want(t, info))
    if name in CASES:  # the data-plane case's own densified reference
        same_values(z[...], np.asarray(CASES[name][1]).astype(info.dtype))
    rng = np.random.default_rng(len(name))
    for _ in range(6):
        box = []
        for n in t.shape:
            a = int(rng.integers(0, n + 1))
            b = int(rng.integers(a, n + 1))
            box.append(slice(a, b))
        box = tuple(box)
        same_values(z[box], want(t, info, box))
    if t.ndim >= 1 and t.shape[0] > 2:
        same_values(z[1, ...], want(t, info)[1, ...])  # an integer index, through zarr


def test_value_types_zarr_has_no_name_for_read_as_float32(store, tdf):
    for name, element_type in [("bf16", "BFLOAT16"), ("f8", "FLOAT8_E4M3FN"), ("f8e5", "FLOAT8_E5M2"),
                               ("i4", "INT4"), ("fp4", "FLOAT4_E2M1FN")]:
        t = tdf[name]
        info = store.array_info(name)
        assert info.dtype == np.float32 and info.read_as == "float32"
        meta = json.loads(get(store, f"{name}/zarr.json"))
        assert meta["data_type"] == "float32"
        attrs = meta["attributes"]["tensordesc"]
        assert attrs["element_type"] == element_type
        assert attrs["value_type"] == str(t.read_dtype()) and attrs["read_as"] == "float32"
        # float32 holds each value exactly: the element's own value, NaN as NaN.
        z = zarr.open_array(store, path=name, mode="r")
        same_values(z[...], t[...].astype(np.float32))
    f8 = zarr.open_array(store, path="f8", mode="r")[...]
    assert np.isnan(f8).sum() == (tdf["f8"][...].view(np.uint8) & 0x7F == 0x7F).sum() > 0


def test_array_metadata(store, tdf):
    meta = json.loads(get(store, "quantized_csr/zarr.json"))
    t = tdf["quantized_csr"]
    info = store.array_info("quantized_csr")
    assert meta == {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [23, 37],
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(info.chunks)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {
            "tensordesc": {
                "element_type": "INT8",
                "value_type": "float32",
                "layout": "CSR",
                "layout_params": {"nnz": t.layout_params["nnz"], "flags": t.layout_params["flags"]},
                "quantization": t.quantization,
                "chunks": "chosen",
            }
        },
        "dimension_names": ["quantized_csr_dim0", "quantized_csr_dim1"],
    }
    assert json.loads(get(store, "bool/zarr.json"))["codecs"] == [{"name": "bytes"}]  # one byte
    assert json.loads(get(store, "bool/zarr.json"))["fill_value"] is False
    assert json.loads(get(store, "c64/zarr.json"))["fill_value"] == [0.0, 0.0]
    assert json.loads(get(store, "u64/zarr.json"))["fill_value"] == 0
    nested = json.loads(get(store, "nested/zarr.json"))["attributes"]["tensordesc"]
    assert nested["regions"] == {
        "count": 6,
        "leaves": 4,
        "layouts": {"CSR": 1, "ROW_MAJOR": 2, "SPLAT": 1},
        "quantization": {"PER_TENSOR_AFFINE": 1, "BLOCKWISE": 1},
    }
    ggml = json.loads(get(store, "ggml_q8_0/zarr.json"))["attributes"]["tensordesc"]
    assert ggml["layout_params"]["ggml_type_name"] == "Q8_0"
    assert json.loads(get(store, "layers/0/zarr.json")) == {
        "zarr_format": 3, "node_type": "group", "attributes": {}
    }
    z = zarr.open_array(store, path="rank4", mode="r")
    assert z.metadata.dimension_names == tuple(f"rank4_dim{i}" for i in range(4))
    assert z.attrs["tensordesc"]["layout"] == "ROW_MAJOR"


def test_chunks_follow_a_regular_grid_of_regions(store, tdf):
    info = store.array_info("tiled_grid")
    assert info.chunks == (16, 16) and info.basis == "regions" and info.counts == (3, 3)
    t = tdf["tiled_grid"]
    boxes = {tuple((s.start, s.stop) for s in r.box) for r in t.regions if r.parent is None}
    chunk_boxes = {
        tuple((i * 16, min(i * 16 + 16, n)) for i, n in zip(idx, t.shape))
        for idx in np.ndindex(*info.counts)
    }
    assert chunk_boxes == boxes
    t = store.file["tiled_grid"]  # the store's own mapping of the file
    # The row-major float32 regions of the full chunk shape are served from the mapping;
    # the others are read, and the edge chunks padded to the full chunk shape.
    dense = dict(info.in_place)
    assert sorted(dense) == [(0, 0), (1, 0)]
    for idx in np.ndindex(*info.counts):
        buf = run(store.get(f"tiled_grid/c/{idx[0]}/{idx[1]}", PROTO)).as_numpy_array()
        assert len(buf) == 16 * 16 * 4
        region = t.region(dense[idx]) if idx in dense else None
        if region is not None:
            assert buf.ctypes.data == region.buffers[0]["address"]
            assert region.layout == "ROW_MAJOR" and region.shape == (16, 16)
        chunk = buf.view(np.float32).reshape(16, 16)
        box = tuple(slice(i * 16, min(i * 16 + 16, n)) for i, n in zip(idx, t.shape))
        h, w = (s.stop - s.start for s in box)
        same_values(chunk[:h, :w], t.read(box))
        assert not chunk[h:, :].any() and not chunk[:, w:].any()


def test_a_dense_tensor_is_served_in_place(tmp_path):
    a = np.arange(64 * 100, dtype=np.float32).reshape(64, 100)
    td.write(tmp_path / "d.tdf", {"a": a})
    store = tz.Store(tmp_path / "d.tdf", chunk_bytes=16 * 100 * 4)
    info = store.array_info("a")
    assert info.chunks == (16, 100)  # whole rows
    base = store.file["a"].buffers[0]["address"]
    for i in range(4):
        buf = run(store.get(f"a/c/{i}/0", PROTO)).as_numpy_array()
        assert buf.ctypes.data == base + i * 16 * 100 * 4
        assert np.array_equal(buf.view(np.float32).reshape(16, 100), a[16 * i:16 * i + 16])


def test_chosen_chunks_respect_region_boundaries(store, tdf):
    info = store.array_info("off_grid")
    assert info.basis == "chosen"
    # Region boundaries: rows 3, 4 (gcd 1), column 3: chunk columns divide 3 or are whole.
    assert info.chunks[1] in (1, 3, 6)
    info = store.array_info("grid_int16")  # 2 x 2 regions of 15 x 25: a regular grid
    assert info.basis == "regions" and info.chunks == (15, 25)


def test_choose_chunks():
    MiB = 2**20
    # Dense: whole rows first, then as many rows as fit.
    assert tz.choose_chunks((10000, 1000), 4) == (1048, 1000)
    assert tz.choose_chunks((10000, 1000), 4, innermost_first=(0, 1)) == (10000, 104)
    assert tz.choose_chunks((100, 100), 8) == (100, 100)
    assert tz.choose_chunks((), 4) == ()
    assert tz.choose_chunks((0, 5), 4) == (1, 5)
    assert tz.choose_chunks((3, 10**8), 1) == (1, 4 * MiB)
    # A lattice cell larger than the target is cut into divisors of its extent...
    c = tz.choose_chunks((8192, 8192), 4, (4096, 4096))
    assert c == (256, 4096) and 4096 % c[0] == 0 and math.prod(c) * 4 <= 4 * MiB
    # ... smaller cells are grown by whole cells.
    c = tz.choose_chunks((1000, 1200), 4, (10, 30))
    assert c[1] == 1200 and c[0] % 10 == 0 and math.prod(c) * 4 <= 4 * MiB
    assert tz.choose_chunks((10**6, 4096), 2, (1, 96), target_bytes=64 * 1024) == (8, 4096)
    assert tz.choose_chunks((10**6, 4800), 2, (1, 96), target_bytes=4096) == (1, 2016)
    # The target is honoured within a factor of two whenever the array is larger.
    rng = np.random.default_rng(3)
    for _ in range(200):
        shape = tuple(int(e) for e in rng.integers(1, 3000, rng.integers(1, 4)))
        lattice = tuple(int(rng.integers(1, e + 1)) for e in shape)
        itemsize = int(rng.choice([1, 2, 4, 8]))
        target = int(rng.choice([1024, 65536]))
        c = tz.choose_chunks(shape, itemsize, lattice, target_bytes=target)
        assert all(1 <= ce <= e for ce, e in zip(c, shape))
        assert math.prod(c) * itemsize <= max(target, itemsize)
    with pytest.raises(ValueError):
        tz.choose_chunks((4, 4), 4, innermost_first=(0, 0))


def test_zarr_data_types():
    assert tz.zarr_data_type(np.dtype(np.float16)) == ("float16", None)
    assert tz.zarr_data_type(np.dtype(np.complex128)) == ("complex128", None)
    assert tz.zarr_data_type(np.dtype(np.bool_)) == ("bool", None)
    assert tz.zarr_data_type(np.dtype(">i4")) == ("int32", None)
    for t in (ml_dtypes.bfloat16, ml_dtypes.float8_e8m0fnu, ml_dtypes.uint4):
        assert tz.zarr_data_type(np.dtype(t)) == ("float32", "float32")


# ---------------------------------------------------------------------------------------
# Keys: missing ones, byte ranges, listing
# ---------------------------------------------------------------------------------------


MISSING = [
    "nope/zarr.json", "nope/c/0/0", "layers/zarr.json/zarr.json", "zarr.jso", "", "/zarr.json",
    "layers//zarr.json", "layers/0/attn/w//zarr.json", "xzarr.json", "row_major/zarr.json/",
    "row_major", "row_major/", "row_major/c", "row_major/c/0", "row_major/c/0/0/0",
    "row_major/c/99/0", "row_major/c/0/99", "row_major/c/-1/0", "row_major/c/01/0",
    "row_major/c/0/x", "row_major/c/0/", "row_major/c//0", "row_major/d/0/0", "row_major/c/٣/0",
    "scalar/c/0", "empty/c/0/0", "layers/c/0", "layers/0/attn/w/c/0/0/0", "layers/0/attn/c/0/0",
]


def test_missing_and_out_of_range_keys(store):
    for key in MISSING:
        assert get(store, key) is None, key
        assert run(store.exists(key)) is False, key
        with pytest.raises(FileNotFoundError):
            run(store.getsize(key))
        assert get(store, key, RangeByteRequest(0, 4)) is None
    assert run(store.get_partial_values(PROTO, [(k, None) for k in MISSING])) == [None] * len(MISSING)
    # The keys that are there.
    for key in ["zarr.json", "layers/zarr.json", "row_major/zarr.json", "row_major/c/0/0", "scalar/c"]:
        assert run(store.exists(key)), key
        assert run(store.getsize(key)) == len(get(store, key))


def test_partial_reads_are_slices_of_the_whole(store):
    for key in ["tiled_grid/c/1/2", "nested/c/0/0", "bool/c/0/0", "zarr.json", "nested/zarr.json"]:
        whole = get(store, key)
        n = len(whole)
        requests = [
            (RangeByteRequest(0, n), whole),
            (RangeByteRequest(3, 17), whole[3:17]),
            (RangeByteRequest(n - 5, n + 100), whole[n - 5:]),
            (RangeByteRequest(n + 10, n + 20), b""),
            (RangeByteRequest(7, 7), b""),
            (OffsetByteRequest(0), whole),
            (OffsetByteRequest(11), whole[11:]),
            (OffsetByteRequest(n + 3), b""),
            (SuffixByteRequest(9), whole[-9:]),
            (SuffixByteRequest(0), b""),
            (SuffixByteRequest(n + 50), whole),
        ]
        for request, expected in requests:
            assert get(store, key, request) == expected, (key, request)
        got = run(store.get_partial_values(PROTO, [(key, r) for r, _ in requests]))
        assert [b.to_bytes() for b in got] == [e for _, e in requests]
        assert store.get_sync(key, byte_range=RangeByteRequest(3, 17)).to_bytes() == whole[3:17]
    for bad in [RangeByteRequest(-1, 4), RangeByteRequest(5, 4), OffsetByteRequest(-2), SuffixByteRequest(-1)]:
        with pytest.raises(ValueError):
            get(store, "zarr.json", bad)


def test_listing(store, tdf):
    keys = listed(store.list())
    assert len(keys) == len(set(keys))
    metadata = {k for k in keys if k.endswith("zarr.json")}
    assert metadata == {"zarr.json"} | {f"{n}/zarr.json" for n in tdf} | {
        f"{g}/zarr.json" for g in ["layers", "layers/0", "layers/0/attn", "layers/1", "layers/1/attn"]
    }
    for name in tdf:
        info = store.array_info(name)
        chunks = {k for k in keys if k.startswith(f"{name}/c") and k[len(name) + 2:len(name) + 3] in ("", "/")}
        assert len(chunks) == math.prod(info.counts), name
        assert all(run(store.exists(k)) for k in chunks)
        assert set(listed(store.list_prefix(f"{name}/"))) == chunks | {f"{name}/zarr.json"}
    assert "scalar/c" in keys and not [k for k in keys if k.startswith("empty/c")]
    assert set(listed(store.list_prefix("layers/0/"))) == {
        "layers/0/zarr.json", "layers/0/attn/zarr.json", "layers/0/attn/w/zarr.json",
        "layers/0/mlp/zarr.json",
    } | {k for k in keys if k.startswith("layers/0/attn/w/c/") or k.startswith("layers/0/mlp/c/")}
    root = listed(store.list_dir(""))
    assert root[0] == "zarr.json" and set(root[1:]) == {n for n in tdf if "/" not in n} | {"layers"}
    assert listed(store.list_dir("layers/")) == ["zarr.json", "0", "1"]
    assert listed(store.list_dir("layers/0/attn/w")) == ["zarr.json", "c"]
    assert listed(store.list_dir("empty")) == ["zarr.json"]
    info = store.array_info("row_major")
    assert listed(store.list_dir("row_major/c")) == [str(i) for i in range(info.counts[0])]
    assert listed(store.list_dir("row_major/c/0")) == [str(i) for i in range(info.counts[1])]
    assert listed(store.list_dir("row_major/c/0/0")) == []
    assert listed(store.list_dir("row_major/c/99")) == []
    assert listed(store.list_dir("nope")) == []
    assert run(store.is_empty("")) is False and run(store.is_empty("nope")) is True


def test_names_that_are_no_zarr_paths_are_left_out(tmp_path):
    names = {
        "x//y": "empty", "/lead": "empty", "trail/": "empty", "__h": "'__'", "g/__x": "'__'",
        "zarr.json": "'zarr.json'", "../up": "'..'", "a/./b": "'.'", "a/b": "inside tensor 'a'",
        "a/b/c": "inside tensor 'a'",
    }
    tensors = {n: np.zeros(2, np.float32) for n in names}
    tensors.update({"a": np.ones(3, np.float32), "g/c/t": np.arange(3, dtype=np.float32), "c": np.ones(1)})
    td.write(tmp_path / "n.tdf", tensors)
    store = tz.Store(tmp_path / "n.tdf")
    assert store.tensors == ["a", "g/c/t", "c"]
    assert set(store.skipped) == set(names)
    for name, why in names.items():
        assert why in store.skipped[name], (name, store.skipped[name])
    g = zarr.open_group(store, mode="r")
    assert g.attrs["tensordesc"]["skipped"] == store.skipped
    assert np.array_equal(g["g/c/t"][...], np.arange(3, dtype=np.float32))
    assert np.array_equal(g["c"][...], np.ones(1))
    assert get(store, "a/b/zarr.json") is None and get(store, "x//y/zarr.json") is None
    # A dimension name is never the name of an array beside it.
    td.write(tmp_path / "d.tdf", {"w": np.zeros((2, 3)), "w_dim0": np.zeros(4), "_w_dim1": np.zeros(5)})
    store = tz.Store(tmp_path / "d.tdf")
    dims = json.loads(get(store, "w/zarr.json"))["dimension_names"]
    assert dims == ["__w_dim0", "__w_dim1"]
    xr = pytest.importorskip("xarray")
    ds = xr.open_zarr(store, consolidated=False)
    assert ds["w"].dims == ("__w_dim0", "__w_dim1") and ds["w_dim0"].shape == (4,)


# ---------------------------------------------------------------------------------------
# Read-only, identity, pickling
# ---------------------------------------------------------------------------------------


def test_writes_are_refused(store):
    from zarr.core.buffer import cpu

    value = cpu.Buffer.from_bytes(b"{}")
    for call in [
        store.set("zarr.json", value), store.set("new/zarr.json", value),
        store.set_if_not_exists("new/zarr.json", value), store.delete("zarr.json"),
        store.delete_dir("row_major"), store.clear(),
    ]:
        with pytest.raises(ValueError, match="read-only"):
            run(call)
    assert store.read_only and not store.supports_writes and not store.supports_deletes
    assert not store.supports_partial_writes and store.supports_listing
    opened = run(tz.Store.open(store.path))  # the ABC's constructor-and-open
    assert opened._is_open and opened == tz.Store(store.path)
    with pytest.raises(ValueError, match="already open"):
        run(opened._open())
    assert not store.supports_consolidated_metadata
    with pytest.raises(ValueError, match="read-only"):
        zarr.open_group(store, mode="a")
    with pytest.raises(ValueError, match="read-only"):
        zarr.open_array(store, path="row_major", mode="r+")
    z = zarr.open_array(store, path="row_major", mode="r")
    with pytest.raises(ValueError, match="read-only"):
        z[0, 0] = 1.0
    with pytest.raises(NotImplementedError, match="with_read_only is not implemented for the <class"):
        store.with_read_only(False)  # as zarr's own store tests expect of a store without one
    other = store.with_read_only(True)
    assert other == store and other is not store and other.file is store.file
    assert other.read_only and not other._is_open
    with pytest.raises(TypeError, match="Unexpected byte_range, got"):
        get(store, "zarr.json", (0, 2))
    assert get(store, "row_major/c/0/0") == get(other, "row_major/c/0/0")


def test_identity_and_pickling(store, path, tdf):
    assert store == tz.Store(str(path), chunk_bytes=store.chunk_bytes)
    assert store != tz.Store(path, chunk_bytes=store.chunk_bytes + 1)
    assert store != zarr.storage.MemoryStore()
    from_file = tz.Store(tdf, chunk_bytes=store.chunk_bytes)
    assert from_file == store and from_file.file is tdf
    data = pickle.dumps(store)
    assert len(data) < 400  # the path and two settings, whatever the file holds
    back = pickle.loads(data)
    assert back == store and hash(back) == hash(store)
    # Unpickled in the same process: the mapping the store had (one per file version).
    assert back.file is store.file
    for key in ["zarr.json", "nested/zarr.json", "nested/c/0/0", "tiled_grid/c/2/2"]:
        assert get(back, key) == get(store, key)
    assert str(store) == f"tensordesc://{path}" and repr(store) == f"tensordesc.zarr.Store({str(path)!r})"


def test_a_rewritten_file_is_mapped_again_on_unpickling(tmp_path):
    p = tmp_path / "v.tdf"
    td.write(p, {"x": np.zeros(4, np.float32)})
    data = pickle.dumps(tz.Store(p))
    td.write(p, {"x": np.ones(4, np.float32), "y": np.ones(2)})
    back = pickle.loads(data)
    assert back.tensors == ["x", "y"]
    assert np.array_equal(zarr.open_array(back, path="x", mode="r")[...], np.ones(4, np.float32))


def test_tensors_that_cannot_be_read_are_left_out(tmp_path):
    """A permissive read keeps a tensor of an unknown layout as an opaque entry: its
    shape is known, its elements are not. The store leaves it out, and every key of it
    is a missing key, not the library's error."""
    good = td.dense(np.arange(4, dtype=np.float32))
    blob = bytearray(td.to_bytes({"ok": good, "bad": good}))
    at = bytes(blob).rindex(good.descriptor_bytes())  # the second tensor's descriptor
    assert blob[at + 18] == 0x01  # layout_tag (spec 1.2), ROW_MAJOR
    blob[at + 18] = 0x3A  # an unassigned tag
    (tmp_path / "p.tdf").write_bytes(bytes(blob))
    f = td.open(tmp_path / "p.tdf", strict=False)
    assert f["bad"].shape == (4,)
    with pytest.raises(td.NotBindable):
        f["bad"].read()
    store = tz.Store(f)
    assert store.tensors == ["ok"]
    assert store.skipped == {"bad": "layout UNKNOWN_0x3A is not readable"}
    for key in ["bad/zarr.json", "bad/c/0"]:
        assert get(store, key) is None and not run(store.exists(key))
    assert np.array_equal(zarr.open_array(store, path="ok", mode="r")[...], np.arange(4, dtype=np.float32))
    assert list(zarr.open_group(store, mode="r").array_keys()) == ["ok"]
    with pytest.raises(td.Error):
        tz.Store(tmp_path / "p.tdf")  # strict: the file does not open


# ---------------------------------------------------------------------------------------
# xarray and Dask
# ---------------------------------------------------------------------------------------

R = 1024  # a 4 x 4 grid of R x R regions: the 4096 x 4096 quantized mixed tensor


def mixed(rng):
    """A 4096 x 4096 FLOAT32 tensor of 16 regions of INT8 (and UINT8) codes in every
    layout and quantization scheme, and the float32 array a read gives. Every value is a multiple of 1/16 below
    2**9, so float64 sums are exact in any order."""
    ref = np.empty((4 * R, 4 * R), np.float32)
    parts = []

    def codes(shape=(R, R)):
        return rng.integers(-128, 128, shape, dtype=np.int8)

    def put(k, part, values):
        i, j = divmod(k, 4)
        parts.append(((i * R, j * R), part))
        ref[i * R:(i + 1) * R, j * R:(j + 1) * R] = values

    def sparse(density):
        c = codes()
        return np.where(rng.random((R, R), np.float32) < density, c, 0).astype(np.int8)

    c = codes()
    put(0, c, c)
    m = sparse(0.02)
    put(1, sp.csr_array(m), m)
    pages, table, lengths, dense = paged(rng, R, R, (), 256, np.int8, values=lambda s: rng.integers(-128, 128, s).astype(np.int8))
    put(2, td.block_paged([pages], table, lengths, (R, R), 256), dense)
    c = codes()
    put(3, td.dense(c, quantization=td.PerTensorAffine(0.25, 3)), (c - 3.0) * 0.25)
    c, s, z = codes(), pow2(rng, R).astype(np.float16), rng.integers(-4, 4, R).astype(np.int8)
    put(4, td.dense(c, quantization=td.PerAxisAffine(0, s, z)), (c - z[:, None].astype(np.float64)) * s[:, None])
    c, s = codes(), pow2(rng, (R, R // 128)).astype(np.float32)
    put(5, td.dense(c, quantization=td.Blockwise(1, 128, s)), c * np.repeat(s.astype(np.float64), 128, axis=1))
    m = sparse(0.05)
    put(6, td.from_scipy(sp.csr_array(m), quantization=td.PerTensorAffine(0.5, 2)), (m - 2.0) * 0.5)
    c = codes()
    put(7, td.tiled(c, (64, 64)), c)
    put(8, td.splat(np.int8(-7), (R, R)), -7)
    left, m = codes((R, R // 2)), sparse(0.01)[:, : R // 2]
    put(9, td.subpaving((R, R), [((0, 0), left), ((0, R // 2), sp.csr_array(m))]), np.concatenate([left, m], axis=1))
    c, s = codes(), pow2(rng, (R // 128, R // 64)).astype(np.float32)
    put(10, td.dense(c, quantization=td.Blockwise2D((0, 1), (128, 64), s)),
        c * np.repeat(np.repeat(s.astype(np.float64), 128, axis=0), 64, axis=1))
    c = codes()
    put(11, td.dense(c, quantization=td.PerTensorAffine(0.5)), c * 0.5)
    m = sparse(0.01)
    put(12, sp.coo_array(m), m)
    cb = (np.arange(256) - 128).astype(np.float32) / 16
    k = rng.integers(0, 256, (R, R), dtype=np.uint8)
    put(13, td.dense(k, quantization=td.Codebook(cb)), cb[k])
    c, s = codes(), pow2(rng, R).astype(np.float32)
    put(14, td.dense(c, quantization=td.PerAxisAffine(1, s)), c * s[None, :].astype(np.float64))
    pages, table, lengths, dense = paged(rng, R, R, (), 256, np.int8, values=lambda s: rng.integers(-128, 128, s).astype(np.int8))
    put(15, td.block_paged([pages], table, lengths, (R, R), 256, quantization=td.PerTensorAffine(0.125, -1)),
        (dense + 1.0) * 0.125)
    return td.subpaving(ref.shape, parts, dtype="float32"), ref


@pytest.fixture(scope="module")
def mixed_file(tmp_path_factory):
    t, ref = mixed(np.random.default_rng(11))
    p = tmp_path_factory.mktemp("mixed") / "mixed.tdf"
    small = np.arange(12, dtype=np.float64).reshape(3, 4)
    td.write(p, {"mixed": t, "small": small, "layers/0/w": small.T.copy()})
    return p, ref


def test_mixed_tensor_grid(mixed_file):
    p, ref = mixed_file
    store = tz.Store(p)
    info = store.array_info("mixed")
    assert info.dtype == np.float32 and info.chunks == (R, R) and info.basis == "regions"
    assert [r.layout for r in store.file["mixed"].regions if r.parent is None][:4] == [
        "ROW_MAJOR", "CSR", "BLOCK_PAGED", "ROW_MAJOR"]
    z = zarr.open_array(store, path="mixed", mode="r")
    same_values(z[...], ref)


def test_xarray_reads_the_variables_and_reduces_the_mixed_tensor(mixed_file, store, tdf):
    xr = pytest.importorskip("xarray")
    p, ref = mixed_file
    ds = xr.open_zarr(tz.Store(p), consolidated=False)
    assert set(ds.data_vars) == {"mixed", "small"}
    assert ds["mixed"].dims == ("mixed_dim0", "mixed_dim1")
    assert ds["mixed"].chunks == ((R,) * 4, (R,) * 4)
    assert ds["mixed"].attrs["tensordesc"]["regions"]["leaves"] == 17
    total = ds["mixed"].sum(dtype=np.float64).compute()
    assert float(total) == ref.sum(dtype=np.float64)
    assert float(ds["mixed"].mean(dtype=np.float64).compute()) == ref.mean(dtype=np.float64)
    row_max = ds["mixed"].max(dim="mixed_dim1").compute().values
    assert np.array_equal(row_max, ref.max(axis=1))
    window = ds["mixed"][R // 2:3 * R + 100, R - 50:4 * R:7].values
    same_values(window, ref[R // 2:3 * R + 100, R - 50:4 * R:7])
    nested = xr.open_zarr(tz.Store(p), group="layers/0", consolidated=False)
    assert np.array_equal(nested["w"].values, np.arange(12.0).reshape(3, 4).T)
    # open_dataset with the zarr engine, without dask: every case tensor at the root.
    ds = xr.open_dataset(store, engine="zarr", consolidated=False, chunks=None)
    root = [n for n in tdf if "/" not in n]
    assert set(ds.variables) == set(root)
    for name in root:
        t = tdf[name]
        same_values(ds[name].values, want(t, store.array_info(name)))


def test_dask_from_zarr_on_a_local_cluster_of_processes(mixed_file, path, tdf):
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    p, ref = mixed_file
    store = tz.Store(p)
    x = da.from_zarr(zarr.open_array(store, path="mixed", mode="r"))
    assert x.chunks == ((R,) * 4, (R,) * 4) and x.dtype == np.float32
    cases = tz.Store(path, chunk_bytes=256)
    others = {name: da.from_zarr(cases, component=name) for name in ["nested", "tiled_grid", "bf16", "quantized_paged"]}
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        total, mean, window = client.compute(
            [x.sum(dtype=np.float64), x.mean(dtype=np.float64), x[R // 2:3 * R + 100, R - 50:4 * R:7]],
            sync=True,
        )
        assert float(total) == ref.sum(dtype=np.float64)
        assert float(mean) == ref.mean(dtype=np.float64)
        same_values(window, ref[R // 2:3 * R + 100, R - 50:4 * R:7])
        got = client.compute(list(others.values()), sync=True)
        for (name, arr), values in zip(others.items(), got):
            assert arr.npartitions > 1, name
            same_values(values, want(tdf[name], cases.array_info(name)))
        # Each worker read chunks through its own mapping of the files.
        pids = client.run(lambda: __import__("os").getpid())
        assert len(set(pids.values())) == 2


# ---------------------------------------------------------------------------------------
# Foreign files: GGUF (written by gguf's own writer) and safetensors, opened in place
# ---------------------------------------------------------------------------------------


def _foreign_paths(tmp_path):
    import pathlib

    from safetensors.numpy import save_file

    gguf = pathlib.Path(__file__).parents[2] / "tests" / "vectors" / "gguf" / "quant.gguf"
    st = tmp_path / "model.safetensors"
    rng = np.random.default_rng(5)
    save_file(
        {"w": rng.standard_normal((6, 10)).astype(np.float16), "b": np.arange(10, dtype=np.int32)},
        str(st),
        metadata={"format": "pt"},
    )
    return [gguf, st]


def test_foreign_files_through_the_store(tmp_path):
    for p in _foreign_paths(tmp_path):
        f = td.open(p)
        store = tz.Store(p)
        g = zarr.open_group(store, mode="r")
        assert g.attrs["tensordesc"]["container"] == f.container
        names = [n for n in f if n not in store.skipped]
        assert names, p
        for name in names:
            a = g[name]
            want_values = f[name][...]
            got = a[...]
            if want_values.dtype.kind == "f" and want_values.dtype.itemsize < 4 and got.dtype != want_values.dtype:
                want_values = want_values.astype(got.dtype)
            np.testing.assert_array_equal(got, want_values, err_msg=f"{p.name}:{name}")
    st = _foreign_paths(tmp_path)[1]
    assert zarr.open_group(tz.Store(st), mode="r").attrs["metadata"] == {"format": "pt"}
