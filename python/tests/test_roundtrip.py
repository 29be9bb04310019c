"""numpy -> tensordesc -> file / stream -> numpy, bit-exact, for every element type and
every way numpy lays an array out."""

import io

import numpy as np
import pytest

import tensordesc as td
from conftest import DTYPES, PACKED, bits, random_array


@pytest.mark.parametrize("name", list(DTYPES))
def test_every_dtype_round_trips_through_a_file(tmp_path, name):
    a = random_array(name, (5, 7), seed=len(name))
    t = td.dense(a)
    assert t.element_type == name
    assert t.dtype == DTYPES[name]
    assert t.shape == (5, 7)
    path = tmp_path / "t.tdf"
    td.write(path, {"x": a, "y": t})
    f = td.open(path)
    for key in ("x", "y"):
        back = f[key].numpy()
        assert back.dtype == DTYPES[name]
        assert back.shape == a.shape
        assert np.array_equal(bits(back), bits(a))
        if name not in PACKED:
            assert not back.flags.writeable
    # Element reads agree with numpy, value for value (integers exactly, floats as float).
    x = f["x"]
    for idx in [(0, 0), (4, 6), (2, 3), (-1, -2)]:
        v = x.get(idx)
        ref = a[idx]
        if name.startswith("COMPLEX"):
            assert v == complex(ref) or (np.isnan(v.real) or np.isnan(v.imag))
        elif name in ("BOOL",):
            assert v is bool(ref)
        elif DTYPES[name].kind in "iu" and name not in PACKED:
            assert v == int(ref) and isinstance(v, int)
        else:
            r = float(ref)
            assert (np.isnan(v) and np.isnan(r)) or v == r


@pytest.mark.parametrize("name", list(DTYPES))
def test_every_dtype_round_trips_through_a_stream(name):
    a = random_array(name, (3, 4, 2), seed=7)
    data = td.write_stream(None, {"a": a})
    back = td.read_stream(data)
    assert list(back) == ["a"]
    assert np.array_equal(bits(back["a"].numpy()), bits(a))


