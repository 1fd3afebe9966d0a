#!/usr/bin/env bash
# The sanitizer and fuzzing step of continuous integration (README, "Reliability").
#
#   1. configures build-asan/ with AddressSanitizer + UndefinedBehaviorSanitizer
#      (LeakSanitizer on), builds the tests and runs the whole CTest suite;
#   2. configures build-fuzz/ with clang++ and the libFuzzer targets of
#      tests/fuzz/ and runs each for QCONV_FUZZ_SECONDS (default 60) seconds.
#
# Environment: QCONV_ASAN_BUILD, QCONV_FUZZ_BUILD (build folders),
# QCONV_FUZZ_SECONDS (0 skips the fuzzers), QCONV_JOBS, QCONV_TEST_JOBS.
# Extra arguments are passed to ctest (e.g. -R hostile).
set -euo pipefail
source "$(dirname "$0")/setup.sh"

ASAN_BUILD="${QCONV_ASAN_BUILD:-$QCONV_ROOT/build-asan}"
FUZZ_BUILD="${QCONV_FUZZ_BUILD:-$QCONV_ROOT/build-fuzz}"
FUZZ_SECONDS="${QCONV_FUZZ_SECONDS:-60}"

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
export CCACHE_NOHASHDIR=1 # share objects between build folders with the same flags

qconv_install_deps

# ---------------------------------------------------------------- step 1
start=$(date +%s)
cmake -S "$QCONV_ROOT" -B "$ASAN_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DQCONV_SANITIZE=address,undefined -DQCONV_BUILD_BENCH=OFF "${launcher[@]}"
cmake --build "$ASAN_BUILD" -j"$QCONV_JOBS"

# Leaks are errors. The suppressions file holds only entries inside oneDNN /
# the OpenMP runtime, each with its justification (never qconv's own code).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$QCONV_ROOT/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The big shape sweeps run a reduced set under the sanitizers (tests/support/quick.h).
export QCONV_TEST_QUICK=1
(cd "$ASAN_BUILD" && ctest --output-on-failure -j"${QCONV_TEST_JOBS:-2}" "$@")
echo "sanitize: ASan+UBSan suite passed in $(( $(date +%s) - start )) s"

# ---------------------------------------------------------------- step 2
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  start=$(date +%s)
  cmake -S "$QCONV_ROOT" -B "$FUZZ_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DQCONV_SANITIZE=address,undefined \
    -DQCONV_BUILD_FUZZ=ON -DQCONV_BUILD_TESTS=OFF -DQCONV_BUILD_BENCH=OFF "${launcher[@]}"
  cmake --build "$FUZZ_BUILD" -j"$QCONV_JOBS" --target qconv_fuzzers
  QCONV_FUZZ_BUILD="$FUZZ_BUILD" "$QCONV_ROOT/tests/fuzz/run_fuzzers.sh" "$FUZZ_SECONDS"
  echo "sanitize: fuzzers passed in $(( $(date +%s) - start )) s"
fi
