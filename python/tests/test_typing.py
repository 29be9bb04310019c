"""Static types: the package is typed (``py.typed``) and the compiled module has stubs
(``tensordesc/_native.pyi``).

- mypy ``--strict`` passes on the installed package, stubs included;
- a script using the main API type-checks under ``--strict``, with the types it relies on
  asserted (``assert_type``), so they are not ``Any``;
- a script with deliberate mistakes gets exactly the errors expected, line by line;
- the stubs declare exactly what ``tensordesc._native`` defines (names, members,
  properties, parameters and defaults), so they cannot go stale silently.

mypy is pinned by scripts/python_tests.sh; the mypy tests are skipped where it is not
installed.
"""

import ast
import inspect
import re
import textwrap
from pathlib import Path

import pytest

import tensordesc as td
from tensordesc import _native, errors

try:
    import mypy.api as mypy_api
except ImportError:  # pragma: no cover - scripts/python_tests.sh installs mypy
    mypy_api = None

needs_mypy = pytest.mark.skipif(
    mypy_api is None, reason="mypy is not installed (scripts/python_tests.sh pins it)"
)

PACKAGE_DIR = Path(td.__file__).parent
STUB = PACKAGE_DIR / "_native.pyi"

# Besides --strict, what checking the package itself needs. Code using the package needs
# neither on its account (the user script below needs the dask one for its own call of
# dask's unannotated Array.sum).
MYPY_CONFIG = """\
[mypy]
strict = True
# dask.array.from_array, which tensordesc.dask calls, has no annotations.
untyped_calls_exclude = dask

# scipy ships no type information (no py.typed; scipy-stubs is a separate package).
[mypy-scipy.*]
ignore_missing_imports = True
"""


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory):
    """One mypy cache for the module's runs (numpy's stubs are analysed once)."""
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.fixture
def run_mypy(tmp_path, monkeypatch, mypy_cache):
    """Run mypy --strict in an empty directory (so that ``tensordesc`` is found where it is
    installed, which needs its py.typed) and return (status, output lines)."""
    config = tmp_path / "mypy.ini"
    config.write_text(MYPY_CONFIG)
    monkeypatch.chdir(tmp_path)

    def run(*args):
        stdout, stderr, status = mypy_api.run(
            ["--strict", "--config-file", str(config), "--cache-dir", str(mypy_cache)]
            + [str(a) for a in args]
        )
        assert stderr == "", stderr
        return status, stdout.splitlines()

    return run


