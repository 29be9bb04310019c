"""Errors: one exception class per status, raised with the status, detail and offset."""

import pickle
import struct

import numpy as np
import pytest
import scipy.sparse as sp

import tensordesc as td
from tensordesc import _native


def test_one_class_per_status_in_number_order():
    codes = _native._status_codes()
    assert len(codes) == 40
    assert [c.code for c in td.errors.STATUS_CLASSES] == [c for c, _, _ in codes]
    for code, status, cls_name in codes:
        cls = getattr(td, cls_name)
        assert issubclass(cls, td.Error)
        assert cls.status == status and cls.code == code
        assert td.errors.BY_CODE[code] is cls
    assert td.RegionOverlap.code == 20 and td.Io.status == "IO"
    assert issubclass(td.NotFound, KeyError)
    assert issubclass(td.IndexOutOfBounds, IndexError)
    assert issubclass(td.InvalidArgument, ValueError)


def two_region_descriptor():
    a = np.zeros((2, 2), np.float32)
    return td.subpaving((2, 4), [((0, 0), a), ((0, 2), a.copy())]).descriptor_bytes()


def test_bad_magic():
    b = two_region_descriptor()
    with pytest.raises(td.BadMagic) as e:
        td.decode(b"XXXX" + b[4:])
    assert e.value.status == "BAD_MAGIC" and e.value.offset == 0
    assert "BAD_MAGIC" in str(e.value)


def test_truncated():
    b = two_region_descriptor()
    td.decode(b)  # the untouched bytes decode
    for cut in (3, 20, len(b) - 1):
        with pytest.raises(td.Truncated) as e:
            td.decode(b[:cut])
        assert e.value.offset is not None


def test_region_overlap_in_bytes():
    b = two_region_descriptor()
    # Region 1's origin [0, 2] and shape [2, 2] as u64s: move it to [0, 1].
    at = b.find(struct.pack("<4Q", 0, 2, 2, 2))
    assert at > 0
    bad = b[:at] + struct.pack("<2Q", 0, 1) + b[at + 16 :]
    with pytest.raises(td.RegionOverlap) as e:
        td.decode(bad)
    assert "overlaps" in e.value.detail
    assert e.value.offset is not None


def test_region_overlap_from_the_builder():
    with pytest.raises(td.RegionOverlap):
        td.subpaving(
            (2, 4), [((0, 0), np.zeros((2, 3), np.int8)), ((0, 2), np.zeros((2, 2), np.int8))]
        )
    with pytest.raises(td.RegionCoverageGap):
        td.subpaving((2, 4), [((0, 0), np.zeros((2, 3), np.int8))])
    with pytest.raises(td.RegionOutOfBounds):
        td.subpaving((2, 4), [((0, 0), np.zeros((2, 4), np.int8)), ((0, 4), np.zeros((2, 1), np.int8))])


def test_file_errors(tmp_path):
    with pytest.raises(td.Io):
        td.open(tmp_path / "missing.tdf")
    p = tmp_path / "junk.tdf"
    p.write_bytes(b"not a tensordesc file at all")
    with pytest.raises(td.BadMagic):
        td.open(p)
    good = tmp_path / "good.tdf"
    td.write(good, {"a": np.arange(100, dtype=np.float64)})
    cut = tmp_path / "cut.tdf"
    cut.write_bytes(good.read_bytes()[:-20])
    with pytest.raises(td.Truncated):
        td.open(cut)
    f = td.open(good)
    with pytest.raises(td.NotFound) as e:
        f["b"]
    assert isinstance(e.value, KeyError)
    with pytest.raises(td.DuplicateName):
        td.write(tmp_path / "d.tdf", [("a", np.zeros(1)), ("a", np.zeros(1))])
    with pytest.raises(td.Truncated):
        td.read_stream(td.write_stream(None, {"a": np.zeros(3)})[:-4])


def test_index_errors():
    t = td.dense(np.arange(6).reshape(2, 3))
    with pytest.raises(td.IndexOutOfBounds) as e:
        t.get((2, 0))
    assert isinstance(e.value, IndexError)
    with pytest.raises(td.InvalidArgument):
        t.get((1,))
    assert t.get((-1, -1)) == 5
    with pytest.raises(IndexError):
        t.region(0)


def test_content_invalid_sparse():
    # A CSR matrix whose column index is outside the matrix (scipy does not check it
    # unless asked): the library's content validation catches it, and to_scipy refuses
    # to hand such indices to scipy's unchecked routines.
    m = sp.csr_array((np.ones(2), np.array([0, 7]), np.array([0, 1, 2])), shape=(2, 3))
    t = td.from_scipy(m)
    with pytest.raises(td.ContentInvalid) as e:
        t.validate()
    assert "index" in e.value.detail or "column" in e.value.detail
    with pytest.raises(td.ContentInvalid):
        t.to_scipy()


def test_size_errors_from_building():
    with pytest.raises(td.BufferSizeMismatch):
        td.block_paged(
            [np.zeros(5, np.float32)], np.zeros((1, 1), np.int64), [2], (1, 2, 2), 2
        )
    with pytest.raises(td.QuantizationInvalid):
        td.dense(np.zeros(4, np.float32), quantization=td.PerTensorAffine(0.5))


def test_not_bindable_without_buffers():
    t = td.decode(td.dense(np.zeros(3, np.int8)).descriptor_bytes())
    assert not t.has_buffers
    assert t.shape == (3,) and t.layout == "ROW_MAJOR"
    with pytest.raises(td.NotBindable):
        t.get((0,))
    with pytest.raises(td.NotBindable):
        t.numpy()


def test_errors_pickle():
    e = td.RegionOverlap("region 0 overlaps region 1", 44)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is td.RegionOverlap
    assert (back.detail, back.offset, back.status) == (e.detail, 44, "REGION_OVERLAP")


def test_the_package_version_is_the_librarys():
    import pathlib
    import re

    cargo = (pathlib.Path(__file__).parents[2] / "Cargo.toml").read_text()
    version = re.search(r'^version = "([0-9.]+)"', cargo, re.M).group(1)
    assert td.__version__ == version == _native.__version__


def test_front_door_rough_edges(tmp_path):
    # The CLI's dtype spellings work in reads.
    t = td.dense(np.arange(4, dtype=np.float32))
    assert t.read(dtype="f32").dtype == np.float32
    assert t.read(dtype="f16").dtype == np.float16
    assert t.read(dtype="F64").dtype == np.float64
    # A name that is not a str is refused, not stored as its str().
    with pytest.raises(TypeError, match="tensor names are str, not int"):
        td.write(tmp_path / "x.tdf", {1: np.zeros(3)})
    # One region is "1 region covers".
    with pytest.raises(td.RegionCoverageGap, match="1 region covers 8 of the 16"):
        td.subpaving((4, 4), [((0, 0), np.zeros((2, 4), np.float32))])
    # A directory as the output says so.
    with pytest.raises(td.Io, match="is a directory"):
        td.write(tmp_path, {"a": np.zeros(3)})
