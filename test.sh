#!/usr/bin/env bash
# Installs what is missing, builds Release into build/ and runs the whole
# CTest suite (GoogleTest suites, driver runs, install + consumer project),
# then prints its wall time and ten slowest tests (scripts/run_suite.sh).
# Extra arguments are passed to ctest (e.g. -R driver).
set -euo pipefail
source "$(dirname "$0")/scripts/setup.sh"

qconv_install_deps
qconv_configure
qconv_build

QCONV_SUITE_NAME="${QCONV_SUITE_NAME:-release}" "$QCONV_ROOT/scripts/run_suite.sh" "$QCONV_BUILD" "$@"
