"""Format 1.1 per-region element types from Python: a float16 tensor assembled from a
float16 block, an INT8 block quantized with expressed float16, a float8_e4m3fn block and
an NVFP4 block; values against numpy, region dtypes, DLPack of a region, a file round
trip, and the value-type rule's error."""

import ml_dtypes
import numpy as np
import pytest
import scipy.sparse as sp

import tensordesc as td


def parts(seed=0):
    rng = np.random.default_rng(seed)
    f16 = rng.standard_normal((4, 20)).astype(np.float16)
    i8 = rng.integers(-128, 128, (4, 4), dtype=np.int8)
    f8 = rng.standard_normal((4, 4)).astype(ml_dtypes.float8_e4m3fn)
    fp4 = rng.standard_normal((4, 8)).astype(ml_dtypes.float4_e2m1fn)
    fp4_scales = np.array([[1.0], [2.0], [0.5], [0.25]]).astype(ml_dtypes.float8_e4m3fn)
    u8 = rng.integers(0, 256, (4, 4), dtype=np.uint8)
    csr = sp.random_array((4, 8), density=0.3, format="csr", rng=rng, dtype=np.float32)
    return f16, i8, f8, fp4, fp4_scales, u8, csr


def mixed(seed=0):
    f16, i8, f8, fp4, fp4_scales, u8, csr = parts(seed)
    t = td.subpaving(
        (12, 20),
        [
            ((0, 0), f16),
            ((4, 0), td.dense(i8, quantization=td.PerTensorAffine(scale=0.125, zero_point=3, expressed="float16"))),
            ((4, 4), f8),
            ((4, 8), td.dense(fp4, quantization=td.Blockwise(axis=1, block_size=8, scales=fp4_scales, expressed="float16"))),
            ((4, 16), u8),
            ((8, 0), td.from_scipy(csr, dtype="float16")),
            ((8, 8), np.zeros((4, 12), np.float16)),
        ],
        dtype="float16",
    )
    want = np.zeros((12, 20), np.float16)
    want[:4] = f16
    want[4:8, 0:4] = ((i8.astype(np.float64) - 3) * 0.125).astype(np.float16)
    want[4:8, 4:8] = f8.astype(np.float16)
    want[4:8, 8:16] = (fp4.astype(np.float64) * fp4_scales.astype(np.float64)).astype(np.float16)
    want[4:8, 16:20] = u8
    want[8:, 0:8] = csr.toarray().astype(np.float16)
    return t, want


def test_a_float16_tensor_of_four_stored_types(tmp_path):
    t, want = mixed()
    assert t.dtype == np.float16
    assert [r.stored_dtype for r in t.regions] == [
        np.dtype(np.float16),
        np.dtype(np.int8),
        np.dtype(ml_dtypes.float8_e4m3fn),
        np.dtype(ml_dtypes.float4_e2m1fn),
        np.dtype(np.uint8),
        np.dtype(np.float16),
        np.dtype(np.float16),
    ]
    t.validate()
    got = t[...]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(t[3:7, 2:19], want[3:7, 2:19])
    np.testing.assert_array_equal(t.read(dtype="float32"), want.astype(np.float32))
    assert t.get((5, 5)) == float(want[5, 5])
    # A region exports the type it stores (numpy has no float8 DLPack dtype: UINT8 here).
    u8 = np.from_dlpack(t.region(4))
    assert u8.dtype == np.uint8
    np.testing.assert_array_equal(u8, want[4:8, 16:20])
    # Region by region: every dense unquantized region exports; the others say why.
    for r in t.regions:
        lo, hi = r.origin, tuple(o + e for o, e in zip(r.origin, r.shape))
        if r.layout in ("ROW_MAJOR",) and r.quantization is None and r.stored_dtype != ml_dtypes.float8_e4m3fn:
            a = np.from_dlpack(r)
            assert a.dtype == r.stored_dtype
            np.testing.assert_array_equal(a.astype(np.float16), want[lo[0]:hi[0], lo[1]:hi[1]])
        elif r.stored_dtype != ml_dtypes.float8_e4m3fn:
            with pytest.raises(td.NotBindable):
                np.from_dlpack(r)
    path = tmp_path / "mixed.tdf"
    td.write(path, {"w": t})
    with td.open(path) as f:
        back = f["w"]
        assert [r.stored_dtype for r in back.regions] == [r.stored_dtype for r in t.regions]
        np.testing.assert_array_equal(back[...], want)


def test_a_part_that_does_not_yield_the_value_type_is_refused():
    f16, *_ = parts()
    with pytest.raises(td.RegionTypeMismatch, match="region 1 stores FLOAT32"):
        td.subpaving(
            (4, 36),
            [((0, 0), f16), ((0, 20), np.ones((4, 16), np.float32))],
            dtype="float16",
        )
    # float16 parts in a float32 tensor convert exactly.
    t = td.subpaving((4, 36), [((0, 0), f16), ((0, 20), np.ones((4, 16), np.float32))], dtype="float32")
    np.testing.assert_array_equal(t[:, :20], f16.astype(np.float32))
