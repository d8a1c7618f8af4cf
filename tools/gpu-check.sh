#!/usr/bin/env bash
# The GPU check (docs/design.md §6): configures a CUDA build for the GPU at hand, builds the library,
# the CUDA tests and bench_gpu, runs the tests, runs the benchmark and prints one summary
# table (GEMM vs cuBLAS, elementwise vs a D2D copy, training-step times and AMP speedups,
# each next to its goal). Sized for < 8 min on one H200 (builds with all cores, short
# benchmark times).
#
#   tools/gpu-check.sh [build-dir]           # default build dir: build-gpu
#   OUT=/some/dir tools/gpu-check.sh         # log, test XML, benchmark JSON go to $OUT (default: <build-dir>/gpu-check)
#   GPU_CHECK_SANITIZER=1 tools/gpu-check.sh # also run the tests under compute-sanitizer (slow)
#   BENCH_MIN_TIME=0.5 tools/gpu-check.sh    # seconds per benchmark (default 0.1)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
out=${OUT:-$build/gpu-check}
jobs=${JOBS:-$(nproc)}
mkdir -p "$out"
log="$out/gpu-check.log"
exec > >(tee "$log") 2>&1
t0=$(date +%s)

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
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMANTISSA_CUDA=ON -DMANTISSA_BUILD_EXAMPLES=OFF \
  -DMANTISSA_BUILD_BENCH=ON "${arch_flag[@]}" >"$out/configure.log" 2>&1 || { cat "$out/configure.log"; exit 1; }
tail -n 5 "$out/configure.log"

echo "== build (-j$jobs)"
start=$(date +%s)
cmake --build "$build" -j"$jobs" --target test_cuda test_cuda_amp test_cuda_transfer test_cuda_attention test_profiler test_profile bench_gpu >"$out/build.log" 2>&1 ||
  { tail -n 60 "$out/build.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

status=0
tests_line=""
for t in test_cuda test_cuda_amp test_cuda_transfer test_cuda_attention test_profiler test_profile; do
  echo "== $t"
  rc=0
  "$build/tests/$t" --gtest_brief=1 --gtest_output="xml:$out/$t.xml" || rc=$?
  [[ $rc -ne 0 ]] && status=1
  total=$(grep -o 'tests="[0-9]*"' "$out/$t.xml" 2>/dev/null | head -n1 | tr -dc '0-9' || true)
  failed=$(grep -o 'failures="[0-9]*"' "$out/$t.xml" 2>/dev/null | head -n1 | tr -dc '0-9' || true)
  skipped=$(grep -c '<skipped' "$out/$t.xml" 2>/dev/null || true)
  tests_line+="$(printf '%-14s %3s tests, %s failed, %s skipped (exit %s)\n' "$t" "${total:-?}" "${failed:-?}" "${skipped:-0}" "$rc")"$'\n'
  # On a GPU machine every GPU test must have run: only test_cuda's no-device test may skip.
  allowed=0
  [[ $t == test_cuda ]] && allowed=1
  if [[ -n "$arch" && "${skipped:-0}" -gt $allowed ]]; then
    echo "FAIL: nvidia-smi sees a GPU but $t skipped ${skipped} tests (driver/runtime mismatch?)"
    status=1
  fi
done

if [[ "${GPU_CHECK_SANITIZER:-0}" != 0 ]] && command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer (memcheck)"
  for t in test_cuda test_cuda_amp; do
    compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/$t" --gtest_brief=1 || status=$?
  done
fi

echo "== bench_gpu"
bench_rc=0
"$build/bench/bench_gpu" --benchmark_min_time="${BENCH_MIN_TIME:-0.1}" \
  --benchmark_out="$out/bench_gpu.json" --benchmark_out_format=json >"$out/bench_gpu.txt" 2>&1 || bench_rc=$?
cat "$out/bench_gpu.txt"
[[ $bench_rc -ne 0 ]] && status=1

echo
echo "================================ gpu-check summary ================================"
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1 || true
printf '%s' "$tests_line"
# The benchmark's own table: everything after its "== summary" line.
sed -n '/^== summary/,$p' "$out/bench_gpu.txt"
[[ $bench_rc -ne 0 ]] && echo "bench_gpu exited with $bench_rc"
echo "wall time $(( $(date +%s) - t0 )) s; status $status; log: $log"
exit "$status"
