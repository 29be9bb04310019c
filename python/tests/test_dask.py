"""tensordesc.dask: dask arrays whose chunks are windowed reads of a file's tensor, on the
local scheduler and on a LocalCluster of worker processes."""

import os
import pickle
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import tensordesc as td

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

import tensordesc.dask as tdd  # noqa: E402


def grid_tensor():
    """A 2 x 3 grid of regions (dense, CSR, splat, tiled, a quantized one) of INT16 and
    the float32 array a read gives."""
    rng = np.random.default_rng(0)
    a = rng.integers(-1000, 1000, (10, 15)).astype(np.int16)
    m = np.where(rng.random((4, 5)) < 0.3, a[:4, 5:10], 0).astype(np.int16)
    t = td.subpaving(
        (10, 15),
        [
            ((0, 0), a[:4, :5]),
            ((0, 5), sp.csr_array(m)),
            ((0, 10), td.splat(np.int16(3), (4, 5))),
            ((4, 0), td.tiled(a[4:, :5], (4, 2))),
            ((4, 5), td.dense(a[4:, 5:10], quantization=td.PerTensorAffine(0.5, 1))),
            ((4, 10), a[4:, 10:]),
        ],
    )
    ref = a.astype(np.float64)
    ref[:4, 5:10] = m
    ref[:4, 10:] = 3
    ref[4:, 5:10] = (a[4:, 5:10] - 1.0) * 0.5
    return t, ref.astype(np.float32)


@pytest.fixture
def small_file(tmp_path):
    t, ref = grid_tensor()
    # Top-level regions not on a grid: the right column is cut at row 3, the left at 4.
    off = td.subpaving((8, 6), [((0, 0), np.ones((4, 3), np.float32)), ((4, 0), np.zeros((4, 3), np.float32)),
                                ((0, 3), np.full((3, 3), 2, np.float32)), ((3, 3), np.full((5, 3), 4, np.float32))])
    path = tmp_path / "small.tdf"
    td.write(path, {"grid": t, "dense": ref, "off_grid": off})
    return path, ref


def test_chunks_follow_the_regions_of_a_grid(small_file):
    path, ref = small_file
    x = tdd.from_tdf(path, "grid")
    assert x.chunks == ((4, 6), (5, 5, 5))
    assert x.dtype == np.float32 and x.shape == (10, 15)
    f = td.open(path)
    boxes = {tuple((s.start, s.stop) for s in r.box) for r in f["grid"].regions}
    starts = [np.cumsum((0,) + c[:-1]) for c in x.chunks]
    chunk_boxes = {
        ((int(r0), int(r0 + h)), (int(c0), int(c0 + w)))
        for r0, h in zip(starts[0], x.chunks[0])
        for c0, w in zip(starts[1], x.chunks[1])
    }
    assert chunk_boxes == boxes
    with dask.config.set(scheduler="sync"):
        assert np.array_equal(x.compute(), ref)
        assert x.sum(dtype=np.float64).compute() == ref.sum(dtype=np.float64)
        assert np.array_equal(x[3:9, 2:14:3].compute(), ref[3:9, 2:14:3])


def test_other_tensors_get_regular_chunks(small_file):
    path, ref = small_file
    assert tdd.region_chunks(td.open(path)["off_grid"]) is None
    assert tdd.region_chunks(td.open(path)["dense"]) is None
    for name, dtype in [("off_grid", np.float32), ("dense", np.float32)]:
        x = tdd.from_tdf(path, name)
        assert x.chunks == da.core.normalize_chunks("auto", x.shape, dtype=dtype)
    with dask.config.set({"array.chunk-size": "64B"}):
        x = tdd.from_tdf(path, "off_grid")
        assert x.npartitions > 1
        assert all(len(set(c[:-1])) <= 1 and c[-1] <= c[0] for c in x.chunks)  # regular
        want = np.zeros((8, 6), np.float32)
        want[:4, :3], want[:3, 3:], want[3:, 3:] = 1, 2, 4
        assert np.array_equal(x.compute(scheduler="sync"), want)