LAYOUTS = {
    "c": lambda a: a,
    "fortran": lambda a: np.asfortranarray(a),
    "transposed": lambda a: a.T,
    "reversed": lambda a: a[::-1, ::-1],
    "every_other": lambda a: a[::2, 1::3],
    "broadcast": lambda a: np.broadcast_to(a[:1], a.shape),
    "scalar": lambda a: a[2, 3],
    "empty": lambda a: a[:0],
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", ["FLOAT32", "INT16", "BFLOAT16", "COMPLEX128", "UINT8"])
def test_numpy_layouts_round_trip(tmp_path, layout, name):
    a = LAYOUTS[layout](random_array(name, (6, 9), seed=3))
    a = np.asarray(a)
    t = td.dense(a)
    expected = {
        "c": "ROW_MAJOR",
        "fortran": "COL_MAJOR",
        "transposed": "COL_MAJOR",
        "reversed": "STRIDED",
        "every_other": "STRIDED",
        "broadcast": "STRIDED",
        "scalar": "ROW_MAJOR",
        "empty": "ROW_MAJOR",
    }[layout]
    assert t.layout == expected
    # The in-memory tensor views the array itself.
    v = t.numpy()
    assert np.array_equal(bits(v), bits(a))
    td.write(tmp_path / "l.tdf", {"a": t})
    back = td.open(tmp_path / "l.tdf")["a"]
    assert back.layout == expected
    assert np.array_equal(bits(back.numpy()), bits(a))


def test_packed_4bit_odd_count_and_col_major_reading(tmp_path):
    a = random_array("INT4", (3, 5), seed=11)
    t = td.dense(a)
    assert t.buffers[0]["size"] == 8  # 15 nibbles -> 8 bytes
    td.write(tmp_path / "p.tdf", {"p": t})
    back = td.open(tmp_path / "p.tdf")["p"]
    assert np.array_equal(bits(back.numpy()), bits(a))
    assert [back.get((i, j)) for i in range(3) for j in range(5)] == [
        int(x) for x in a.astype(np.int8).reshape(-1)
    ]


def test_write_stream_to_file_objects_and_paths(tmp_path):
    a = np.arange(10, dtype=np.int32)
    buf = io.BytesIO()
    assert td.write_stream(buf, {"a": a, "b": a[::-1]}) is None
    got = td.read_stream(buf.getvalue())
    assert list(got) == ["a", "b"]
    assert np.array_equal(got["b"].numpy(), a[::-1])
    p = tmp_path / "s.tdfs"
    td.write_stream(p, [("a", a)])
    assert np.array_equal(td.read_stream(p)["a"].numpy(), a)
    assert td.read_stream(str(p))["a"].name == "a"


def test_to_bytes_matches_write(tmp_path):
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    td.write(tmp_path / "w.tdf", {"a": a})
    assert td.to_bytes({"a": a}) == (tmp_path / "w.tdf").read_bytes()


def test_rewriting_a_mapped_file_keeps_old_views_valid(tmp_path):
    p = tmp_path / "r.tdf"
    a = np.arange(1000, dtype=np.float32)
    td.write(p, {"a": a})
    old = td.open(p)["a"].numpy()
    td.write(p, {"a": a * 2})
    # The old mapping still holds the old bytes: the file was replaced, not rewritten.
    assert np.array_equal(old, a)
    assert np.array_equal(td.open(p)["a"].numpy(), a * 2)
    assert not list(tmp_path.glob(".*tmp*"))


def test_file_mapping_lives_while_a_view_does(tmp_path):
    import gc

    p = tmp_path / "m.tdf"
    a = np.arange(4096, dtype=np.int64)
    td.write(p, {"a": a})
    f = td.open(p)
    v = f["a"].numpy()
    del f
    gc.collect()
    assert np.array_equal(v, a)
    assert v.base is not None


def test_file_is_a_mapping(tmp_path):
    from collections.abc import Mapping

    p = tmp_path / "k.tdf"
    td.write(p, [("b", np.zeros(2)), ("a", np.ones(3))])
    with td.open(p) as f:
        assert isinstance(f, Mapping)
        assert list(f) == ["b", "a"] == f.keys()
        assert len(f) == 2 and "a" in f and "c" not in f
        assert f.get("c") is None
        assert [n for n, _ in f.items()] == ["b", "a"]
        assert f["a"].name == "a"
        with pytest.raises(KeyError):
            f["c"]
        f.validate()


def test_tensors_of_files_pickle_as_path_and_name(tmp_path, monkeypatch):
    import pickle

    monkeypatch.chdir(tmp_path)
    td.write("p.tdf", {"a": np.arange(5.0), "s": td.subpaving((2, 2), [((0, 0), np.ones((2, 1))), ((0, 1), np.zeros((2, 1)))])})
    t = td.open("p.tdf")["a"]
    data = pickle.dumps(t)
    assert len(data) < 200  # path and name, not the data
    back = pickle.loads(data)
    assert back.name == "a" and np.array_equal(back.numpy(), np.arange(5.0))
    r = pickle.loads(pickle.dumps(td.open("p.tdf")["s"].region(1)))
    assert r.index == 1 and np.array_equal(r.numpy(), np.zeros((2, 1)))
    with pytest.raises(TypeError, match="pickle"):
        pickle.dumps(td.dense(np.arange(3)))


def test_tensors_are_shared_between_threads(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    import scipy.sparse as sp

    m = sp.random_array((200, 100), density=0.05, format="csr", dtype=np.float64, rng=1)
    a = np.arange(20000, dtype=np.float64).reshape(200, 100)
    td.write(tmp_path / "t.tdf", {"m": m, "a": a})
    f = td.open(tmp_path / "t.tdf")
    dense = m.toarray()

    def work(i):
        f["m"].validate()
        r = i % 200
        return (
            f["m"].get((r, i % 100)) == dense[r, i % 100]
            and f["a"].numpy()[r, 3] == a[r, 3]
            and f["m"].to_scipy()[[r], :].toarray().tolist() == dense[[r], :].tolist()
        )

    with ThreadPoolExecutor(4) as ex:
        assert all(ex.map(work, range(400)))


def test_element_types_come_from_the_library_and_each_has_a_numpy_dtype():
    # The package's table of element types is the library's own: every name the tests
    # know, each with the numpy dtype a tensor of it reports.
    assert set(td.ELEMENT_TYPES) == set(DTYPES)
    for name, dtype in DTYPES.items():
        t = td.dense(random_array(name, (2, 3)))
        assert t.element_type == name
        assert t.dtype == dtype
