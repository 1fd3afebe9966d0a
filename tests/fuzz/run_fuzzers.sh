#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz/ for SECONDS seconds each (default
# 60) from its committed seed corpus (tests/fuzz/corpus/<name>/, read only;
# new inputs go to a scratch corpus in the build folder) and prints the number
# of executions per target. Exits non-zero on the first crash, leak, timeout
# or failed property; the reproducer is left in $QCONV_FUZZ_BUILD/fuzz-artifacts/.
#
#   tests/fuzz/run_fuzzers.sh [SECONDS] [TARGET...]      e.g.  run_fuzzers.sh 600 fuzz_diff
#   tests/fuzz/run_fuzzers.sh --list                     the default targets, one a line
#
# QCONV_FUZZ_JOBS targets run at once (default 2: each fuzzer is one thread, so
# two share a 2-core machine without slowing each other); each target's wall
# time is left in $QCONV_FUZZ_BUILD/fuzz-artifacts/<target>.seconds.
#
# Build first (scripts/sanitize.sh does both):
#   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DQCONV_BUILD_FUZZ=ON \
#     -DQCONV_BUILD_TESTS=OFF -DQCONV_BUILD_BENCH=OFF -DQCONV_SANITIZE=address,undefined
#   cmake --build build-fuzz --target qconv_fuzzers
# Reproduce a finding: build-fuzz/tests/fuzz/fuzz_diff build-fuzz/fuzz-artifacts/crash-...
set -euo pipefail
default_targets=(fuzz_desc fuzz_options fuzz_graph fuzz_onnx fuzz_diff)
if [ "${1:-}" = --list ]; then printf '%s\n' "${default_targets[@]}"; exit 0; fi
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${QCONV_FUZZ_BUILD:-$root/build-fuzz}"
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${default_targets[@]}")
jobs="${QCONV_FUZZ_JOBS:-2}"

# Tiny problems: one OpenMP thread, no spinning workers on the shared cores.
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

mkdir -p "$build/fuzz-artifacts" "$build/fuzz-corpus"
for t in "${targets[@]}"; do
  [ -x "$build/tests/fuzz/$t" ] || { echo "run_fuzzers: $build/tests/fuzz/$t is missing (build the qconv_fuzzers target)" >&2; exit 2; }
done

# One target: runs it, leaves <target>.seconds and <target>.verdict (one line).
run_one() {
  local t="$1" bin="$build/tests/fuzz/$1" seeds="$here/corpus/${1#fuzz_}" work="$build/fuzz-corpus/$1"
  local log="$build/fuzz-artifacts/$t.log" max_len=4096 rc runs t0
  mkdir -p "$work"
  [ "$t" = fuzz_graph ] && max_len=8192
  t0=$(date +%s)
  [ "$t" = fuzz_onnx ] && max_len=16384
  set +e
  "$bin" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=3072 -max_len=$max_len \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" "$work" "$seeds" >"$log" 2>&1
  rc=$?
  set -e
  echo $(( $(date +%s) - t0 )) >"$build/fuzz-artifacts/$t.seconds"
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  if [ $rc -ne 0 ]; then
    { echo "fuzz: $t FAILED (exit $rc) after ${runs:-?} executions; log $log"
      grep -E 'ERROR|SUMMARY|fuzz_[a-z]+:|Test unit written' "$log" | awk 'NR <= 20'; } >"$build/fuzz-artifacts/$t.verdict"
  else
    echo "fuzz: $t executions=${runs:-?} seconds=$seconds corpus=$(ls "$work" | wc -l)" >"$build/fuzz-artifacts/$t.verdict"
  fi
  return $rc
}

status=0
names=()
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  rm -f "$build/fuzz-artifacts/$t.verdict"
  run_one "$t" &
  names+=("$t")
done
wait || true
for t in "${names[@]}"; do
  verdict="$build/fuzz-artifacts/$t.verdict"
  if [ -s "$verdict" ]; then cat "$verdict"; else echo "fuzz: $t FAILED (no verdict)"; status=1; fi
  grep -q "^fuzz: $t FAILED" "$verdict" 2>/dev/null && status=1
done
exit $status