def test_given_chunks_and_dtypes(small_file):
    path, ref = small_file
    x = tdd.from_tdf(path, "grid", chunks=(3, 4))
    assert x.chunks == ((3, 3, 3, 1), (4, 4, 4, 3))
    assert np.array_equal(x.compute(scheduler="sync"), ref)
    raw = tdd.from_tdf(path, "grid", dtype="raw")
    assert raw.dtype == np.int16
    codes = raw.compute(scheduler="sync")
    assert np.array_equal(codes[4:, 5:10], td.open(path)["grid"].region(4).numpy(raw=True))
    f64 = tdd.from_tdf(path, "grid", dtype="float64")
    assert f64.dtype == np.float64
    assert np.array_equal(f64.compute(scheduler="sync"), ref.astype(np.float64))


def test_graph_carries_path_and_name_only(small_file, tmp_path):
    path, ref = small_file
    big = np.arange(1 << 20, dtype=np.float64).reshape(1024, 1024)
    td.write(tmp_path / "big.tdf", {"big": big})
    x = tdd.from_tdf(tmp_path / "big.tdf", "big", chunks=256)
    graph = dict(x.__dask_graph__())
    assert len(graph) == 16
    assert len(pickle.dumps(graph)) < 16 * 1024  # 8 MiB of elements, a few KiB of graph
    # A chunk's source unpickles to a tensor of the same file, mapped once per process.
    src = pickle.loads(pickle.dumps(tdd.TdfArray(td.open(path)["grid"])))
    assert np.array_equal(src[2:5, 1:9], ref[2:5, 1:9])
    assert pickle.loads(pickle.dumps(td.open(path)["grid"])).buffers[0]["address"] == \
        src.tensor.buffers[0]["address"]


def test_names_are_deterministic_per_file_version(small_file):
    path, _ = small_file
    a, b = tdd.from_tdf(path, "grid"), tdd.from_tdf(str(path), "grid")
    assert a.name == b.name
    assert tdd.from_tdf(path, "grid", dtype="raw").name != a.name
    t, ref = grid_tensor()
    td.write(path, {"grid": td.dense(ref * 2)})
    c = tdd.from_tdf(path, "grid")
    assert c.name != a.name
    assert np.array_equal(c.compute(scheduler="sync"), ref * 2)


# ---------------------------------------------------------------------------------------
# A LocalCluster of two worker processes over a heterogeneous tensor of a few hundred MB
# ---------------------------------------------------------------------------------------

R = 4096  # region extent; a 4 x 4 grid of R x R INT8 regions (256 MiB of elements)


def pow2(rng, shape):
    return np.exp2(rng.integers(-3, 2, shape))


