#!/usr/bin/env bash
# Runs the C and C++ test programs under valgrind (memcheck, full leak check); any error
# or definite/possible leak fails. The programs are compiled (and run once) by
# `cargo test -p libtensordesc --test c_abi`, which this script runs first.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
command -v valgrind >/dev/null || { echo "valgrind is not installed"; exit 1; }
cargo test -p libtensordesc --test c_abi
dir="${CARGO_TARGET_DIR:-$root/target}/debug/c_tests"
vg=(valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,possible
    --show-leak-kinds=definite,possible --track-origins=yes --quiet)
echo "== valgrind test_c_api"
"${vg[@]}" "$dir/test_c_api" "$dir/rust_bytes"
echo "== valgrind test_golden"
"${vg[@]}" "$dir/test_golden" "$root/tests/vectors"
echo "== valgrind test_golden_files"
mkdir -p "$dir/golden_files_scratch"
"${vg[@]}" "$dir/test_golden_files" "$root/tests/vectors/files" "$dir/golden_files_scratch"
echo "== valgrind test_cpp_api"
"${vg[@]}" "$dir/test_cpp_api"
echo "== valgrind test_golden_static"
"${vg[@]}" "$dir/test_golden_static" "$root/tests/vectors"
echo "== valgrind test_dlpack"
"${vg[@]}" "$dir/test_dlpack"
echo "== valgrind test_dlpack_cpp"
"${vg[@]}" "$dir/test_dlpack_cpp"
echo "== valgrind test_transport"
"${vg[@]}" "$dir/test_transport" "$dir/transport_scratch"
echo "== valgrind test_transport_cpp"
"${vg[@]}" "$dir/test_transport_cpp" "$dir/transport_cpp_scratch"
echo "== valgrind test_live_stream (both processes)"
"${vg[@]}" "$dir/test_live_stream" "$dir/live_scratch"
echo "== valgrind test_data_plane"
"${vg[@]}" "$dir/test_data_plane"
echo "== valgrind test_data_plane_cpp"
"${vg[@]}" "$dir/test_data_plane_cpp"
echo "valgrind: OK"
