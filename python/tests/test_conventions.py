"""Quantized safetensors checkpoints whose weights are stored as pieces (codes, scales,
global scales) by a convention — NVFP4 (ModelOpt, compressed-tensors), FP8 blocks
(DeepSeek-V3 / Qwen3), FP8 per channel, MXFP4 (gpt-oss) — open as one tensor each whose
buffers are the checkpoint's own bytes. Files are written by the ``safetensors`` package,
the pieces named as the conventions' producers name them; values are compared with an
independent numpy computation (ml_dtypes decodes the float codes)."""

import json

import ml_dtypes
import numpy as np
import pytest
import safetensors
from safetensors import TensorSpec

import tensordesc as td


def write(path, pieces):
    """pieces: name -> (safetensors dtype name for TensorSpec, shape, raw bytes)."""
    keep, d = [], {}
    for k, (dtype, shape, raw) in pieces.items():
        a = np.frombuffer(bytes(raw), dtype=np.uint8).copy()
        keep.append(a)
        d[k] = TensorSpec(dtype=dtype, shape=list(shape), data_ptr=a.ctypes.data, data_len=a.nbytes)
    path.write_bytes(bytes(safetensors.serialize(d)))
    return path


def e2m1(codes):
    """FP4 E2M1 codes (uint8, one a byte) as float64."""
    mag = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float64)[codes & 7]
    return np.where(codes & 8, -mag, mag)


def unpack4(packed, n, k):
    """Two codes a byte, the first in the low nibble: [n, k/2] bytes -> [n, k] codes."""
    lo, hi = packed & 0xF, packed >> 4
    return np.stack([lo, hi], axis=-1).reshape(n, k)


@pytest.mark.parametrize("flavour", ["modelopt", "compressed-tensors"])
def test_nvfp4(tmp_path, flavour):
    rng = np.random.default_rng(11)
    n, k = 8, 64
    packed = rng.integers(0, 256, size=(n, k // 2), dtype=np.uint8)
    scales = rng.uniform(0.1, 4, size=(n, k // 16)).astype(ml_dtypes.float8_e4m3fn)
    g = np.float32(0.0625 if flavour == "modelopt" else 16.0)
    if flavour == "modelopt":
        names = ("layer.weight", "layer.weight_scale", "layer.weight_scale_2")
    else:
        names = ("layer.weight_packed", "layer.weight_scale", "layer.weight_global_scale")
    path = write(
        tmp_path / "m.safetensors",
        {
            names[0]: ("uint8", (n, k // 2), packed.tobytes()),
            names[1]: ("float8_e4m3fn", (n, k // 16), scales.tobytes()),
            names[2]: ("float32", (1,), np.array([g], np.float32).tobytes()),
            "layer.input_scale": ("float32", (1,), np.array([2.0], np.float32).tobytes()),
        },
    )
    f = td.open(path)
    assert sorted(f.keys()) == ["layer.input_scale", "layer.weight"]
    t = f["layer.weight"]
    assert t.shape == (n, k)
    assert t.quantization is not None
    s = np.repeat(scales.astype(np.float64), 16, axis=1)
    v = e2m1(unpack4(packed, n, k)) * s
    want = (v * g if flavour == "modelopt" else v / g).astype(np.float32)
    np.testing.assert_array_equal(t.read(), want)
    np.testing.assert_array_equal(t[2:5, 10:40], want[2:5, 10:40])
    # The buffers are the checkpoint's own bytes, where they lie.
    raw = path.read_bytes()
    for b, piece in zip(t.buffers, (packed.tobytes(), scales.tobytes(), np.array([g], np.float32).tobytes())):
        assert raw[b["file_offset"] : b["file_offset"] + b["size"]] == piece
    # group=False: the file's own tensors.
    assert sorted(td.open(path, group=False).keys()) == sorted(list(names) + ["layer.input_scale"])


def test_fp8_blocks_with_config_block_size(tmp_path):
    rng = np.random.default_rng(5)
    n, k, b0, b1 = 6, 10, 4, 8
    w = rng.uniform(-8, 8, size=(n, k)).astype(ml_dtypes.float8_e4m3fn)
    inv = rng.uniform(0.5, 2, size=(-(-n // b0), -(-k // b1))).astype(np.float32)
    write(
        tmp_path / "model.safetensors",
        {
            "mlp.weight": ("float8_e4m3fn", (n, k), w.tobytes()),
            "mlp.weight_scale_inv": ("float32", inv.shape, inv.tobytes()),
        },
    )
    # Without the block size the scales do not fit 128-blocks: left as pieces, with a note.
    f = td.open(tmp_path / "model.safetensors")
    assert sorted(f.keys()) == ["mlp.weight", "mlp.weight_scale_inv"]
    assert any("weight_scale_inv" in note for note in f.grouping_notes)
    (tmp_path / "config.json").write_text(
        json.dumps({"quantization_config": {"quant_method": "fp8", "weight_block_size": [b0, b1]}})
    )
    f = td.open(tmp_path / "model.safetensors")
    assert list(f.keys()) == ["mlp.weight"]
    s = np.repeat(np.repeat(inv.astype(np.float64), b0, axis=0), b1, axis=1)[:n, :k]
    want = (w.astype(np.float64) * s).astype(np.float32)
    np.testing.assert_array_equal(f["mlp.weight"].read(), want)


def test_fp8_per_channel(tmp_path):
    rng = np.random.default_rng(6)
    w = rng.uniform(-8, 8, size=(4, 5)).astype(ml_dtypes.float8_e4m3fn)
    s = np.array([[0.5], [1.0], [2.0], [4.0]], np.float32)
    path = write(
        tmp_path / "m.safetensors",
        {"o.weight": ("float8_e4m3fn", (4, 5), w.tobytes()), "o.weight_scale": ("float32", (4, 1), s.tobytes())},
    )
    t = td.open(path)["o.weight"]
    np.testing.assert_array_equal(t.read(), (w.astype(np.float64) * s).astype(np.float32))


def test_mxfp4_gpt_oss(tmp_path):
    rng = np.random.default_rng(7)
    e, g = 3, 2  # experts, blocks a row
    blocks = rng.integers(0, 256, size=(e, g, 16), dtype=np.uint8)
    scales = rng.integers(120, 134, size=(e, g), dtype=np.uint8)
    path = write(
        tmp_path / "m.safetensors",
        {
            "block.0.mlp.experts.gate_up_proj_blocks": ("uint8", blocks.shape, blocks.tobytes()),
            "block.0.mlp.experts.gate_up_proj_scales": ("uint8", scales.shape, scales.tobytes()),
        },
    )
    f = td.open(path)
    t = f["block.0.mlp.experts.gate_up_proj"]
    assert t.shape == (e, g * 32)
    codes = np.stack([blocks & 0xF, blocks >> 4], axis=-1).reshape(e, g * 32)
    s = np.repeat(np.ldexp(1.0, scales.astype(np.int64) - 127), 32, axis=1)
    np.testing.assert_array_equal(t.read(), (e2m1(codes) * s).astype(np.float32))
