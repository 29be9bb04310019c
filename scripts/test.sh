#!/usr/bin/env bash
# Every test: the Rust suite (unit, integration, golden vectors, CLI, C and C++ through the
# C ABI, doc tests), then the Python package's pytest suite against the real numpy, scipy,
# ml_dtypes and dask (scripts/python_tests.sh builds it into a virtual environment; it
# needs python3 with venv and pip, and the package registry).
#
#   bash scripts/test.sh            # everything
#   TDESC_SKIP_PYTHON=1 bash scripts/test.sh   # the Rust suite only
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test"
cargo test
if [ "${TDESC_SKIP_PYTHON:-0}" != 1 ]; then
  echo "== Python package (scripts/python_tests.sh)"
  bash scripts/python_tests.sh
fi
