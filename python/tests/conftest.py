import gc

import ml_dtypes
import numpy as np
import pytest

import tensordesc as td

# Every element type of the format and its numpy dtype.
DTYPES = {
    "BOOL": np.dtype(np.bool_),
    "INT8": np.dtype(np.int8),
    "UINT8": np.dtype(np.uint8),
    "INT16": np.dtype(np.int16),
    "UINT16": np.dtype(np.uint16),
    "INT32": np.dtype(np.int32),
    "UINT32": np.dtype(np.uint32),
    "INT64": np.dtype(np.int64),
    "UINT64": np.dtype(np.uint64),
    "FLOAT16": np.dtype(np.float16),
    "BFLOAT16": np.dtype(ml_dtypes.bfloat16),
    "FLOAT32": np.dtype(np.float32),
    "FLOAT64": np.dtype(np.float64),
    "COMPLEX64": np.dtype(np.complex64),
    "COMPLEX128": np.dtype(np.complex128),
    "FLOAT8_E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "FLOAT8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "FLOAT8_E8M0FNU": np.dtype(ml_dtypes.float8_e8m0fnu),
    "INT4": np.dtype(ml_dtypes.int4),
    "UINT4": np.dtype(ml_dtypes.uint4),
    "FLOAT4_E2M1FN": np.dtype(ml_dtypes.float4_e2m1fn),
}
PACKED = {"INT4", "UINT4", "FLOAT4_E2M1FN"}


def random_array(name, shape, seed=0):
    """Random bit patterns of the dtype (NaN payloads included), or valid codes for
    4-bit types and booleans."""
    rng = np.random.default_rng(seed)
    dt = DTYPES[name]
    n = int(np.prod(shape))
    if name == "BOOL":
        return rng.integers(0, 2, n).astype(np.bool_).reshape(shape)
    if name in PACKED:
        return rng.integers(0, 16, n, dtype=np.uint8).view(dt).reshape(shape)
    raw = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8)
    return raw.view(dt).reshape(shape)


def bits(a):
    """The bytes of an array's elements in C order (4-bit: the codes)."""
    a = np.ascontiguousarray(a)
    if a.dtype.itemsize == 1 and a.dtype.kind == "V" and a.dtype in (
        DTYPES["INT4"],
        DTYPES["UINT4"],
        DTYPES["FLOAT4_E2M1FN"],
    ):
        return a.view(np.uint8) & 0x0F
    return a.reshape(-1).view(np.uint8)


def address(a):
    return a.__array_interface__["data"][0]


@pytest.fixture
def exports_settled():
    """Asserts that every DLPack export made during the test was released exactly once."""
    gc.collect()
    before = td.live_exports()
    yield
    gc.collect()
    assert td.live_exports() == before
