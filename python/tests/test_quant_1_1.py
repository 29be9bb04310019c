"""Format 1.1 quantization from Python: NVFP4 (E2M1 codes, float8_e4m3fn scales per 16, a
float32 global scale that multiplies or divides) and DeepSeek-style FP8 weights with
128 x 128 block scales (Blockwise2D), each against a numpy reference computed with
ml_dtypes, through t[...], t.read, a window, get, and a round trip through a file."""

import ml_dtypes
import numpy as np
import pytest

import tensordesc as td

E2M1 = ml_dtypes.float4_e2m1fn
E4M3 = ml_dtypes.float8_e4m3fn


def nvfp4_parts(rows=8, cols=64, seed=0):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 16, (rows, cols), dtype=np.uint8).view(np.uint8)
    values = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])
    e2m1 = values[codes].astype(E2M1)
    scales = rng.uniform(0.02, 400.0, (rows, cols // 16)).astype(E4M3)
    scales[0, 1] = 0  # an all-zero block's scale
    return e2m1, scales


@pytest.mark.parametrize("divides", [False, True])
def test_nvfp4_against_numpy(tmp_path, divides):
    codes, scales = nvfp4_parts()
    amax_scale = np.float32(0.000123)
    g = np.float32(1.0) / amax_scale if divides else amax_scale
    q = td.Blockwise(
        axis=1,
        block_size=16,
        scales=scales,
        global_scale=g,
        global_divides=divides,
    )
    t = td.dense(codes, quantization=q)
    assert t.quantization["scheme"] == "BLOCKWISE"
    assert t.quantization["scale_type"] == "float8_e4m3fn"
    assert t.quantization["global_scale"] == ("divides" if divides else "multiplies")
    s = np.repeat(scales.astype(np.float64), 16, axis=1)
    v = codes.astype(np.float64) * s
    want = (v / np.float64(g) if divides else v * np.float64(g)).astype(np.float32)
    t.validate()
    np.testing.assert_array_equal(t[...], want)
    np.testing.assert_array_equal(t[2:7, 5:41], want[2:7, 5:41])
    np.testing.assert_array_equal(t.read(dtype="float64"), want.astype(np.float64))
    assert t.get((3, 17)) == float(want[3, 17])
    path = tmp_path / "nvfp4.tdf"
    td.write(path, {"w": t})
    with td.open(path) as f:
        back = f["w"]
        assert back.quantization == t.quantization
        np.testing.assert_array_equal(back[...], want)


def test_scale_type_converts_the_scales():
    codes, scales = nvfp4_parts(rows=2, cols=32)
    as_f32 = scales.astype(np.float32)
    t = td.dense(
        codes,
        quantization=td.Blockwise(axis=1, block_size=16, scales=as_f32, scale_type="float8_e4m3fn"),
    )
    assert t.quantization["scale_type"] == "float8_e4m3fn"
    want = (codes.astype(np.float64) * np.repeat(as_f32.astype(np.float64), 16, axis=1)).astype(np.float32)
    np.testing.assert_array_equal(t[...], want)


def test_fp8_weight_with_128x128_block_scales():
    rng = np.random.default_rng(1)
    n, k = 300, 260
    w = rng.standard_normal((n, k)).astype(E4M3)
    inv = rng.uniform(1e-4, 1e-2, (-(-n // 128), -(-k // 128))).astype(np.float32)
    t = td.dense(w, quantization=td.Blockwise2D(axes=(0, 1), block=(128, 128), scales=inv, expressed="bfloat16"))
    assert t.quantization["scheme"] == "BLOCKWISE_2D"
    q = t.quantization
    assert (q["axis_a"], q["axis_b"], q["block_a"], q["block_b"]) == (0, 1, 128, 128)
    full = np.repeat(np.repeat(inv.astype(np.float64), 128, axis=0), 128, axis=1)[:n, :k]
    want = (w.astype(np.float64) * full).astype(ml_dtypes.bfloat16)
    got = t[...]
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(t[100:200, 120:140].view(np.uint16), want[100:200, 120:140].view(np.uint16))


def test_1_1_argument_errors():
    codes, scales = nvfp4_parts(rows=2, cols=32)
    with pytest.raises(ValueError, match="global_divides"):
        td.dense(codes, quantization=td.Blockwise(axis=1, block_size=16, scales=scales, global_divides=True))
    with pytest.raises(ValueError, match="one value"):
        td.dense(codes, quantization=td.Blockwise(axis=1, block_size=16, scales=scales, global_scale=[1.0, 2.0]))
    with pytest.raises(td.QuantizationInvalid):
        td.dense(
            codes,
            quantization=td.Blockwise2D(axes=(1, 0), block=(2, 16), scales=np.ones(2, np.float32)),
        )
    # Global scales are content-validated: finite and positive.
    t = td.dense(codes, quantization=td.Blockwise(axis=1, block_size=16, scales=scales, global_scale=0.0))
    with pytest.raises(td.ContentInvalid, match="global scale"):
        t.validate()
