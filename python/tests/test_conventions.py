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


# --- the checkpoint's configuration beside the file (config.json, hf_quant_config.json) ---


def nvfp4_pieces(rng, n, k, block, names, g):
    packed = rng.integers(0, 256, size=(n, k // 2), dtype=np.uint8)
    scales = rng.uniform(0.1, 4, size=(n, k // block)).astype(ml_dtypes.float8_e4m3fn)
    pieces = {
        names[0]: ("uint8", (n, k // 2), packed.tobytes()),
        names[1]: ("float8_e4m3fn", scales.shape, scales.tobytes()),
        names[2]: ("float32", (), np.array([g], np.float32).tobytes()),
    }
    v = e2m1(unpack4(packed, n, k)) * np.repeat(scales.astype(np.float64), block, axis=1)
    return pieces, v


MODELOPT = ("l.weight", "l.weight_scale", "l.weight_scale_2")
CT_NVFP4 = ("l.weight_packed", "l.weight_scale", "l.weight_global_scale")


@pytest.mark.parametrize(
    "config_name, config",
    [
        (None, None),
        (
            "hf_quant_config.json",
            {
                "producer": {"name": "modelopt", "version": "0.29.0"},
                "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16, "exclude_modules": ["lm_head"]},
            },
        ),
        ("config.json", {"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}}),
    ],
)
def test_nvfp4_modelopt_with_and_without_its_config(tmp_path, config_name, config):
    pieces, v = nvfp4_pieces(np.random.default_rng(21), 4, 48, 16, MODELOPT, 0.25)
    path = write(tmp_path / "model.safetensors", pieces)
    if config_name:
        (tmp_path / config_name).write_text(json.dumps(config))
    f = td.open(path)
    assert list(f.keys()) == ["l.weight"] and f.grouping_notes == []
    np.testing.assert_array_equal(f["l.weight"].read(), (v * 0.25).astype(np.float32))


def test_nvfp4_block_size_from_the_config(tmp_path):
    """A declared group size other than 16: the scales' shape is read with it."""
    pieces, v = nvfp4_pieces(np.random.default_rng(22), 3, 64, 32, MODELOPT, 2.0)
    path = write(tmp_path / "model.safetensors", pieces)
    f = td.open(path)
    assert "l.weight_scale" in f.keys()  # blocks of 16 do not fit [3, 2] scales
    assert any("blocks of 16" in n for n in f.grouping_notes)
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "NVFP4", "group_size": 32}}))
    t = td.open(path)["l.weight"]
    assert t.quantization["block_size"] == 32
    np.testing.assert_array_equal(t.read(), (v * 2.0).astype(np.float32))


def test_nvfp4_compressed_tensors_config(tmp_path):
    pieces, v = nvfp4_pieces(np.random.default_rng(23), 5, 32, 16, CT_NVFP4, 8.0)
    path = write(tmp_path / "model.safetensors", pieces)
    want = (v / 8.0).astype(np.float32)
    np.testing.assert_array_equal(td.open(path)["l.weight"].read(), want)
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "quantization_config": {
                    "quant_method": "compressed-tensors",
                    "format": "nvfp4-pack-quantized",
                    "config_groups": {
                        "group_0": {
                            "targets": ["Linear"],
                            "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True},
                            "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"},
                        }
                    },
                    "ignore": ["lm_head"],
                },
            }
        )
    )
    f = td.open(path)
    assert list(f.keys()) == ["l.weight"] and f.grouping_notes == []
    np.testing.assert_array_equal(f["l.weight"].read(), want)


def test_mxfp4_with_its_config(tmp_path):
    rng = np.random.default_rng(24)
    blocks = rng.integers(0, 256, size=(2, 3, 16), dtype=np.uint8)
    scales = rng.integers(118, 136, size=(2, 3), dtype=np.uint8)
    path = write(
        tmp_path / "model.safetensors",
        {"x.down_proj_blocks": ("uint8", blocks.shape, blocks.tobytes()), "x.down_proj_scales": ("uint8", scales.shape, scales.tobytes())},
    )
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["router"]}}))
    codes = np.stack([blocks & 0xF, blocks >> 4], axis=-1).reshape(2, 96)
    s = np.repeat(np.ldexp(1.0, scales.astype(np.int64) - 127).reshape(2, 3), 32, axis=1)
    np.testing.assert_array_equal(td.open(path)["x.down_proj"].read(), (e2m1(codes) * s).astype(np.float32))


def int8_oracle(q, s, z, block):
    s64 = np.asarray(s, np.float64)
    z64 = np.zeros_like(s64) if z is None else np.asarray(z, np.float64)
    if s64.ndim == 2 and s64.shape[1] > 1:
        s64 = np.repeat(s64, block, axis=1)[:, : q.shape[1]]
        z64 = np.repeat(z64, block, axis=1)[:, : q.shape[1]]
    return ((q.astype(np.float64) - z64) * s64).astype(np.float32)


@pytest.mark.parametrize("scale_dtype", ["float32", "bfloat16", "float16"])
def test_int8_per_channel(tmp_path, scale_dtype):
    """compressed-tensors int-quantized (W8A8): INT8 codes, one scale a row."""
    rng = np.random.default_rng(25)
    q = rng.integers(-128, 128, size=(6, 40), dtype=np.int8)
    npd = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[scale_dtype]
    s = rng.uniform(0.001, 0.1, size=(6, 1)).astype(npd)
    path = write(
        tmp_path / "model.safetensors",
        {"q_proj.weight": ("int8", q.shape, q.tobytes()), "q_proj.weight_scale": (scale_dtype, s.shape, s.tobytes())},
    )
    f = td.open(path)
    assert list(f.keys()) == ["q_proj.weight"]
    t = f["q_proj.weight"]
    assert t.dtype == np.int8 or str(t.dtype) == "int8"
    np.testing.assert_array_equal(t.read(dtype="float32"), int8_oracle(q, s.astype(np.float64), None, 0))
    np.testing.assert_array_equal(t[1:4, 7:33], int8_oracle(q, s.astype(np.float64), None, 0)[1:4, 7:33])


