"""safetensors files opened in place by ``td.open``: files written by the ``safetensors``
package itself (``safetensors.numpy.save_file``, and ``safetensors.serialize`` for the
dtypes numpy lacks), compared with what the package reads back; a tensor at an odd byte
offset read where it lies; metadata; hostile headers."""

import json
import struct

import ml_dtypes
import numpy as np
import pytest
import safetensors
from safetensors import TensorSpec
from safetensors.numpy import load_file, save_file

import tensordesc as td


def produced(tmp_path, tensors, metadata=None, name="m.safetensors"):
    """A file written by ``safetensors.numpy.save_file``."""
    path = tmp_path / name
    save_file(tensors, str(path), metadata=metadata)
    return path


def serialized(tmp_path, specs, metadata=None, name="s.safetensors"):
    """A file written by ``safetensors.serialize`` from (dtype name, shape, bytes)."""
    keep = []
    d = {}
    for k, (dtype, shape, raw) in specs.items():
        a = np.frombuffer(bytes(raw), dtype=np.uint8).copy()
        keep.append(a)
        d[k] = TensorSpec(dtype=dtype, shape=shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
    path = tmp_path / name
    path.write_bytes(bytes(safetensors.serialize(d, metadata=metadata)))
    return path


def by_hand(tmp_path, header, data, name="h.safetensors"):
    """A file made by hand: the header text as given, then ``data``."""
    text = header if isinstance(header, bytes) else header.encode()
    path = tmp_path / name
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(data))
    return path


def test_numpy_file_reads_as_the_package_reads_it(tmp_path):
    rng = np.random.default_rng(7)
    tensors = {
        "w": rng.standard_normal((3, 5)).astype(np.float32),
        "h": rng.standard_normal(7).astype(np.float16),
        "d": rng.standard_normal((2, 2)).astype(np.float64),
        "i": np.arange(-5, 6, dtype=np.int8),
        "u": np.arange(9, dtype=np.uint16).reshape(3, 3),
        "q": np.arange(4, dtype=np.int64),
        "b": np.array([True, False, True]),
        "e": np.zeros((0, 4), np.float32),
    }
    path = produced(tmp_path, tensors, metadata={"format": "np", "note": "é \"q\""})
    want = load_file(str(path))
    f = td.open(path)
    assert f.container == "safetensors"
    assert "safetensors" in repr(f)
    assert sorted(f.keys()) == sorted(tensors)
    assert f.metadata == {"format": "np", "note": "é \"q\""}
    for name, a in want.items():
        t = f[name]
        assert t.dtype == a.dtype, name
        assert t.shape == a.shape, name
        got = t.numpy()
        np.testing.assert_array_equal(got, a)
        assert not got.flags.writeable, name
        assert t.read_only
    f.validate()
    np.testing.assert_array_equal(f["w"].read(dtype="float64"), want["w"].astype(np.float64))
    np.testing.assert_array_equal(f["w"][1:, 2:4], want["w"][1:, 2:4])


def test_buffers_are_the_file_bytes_in_place(tmp_path):
    tensors = {"a": np.arange(6, dtype=np.float32), "b": np.arange(3, dtype=np.uint8)}
    path = produced(tmp_path, tensors)
    raw = path.read_bytes()
    f = td.open(path)
    bases = set()
    for name in tensors:
        (b,) = f[name].buffers
        off = b["file_offset"]
        assert raw[off : off + b["size"]] == tensors[name].tobytes()
        assert b["read_only"]
        bases.add(b["address"] - off)
    assert len(bases) == 1  # every buffer lies in the one mapping


