#!/usr/bin/env bash
# Builds the Python package (python/) as a wheel, installs it into a virtual environment
# (and alone into a fresh one without a Rust toolchain on PATH), and runs its tests
# against the real numpy, scipy, ml_dtypes, dask and gguf (llama.cpp's own Python package:
# the GGML_BLOCKS tests quantize and dequantize with it; torch only where already
# installed), zarr and xarray (tensordesc.zarr's store read by them), and type-checks the package and its stubs with mypy (tests/test_typing.py).
#
#   bash scripts/python_tests.sh [pytest arguments...]
#
# TDESC_PY_VENV chooses the environment (default target/python-venv), PYTHON the
# interpreter that creates it (default python3). The wheel, the environments and the build
# go under $CARGO_TARGET_DIR when it is set (default target/). TDESC_SKIP_FRESH_VENV=1
# skips the check of the wheel alone in a fresh environment.
set -euo pipefail
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
  # Absolute: maturin runs in python/.
  mkdir -p "$CARGO_TARGET_DIR"
  CARGO_TARGET_DIR="$(cd "$CARGO_TARGET_DIR" && pwd)"
  export CARGO_TARGET_DIR
fi
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"

VENV="${TDESC_PY_VENV:-$TARGET/python-venv}"
PY="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# Pinned: the versions the package is tested with.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "maturin==1.16.0" \
  "numpy==2.4.6" \
  "scipy==1.17.1" \
  "ml_dtypes==0.7.0" \
  "dask[array]==2026.8.0" \
  "distributed==2026.8.0" \
  "gguf==0.19.0" \
  "zarr==3.1.6" \
  "xarray==2026.9.0" \
  "pytest==9.2.0" \
  "mypy==2.4.1" \
  "safetensors==0.8.0"

echo "== building the wheel (maturin build --release)"
WHEELS="$TARGET/wheels"
rm -f "$WHEELS"/tensordesc-*.whl
(
  cd python
  VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" \
    maturin build --release --quiet --interpreter "$VENV/bin/python" --out "$WHEELS" </dev/null
)
WHEEL="$(ls "$WHEELS"/tensordesc-*.whl)"
echo "== installing $(basename "$WHEEL") (the tests import the installed package)"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall \
  --no-deps "$WHEEL"

if [ "${TDESC_SKIP_FRESH_VENV:-0}" = 0 ]; then
  # The wheel alone, in a fresh environment, with no Rust toolchain on PATH: the package
  # imports and reads, and the command line it brings (the `tensordesc` console script,
  # `python -m tensordesc`) runs.
  FRESH="$TARGET/python-fresh-venv"
  rm -rf "$FRESH"
  "$VENV/bin/python" -m venv "$FRESH"
  env PATH="/usr/bin:/bin" "$FRESH/bin/python" -m pip install --quiet \
    --disable-pip-version-check "numpy==2.4.6" "$WHEEL"
  CRATE_VERSION="$(sed -n 's/^version = "\([0-9.]*\)".*/\1/p' Cargo.toml | head -n 1)"
  SCRATCH="$(mktemp -d)"
  (cd "$SCRATCH" && env PATH="$FRESH/bin:/usr/bin:/bin" CRATE_VERSION="$CRATE_VERSION" \
    FRESH_BIN="$FRESH/bin" bash -c '
set -euo pipefail
test -z "$(command -v cargo)" || { echo "cargo is on PATH" >&2; exit 1; }
test "$(command -v tensordesc)" = "$FRESH_BIN/tensordesc"
python -c "
import tensordesc, numpy as np
t = tensordesc.dense(np.arange(6, dtype=np.float32).reshape(2, 3))
assert float(t[1, 2]) == 5.0
"
v="$(python -c "import tensordesc; print(tensordesc.__version__)")"
test "$v" = "$CRATE_VERSION" || { echo "tensordesc.__version__ $v, the crate $CRATE_VERSION" >&2; exit 1; }
tensordesc --help | grep -q "^Usage: tensordesc "
test "$(tensordesc --version)" = "tensordesc $CRATE_VERSION"
python -m tensordesc --help | grep -q "^Usage: python -m tensordesc "
for c in demo inspect validate locate export convert; do
  tensordesc "$c" --help >/dev/null
done
tensordesc demo --out demo >/dev/null
tensordesc validate --contents demo/model.tdf >/dev/null
W=model.layers.0.mlp.up_proj.weight
tensordesc locate demo/model.safetensors --tensor $W 100,70 | grep -q "^value: "
tensordesc export demo/model.safetensors --tensor $W --box 0:64,0:32 --dtype f32 -o w.npy >/dev/null
python -c "import numpy as np; assert np.load(\"w.npy\").shape == (64, 32)"
# A reader that closes the pipe at once: the command stops quietly, no Python traceback.
tensordesc inspect demo/model.tdf 2>inspect.err | true
test ! -s inspect.err || { cat inspect.err >&2; exit 1; }
python -m tensordesc convert -q demo/model.safetensors copy.tdf
python -c "import tensordesc; assert len(tensordesc.open(\"copy.tdf\")) == len(tensordesc.open(\"demo/model.safetensors\")) > 1"
echo "fresh venv without cargo: tensordesc $v imports and reads; tensordesc and python -m tensordesc run"
')
  rm -rf "$SCRATCH"
fi

echo "== pytest"
# From the tests directory: `import tensordesc` finds the installed wheel, not ./tensordesc.
cd python/tests
"$VENV/bin/python" -m pytest -q . "$@"
