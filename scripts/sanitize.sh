#!/usr/bin/env bash
# The sanitizer and fuzzing steps of continuous integration (README, "Reliability").
#
#   scripts/sanitize.sh [STEP] [ctest arguments...]
#
#   build       configures build-asan/ with AddressSanitizer + UndefinedBehaviorSanitizer
#               (LeakSanitizer on) and builds the tests;
#   suite       runs its whole CTest suite (the quick set, QCONV_TEST_QUICK=1) through
#               scripts/run_suite.sh (ctest arguments go here);
#   fuzz-build  configures build-fuzz/ with clang++ and builds the libFuzzer targets of tests/fuzz/;
#   fuzz        runs each for QCONV_FUZZ_SECONDS (default 60) seconds, two at a time;
#   all         (or no step) all four in this order.
#
# Environment: QCONV_ASAN_BUILD, QCONV_FUZZ_BUILD (build folders),
# QCONV_FUZZ_SECONDS (0 skips the fuzzers), QCONV_FUZZ_JOBS (fuzzers at once,
# default 2), QCONV_JOBS, QCONV_TEST_JOBS.
set -euo pipefail
source "$(dirname "$0")/setup.sh"

ASAN_BUILD="${QCONV_ASAN_BUILD:-$QCONV_ROOT/build-asan}"
FUZZ_BUILD="${QCONV_FUZZ_BUILD:-$QCONV_ROOT/build-fuzz}"
FUZZ_SECONDS="${QCONV_FUZZ_SECONDS:-60}"

step="all"
case "${1:-}" in build | suite | fuzz-build | fuzz | all) step="$1"; shift ;; esac

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# Builds a folder, printing only its errors, warnings and last line; the
# build's own exit status (a pipe into grep would hide it under pipefail).
built() {
  local dir="$1" log rc=0
  shift
  log=$(cmake --build "$dir" -j"$QCONV_JOBS" "$@" 2>&1) || rc=$?
  grep -E '^\[100%\]|error|warning' <<<"$log" || true
  [ "$rc" -eq 0 ] || echo "sanitize: building $dir failed (exit $rc)" >&2
  return "$rc"
}

asan_build() {
  cmake -S "$QCONV_ROOT" -B "$ASAN_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DQCONV_SANITIZE=address,undefined -DQCONV_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
  built "$ASAN_BUILD"
}

asan_suite() {
  # Leaks are errors. The suppressions file holds only entries inside oneDNN /
  # the OpenMP runtime, each with its justification (never qconv's own code).
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
  export LSAN_OPTIONS="suppressions=$QCONV_ROOT/scripts/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  # The big shape sweeps run a reduced set under the sanitizers (tests/support/quick.h).
  export QCONV_TEST_QUICK=1
  # Its own share of the budget when one is set (.ci/run: QCONV_ASAN_SUITE_BUDGET_S).
  [ -n "${QCONV_ASAN_SUITE_BUDGET_S:-}" ] && export QCONV_SUITE_BUDGET_S="$QCONV_ASAN_SUITE_BUDGET_S"
  QCONV_SUITE_NAME=asan "$QCONV_ROOT/scripts/run_suite.sh" "$ASAN_BUILD" "$@"
}

fuzz_build() {
  cmake -S "$QCONV_ROOT" -B "$FUZZ_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DQCONV_SANITIZE=address,undefined \
    -DQCONV_BUILD_FUZZ=ON -DQCONV_BUILD_TESTS=OFF -DQCONV_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
  built "$FUZZ_BUILD" --target qconv_fuzzers
}

fuzz() {
  [ "$FUZZ_SECONDS" -gt 0 ] || { echo "sanitize: fuzzers skipped (QCONV_FUZZ_SECONDS=0)"; return 0; }
  QCONV_FUZZ_BUILD="$FUZZ_BUILD" "$QCONV_ROOT/tests/fuzz/run_fuzzers.sh" "$FUZZ_SECONDS"
}

qconv_install_deps
case "$step" in
build) asan_build ;;
suite) asan_suite "$@" ;;
fuzz-build) fuzz_build ;;
fuzz) fuzz ;;
all) asan_build && asan_suite "$@" && fuzz_build && fuzz ;;
esac
