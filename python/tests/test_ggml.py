"""GGML_BLOCKS from Python against ggml's own Python package, gguf 0.19.0 (the producer
and the reference): tensors quantized by ``gguf.quants.quantize`` (every type it can
quantize) are written to a GGUF file by ``gguf.GGUFWriter``, read back by
``gguf.GGUFReader`` and described where they lie by ``td.ggml_blocks``; every element,
window and output type is compared with ``gguf.quants.dequantize`` bit for bit (a NaN only
as a NaN). Random block bytes of every type the layout reads, the layout's fields, a
.tdf round trip, a subpaving of two block types beside a dense region, and the rules."""

import gguf
import ml_dtypes
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

import tensordesc as td

# Random scales overflow float16 and make NaNs in gguf's own arithmetic: expected here.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

BF16 = ml_dtypes.bfloat16
TYPES = [Q[name] for name in td.GGML_TYPES]


def sizes(t):
    """(values, bytes) per block of ggml type ``t``."""
    return gguf.GGML_QUANT_SIZES[t]


def can_quantize(t):
    qk, _ = sizes(t)
    try:
        gguf.quants.quantize(np.ones((1, qk), np.float32), t)
    except NotImplementedError:
        return False
    return True


QUANTIZABLE = [t for t in TYPES if can_quantize(t)]

_BITS = {4: np.uint32, 8: np.uint64, 2: np.uint16}


def assert_same(got, want, what=""):
    """Equal bit for bit where not NaN, NaN where NaN (in the dtype of ``want``)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype, what
    assert got.shape == want.shape, what
    gn = np.isnan(got.astype(np.float64))
    wn = np.isnan(want.astype(np.float64))
    assert np.array_equal(gn, wn), f"{what}: NaN positions differ"
    bits = _BITS[want.dtype.itemsize]
    g = np.where(gn, 0, got).astype(want.dtype).view(bits)
    w = np.where(wn, 0, want).astype(want.dtype).view(bits)
    bad = np.argwhere(g != w)
    assert bad.size == 0, f"{what}: {len(bad)} differ, first at {bad[0]}: {got[tuple(bad[0])]!r} != {want[tuple(bad[0])]!r}"


def weights(shape, seed):
    """Values with the spread of real weights, rows of zeros, tiny and large values."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(shape).astype(np.float32) * np.float32(0.05)
    w.reshape(-1, shape[-1])[0] = 0.0
    w.reshape(-1, shape[-1])[-1] *= np.float32(3.0e3)
    w.flat[5] = np.float32(1.0e-8)
    return w


