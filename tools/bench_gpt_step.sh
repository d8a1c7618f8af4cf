#!/usr/bin/env bash
# One training step of the transformer example's default model (4 x 128, context 128, batch
# 16): Mantissa (bench/bench_gpt_step, fp32 / fp16 / bf16) and PyTorch 1.13
# (tools/train_gpt_torch.py --bench, fp32 / bf16 autocast), alternating in one go so that
# both see the same machine load. Both use OMP_NUM_THREADS threads (default 2).
#   cmake --build build --target bench_gpt_step && bash tools/bench_gpt_step.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
threads=${OMP_NUM_THREADS:-2}
bench=${BUILD_DIR:-build}/bench/bench_gpt_step
[ -x "$bench" ] || { echo "build $bench first: cmake --build ${BUILD_DIR:-build} --target bench_gpt_step" >&2; exit 1; }
lscpu | grep 'Model name'
for r in $(seq 1 "$rounds"); do
  echo "== round $r"
  OMP_NUM_THREADS=$threads "$bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only 2>/dev/null |
    grep -E '_median|^mantissa|gpt_(fp16|bf16)'
  if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    for amp in off bf16; do
      /usr/bin/python3 tools/train_gpt_torch.py --bench 10 --amp "$amp" --threads "$threads"
    done
  else
    echo "PyTorch not installed: no reference"
  fi
done
