#!/usr/bin/env bash
# Configures, builds and installs libtensordesc with CMake into a temporary prefix, checks
# the installed layout (versioned .so and its links, SONAME, .a, no debug info in either,
# headers, pkg-config file, CMake package), then builds examples/consumer against it with
# find_package(tensordesc CONFIG REQUIRED) and runs it.
#
# The cargo build is cached in target/cmake-cargo (override with TDESC_CMAKE_CARGO_TARGET_DIR).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
# TDESC_KEEP_WORK=1 keeps the temporary tree for inspection.
[ "${TDESC_KEEP_WORK:-0}" = 1 ] && echo "work tree: $work" || trap 'rm -rf "$work"' EXIT
cargo_dir="${TDESC_CMAKE_CARGO_TARGET_DIR:-$root/target/cmake-cargo}"
prefix="$work/prefix"

echo "== configure + build + install (prefix $prefix)"
cmake -S "$root" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DTENSORDESC_CARGO_TARGET_DIR="$cargo_dir"
cmake --build "$work/build" --parallel 2
cmake --install "$work/build"

echo "== installed layout"
# The version lives in Cargo.toml alone.
ver="$(sed -n 's/^version = "\([0-9.]*\)"$/\1/p' "$root/Cargo.toml" | head -n1)"
libdir="$(dirname "$(find "$prefix" -name "libtensordesc.so.$ver" | head -n1)")"
[ -f "$libdir/libtensordesc.so.$ver" ] || { echo "missing libtensordesc.so.$ver"; exit 1; }
[ "$(readlink "$libdir/libtensordesc.so.1")" = "libtensordesc.so.$ver" ] || { echo "bad libtensordesc.so.1 link"; exit 1; }
[ "$(readlink "$libdir/libtensordesc.so")" = "libtensordesc.so.1" ] || { echo "bad libtensordesc.so link"; exit 1; }
[ -f "$libdir/libtensordesc.a" ] || { echo "missing libtensordesc.a"; exit 1; }
if command -v readelf >/dev/null; then
  readelf -d "$libdir/libtensordesc.so.$ver" | grep 'SONAME.*\[libtensordesc.so.1\]' >/dev/null \
    || { echo "SONAME is not libtensordesc.so.1"; exit 1; }
  # Installed without debug info (TENSORDESC_INSTALL_STRIPPED, on by default); the cargo
  # build it came from keeps it ([profile.release] debug = 1).
  debug_sections() { readelf -S -W "$1" | grep -cE '^\s*\[\s*[0-9]+\] \.debug_' || true; }
  for f in "$libdir/libtensordesc.so.$ver" "$libdir/libtensordesc.a"; do
    n="$(debug_sections "$f")"
    [ "$n" = 0 ] || { echo "$f has $n .debug_* sections"; exit 1; }
  done
  [ "$(debug_sections "$cargo_dir/release/libtensordesc.so")" != 0 ] \
    || { echo "the cargo build has no debug info: [profile.release] debug = 1 is gone"; exit 1; }
  # A stripped shared object still exports the C ABI.
  readelf --dyn-syms -W "$libdir/libtensordesc.so.$ver" | grep ' tdesc_tensor_get_f64$' >/dev/null \
    || { echo "tdesc_tensor_get_f64 is not exported"; exit 1; }
fi
echo "installed sizes: libtensordesc.so.$ver $(wc -c <"$libdir/libtensordesc.so.$ver") bytes," \
  "libtensordesc.a $(wc -c <"$libdir/libtensordesc.a") bytes"
[ -f "$prefix/include/tensordesc.h" ] && [ -f "$prefix/include/tensordesc.hpp" ] \
  || { echo "missing headers"; exit 1; }
[ -f "$libdir/cmake/tensordesc/tensordesc-config.cmake" ] \
  && [ -f "$libdir/cmake/tensordesc/tensordesc-config-version.cmake" ] \
  || { echo "missing CMake package files"; exit 1; }
if command -v pkg-config >/dev/null; then
  version="$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --modversion tensordesc)"
  [ "$version" = "$ver" ] || { echo "pkg-config version $version"; exit 1; }
  # A C program built with the pkg-config flags alone.
  cc -std=c11 -Wall -Wextra -Werror -pedantic "$root/examples/consumer/main.c" -o "$work/pc_consumer" \
    $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs tensordesc) -Wl,-rpath,"$libdir"
  "$work/pc_consumer" | tee "$work/pc.out"
  grep -q '^static: bytes=.* rank=2 layout=ROW_MAJOR offset=40$' "$work/pc.out"
fi

echo "== consumer project (find_package)"
cmake -S "$root/examples/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release
cmake --build "$work/consumer" --parallel 2
"$work/consumer/consumer" | tee "$work/consumer.out"
grep -q '^bytes=.* regions=2 buffers=4$' "$work/consumer.out"
grep -q '^buffer region=1 role=INDPTR size=40$' "$work/consumer.out"
grep -q '^value(1,2)=6 value(2,7)=7.5 value(0,5)=0$' "$work/consumer.out"
grep -q '^locate(3,6)=LOOKUP region=1 tag=CSR$' "$work/consumer.out"
grep -q '^error=INDEX_OUT_OF_BOUNDS$' "$work/consumer.out"
"$work/consumer/consumer_static_c" | tee "$work/static.out"
grep -q '^static: bytes=.* rank=2 layout=ROW_MAJOR offset=40$' "$work/static.out"
if command -v ldd >/dev/null; then
  # (no grep -q in pipelines: with pipefail an early exit would fail the producer)
  ! ldd "$work/consumer/consumer_static_c" | grep libtensordesc >/dev/null \
    || { echo "consumer_static_c links libtensordesc dynamically"; exit 1; }
  ldd "$work/consumer/consumer" | grep "libtensordesc.so.1 => $libdir" >/dev/null \
    || { echo "consumer does not load the installed libtensordesc.so.1"; exit 1; }
fi
echo "cmake consumer: OK"
