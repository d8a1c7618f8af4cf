#!/usr/bin/env bash
# clang-tidy (checks in .clang-tidy: bugprone-*, performance-*) over the C++ files changed since
# a base revision, with the compile commands of a configured build.
#   bash tools/tidy.sh                  # files changed by the last commit
#   bash tools/tidy.sh main             # files changed since main
#   BUILD_DIR=build-cpu bash tools/tidy.sh HEAD~5
# Exit status 1 when a check fires (findings are errors: WarningsAsErrors in .clang-tidy).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
base="${1:-HEAD~1}"
build="${BUILD_DIR:-build}"

tidy=$(command -v clang-tidy || command -v clang-tidy-14 || true)
if [[ -z "$tidy" ]]; then
  echo "tidy: clang-tidy is not installed (tools/install-deps.sh installs it)" >&2
  exit 2
fi
if [[ ! -f "$build/compile_commands.json" ]]; then
  echo "tidy: $build/compile_commands.json is missing: configure the build first (tools/build.sh)" >&2
  exit 2
fi
if ! git rev-parse --verify -q "$base" >/dev/null; then
  echo "tidy: no revision $base (a shallow clone?); nothing to check"
  exit 0
fi
# Library sources only (tests and examples follow them; CUDA files need nvcc's view).
mapfile -t files < <(git diff --name-only --diff-filter=AM "$base" -- \
  'core/*.cpp' 'amp/*.cpp' 'autograd/*.cpp' 'nn/*.cpp' 'optim/*.cpp' 'data/*.cpp' 'distributed/*.cpp' 'onnx/*.cpp')
if ((${#files[@]} == 0)); then
  echo "tidy: no library source changed since $base"
  exit 0
fi
status=0
for f in "${files[@]}"; do
  [[ -f "$f" ]] || continue
  echo "tidy: $f"
  # The build passes GCC-only warning flags, which clang does not know.
  "$tidy" -p "$build" --quiet --extra-arg=-Wno-unknown-warning-option "$f" 2>/dev/null || status=1
done
exit "$status"
