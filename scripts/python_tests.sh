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
# interpreter that creates it (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${TDESC_PY_VENV:-$PWD/target/python-venv}"
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
WHEELS="$PWD/target/wheels"
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

if [ -z "${TDESC_SKIP_FRESH_VENV:-}" ]; then
  # The wheel alone, in a fresh environment, with no Rust toolchain on PATH.
  FRESH="$PWD/target/python-fresh-venv"
  rm -rf "$FRESH"
  "$VENV/bin/python" -m venv "$FRESH"
  env PATH="/usr/bin:/bin" "$FRESH/bin/python" -m pip install --quiet \
    --disable-pip-version-check "numpy==2.4.6" "$WHEEL"
  (cd /tmp && env PATH="$FRESH/bin:/usr/bin:/bin" "$FRESH/bin/python" -c '
import shutil, tensordesc, numpy as np
assert shutil.which("cargo") is None, "cargo is on PATH"
t = tensordesc.dense(np.arange(6, dtype=np.float32).reshape(2, 3))
assert float(t[1, 2]) == 5.0
print("fresh venv without cargo: tensordesc", tensordesc.__version__, "imports and reads")
')
fi

echo "== pytest"
# From the tests directory: `import tensordesc` finds the installed wheel, not ./tensordesc.
cd python/tests
"$VENV/bin/python" -m pytest -q . "$@"
