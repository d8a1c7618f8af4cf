#!/usr/bin/env bash
# The multi-GPU check of distributed/: a CUDA + NCCL build, then the NCCL tests with one process
# per GPU (collectives on every floating dtype; DistributedDataParallel under fp16 AMP
# against one GPU with the whole batch). Needs >= 2 GPUs; with fewer the tests report
# themselves skipped.
#
#   tools/dist-gpu-check.sh [build-dir]     # default build dir: build-gpu
#   NP=4 tools/dist-gpu-check.sh            # processes (GPUs) to use, default: every GPU
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
gpus=$(nvidia-smi --list-gpus 2>/dev/null | wc -l || echo 0)
np=${NP:-$gpus}
((np >= 2)) || { echo "dist-gpu-check: $gpus GPU(s) found, need 2 (NP=$np)"; np=2; }

arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .' || true)
arch_flag=()
[[ "$arch" =~ ^[0-9]+$ ]] && arch_flag=(-DCMAKE_CUDA_ARCHITECTURES="$arch")
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMANTISSA_CUDA=ON -DMANTISSA_DIST=ON \
  -DMANTISSA_BUILD_EXAMPLES=OFF -DMANTISSA_BUILD_BENCH=OFF "${arch_flag[@]}"
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target test_dist_gpu
OMP_NUM_THREADS=1 MANTISSA_DIST_TIMEOUT=120 \
  mpirun --oversubscribe --allow-run-as-root -np "$np" "$build/tests/test_dist_gpu"
