"""Arguments of the wrong type or out of range: a TypeError naming the type, or
tensordesc.InvalidArgument (a ValueError) naming the parameter and its range — never an
int taken for a byte count, nor a bare OverflowError."""

import array

import numpy as np
import pytest

import tensordesc as td

DESCRIPTOR = td.dense(np.arange(6, dtype=np.int16).reshape(2, 3)).descriptor_bytes()
STREAM = td.write_stream(None, {"a": np.arange(5, dtype=np.int32)})


# ---------------------------------------------------------------------------------------
# Bytes-like arguments
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [12, 0, 3.5, [1, 2, 3], None, "TDSC", object()])
def test_decode_takes_only_bytes_like_objects(bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        td.decode(bad)


@pytest.mark.parametrize("bad", [12, 0, 3.5, [1, 2, 3], None, object()])
def test_read_stream_takes_only_bytes_like_objects_or_paths(bad):
    with pytest.raises(TypeError, match=type(bad).__name__):
        td.read_stream(bad)


@pytest.mark.parametrize(
    "wrap",
    [bytes, bytearray, memoryview, lambda b: np.frombuffer(b, np.uint8), lambda b: array.array("B", b)],
)
def test_bytes_like_objects_are_accepted(wrap):
    t = td.decode(wrap(DESCRIPTOR))
    assert t.shape == (2, 3) and t.element_type == "INT16"
    got = td.read_stream(wrap(STREAM))
    assert np.array_equal(got["a"].numpy(), np.arange(5, dtype=np.int32))


def test_native_decode_refuses_an_int():
    with pytest.raises(TypeError):
        td._native._decode(12, True)


# ---------------------------------------------------------------------------------------
# Integer parameters out of range
# ---------------------------------------------------------------------------------------

CODES = np.arange(8, dtype=np.int8).reshape(2, 4)
SCALES = np.ones(2, np.float32)
F32 = np.zeros(8, np.float32)


def pools(n):
    return [np.zeros(8, np.float32) for _ in range(n)]


U64 = ("0", "2**64 - 1")
U32 = ("0", "2**32 - 1")
U8 = ("0", "255")
I64 = ("-2**63", "2**63 - 1")
UNSIGNED_BAD = [-1, 2**64, 2**200]

# (test id, what the message names, the range's ends, bad values, a call taking one)
PARAMETERS = [
    ("PerTensorAffine.zero_point", "zero_point", I64, [-(2**63) - 1, 2**63, 2**200],
     lambda v: td.dense(CODES, quantization=td.PerTensorAffine(0.5, zero_point=v))),
    ("PerAxisAffine.axis", "axis", U8, UNSIGNED_BAD,
     lambda v: td.dense(CODES, quantization=td.PerAxisAffine(v, SCALES))),
    ("Blockwise.axis", "axis", U8, UNSIGNED_BAD,
     lambda v: td.dense(CODES, quantization=td.Blockwise(v, 2, np.ones((2, 2), np.float32)))),
    ("Blockwise.block_size", "block_size", U32, UNSIGNED_BAD,
     lambda v: td.dense(CODES, quantization=td.Blockwise(1, v, np.ones((2, 1), np.float32)))),
    ("splat.shape", "shape[1]", U64, UNSIGNED_BAD, lambda v: td.splat(1.0, (2, v))),
    ("tiled.tile_shape", "tile_shape[0]", ("1", "2**64 - 1"), [0, -1, 2**64, 2**200],
     lambda v: td.tiled(CODES, (v, 2))),
    ("block_paged.block_size", "block_size", U64, UNSIGNED_BAD,
     lambda v: td.block_paged(pools(1), [[0]], [2], (1, 2, 1), v)),
    ("block_paged.shape", "shape[2]", U64, UNSIGNED_BAD,
     lambda v: td.block_paged(pools(1), [[0]], [2], (1, 2, v), 4)),
    ("block_paged.row_lengths", "row_lengths", U64, UNSIGNED_BAD,
     lambda v: td.block_paged(pools(1), [[0]], [v], (1, 2, 1), 4)),
    ("block_paged.row_lengths_int64", "row_lengths", U64, [-1],
     lambda v: td.block_paged(pools(1), [[0]], np.array([v]), (1, 2, 1), 4)),
    ("block_paged.block_table", "block_table", U64, [2**64, 2**200],
     lambda v: td.block_paged(pools(1), [[v]], [2], (1, 2, 1), 4)),
    ("subpaving.shape", "shape[0]", U64, UNSIGNED_BAD,
     lambda v: td.subpaving((v,), [((0,), F32)])),
    ("subpaving.origin", "origin[0]", U64, UNSIGNED_BAD,
     lambda v: td.subpaving((8,), [((v,), F32)])),
    ("write.alignment", "alignment", U32, UNSIGNED_BAD,
     lambda v: td.write("/nonexistent-dir/x.tdf", {"a": F32}, alignment=v)),
    ("to_bytes.alignment", "alignment", U32, UNSIGNED_BAD,
     lambda v: td.to_bytes({"a": F32}, alignment=v)),
]

CASES = [(p, v) for p in PARAMETERS for v in p[3]]


@pytest.mark.parametrize("param,value", CASES, ids=[f"{p[0]}={v}" for p, v in CASES])
def test_integer_out_of_range_names_the_parameter_and_range(param, value):
    _, names, (low, high), _, call = param
    with pytest.raises(td.InvalidArgument) as e:
        call(value)
    msg = str(e.value)
    assert names in msg and low in msg and high in msg and str(value) in msg, msg
    assert isinstance(e.value, ValueError)


def test_too_many_pools_names_the_limit():
    with pytest.raises(td.InvalidArgument, match="255"):
        td.block_paged(pools(256), [[0]], [2], (1, 2, 1), 4)


def test_valid_edges_still_build():
    # The ends of each range are accepted by the argument checks (the library's own
    # rules decide about them afterwards).
    td.dense(CODES, quantization=td.PerTensorAffine(0.5, zero_point=2**63 - 1))
    td.dense(CODES, quantization=td.PerTensorAffine(0.5, zero_point=-(2**63)))
    with pytest.raises(td.QuantizationInvalid):
        td.dense(CODES, quantization=td.PerAxisAffine(255, SCALES))
    b = td.dense(CODES, quantization=td.Blockwise(1, 2**32 - 1, np.ones((2, 1), np.float32)))
    assert b.quantization["block_size"] == 2**32 - 1
    assert td.splat(1.0, (2, 0)).shape == (2, 0)


# ---------------------------------------------------------------------------------------
# Element and region indices of any size
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "index, axis",
    [((2**70, 0), 0), ((0, -(2**70)), 1), ((2**64, 2**64), 0), ((1, 3), 1), ((-3, 0), 0)],
)
def test_get_reports_any_coordinate_outside_its_extent(index, axis):
    t = td.dense(np.arange(6, dtype=np.int16).reshape(2, 3))
    with pytest.raises(td.IndexOutOfBounds, match=f"axis {axis} coordinate {index[axis]} "):
        t.get(index)
    assert t.get((np.int64(-1), np.uint8(2))) == 5
    assert t.get(np.array([1, 1])) == 4


@pytest.mark.parametrize("bad", [("a", 0), "ab", 1.5, (0.0, 1), object()])
def test_get_refuses_what_is_not_an_integer_index(bad):
    t = td.dense(np.arange(6, dtype=np.int16).reshape(2, 3))
    with pytest.raises(TypeError, match="an index is an integer or a sequence of integers"):
        t.get(bad)


@pytest.mark.parametrize("i", [2**64, 2**70, -(2**70), 2, -3])
def test_region_reports_any_index_out_of_range(i):
    t = td.subpaving(
        (2, 2), [((0, 0), np.zeros((1, 2), np.float32)), ((1, 0), np.ones((1, 2), np.float32))]
    )
    with pytest.raises(IndexError, match=f"region {i} is out of range: the tensor has 2 regions"):
        t.region(i)
    assert t.region(-1).get((0, 1)) == 1.0
