#!/usr/bin/env bash
# Installs what is missing, builds Release into build/ and runs the whole
# CTest suite (GoogleTest suites, driver runs, install + consumer project).
# Extra arguments are passed to ctest (e.g. -R driver).
set -euo pipefail
source "$(dirname "$0")/scripts/setup.sh"

qconv_install_deps
qconv_configure
qconv_build

cd "$QCONV_BUILD"
ctest --output-on-failure -j"${QCONV_TEST_JOBS:-2}" "$@"
