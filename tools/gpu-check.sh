#!/usr/bin/env bash
# The GPU check (design §6): configures a CUDA build, builds the library and the CUDA tests,
# runs them on the GPU and keeps the log. The fp32-vs-AMP benchmark table will be added
# once bench/ has it. Sized to finish in a few minutes on one GPU.
#
#   tools/gpu-check.sh [build-dir]           # default build dir: build-gpu
#   OUT=/some/dir tools/gpu-check.sh         # log and test XML go to $OUT (default: <build-dir>/gpu-check)
#   GPU_CHECK_SANITIZER=1 tools/gpu-check.sh # also run the tests under compute-sanitizer (slow)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
out=${OUT:-$build/gpu-check}
mkdir -p "$out"
log="$out/gpu-check.log"
exec > >(tee "$log") 2>&1

echo "== gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) in $root"
git -C "$root" rev-parse --short HEAD 2>/dev/null || true
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv || true
else
  echo "nvidia-smi not found"
fi

# Compile for the GPU at hand only (halves nvcc time); fall back to the project default.
arch=""
if command -v nvidia-smi >/dev/null; then
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .' || true)
fi
arch_flag=()
[[ "$arch" =~ ^[0-9]+$ ]] && arch_flag=(-DCMAKE_CUDA_ARCHITECTURES="$arch")
echo "== configure (CUDA architectures: ${arch:-default})"
cmake -S "$root" -B "$build" -DMANTISSA_CUDA=ON -DMANTISSA_BUILD_EXAMPLES=OFF -DMANTISSA_BUILD_BENCH=OFF \
  "${arch_flag[@]}" >"$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
tail -n 5 "$out/configure.log"

echo "== build"
start=$(date +%s)
make -C "$build" -j"$(nproc)" test_cuda >"$out/build.log" 2>&1 || { tail -n 60 "$out/build.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

echo "== CUDA tests"
status=0
"$build/tests/test_cuda" --gtest_output="xml:$out/test_cuda.xml" || status=$?

# On a GPU machine every GPU test must have run: only the no-device test may skip.
skipped=$(grep -c '<skipped' "$out/test_cuda.xml" 2>/dev/null || true)
echo "skipped tests: ${skipped:-0} (1 expected on a GPU machine: CudaNoDevice.GpuTensorsFailCleanly)"
if [[ -n "$arch" && "${skipped:-0}" -gt 1 ]]; then
  echo "FAIL: nvidia-smi sees a GPU but GPU tests were skipped (driver/runtime mismatch?)"
  status=1
fi

if [[ "${GPU_CHECK_SANITIZER:-0}" != 0 ]] && command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer (memcheck)"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/test_cuda" --gtest_brief=1 || status=$?
fi

echo "== benchmark table: not yet (bench/ will provide fp32-vs-AMP step times)"
echo "== gpu-check finished with status $status; log: $log"
exit "$status"