def heterogeneous(rng):
    """The regions (origin, part) and the float32 array a read gives. Every value is a
    multiple of 1/16 below 2**9, so float64 sums of them are exact in any order."""
    ref = np.empty((4 * R, 4 * R), np.float32)
    parts = []

    def codes(shape=(R, R)):
        return rng.integers(-128, 128, shape, dtype=np.int8)

    def put(i, j, part, values):
        parts.append(((i * R, j * R), part))
        ref[i * R:(i + 1) * R, j * R:(j + 1) * R] = values

    def sparse(density):
        c = codes()
        return np.where(rng.random((R, R), np.float32) < density, c, 0).astype(np.int8)

    def paged():
        block = 256
        nb = R // block
        pages = codes((R * nb, block))
        table = np.arange(R * nb).reshape(R, nb)
        table[rng.random(table.shape) < 0.1] = -1
        lengths = rng.integers(0, R + 1, R)
        lengths[::7] = R
        dense = pages[np.maximum(table, 0)].reshape(R, R)
        dense[np.repeat(table < 0, block, axis=1)] = 0
        dense[np.arange(R)[None, :] >= lengths[:, None]] = 0
        return pages, table, lengths, dense

    a = codes()
    put(0, 0, a, a)
    m = sparse(0.02)
    put(0, 1, sp.csr_array(m), m)
    pages, table, lengths, dense = paged()
    put(0, 2, td.block_paged([pages], table, lengths, (R, R), 256), dense)
    c = codes()
    put(0, 3, td.dense(c, quantization=td.PerTensorAffine(0.25, 3)), (c - 3.0) * 0.25)
    c, s, z = codes(), pow2(rng, R).astype(np.float16), rng.integers(-4, 4, R).astype(np.int8)
    put(1, 0, td.dense(c, quantization=td.PerAxisAffine(0, s, z)), (c - z[:, None].astype(np.float64)) * s[:, None])
    c, s = codes(), pow2(rng, (R, R // 128)).astype(np.float32)
    put(1, 1, td.dense(c, quantization=td.Blockwise(1, 128, s)), c * np.repeat(s.astype(np.float64), 128, axis=1))
    m = sparse(0.05)
    put(1, 2, td.from_scipy(sp.csr_array(m), quantization=td.PerTensorAffine(0.5, 2)), (m - 2.0) * 0.5)
    c = codes()
    put(1, 3, td.tiled(c, (64, 64)), c)
    put(2, 0, td.splat(np.int8(-7), (R, R)), -7)
    left, m = codes((R, R // 2)), sparse(0.01)[:, : R // 2]
    nested = td.subpaving((R, R), [((0, 0), left), ((0, R // 2), sp.csr_array(m))])
    put(2, 1, nested, np.concatenate([left, m], axis=1))
    c = codes()
    put(2, 2, c, c)
    c = codes()
    put(2, 3, td.dense(c, quantization=td.PerTensorAffine(0.5)), c * 0.5)
    m = sparse(0.01)
    put(3, 0, sp.coo_array(m), m)
    c = codes()
    put(3, 1, c, c)
    c, s = codes(), pow2(rng, R).astype(np.float32)
    put(3, 2, td.dense(c, quantization=td.PerAxisAffine(1, s)), c * s[None, :].astype(np.float64))
    pages, table, lengths, dense = paged()
    put(3, 3, td.block_paged([pages], table, lengths, (R, R), 256, quantization=td.PerTensorAffine(0.125, -1)),
        (dense + 1.0) * 0.125)
    return parts, ref


def _count_opens():
    """Run in each worker: count the files tensordesc opens (maps) from now on."""
    import tensordesc

    if not hasattr(tensordesc, "_opens_seen"):
        opened = tensordesc.open
        tensordesc._opens_seen = []

        def counting(path, **kw):
            tensordesc._opens_seen.append(str(path))
            return opened(path, **kw)

        tensordesc.open = counting
    return os.getpid()


def _opens():
    import tensordesc

    return list(tensordesc._opens_seen)


def test_local_cluster_over_a_heterogeneous_tensor(tmp_path):
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    rng = np.random.default_rng(7)
    parts, ref = heterogeneous(rng)
    path = tmp_path / "hetero.tdf"
    td.write(path, {"w": td.subpaving(ref.shape, parts)})
    del parts
    assert os.path.getsize(path) > 150 * 2**20  # ~200 MB; 1 GiB as float32
    assert [r.layout for r in td.open(path)["w"].regions if r.parent is None] == [
        "ROW_MAJOR", "CSR", "BLOCK_PAGED", "ROW_MAJOR",
        "ROW_MAJOR", "ROW_MAJOR", "CSR", "TILED",
        "SPLAT", "SUBPAVING", "ROW_MAJOR", "ROW_MAJOR",
        "COO", "ROW_MAJOR", "ROW_MAJOR", "BLOCK_PAGED",
    ]

    x = tdd.from_tdf(path, "w")
    assert x.chunks == ((R,) * 4, (R,) * 4) and x.dtype == np.float32
    want_sum = ref.sum(dtype=np.float64)
    want_mean = ref.mean(dtype=np.float64)
    window = np.s_[R // 2:3 * R + 100, R - 50:4 * R:7]
    want_window = ref[window]

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster, distributed.Client(cluster) as client:
            pids = client.run(_count_opens)
            assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
            total, mean, got = dask.compute(
                x.sum(dtype=np.float64), x.mean(dtype=np.float64), x[window]
            )
            assert total == want_sum
            assert mean == want_mean
            assert got.dtype == np.float32 and np.array_equal(got, want_window)
            # Both workers read chunks, and each mapped the file once for all of them.
            opens = client.run(_opens)
            assert sorted(opens.values()) == [[str(path)], [str(path)]], opens
            assert client.compute(x[-1, -5:]).result().tolist() == ref[-1, -5:].tolist()
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
