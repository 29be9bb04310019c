#!/usr/bin/env bash
# Builds the Python package (python/) into a virtual environment and runs its tests
# against the real numpy, scipy, ml_dtypes, dask and gguf (llama.cpp's own Python package:
# the GGML_BLOCKS tests quantize and dequantize with it; torch only where already
# installed), and type-checks the package and its stubs with mypy (tests/test_typing.py).
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
  "pytest==9.2.0" \
  "mypy==2.4.1"

echo "== building the extension (maturin develop --release)"
(
  cd python
  VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" maturin develop --release --quiet </dev/null
)

echo "== pytest"
cd python
"$VENV/bin/python" -m pytest -q tests "$@"
