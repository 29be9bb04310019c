"""DLPack: zero-copy exports of dense tensors and regions (versioned and legacy capsules,
read-only flags, deleters run exactly once) and imports from any producer."""

import ctypes
import gc
import sys
import weakref

import ml_dtypes
import numpy as np
import pytest
import scipy.sparse as sp

import tensordesc as td
from conftest import address, bits, random_array

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_name(c):
    return _get_name(c).decode()


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


def versioned_struct(capsule):
    p = _get_pointer(capsule, b"dltensor_versioned")
    return DLManagedTensorVersioned.from_address(p)


@pytest.fixture
def mixed_file(tmp_path):
    """A file with a dense tensor and a subpaving of dense, tiled, CSR and quantized
    regions."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 6)).astype(np.float32)
    left = rng.standard_normal((8, 3)).astype(np.float32)
    right = rng.standard_normal((4, 3)).astype(np.float32)
    tiles = rng.standard_normal((4, 3)).astype(np.float32)
    sub = td.subpaving(
        (8, 9),
        [
            ((0, 0), np.asfortranarray(left)),
            ((0, 3), right),
            ((4, 3), td.tiled(tiles, (2, 2))),
            ((0, 6), sp.csr_array(np.eye(8, 3, dtype=np.float32))),
        ],
    )
    path = tmp_path / "m.tdf"
    td.write(path, {"dense": a, "sub": sub})
    return td.open(path), {"dense": a, "left": left, "right": right, "tiles": tiles}


def test_numpy_from_dlpack_of_a_file_region_is_zero_copy_and_read_only(mixed_file, exports_settled):
    f, ref = mixed_file
    sub = f["sub"]
    r0 = sub.region(0)
    x = np.from_dlpack(r0)
    assert np.array_equal(x, ref["left"])
    assert address(x) == r0.buffers[0]["address"]
    assert not x.flags.writeable
    assert x.flags.f_contiguous
    y = np.from_dlpack(f["dense"])
    assert address(y) == f["dense"].buffers[0]["address"]
    assert np.array_equal(y, ref["dense"])
    assert td.live_exports() >= 2
    del x, y


def test_capsule_names_and_versions(exports_settled):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = td.dense(a)
    c = t.__dlpack__(max_version=(1, 1))
    assert capsule_name(c) == "dltensor_versioned"
    m = versioned_struct(c)
    assert (m.major, m.minor) == (1, 1)
    assert m.flags == 0  # writable source, not a copy
    assert m.dl_tensor.data == address(a)
    assert [m.dl_tensor.shape[i] for i in range(2)] == [3, 4]
    assert [m.dl_tensor.strides[i] for i in range(2)] == [4, 1]
    assert (m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits) == (2, 32)
    c10 = t.__dlpack__(max_version=(1, 0))
    assert (versioned_struct(c10).major, versioned_struct(c10).minor) == (1, 0)
    legacy = t.__dlpack__()
    assert capsule_name(legacy) == "dltensor"
    legacy0 = t.__dlpack__(max_version=(0, 8))
    assert capsule_name(legacy0) == "dltensor"
    assert td.live_exports() >= 4
    # Unconsumed capsules: their destructor runs each deleter (exports_settled checks).
    del c, c10, legacy, legacy0


def test_consumed_capsule_deleter_runs_once(exports_settled):
    a = np.arange(6, dtype=np.int64)
    t = td.dense(a)
    gc.collect()
    base = td.live_exports()
    c = t.__dlpack__(max_version=(1, 1))
    assert td.live_exports() == base + 1
    # numpy consumes the capsule (renaming it) and owns the export now.
    x = np.from_dlpack(t)
    assert td.live_exports() == base + 2
    del c
    gc.collect()
    assert td.live_exports() == base + 1  # the unconsumed capsule released its export
    del x
    gc.collect()
    assert td.live_exports() == base  # numpy called the deleter of the consumed one


def test_read_only_memory_has_no_legacy_export(mixed_file):
    f, _ = mixed_file
    with pytest.raises(BufferError):
        f["dense"].__dlpack__()
    c = f["dense"].__dlpack__(max_version=(1, 1))
    assert versioned_struct(c).flags & 1  # READ_ONLY


def test_writable_memory_exports_writable(exports_settled):
    a = np.zeros(5, dtype=np.float64)
    x = np.from_dlpack(td.dense(a))
    assert x.flags.writeable
    x[2] = 7
    assert a[2] == 7  # the same memory
    ro = a.copy()
    ro.flags.writeable = False
    y = np.from_dlpack(td.dense(ro))
    assert not y.flags.writeable
    del x, y


def test_copy_true_gives_a_private_copy(mixed_file, exports_settled):
    f, ref = mixed_file
    c = f["dense"].__dlpack__(max_version=(1, 1), copy=True)
    m = versioned_struct(c)
    assert m.flags & 2 and not m.flags & 1  # IS_COPIED, writable
    assert m.dl_tensor.data != f["dense"].buffers[0]["address"]
    x = np.from_dlpack(f["dense"], copy=True)
    assert x.flags.writeable
    x[0, 0] = 99
    assert np.array_equal(f["dense"].numpy(), ref["dense"])
    del c, x


def test_dlpack_arguments(mixed_file):
    f, _ = mixed_file
    t = f["dense"]
    assert t.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 1), stream=5)
    with pytest.raises(BufferError):
        t.__dlpack__(max_version=(1, 1), dl_device=(2, 0))
    t.__dlpack__(max_version=(1, 1), stream=None, dl_device=(1, 0))
    with pytest.raises(TypeError):
        t.__dlpack__(max_version=3)


def test_what_cannot_be_exported(mixed_file, exports_settled):
    f, _ = mixed_file
    sub = f["sub"]
    with pytest.raises(td.NotBindable, match="subpaving"):
        sub.__dlpack__(max_version=(1, 1))
    with pytest.raises(td.NotBindable, match="TILED"):
        np.from_dlpack(sub.region(2))
    with pytest.raises(td.NotBindable, match="sparse"):
        sub.region(3).__dlpack__(max_version=(1, 1))
    q = td.dense(np.arange(4, dtype=np.int8), quantization=td.PerTensorAffine(0.5))
    with pytest.raises(td.NotBindable, match="quantized"):
        q.__dlpack__(max_version=(1, 1))


def test_import_numpy_is_zero_copy_and_releases_the_array(exports_settled):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    w = weakref.ref(a)
    refs = sys.getrefcount(a)
    t = td.from_dlpack(a)
    assert t.layout == "ROW_MAJOR"
    assert t.buffers[0]["address"] == address(a)
    assert t.get((3, 5)) == 23.0
    assert np.array_equal(t.numpy(), a)
    assert address(t.numpy()) == address(a)
    del t
    gc.collect()
    assert sys.getrefcount(a) == refs  # numpy's deleter ran: its reference is gone
    del a
    gc.collect()
    assert w() is None


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a[::-1],
        lambda a: a.T,
        lambda a: a[1:, ::2],
        lambda a: np.broadcast_to(a[:1], a.shape),
    ],
)
def test_import_strided_numpy(view):
    a = np.arange(30, dtype=np.int16).reshape(5, 6)
    v = view(a)
    t = td.from_dlpack(v)
    assert t.shape == v.shape
    for idx in np.ndindex(v.shape):
        assert t.get(idx) == v[idx]
    assert np.array_equal(t.numpy(), v)


def test_import_read_only_numpy_is_read_only():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = td.from_dlpack(a)
    assert t.read_only
    assert not t.numpy().flags.writeable


def test_import_our_own_exports_versioned_and_legacy(mixed_file, exports_settled):
    f, ref = mixed_file
    gc.collect()
    base = td.live_exports()
    back = td.from_dlpack(f["sub"].region(1))
    assert td.live_exports() == base + 1
    assert np.array_equal(back.numpy(), ref["right"])
    assert back.read_only
    w = td.dense(np.arange(5, dtype=np.uint8))
    legacy = td.from_dlpack(w.__dlpack__())  # a bare legacy capsule
    assert np.array_equal(legacy.numpy(), np.arange(5))
    assert td.live_exports() == base + 2
    del back, legacy
    gc.collect()
    assert td.live_exports() == base


def test_consumed_capsule_cannot_be_imported_twice(exports_settled):
    c = td.dense(np.arange(3.0)).__dlpack__(max_version=(1, 1))
    t = td.from_dlpack(c)
    assert capsule_name(c) == "used_dltensor_versioned"
    with pytest.raises(ValueError, match="capsule"):
        td.from_dlpack(c)
    del t, c


@pytest.mark.parametrize(
    "name", ["BFLOAT16", "FLOAT8_E4M3FN", "FLOAT8_E8M0FNU", "INT4", "UINT4", "FLOAT4_E2M1FN", "COMPLEX64"]
)
def test_every_dtype_exports_and_imports_back(name, exports_settled):
    a = random_array(name, (3, 4), seed=5)
    t = td.dense(a)
    c = t.__dlpack__(max_version=(1, 1))
    m = versioned_struct(c)
    assert m.dl_tensor.dtype.bits == (4 if name in ("INT4", "UINT4", "FLOAT4_E2M1FN") else a.dtype.itemsize * 8)
    back = td.from_dlpack(c)
    assert back.element_type == name
    assert np.array_equal(bits(back.numpy()), bits(a))
    del back, c


def test_bool_and_float16_through_numpy(exports_settled):
    for a in (np.array([True, False, True]), np.arange(5, dtype=np.float16)):
        x = np.from_dlpack(td.dense(a))
        assert x.dtype == a.dtype and np.array_equal(x, a)


def test_torch_round_trip(exports_settled):
    torch = pytest.importorskip("torch")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = td.dense(a)
    x = torch.from_dlpack(t)
    assert x.data_ptr() == address(a)
    back = td.from_dlpack(torch.arange(6, dtype=torch.bfloat16).reshape(2, 3))
    assert back.element_type == "BFLOAT16"
    assert back.numpy().astype(np.float32).tolist() == [[0, 1, 2], [3, 4, 5]]
    del x, back


def test_ml_dtypes_view_of_bfloat16_region(tmp_path):
    a = np.arange(8, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(2, 4)
    td.write(tmp_path / "b.tdf", {"b": a})
    v = td.open(tmp_path / "b.tdf")["b"].numpy()
    assert v.dtype == np.dtype(ml_dtypes.bfloat16)
    assert np.array_equal(v.astype(np.float32), a.astype(np.float32))


def test_splat_exports_are_read_only(exports_settled):
    s = td.splat(np.float32(2.5), (3, 4))
    x = np.from_dlpack(s)
    assert x.strides == (0, 0) and not x.flags.writeable and x.sum() == 30.0
    assert not s.numpy().flags.writeable
    del x