def gguf_round_trip(tmp_path, tensors):
    """Write ``tensors`` ({name: (blocks, ggml type)}) with GGUFWriter, read them with
    GGUFReader: {name: ReaderTensor}."""
    path = tmp_path / "model.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    for name, (q, t) in tensors.items():
        w.add_tensor(name, q, raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = gguf.GGUFReader(str(path))
    return {t.name: t for t in r.tensors}


def windows(shape, qk):
    """Boxes starting and ending inside blocks, one inside a single block, one crossing a
    block boundary."""
    last = shape[-1]
    lead = tuple(slice(e // 3, e - e // 4) if e > 1 else slice(0, 1) for e in shape[:-1])
    return [
        lead + (slice(qk // 2 + 1, last - qk // 3 - 1),),
        lead + (slice(3, min(qk, 7)),),
        (slice(None),) * (len(shape) - 1) + (slice(qk - 1, qk + 1),),
    ]


def check(t, ref, qk, what):
    """``t`` (FLOAT32 values) against gguf's values ``ref`` in every way it reads."""
    assert t.dtype == np.float32
    assert_same(t[...], ref, f"{what} t[...]")
    assert_same(t.read(), ref, f"{what} read()")
    assert_same(t.read(dtype="float64"), ref.astype(np.float64), f"{what} float64")
    assert_same(t.read(dtype="float16"), ref.astype(np.float16), f"{what} float16")
    assert_same(t.read(dtype="bfloat16"), ref.astype(BF16), f"{what} bfloat16")
    assert_same(t.read(dtype="raw"), ref, f"{what} raw")
    for box in windows(ref.shape, qk):
        assert_same(t[box], ref[box], f"{what} window {box}")
        assert_same(t.read(box, dtype="float16"), ref[box].astype(np.float16), f"{what} window f16")
        assert_same(t.read(box, dtype="raw"), ref[box], f"{what} window raw")
    rng = np.random.default_rng(1)
    for _ in range(40):
        i = tuple(int(rng.integers(0, e)) for e in ref.shape)
        v = t.get(i)
        if np.isnan(ref[i]):
            assert np.isnan(v), (what, i)
        else:
            assert v == float(ref[i]) and np.float32(v).view(np.uint32) == ref[i].view(np.uint32), (what, i)


@pytest.mark.parametrize("qtype", QUANTIZABLE, ids=lambda t: t.name)
def test_gguf_quantized_tensors_read_as_gguf_dequantizes_them(tmp_path, qtype):
    qk, nbytes = sizes(qtype)
    shapes = {"vec": (5 * qk,), "mat": (6, 3 * qk), "experts": (3, 4, 2 * qk)}
    data = {k: weights(s, seed) for seed, (k, s) in enumerate(shapes.items())}
    quantized = {k: (gguf.quants.quantize(v, qtype), qtype) for k, v in data.items()}
    read = gguf_round_trip(tmp_path, quantized)
    for name, shape in shapes.items():
        rt = read[name]
        assert rt.tensor_type == qtype
        # GGUF's shape is ggml's ne: the reverse of numpy's.
        assert tuple(reversed(rt.shape.tolist())) == shape
        ref = gguf.quants.dequantize(rt.data, rt.tensor_type)
        assert ref.shape == shape and ref.dtype == np.float32
        t = td.ggml_blocks(rt.data, int(rt.tensor_type), tuple(reversed(rt.shape.tolist())))
        assert t.shape == shape
        assert t.layout == "GGML_BLOCKS"
        assert t.layout_params == {
            "ggml_type": int(qtype),
            "ggml_type_name": qtype.name,
            "block_elems": qk,
            "block_bytes": nbytes,
        }
        # The blocks are used where the GGUF mapping holds them.
        assert t.buffers[0]["size"] == rt.data.nbytes
        assert t.buffers[0]["address"] == rt.data.ctypes.data
        check(t, ref, qk, f"{qtype.name} {name}")
        # The same blocks by name, as FLOAT16 and BFLOAT16 values (rounded once).
        h = td.ggml_blocks(rt.data, qtype.name.lower(), shape, dtype="float16")
        assert h.dtype == np.float16
        assert_same(h[...], ref.astype(np.float16), f"{qtype.name} {name} as float16")
        assert_same(h.read(dtype="float32"), ref.astype(np.float16).astype(np.float32))
        b = td.ggml_blocks(rt.data, qtype.name, shape, dtype="bfloat16")
        assert_same(b[...], ref.astype(BF16), f"{qtype.name} {name} as bfloat16")


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_random_blocks_of_every_type(qtype):
    """Any bytes are blocks (NaN, infinite and subnormal scales included): gguf's values."""
    qk, nbytes = sizes(qtype)
    rng = np.random.default_rng(int(qtype))
    raw = rng.integers(0, 256, 6 * nbytes, dtype=np.uint8)
    shape = (2, 3 * qk)
    ref = gguf.quants.dequantize(raw.reshape(2, 3 * nbytes), qtype)
    # From bytes, a bytearray and the array itself.
    for data in (raw.tobytes(), bytearray(raw.tobytes()), raw):
        t = td.ggml_blocks(data, int(qtype), shape)
        check(t, ref, qk, f"{qtype.name} random")
    assert td.GGML_TYPES[qtype.name] == int(qtype)


def test_the_quantizable_types_include_the_legacy_ternary_and_mx_ones():
    names = {t.name for t in QUANTIZABLE}
    assert {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "TQ1_0", "TQ2_0", "MXFP4"} <= names
    assert len(td.GGML_TYPES) == 23


def test_a_tdf_file_keeps_ggml_blocks(tmp_path):
    qk, _ = sizes(Q.Q8_0)
    w = weights((4, 2 * qk), 7)
    q = gguf.quants.quantize(w, Q.Q8_0)
    ref = gguf.quants.dequantize(q, Q.Q8_0)
    t = td.ggml_blocks(q, "Q8_0", w.shape)
    path = tmp_path / "q.tdf"
    td.write(path, {"w": t})
    f = td.open(path)
    g = f["w"]
    assert g.layout == "GGML_BLOCKS"
    assert g.layout_params["ggml_type_name"] == "Q8_0"
    assert_same(g[...], ref, "from the file")
    assert_same(g[1:3, 5:40], ref[1:3, 5:40], "a window from the file")
    d = td.decode(g.descriptor_bytes())
    assert d.layout_params["ggml_type"] == 8
    assert d.descriptor_bytes()[5] == 1  # version_minor: a 1.1 layout
    assert "GGML_BLOCKS Q8_0" in repr(g)


def test_a_subpaving_of_two_block_types_beside_a_dense_region():
    q8 = gguf.quants.quantize(weights((4, 256), 1), Q.Q8_0)
    q4 = gguf.quants.quantize(weights((2, 512), 2), Q.TQ2_0)
    dense = weights((2, 512), 3)
    t = td.subpaving(
        (4, 768),
        [
            ((0, 0), td.ggml_blocks(q8, "Q8_0", (4, 256))),
            ((0, 256), td.ggml_blocks(q4, "TQ2_0", (2, 512))),
            ((2, 256), td.dense(dense)),
        ],
    )
    ref = np.empty((4, 768), np.float32)
    ref[:, :256] = gguf.quants.dequantize(q8, Q.Q8_0)
    ref[:2, 256:] = gguf.quants.dequantize(q4, Q.TQ2_0)
    ref[2:, 256:] = dense
    assert [r.layout for r in t.regions] == ["GGML_BLOCKS", "GGML_BLOCKS", "ROW_MAJOR"]
    assert_same(t[...], ref, "subpaving")
    assert_same(t[1:4, 200:700], ref[1:4, 200:700], "across regions")
    assert_same(t.read((slice(0, 2), slice(17, 300)), dtype="float64"), ref[0:2, 17:300].astype(np.float64))
    assert_same(t.region(1).read(), ref[:2, 256:], "one region")
    assert t.region(2).numpy() is not None
    with pytest.raises(td.NotBindable, match="hold ggml blocks"):
        t.region(0).numpy()


def test_the_rules():
    q = gguf.quants.quantize(weights((2, 64), 4), Q.Q8_0)
    with pytest.raises(td.LayoutConstraint, match="multiple of the 32 values"):
        td.ggml_blocks(q, "Q8_0", (4, 16))
    with pytest.raises(td.LayoutConstraint, match="not INT8"):
        td.ggml_blocks(q, "Q8_0", (2, 64), dtype="int8")
    with pytest.raises(td.LayoutConstraint, match="ggml_type 15 "):
        td.ggml_blocks(q, 15, (2, 64))
    with pytest.raises(td.InvalidArgument, match="Q8_K"):
        td.ggml_blocks(q, "Q8_K", (2, 64))
    with pytest.raises(td.BufferSizeMismatch):
        td.ggml_blocks(q.tobytes()[:-1], "Q8_0", (2, 64))
    with pytest.raises(td.BufferSizeMismatch):
        td.ggml_blocks(q, "Q8_0", (1, 64))
    with pytest.raises(td.LayoutConstraint):
        td.ggml_blocks(q, "Q8_0", ())