def write_script(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


# ---------------------------------------------------------------------------------------
# The package
# ---------------------------------------------------------------------------------------


def test_marker_and_stubs_are_installed():
    assert (PACKAGE_DIR / "py.typed").is_file()
    assert STUB.is_file()
    # The stub stands beside the compiled module it describes.
    assert Path(_native.__file__).parent == PACKAGE_DIR


@needs_mypy
def test_package_passes_mypy_strict(run_mypy):
    status, out = run_mypy("-p", "tensordesc")
    # Every module of the package and the stub, checked (not skipped as untyped).
    checked = len(list(PACKAGE_DIR.glob("*.py"))) + 1
    assert out == [f"Success: no issues found in {checked} source files"], "\n".join(out)
    assert status == 0


# ---------------------------------------------------------------------------------------
# A user's script
# ---------------------------------------------------------------------------------------

USER_SCRIPT = '''
from __future__ import annotations

import io
import pathlib
import pickle
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import tensordesc as td
import tensordesc.dask
import tensordesc.zarr


def inspect_file(path: pathlib.Path) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    with td.open(path, strict=False) as f:
        assert_type(f, td.File)
        assert_type(f.path, str)
        assert_type(f.alignment, int)
        assert_type(len(f), int)
        assert_type("weights" in f, bool)
        assert_type(list(f), list[str])
        assert_type(f.keys(), list[str])
        for name, t in f.items():
            shapes[name] = t.shape
        assert_type(f.get("missing"), td.Tensor | None)
        assert_type(f.get("missing", 0), td.Tensor | int)
        assert_type(dict(f), dict[str, td.Tensor])
        f.validate()
    return shapes


def read(path: str) -> npt.NDArray[np.float32]:
    f = td.open(path)
    t = f["weights"]
    assert_type(t, td.Tensor)
    assert_type(t.name, str | None)
    assert_type(t.shape, tuple[int, ...])
    assert_type(t.ndim + t.size + t.nbytes, int)
    assert_type(t.dtype, np.dtype[Any])
    assert_type(t.read_only and t.has_buffers, bool)
    element_type: str = t.element_type
    layout: str = t.layout
    params = t.layout_params
    if t.layout == "CSR":
        assert_type(params["nnz"], int)
        assert_type(params["flags"], list[Literal["SORTED", "UNIQUE"]])
    q = t.quantization
    if q is not None:
        assert_type(q["scheme"], str)
        assert_type(q["has_zero_point"], bool)
        scale: float = q["scale"]
    for r in t.regions:
        assert_type(r, td.Region)
        assert_type(r.parent, int | None)
        assert_type(r.origin, tuple[int, ...])
        assert_type(r.box, tuple[slice[int, int, None], ...])
        assert_type(t.read(r.box, dtype="float32"), npt.NDArray[Any])
        assert_type(r[0:2, ...], npt.NDArray[Any])
        assert_type(r.tensor, td.Tensor)
        print(r.index, r.depth, r.is_leaf, r.shape, r.layout, r.quantization)
    assert_type(t.region(-1), td.Region)
    for b in t.buffers:
        assert_type(b["size"], int)
        assert_type(b["region"], int | None)
        offset: int | None = b.get("file_offset")
    loc = t.locate((0, 0))
    if loc["kind"] == "dense":
        assert_type(loc["byte_offset"], int)
    else:
        assert_type(loc["local_index"], list[int])
    assert_type(t.get((5, 7)), bool | int | float | complex)
    t.validate()
    window = t[0:128, 64:96]
    assert_type(window, npt.NDArray[Any])
    assert_type(t[-1, ..., ::4], npt.NDArray[Any])
    element = t[3, 7]  # a scalar or an array, by the tensor's rank
    assert_type(np.asarray(t), npt.NDArray[Any])
    assert_type(t.read(np.s_[0:128, 64:96], dtype="float64"), npt.NDArray[Any])
    assert_type(t.read(), npt.NDArray[Any])
    assert_type(t.read_dtype("raw"), np.dtype[Any])
    if t.layout == "ROW_MAJOR":
        assert_type(t.numpy(), npt.NDArray[Any])
        exported = np.from_dlpack(t)
        assert_type(t.__dlpack_device__(), tuple[int, int])
    if t.layout == "CSR":
        m = t.to_scipy()
        print(m.nnz)
    blob = t.descriptor_bytes()
    assert_type(blob, bytes)
    assert_type(td.decode(blob), td.Tensor)
    assert_type(td.decode(bytearray(blob), strict=False), td.Tensor)
    restored = pickle.loads(pickle.dumps(t))
    print(element_type, layout, element, exported, restored)
    return window.astype(np.float32)


def build(out: pathlib.Path) -> bytes:
    codes = np.arange(16, dtype=np.int8).reshape(4, 4)
    q = td.dense(codes, quantization=td.PerTensorAffine(0.5, zero_point=1, expressed="float16"))
    per_axis = td.dense(codes, quantization=td.PerAxisAffine(0, np.ones(4, np.float32)))
    blocks = td.dense(
        codes, quantization=td.Blockwise(axis=1, block_size=2, scales=np.ones((4, 2), np.float32))
    )
    book = td.dense(
        codes.astype(np.uint8), quantization=td.Codebook(np.linspace(0, 1, 16, dtype=np.float32))
    )
    ones = td.splat(1.5, (3, 3), np.float32)
    tiles = td.tiled(np.zeros((5, 7), np.float32), (2, 2))
    paving = td.subpaving((4, 8), [((0, 0), codes), ((0, 4), q)])
    kv = td.block_paged([np.zeros((2, 4, 8), np.float16)], [[0, 1]], [8], (1, 8, 8), 4)
    imported = td.from_dlpack(np.zeros(3))
    listed = td.as_tensor([1, 2, 3])
    assert_type(paving, td.Tensor)
    td.write(
        out,
        {"codes": codes, "q": q, "per_axis": per_axis, "blocks": blocks, "book": book,
         "ones": ones, "tiles": tiles, "paving": paving, "kv": kv, "imported": imported,
         "listed": listed},
        alignment=128,
    )
    td.write(str(out), [("a", codes), ("b", q)])
    td.write(out.with_suffix(".copy.tdf"), td.open(out))
    data = td.to_bytes({"codes": codes})
    assert_type(data, bytes)
    stream = td.write_stream(None, {"codes": codes})
    assert_type(stream, bytes)
    assert_type(td.write_stream(out.with_suffix(".tdfs"), {"codes": codes}), None)
    td.write_stream(io.BytesIO(), [("codes", codes)])
    assert_type(td.read_stream(stream), dict[str, td.Tensor])
    assert_type(td.read_stream(out.with_suffix(".tdfs")), dict[str, td.Tensor])
    assert_type(td.ELEMENT_TYPES, tuple[str, ...])
    assert_type(td.live_exports(), int)
    return data


def handle(path: str) -> str:
    try:
        td.open(path)["missing"]
    except td.NotFound as e:
        assert_type(e.status, str)
        assert_type(e.code, int)
        assert_type(e.offset, int | None)
        return e.detail
    except (td.RegionOverlap, td.errors.ContentInvalid) as e:
        return str(e)
    except td.Error as e:
        return e.status
    for cls in td.errors.STATUS_CLASSES:
        assert_type(td.errors.BY_CODE[cls.code], type[td.Error])
    return ""


def distributed(path: str) -> None:
    x = tensordesc.dask.from_tdf(path, "weights", chunks=(1024, 1024), dtype="raw")
    print(x.sum().compute())
    t = td.open(path)["weights"]
    assert_type(tensordesc.dask.region_chunks(t), tuple[tuple[int, ...], ...] | None)
    assert_type(tensordesc.dask.TdfArray(t)[0:1, 0:2], npt.NDArray[Any])


def zarr_store(path: pathlib.Path) -> None:
    import zarr
    import zarr.abc.store
    import zarr.storage

    store = tensordesc.zarr.Store(path, chunk_bytes=1 << 20)
    assert_type(store.path, str)
    assert_type(store.tensors, list[str])
    assert_type(store.skipped, dict[str, str])
    assert_type(store.file, td.File)
    info = store.array_info("weights")
    assert_type(info.chunks, tuple[int, ...])
    assert_type(info.dtype, np.dtype[Any])
    assert_type(info.read_as, str | None)
    group = zarr.open_group(store, mode="r")
    print(group.attrs["tensordesc"], tensordesc.zarr.Store(td.open(path)) == store)
    assert_type(store.with_read_only(True), tensordesc.zarr.Store)
    assert_type(tensordesc.zarr.choose_chunks((4096, 4096), 4, (1024, 1024)), tuple[int, ...])
    assert_type(tensordesc.zarr.zarr_data_type(np.dtype("float16")), tuple[str, str | None])
    base: zarr.abc.store.Store = store  # zarr's stores and this one share the ABC
    print(base, zarr.storage.ZipStore)
'''


@needs_mypy
def test_user_script_passes_mypy_strict(tmp_path, run_mypy):
    script = write_script(tmp_path, "user_script.py", USER_SCRIPT)
    status, out = run_mypy(script)
    assert out == ["Success: no issues found in 1 source file"], "\n".join(out)
    assert status == 0


# Each line ending in "# E: <code>" must be reported with that error code, and no other.
BAD_SCRIPT = """
import numpy as np
import tensordesc as td

f = td.open("model.tdf")
t = f["weights"]
t.region("0")  # E: arg-type
t.no_such_method()  # E: attr-defined
f[0]  # E: index
rank: str = t.ndim  # E: assignment
td.dense(np.zeros(3), quantization="int8")  # E: arg-type
td.write("out.tdf", {"w": np.zeros(3)}, alignment="64")  # E: arg-type
td.PerTensorAffine("0.5")  # E: arg-type
t.read(box=3)  # E: arg-type
data: bytes = td.write_stream("out.tdfs", {"w": np.zeros(3)})  # E: assignment
td.open(3)  # E: arg-type
t.layout_params["no_such_field"]  # E: typeddict-item
location = t.locate(0)
location["byte_offset"]  # E: typeddict-item
region: td.Region = t.regions  # E: assignment
td.decode("not bytes")  # E: arg-type
td.NotFound(3)  # E: arg-type
t.quantization["scale"]  # E: index
f.path = "other.tdf"  # E: misc
td.open("model.tdf", True)  # E: call-arg
import tensordesc.zarr
tensordesc.zarr.Store("model.tdf", chunk_bytes="4MiB")  # E: arg-type
"""


@needs_mypy
def test_mistakes_are_reported(tmp_path, run_mypy):
    script = write_script(tmp_path, "bad_script.py", BAD_SCRIPT)
    expected = {
        (number, m.group(1))
        for number, line in enumerate(script.read_text().splitlines(), 1)
        if (m := re.search(r"# E: ([\w-]+)$", line))
    }
    status, out = run_mypy(script)
    reported = {
        (int(m.group(1)), m.group(2))
        for line in out
        if (m := re.match(r"bad_script\.py:(\d+): error: .*\[([\w-]+)\]$", line))
    }
    assert reported == expected, "\n".join(out)
    assert out[-1] == f"Found {len(expected)} errors in 1 file (checked 1 source file)"
    assert status == 1


# ---------------------------------------------------------------------------------------
# The stubs against the compiled module
# ---------------------------------------------------------------------------------------


def _decorators(node):
    return {
        d.id if isinstance(d, ast.Name) else getattr(d, "attr", None) for d in node.decorator_list
    }


def _type_only(node):
    """Stub-only declarations: @type_check_only classes, TypeAlias and TypeVar assignments."""
    if isinstance(node, ast.ClassDef):
        return "type_check_only" in _decorators(node)
    if isinstance(node, ast.AnnAssign):
        return ast.unparse(node.annotation) in ("TypeAlias", "typing.TypeAlias")
    if isinstance(node, ast.Assign):
        return isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "TypeVar"
    return False


def _declarations(body):
    """name -> list of the definitions in a module or class body (overloads: several)."""
    found = {}
    for node in body:
        if _type_only(node):
            continue
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.setdefault(node.target.id, []).append(node)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node)
    return found


