#!/usr/bin/env bash
# The test job: dependencies, a Release build, then every CTest test (unit tests, example
# smoke runs, the install + find_package consumer check).
#   bash tools/run-tests.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash tools/install-deps.sh
bash tools/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "${CTEST_JOBS:-2}"