def test_dlpack_exports_are_read_only(tmp_path):
    path = produced(tmp_path, {"a": np.arange(6, dtype=np.float32).reshape(2, 3)})
    t = td.open(path)["a"]
    x = np.from_dlpack(t)
    np.testing.assert_array_equal(x, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert not x.flags.writeable


def test_dtypes_numpy_lacks(tmp_path):
    rng = np.random.default_rng(3)
    bf = rng.standard_normal(6).astype(ml_dtypes.bfloat16)
    e4 = rng.standard_normal(8).astype(ml_dtypes.float8_e4m3fn)
    e5 = rng.standard_normal(8).astype(ml_dtypes.float8_e5m2)
    e8 = np.array([0.25, 1, 2, 1024], dtype=ml_dtypes.float8_e8m0fnu)
    fp4 = np.array([0.5, -1.0, 6.0, 0.0, 1.5, -6.0], dtype=ml_dtypes.float4_e2m1fn)
    codes = fp4.view(np.uint8) & 0xF
    packed = (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8)
    path = serialized(
        tmp_path,
        {
            "bf": ("bfloat16", [2, 3], bf.tobytes()),
            "e4": ("float8_e4m3fn", [8], e4.tobytes()),
            "e5": ("float8_e5m2", [8], e5.tobytes()),
            "e8": ("float8_e8m0fnu", [4], e8.tobytes()),
            # Storage shape [3] (bytes); the package writes the logical shape [6].
            "fp4": ("float4_e2m1fn_x2", [3], packed.tobytes()),
        },
    )
    header = json.loads(path.read_bytes()[8 : 8 + struct.unpack("<Q", path.read_bytes()[:8])[0]])
    assert header["fp4"]["dtype"] == "F4" and header["fp4"]["shape"] == [6]
    f = td.open(path)
    np.testing.assert_array_equal(f["bf"].read(dtype="float32"), bf.astype(np.float32).reshape(2, 3))
    np.testing.assert_array_equal(f["e4"].read(dtype="float32"), e4.astype(np.float32))
    np.testing.assert_array_equal(f["e5"].read(dtype="float32"), e5.astype(np.float32))
    np.testing.assert_array_equal(f["e8"].read(dtype="float32"), e8.astype(np.float32))
    assert f["fp4"].shape == (6,)
    np.testing.assert_array_equal(f["fp4"].read(dtype="float32"), fp4.astype(np.float32))


def test_types_without_a_tensordesc_type(tmp_path):
    raw = bytes(range(8))
    path = serialized(tmp_path, {"z": ("float8_e4m3fnuz", [8], raw), "ok": ("uint8", [8], raw)})
    with pytest.raises(td.errors.InvalidElementType, match=r'tensor "z".*F8_E4M3FNUZ'):
        td.open(path)
    f = td.open(path, strict=False)
    np.testing.assert_array_equal(f["ok"].numpy(), np.arange(8, dtype=np.uint8))
    with pytest.raises(td.errors.InvalidElementType):
        f["z"].shape


def test_odd_offset_tensor_is_read_where_it_lies(tmp_path):
    header = '{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"x":{"dtype":"F32","shape":[2,2],"data_offsets":[3,19]}}'
    if (8 + len(header) + 3) % 2 == 0:
        header += " "
    want = np.array([[1.5, -2.0], [0.25, 8.0]], np.float32)
    path = by_hand(tmp_path, header, bytes([7, 8, 9]) + want.tobytes())
    # The package itself reads the file.
    np.testing.assert_array_equal(load_file(str(path))["x"], want)
    f = td.open(path)
    t = f["x"]
    (b,) = t.buffers
    assert b["file_offset"] % 2 == 1
    assert b["alignment"] == 1
    assert b["address"] % 2 == 1  # no copy: the mapping's own (odd) address
    (a,) = f["a"].buffers
    assert b["address"] - b["file_offset"] == a["address"] - a["file_offset"]
    np.testing.assert_array_equal(t.read(), want)
    np.testing.assert_array_equal(t.numpy(), want)
    assert t.get((1, 1)) == 8.0
    assert t.descriptor_bytes()[5] == 1  # format 1.1: alignment below 64


@pytest.mark.parametrize(
    "header,data,error,says",
    [
        ('{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}', 4, td.errors.DuplicateName, '"a"'),
        ('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', 4, td.errors.BufferSizeMismatch, 'tensor "a"'),
        ('{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}', 4, td.errors.Truncated, 'tensor "a"'),
        ('{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}', 6, td.errors.ContentInvalid, "overlap"),
        ('{"a":{"dtype":"Q9","shape":[4],"data_offsets":[0,4]}}', 4, td.errors.InvalidElementType, '"Q9"'),
        ('{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":' + "[" * 200 + "]" * 200 + "}}", 0, td.errors.ContentInvalid, "deeper than 64"),
        ('{"__metadata__":{"k":"1","k":"2"}}', 0, td.errors.DuplicateName, '"k"'),
    ],
)
def test_hostile_headers(tmp_path, header, data, error, says):
    path = by_hand(tmp_path, header, bytes(data))
    with pytest.raises(error, match=says):
        td.open(path)


def test_header_length_beyond_the_file_and_the_cap(tmp_path):
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(td.errors.Truncated):
        td.open(path)
    path.write_bytes(struct.pack("<Q", 100_000_001) + b"{}")
    with pytest.raises(td.errors.ContentInvalid, match="cap"):
        td.open(path)


def test_other_files_are_bad_magic(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"PK\x03\x04" + bytes(60))
    with pytest.raises(td.errors.BadMagic, match="safetensors"):
        td.open(path)


def test_tensors_pickle_by_path_and_name(tmp_path):
    import pickle

    path = produced(tmp_path, {"a": np.arange(4, dtype=np.float32)})
    t = td.open(path)["a"]
    u = pickle.loads(pickle.dumps(t))
    np.testing.assert_array_equal(u.numpy(), np.arange(4, dtype=np.float32))


def _hex_vector(name):
    """A golden .tdf file vector (tests/vectors/files/NAME.hex: '#' comments, hex digits)."""
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "tests" / "vectors" / "files" / f"{name}.hex"
    digits = "".join(line.split("#")[0] for line in path.read_text().splitlines())
    return bytes.fromhex("".join(digits.split()))


def test_tdf_metadata_entry_is_a_typed_dict(tmp_path):
    path = tmp_path / "m.tdf"
    path.write_bytes(_hex_vector("v2_metadata"))
    f = td.open(path)
    assert f.container == "tdf"
    assert f.metadata == {"format": "pt", "n": 7}
    assert isinstance(f.metadata["n"], int)
    np.testing.assert_array_equal(f["a"].numpy(), np.array([1, 2, 3], np.uint8))


def test_files_without_metadata_have_an_empty_dict(tmp_path):
    path = tmp_path / "p.tdf"
    td.write(path, {"a": td.dense(np.arange(3, dtype=np.float32))})
    assert td.open(path).metadata == {}


def test_sharded_checkpoint_is_one_file(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(5, dtype=np.int8)
    c = np.linspace(0, 1, 4).astype(np.float16)
    save_file({"a": a, "b": b}, str(tmp_path / "model-00001-of-00002.safetensors"), metadata={"format": "np"})
    save_file({"c": c}, str(tmp_path / "model-00002-of-00002.safetensors"), metadata={"format": "np"})
    index = {
        "metadata": {"total_size": a.nbytes + b.nbytes + c.nbytes},
        "weight_map": {
            "a": "model-00001-of-00002.safetensors",
            "b": "model-00001-of-00002.safetensors",
            "c": "model-00002-of-00002.safetensors",
        },
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    for path in (tmp_path, tmp_path / "model.safetensors.index.json"):
        f = td.open(path)
        assert f.container == "sharded-safetensors"
        assert sorted(f.keys()) == ["a", "b", "c"]
        assert f.metadata == {"total_size": index["metadata"]["total_size"], "format": "np"}
        np.testing.assert_array_equal(f["a"].numpy(), a)
        np.testing.assert_array_equal(f["b"].read(), b)
        np.testing.assert_array_equal(f["c"].numpy(), c)
        np.testing.assert_array_equal(np.from_dlpack(f["c"]), c)
        f.validate()
    import pickle

    t = pickle.loads(pickle.dumps(td.open(tmp_path)["c"]))
    np.testing.assert_array_equal(t.numpy(), c)


def test_sharded_index_that_disagrees_with_its_shards(tmp_path):
    save_file({"a": np.zeros(2, np.float32)}, str(tmp_path / "s1.safetensors"))
    (tmp_path / "m.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "s1.safetensors", "z": "s1.safetensors"}}))
    with pytest.raises(td.errors.ContentInvalid, match='"z"'):
        td.open(tmp_path)
    (tmp_path / "m.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "../s1.safetensors"}}))
    with pytest.raises(td.errors.ContentInvalid, match="file name"):
        td.open(tmp_path)


def test_gguf_opens_through_td_open():
    """GGUF files (written by GGUFWriter: tests/vectors/gguf) open by their magic; block
    types read as gguf's own dequantization."""
    import pathlib

    import gguf

    path = pathlib.Path(__file__).resolve().parents[2] / "tests" / "vectors" / "gguf" / "quant.gguf"
    f = td.open(path)
    assert f.container == "gguf"
    assert f.metadata["general.alignment"] == 64
    reader = gguf.GGUFReader(str(path))
    checked = 0
    for t in reader.tensors:
        want = gguf.quants.dequantize(t.data, t.tensor_type)
        got = f[t.name].read(dtype="float32")
        np.testing.assert_array_equal(got.reshape(want.shape), want)
        checked += 1
    assert checked == len(f)