def _stub():
    return ast.parse(STUB.read_text(), filename=str(STUB))


def _runtime_public(module):
    return {n for n in dir(module) if not (n.startswith("__") and n.endswith("__"))}


def test_stub_declares_exactly_the_native_names():
    declared = set(_declarations(_stub().body))
    # The module's one dunder attribute, its version, is declared too.
    assert "__version__" in declared and isinstance(_native.__version__, str)
    declared.discard("__version__")
    assert declared == _runtime_public(_native)
    # pyo3's __all__ lists the classes and functions the module adds.
    assert declared == set(_native.__all__) - {"__version__"}


def _stub_classes():
    return {
        name: nodes[0]
        for name, nodes in _declarations(_stub().body).items()
        if isinstance(nodes[0], ast.ClassDef)
    }


def test_stub_classes_declare_exactly_the_native_members():
    classes = _stub_classes()
    assert set(classes) == {n for n in _native.__all__ if isinstance(getattr(_native, n), type)}
    for name, node in classes.items():
        cls = getattr(_native, name)
        runtime = {n: v for n, v in vars(cls).items() if n not in ("__doc__", "__module__")}
        members = _declarations(node.body)
        assert set(members) == set(runtime), name
        for member, defs in members.items():
            is_property = all(
                isinstance(d, ast.FunctionDef) and "property" in _decorators(d) for d in defs
            )
            # pyo3 getters are data descriptors; methods are not.
            assert is_property == inspect.isdatadescriptor(runtime[member]), f"{name}.{member}"


