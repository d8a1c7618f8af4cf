#!/usr/bin/env bash
# Training-step speed of Mantissa against PyTorch on this machine (see tools/compare_pytorch.py):
# builds bench_train_step in $BUILD_DIR (default build) and runs both, alternating.
#   bash tools/compare-pytorch.sh [--threads 2] [--rounds 3] [--models mlp cnn]
#   bash tools/compare-pytorch.sh --scaling      # the GPT step at d_model x context 128/256 (--scaling-full: to 512)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${BUILD_DIR:-build}
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "compare-pytorch: PyTorch is not installed (apt-get install python3-torch)" >&2
  exit 1
fi
[[ -f $build/CMakeCache.txt ]] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "${JOBS:-2}" --target bench_train_step bench_gpt_step bench_resnet_step
exec /usr/bin/python3 tools/compare_pytorch.py --bench "$build/bench/bench_train_step" "$@"
