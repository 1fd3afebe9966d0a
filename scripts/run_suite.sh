#!/usr/bin/env bash
# Runs a build folder's CTest suite and reports where its time went.
#
#   scripts/run_suite.sh BUILD_DIR [ctest arguments...]
#
# Prints the suite's wall time and its ten slowest tests. With
# QCONV_SUITE_BUDGET_S set (continuous integration sets it, .ci/run), the run
# fails when the suite's own wall time -- the tests, not the build -- is above
# that many seconds, so a new feature pays for its tests by making others
# smaller (docs/testing.md, "The CI budget").
#
# Environment: QCONV_TEST_JOBS (ctest -j, default 2), QCONV_SUITE_BUDGET_S,
# QCONV_SUITE_NAME (the name in the report lines, default the folder's).
set -euo pipefail
build="${1:?usage: run_suite.sh BUILD_DIR [ctest arguments]}"
shift
name="${QCONV_SUITE_NAME:-$(basename "$build")}"
log="$build/Testing/suite.log"
mkdir -p "$build/Testing"

start=$(date +%s)
set +e
(cd "$build" && ctest --output-on-failure -j"${QCONV_TEST_JOBS:-2}" "$@") 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
wall=$(( $(date +%s) - start ))

# "  12/1537 Test  #345: Name ...................   Passed    3.21 sec"
echo "suite $name: ${wall} s wall; the ten slowest tests:"
sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .* \([0-9][0-9.]*\) sec$/\2 \1/p' "$log" |
  sort -rn | awk 'NR <= 10 { printf "  %8.2f s  %s\n", $1, $2 }'
[ "$rc" -eq 0 ] || exit "$rc"

if [ -n "${QCONV_SUITE_BUDGET_S:-}" ] && [ "$wall" -gt "$QCONV_SUITE_BUDGET_S" ]; then
  echo "suite $name: FAILED the CI budget: ${wall} s is above its share of ${QCONV_SUITE_BUDGET_S} s." >&2
  echo "  Make the slowest tests above smaller (a smaller case that catches the same faults)," >&2
  echo "  or share their fixtures, before adding more (docs/testing.md, \"The CI budget\")." >&2
  exit 1
fi