def test_int8_groups_and_zero_points(tmp_path):
    """Per group along K with zero points; a group size that does not divide K needs the
    configuration's group_size, and without it the pieces stay, with a note."""
    rng = np.random.default_rng(26)
    n, k, g = 4, 100, 32  # 4 groups, the last of 4 columns
    q = rng.integers(-128, 128, size=(n, k), dtype=np.int8)
    s = rng.uniform(0.01, 0.2, size=(n, 4)).astype(np.float32)
    z = rng.integers(-8, 8, size=(n, 4), dtype=np.int8)
    path = write(
        tmp_path / "model.safetensors",
        {
            "o.weight": ("int8", q.shape, q.tobytes()),
            "o.weight_scale": ("float32", s.shape, s.tobytes()),
            "o.weight_zero_point": ("int8", z.shape, z.tobytes()),
        },
    )
    f = td.open(path)
    assert "o.weight_scale" in f.keys()
    assert any("group_size" in n_ for n_ in f.grouping_notes)
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "quantization_config": {
                    "quant_method": "compressed-tensors",
                    "format": "int-quantized",
                    "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "group", "group_size": g, "symmetric": False}}},
                }
            }
        )
    )
    f = td.open(path)
    assert list(f.keys()) == ["o.weight"] and f.grouping_notes == []
    t = f["o.weight"]
    assert t.quantization["block_size"] == g
    want = int8_oracle(q, s, z, g)
    np.testing.assert_array_equal(t.read(dtype="float32"), want)
    np.testing.assert_array_equal(t[:, 90:100], want[:, 90:100])
    # K divisible by the groups: the block follows from the shapes alone.
    q2 = q[:, :96].copy()
    s2 = s[:, :3].copy()
    (tmp_path / "sub").mkdir()
    path2 = write(
        tmp_path / "sub" / "m.safetensors",
        {"o.weight": ("int8", q2.shape, q2.tobytes()), "o.weight_scale": ("float32", s2.shape, s2.tobytes())},
    )
    np.testing.assert_array_equal(td.open(path2)["o.weight"].read(dtype="float32"), int8_oracle(q2, s2, None, 32))


def pack_int32_offset(q, bits):
    """compressed-tensors' pack_to_int32: q + 2^(bits-1), packed low bits first."""
    u = (q.astype(np.int64) + (1 << (bits - 1))).astype(np.uint32)
    per = 32 // bits
    n, k = u.shape
    u = u.reshape(n, k // per, per)
    words = np.zeros((n, k // per), np.uint32)
    for j in range(per):
        words |= u[:, :, j] << np.uint32(bits * j)
    return words.view(np.int32)


@pytest.mark.parametrize("with_config", [False, True])
def test_pack_quantized_stays_pieces_and_says_why(tmp_path, with_config):
    rng = np.random.default_rng(27)
    q = rng.integers(-8, 8, size=(4, 64), dtype=np.int8)
    packed = pack_int32_offset(q, 4)
    s = rng.uniform(0.01, 0.1, size=(4, 2)).astype(np.float16)
    path = write(
        tmp_path / "model.safetensors",
        {
            "m.weight_packed": ("int32", packed.shape, packed.tobytes()),
            "m.weight_scale": ("float16", s.shape, s.tobytes()),
            "m.weight_shape": ("int64", (2,), np.array([4, 64], np.int64).tobytes()),
        },
    )
    if with_config:
        (tmp_path / "config.json").write_text(
            json.dumps(
                {
                    "quantization_config": {
                        "quant_method": "compressed-tensors",
                        "format": "pack-quantized",
                        "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True}}},
                    }
                }
            )
        )
    f = td.open(path)
    assert sorted(f.keys()) == ["m.weight_packed", "m.weight_scale", "m.weight_shape"]
    assert any("offset-binary" in n for n in f.grouping_notes)
    # The pieces read as what they are: the checkpoint's own int32 words.
    np.testing.assert_array_equal(f["m.weight_packed"][...], packed)
    # ... from which the values follow as compressed-tensors unpacks them.
    words = f["m.weight_packed"][...].view(np.uint32)
    codes = np.stack([(words >> np.uint32(4 * j)) & 0xF for j in range(8)], axis=-1).reshape(4, 64).astype(np.int64) - 8
    np.testing.assert_array_equal(codes, q)


def test_declared_method_with_nothing_to_group_is_said(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = write(tmp_path / "model.safetensors", {"norm.weight": ("float32", a.shape, a.tobytes())})
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}))
    f = td.open(path)
    assert list(f.keys()) == ["norm.weight"]
    assert f.grouping_notes == ["the checkpoint's configuration declares fp8, but no tensor's pieces fit a convention"]


def test_unreadable_config_is_a_note_not_an_error(tmp_path):
    pieces, v = nvfp4_pieces(np.random.default_rng(28), 2, 32, 16, MODELOPT, 1.0)
    path = write(tmp_path / "model.safetensors", pieces)
    (tmp_path / "config.json").write_text('{"quantization_config": {"quant_method": "fp8",')
    f = td.open(path)
    assert list(f.keys()) == ["l.weight"]
    assert any("config.json" in n and "not read" in n for n in f.grouping_notes)
    np.testing.assert_array_equal(f["l.weight"].read(), v.astype(np.float32))
