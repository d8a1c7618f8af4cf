#!/usr/bin/env bash
# The test job: dependencies, the style check (clang-format), a Release build (GCC warnings are
# errors in the library), clang-tidy on the library files the last commit changed, every
# CTest test (unit tests, example smoke runs, the install + find_package consumer check), then
# the two-thread, DataLoader, engine and training tests under ThreadSanitizer (tools/sanitize.sh
# tsan: a clang-14 build of the library and those four tests).
#   bash tools/run-tests.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash tools/install-deps.sh
bash tools/format.sh
bash tools/build.sh
BUILD_DIR="${BUILD_DIR:-build}" bash tools/tidy.sh HEAD~1
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "${CTEST_JOBS:-2}"
bash tools/sanitize.sh tsan
