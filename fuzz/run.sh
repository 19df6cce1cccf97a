#!/usr/bin/env bash
# Builds the libFuzzer targets (clang++, into ${FUZZ_BUILD_DIR:-build-fuzz}) and runs each one
# for a bounded time, starting from its seed corpus fuzz/corpus/<target>/. New inputs go to a
# scratch folder, never into the repository; a crash leaves its input in
# ${FUZZ_BUILD_DIR}/artifacts/ and fails the script. fuzz/dict/<target>.dict, where present, lists
# the format's tokens (field names, edge-case numbers) for libFuzzer to splice in. See docs/HARDENING.md.
#   fuzz/run.sh                      every target, FUZZ_SECONDS (default 15) each
#   FUZZ_SECONDS=600 fuzz/run.sh safetensors      one target, longer
#   FUZZ_SECONDS=0 fuzz/run.sh       only replay the seed corpora (no new inputs)
# Limits: a single allocation over 256 MB or 1 GB of memory in all is a finding (no input
# here is large, so such an allocation means a size was trusted before it was checked), and
# so is one input taking over 10 s.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-15}
CXX_FUZZ=${FUZZ_CXX:-clang++}

cmake -S fuzz -B "$BUILD" -DCMAKE_CXX_COMPILER="$CXX_FUZZ" >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in fuzz/*_fuzz.cpp; do
    name=$(basename "$src" _fuzz.cpp)
    targets+=("$name")
  done
fi
cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null

mkdir -p "$BUILD/artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for name in "${targets[@]}"; do
  seeds=fuzz/corpus/$name
  scratch=$(mktemp -d)
  log="$BUILD/fuzz_$name.log"
  limits=(-rss_limit_mb=1024 -malloc_limit_mb=256 -timeout=10 -artifact_prefix="$BUILD/artifacts/$name-"
          -print_final_stats=1)
  [ -f "fuzz/dict/$name.dict" ] && limits+=(-dict="fuzz/dict/$name.dict")  # the format's tokens
  if [ "$SECONDS_EACH" = 0 ]; then
    run=("$BUILD/fuzz_$name" "${limits[@]}" -runs=0 "$seeds")
  else
    run=("$BUILD/fuzz_$name" "${limits[@]}" -max_total_time="$SECONDS_EACH" "$scratch" "$seeds")
  fi
  if "${run[@]}" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "fuzz $name: ok, ${execs:-?} executions (${rate:-?}/s), ${cov:-cov: ?}, ${SECONDS_EACH} s"
  else
    echo "fuzz $name: FAILED (log: $log)"
    grep -E "ERROR|runtime error|==[0-9]+==|Test unit written" "$log" | head -20 || true
    failed+=("$name")
  fi
  rm -rf "$scratch"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]} (inputs in $BUILD/artifacts/)"
  exit 1
fi
