#!/usr/bin/env bash
# The C and C++ test programs (c_tests/) under AddressSanitizer + UndefinedBehaviorSanitizer
# (leak detection on), compiled with clang against libtensordesc.so and libtensordesc.a,
# then Miri over the Rust tests that exercise unsafe code, when a nightly toolchain with
# Miri is available (it takes minutes: Miri builds the dev-dependencies first).
#
#   scripts/sanitize.sh            # ASan/UBSan C tests, then Miri
#   SANITIZE_MIRI=0 scripts/sanitize.sh   # skip Miri
#
# The Rust side is not instrumented: ASan's runtime replaces malloc/free for the whole
# process, and the library allocates through the system allocator, so use-after-free,
# double free, overflows of library-returned memory and leaks of library objects
# (a descriptor, tensor or string never freed) are caught across the boundary. Valgrind
# is c_tests/run_valgrind.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

if ! command -v clang >/dev/null || ! command -v clang++ >/dev/null; then
  echo "== installing clang"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang
fi

# Builds the library, compiles and runs the C tests once uninstrumented, stages the
# library under target/debug/c_tests/lib and writes the inputs test_c_api reads.
echo "== cargo test -p libtensordesc --test c_abi"
cargo test --quiet -p libtensordesc --test c_abi

target="${CARGO_TARGET_DIR:-$root/target}/debug/c_tests"
lib="$target/lib"
out="$target/sanitize"
mkdir -p "$out"
[ -e "$lib/libtensordesc.so" ] || { echo "no $lib/libtensordesc.so (did capi/lib/tests/c_abi/c_api.rs change?)" >&2; exit 1; }

san=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1)
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:detect_invalid_pointer_pairs=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="report_objects=1"

# Arguments each program takes (see its usage line).
args_for() {
  case "$1" in
    test_c_api) echo "$target/rust_bytes" ;;
    test_golden | test_golden_static) echo "$root/tests/vectors" ;;
    test_golden_files) mkdir -p "$out/golden_files_scratch" && echo "$root/tests/vectors/files $out/golden_files_scratch" ;;
    test_transport) mkdir -p "$out/transport_scratch" && echo "$out/transport_scratch" ;;
    test_transport_cpp) mkdir -p "$out/transport_cpp_scratch" && echo "$out/transport_cpp_scratch" ;;
    test_live_stream) mkdir -p "$out/live_scratch" && echo "$out/live_scratch" ;;
    # The files tests/c_abi/c_api.rs (foreign_files_and_metadata_from_c) writes; cargo test
    # runs before this script.
    test_foreign)
      local f="$target/foreign_scratch"
      echo "$f/m.safetensors $f/odd.safetensors $f/meta.tdf $f/shards $f/nvfp4.safetensors $f/quant/model.safetensors" ;;
    *) echo "" ;;
  esac
}

ran=0
run() {
  local exe="$1" name
  name="$(basename "$exe")"
  echo "== $name (ASan + UBSan)"
  # shellcheck disable=SC2046
  "$exe" $(args_for "${name%_asan}") | tail -n 3
  ran=$((ran + 1))
}

for src in c_tests/*.c c_tests/*.cpp; do
  [ -e "$src" ] || continue
  base="$(basename "$src")"
  stem="${base%.*}"
  if [[ "$src" == *.cpp ]]; then
    cc=(clang++ -std=c++17)
  else
    cc=(clang -std=c11)
  fi
  flags=(-Wall -Wextra -Werror -pedantic -I "$root/include")
  if ! grep -q 'int main' "$src"; then
    echo "== $base: compile only"
    "${cc[@]}" "${flags[@]}" "${san[@]}" -c "$src" -o "$out/$stem.o"
    continue
  fi
  "${cc[@]}" "${flags[@]}" "${san[@]}" "$src" -o "$out/${stem}_asan" \
    -L"$lib" -ltensordesc -Wl,-rpath,"$lib"
  run "$out/${stem}_asan"
  if [ "$stem" = test_golden ]; then
    # The same program against the static library.
    "${cc[@]}" "${flags[@]}" "${san[@]}" "$src" -o "$out/test_golden_static_asan" \
      "$lib/libtensordesc.a" -lpthread -ldl -lm
    run "$out/test_golden_static_asan"
  fi
done
[ "$ran" -gt 0 ] || { echo "no C test programs found in c_tests/" >&2; exit 1; }
echo "== ASan + UBSan: $ran programs clean"

if [ "${SANITIZE_MIRI:-1}" != 0 ]; then
  if cargo +nightly miri --version >/dev/null 2>&1; then
    # Miri interprets the unit tests of the code with unsafe blocks (the C ABI, capi/src;
    # src/transport/file) and of their main users, then the small end-to-end runs through
    # the unsafe paths: capi/tests/ffi/miri.rs (C ABI round trip) and
    # tests/hostile/catalogue.rs (the file reader's aligned copies, a stream fed byte by byte). Miri cannot map real files (file-backed mmap is unsupported), so the
    # memory map itself is covered by the `file` fuzz target under ASan instead.
    # -p: one package at a time (the CLI is a package of its own).
    echo "== cargo +nightly miri test -p tensordesc-capi --lib"
    cargo +nightly miri test --quiet -p tensordesc-capi --lib
    echo "== cargo +nightly miri test -p tensordesc --lib (file, stream, bound, lookup)"
    cargo +nightly miri test --quiet -p tensordesc --lib -- file:: stream:: bound:: lookup::
    echo "== cargo +nightly miri test --test ffi unsafe_, --test hostile unsafe_"
    cargo +nightly miri test --quiet -p tensordesc-capi --test ffi -- unsafe_
    cargo +nightly miri test --quiet -p tensordesc --test hostile -- unsafe_
    echo "== Miri: clean"
  else
    echo "== Miri not available (needs: rustup toolchain install nightly --component miri); skipped"
  fi
fi