_KINDS = {
    "posonly": inspect.Parameter.POSITIONAL_ONLY,
    "args": inspect.Parameter.POSITIONAL_OR_KEYWORD,
    "kwonly": inspect.Parameter.KEYWORD_ONLY,
}


def _stub_parameters(fn, method):
    """[(name, kind, default or inspect.Parameter.empty)] of a stub function (without
    ``self`` for methods)."""
    a = fn.args
    positional = [(p, "posonly") for p in a.posonlyargs] + [(p, "args") for p in a.args]
    defaults = [inspect.Parameter.empty] * (len(positional) - len(a.defaults)) + [
        ast.literal_eval(d) for d in a.defaults
    ]
    params = [(p.arg, _KINDS[k], d) for (p, k), d in zip(positional, defaults)]
    params += [
        (p.arg, _KINDS["kwonly"], inspect.Parameter.empty if d is None else ast.literal_eval(d))
        for p, d in zip(a.kwonlyargs, a.kw_defaults)
    ]
    assert a.vararg is None and a.kwarg is None, fn.name
    return params[1:] if method else params


def _runtime_parameters(obj, method):
    params = [(p.name, p.kind, p.default) for p in inspect.signature(obj).parameters.values()]
    return params[1:] if method else params


def _callables():
    """(qualified name, runtime object, stub definitions, is a method) of everything
    callable the stub declares."""
    for name, defs in _declarations(_stub().body).items():
        if isinstance(defs[0], ast.FunctionDef):
            yield name, getattr(_native, name), defs, False
    for cname, node in _stub_classes().items():
        cls = getattr(_native, cname)
        for name, defs in _declarations(node.body).items():
            if not any("property" in _decorators(d) for d in defs):
                yield f"{cname}.{name}", vars(cls)[name], defs, True


def test_stub_signatures_match_the_native_ones():
    checked = 0
    for qualname, obj, defs, method in _callables():
        assert callable(obj), qualname
        runtime = _runtime_parameters(obj, method)
        overloaded = len(defs) > 1
        for fn in defs:
            stub = _stub_parameters(fn, method)
            if overloaded:
                # An overload may require what the function defaults (File.get's default):
                # names and kinds must match, defaults are the implementation's.
                assert [p[:2] for p in stub] == [p[:2] for p in runtime], qualname
            else:
                assert stub == runtime, qualname
        checked += 1
    functions = [n for n in _native.__all__ if n != "__version__" and not isinstance(getattr(_native, n), type)]
    methods = [
        v for n in _native.__all__ if isinstance(c := getattr(_native, n), type)
        for v in vars(c).values() if callable(v)
    ]
    assert checked == len(functions) + len(methods) == 55


def test_written_out_export_lists_match_the_classes():
    names = [c.__name__ for c in errors.STATUS_CLASSES]
    assert errors.__all__ == ["Error", "STATUS_CLASSES", "BY_CODE"] + names
    assert td.__all__[-len(names) :] == names
    assert len(set(td.__all__)) == len(td.__all__)
    for name in td.__all__:
        assert hasattr(td, name), name
