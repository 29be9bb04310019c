#!/usr/bin/env bash
# Build and run every cargo-fuzz target for SECONDS seconds each, one at a time, and fail
# on any crash, panic, leak, timeout or out-of-memory.
#
#   scripts/fuzz.sh 20            # CI smoke run (.ci/run)
#   scripts/fuzz.sh 600 locate    # ten minutes of one target
#
# Needs a toolchain that accepts -Z flags: `cargo +nightly` when rustup has a nightly
# toolchain, otherwise the default toolchain with RUSTC_BOOTSTRAP=1 (cargo-fuzz only needs
# the sanitizer and coverage flags, which stable rustc has behind the bootstrap switch;
# tested with stable 1.95). Override with FUZZ_TOOLCHAIN=<rustup toolchain>. Installs cargo-fuzz from crates.io when it
# is missing. Seeds come from fuzz/seeds (builder-made descriptors, valid buffer contents,
# files and streams, and the golden vectors tests/vectors/*.hex); findings land in
# fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}"
shift
case "$secs" in '' | *[!0-9]*)
  echo "SECONDS must be a whole number" >&2
  exit 2
  ;;
esac

if ! command -v cargo-fuzz >/dev/null 2>&1 && ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

toolchain="${FUZZ_TOOLCHAIN:-}"
if [ -z "$toolchain" ] && command -v rustup >/dev/null 2>&1 && cargo +nightly --version >/dev/null 2>&1; then
  toolchain=nightly
fi
if [ -n "$toolchain" ]; then
  fuzz=(cargo "+$toolchain" fuzz)
else
  fuzz=(cargo fuzz)
fi
case "$toolchain" in
  nightly*) ;;
  *) export RUSTC_BOOTSTRAP=1 ;;
esac
echo "== cargo fuzz with the ${toolchain:-default} toolchain${RUSTC_BOOTSTRAP:+ (RUSTC_BOOTSTRAP=1)}"

# -O: optimised; -a: debug assertions, which also turn on integer overflow checks, so an
# unchecked overflow on wire values is a crash rather than a silent wrap.
build_flags=(-O -a)

echo "== seed corpora"
cargo run --quiet --manifest-path fuzz/Cargo.toml -p tensordesc-fuzz-seeds --bin seeds -- fuzz/corpus

if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <("${fuzz[@]}" list)
fi

echo "== building ${targets[*]}"
"${fuzz[@]}" build "${build_flags[@]}"

failed=()
for t in "${targets[@]}"; do
  echo "== fuzzing $t for ${secs}s"
  mkdir -p "fuzz/artifacts/$t"
  # One process (no -jobs/-workers): one core. -timeout: a single input taking 10 s is a
  # hang; -rss_limit_mb / -malloc_limit_mb: bounded memory (the targets also assert a
  # per-input heap bound with a counting allocator).
  set +e
  "${fuzz[@]}" run "${build_flags[@]}" "$t" -- \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
    -print_final_stats=1 2>&1 | tee "fuzz/artifacts/$t/last-run.log" |
    grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec|==[0-9]+==|SUMMARY|thread .* panicked|Test unit written)'
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    echo "!! $t FAILED (exit $status); see fuzz/artifacts/$t/ (reproduce: ${fuzz[*]} run ${build_flags[*]} $t fuzz/artifacts/$t/<crash-file>)" >&2
    failed+=("$t")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing found crashes in: ${failed[*]}" >&2
  exit 1
fi
echo "== all ${#targets[@]} targets ran ${secs}s each without a finding"
