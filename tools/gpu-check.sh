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
#   tools/gpu-check.sh --self-check          # no GPU needed: checks the plan below against the
#                                            # test sources and lists what a run would do (CTest
#                                            # runs this: tools.gpu_check_self_check)
#
# Besides the test binaries, every run puts the fused step over one 48 M-element parameter
# after 25 small ones under compute-sanitizer memcheck (the launch-carry crash of issue 22).
# Without a GPU it says so and exits 0.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

# The plan: test binaries (each tests/<name>.cpp) and the memcheck cases (binary:filter).
gpu_tests=(test_cuda test_cuda_nn_list test_cuda_amp test_cuda_transfer test_cuda_attention test_cuda_host_path test_profiler
  test_profile)
memcheck_cases=("test_cuda_host_path:CudaFusedStep.*" "test_cuda_host_path:CudaStickyError.*")
# Cases of test_cuda_host_path a GPU run must not skip (the 2-GPU one may).
host_path_cases=(CudaFusedStep.LargeParameterAfterManySmallOnesMatchesCpu CudaHostSync.NoSynchronisationInAnFp16AmpGptStep
  CudaLarge.MoreThan2Pow31HalfElements CudaScaler.TwoHundredForcedOverflowsMatchTheCpuRow
  CudaStickyError.OutOfRangeIndexRaisesAtTheNextHostRead
  CudaTransfer.BlockingUploadFromPinnedMemoryMayBeRefilled CudaBackward.KernelsMatchCpu)

if [[ "${1:-}" == --self-check ]]; then
  rc=0
  for t in "${gpu_tests[@]}"; do
    [[ -f "$root/tests/$t.cpp" ]] || { echo "self-check: tests/$t.cpp is missing"; rc=1; }
  done
  for c in "${memcheck_cases[@]}"; do
    bin=${c%%:*} suite=${c#*:}
    suite=${suite%%.*}
    grep -q "TEST($suite," "$root/tests/$bin.cpp" 2>/dev/null || { echo "self-check: no $suite tests in tests/$bin.cpp"; rc=1; }
  done
  for c in "${host_path_cases[@]}"; do
    grep -q "TEST(${c%%.*}, ${c#*.})" "$root/tests/test_cuda_host_path.cpp" ||
      { echo "self-check: $c not in tests/test_cuda_host_path.cpp"; rc=1; }
  done
  for t in "${gpu_tests[@]}"; do
    # Every GPU case must skip cleanly without a GPU.
    if [[ $t == test_cuda* ]] && grep -q '^TEST(' "$root/tests/$t.cpp" &&
      [[ $(grep -c 'REQUIRE_GPU()' "$root/tests/$t.cpp") -eq 0 ]]; then
      echo "self-check: tests/$t.cpp has no REQUIRE_GPU()"
      rc=1
    fi
  done
  echo "gpu-check plan: build ${gpu_tests[*]} bench_gpu; run each test binary;"
  echo "  compute-sanitizer --tool memcheck on: ${memcheck_cases[*]}"
  echo "  required GPU cases: ${host_path_cases[*]}"
  echo "  then bench_gpu and the summary table"
  [[ $rc -eq 0 ]] && echo "self-check: OK"
  exit $rc
fi

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "gpu-check: no NVIDIA GPU on this machine; nothing to run (tools/gpu-check.sh --self-check checks the plan)"
  exit 0
fi
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
cmake --build "$build" -j"$jobs" $(printf -- '--target %s ' "${gpu_tests[@]}") --target bench_gpu >"$out/build.log" 2>&1 ||
  { tail -n 60 "$out/build.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

status=0
tests_line=""
for t in "${gpu_tests[@]}"; do
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
  [[ $t == test_cuda_host_path ]] && allowed=1  # the two-GPU case on a one-GPU machine
  if [[ -n "$arch" && "${skipped:-0}" -gt $allowed ]]; then
    echo "FAIL: nvidia-smi sees a GPU but $t skipped ${skipped} tests (driver/runtime mismatch?)"
    status=1
  fi
done

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
memcheck_line=""
for c in "${memcheck_cases[@]}"; do
  bin=${c%%:*} filter=${c#*:}
  echo "== compute-sanitizer memcheck: $bin $filter"
  rc=0
  "$sanitizer" --tool memcheck --error-exitcode 9 "$build/tests/$bin" --gtest_brief=1 --gtest_filter="$filter" || rc=$?
  [[ $rc -ne 0 ]] && status=1
  memcheck_line+="$(printf 'memcheck %-40s exit %s' "$bin $filter" "$rc")"$'\n'
done

if [[ "${GPU_CHECK_SANITIZER:-0}" != 0 ]] && [[ -x "$sanitizer" ]]; then
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
printf '%s' "$memcheck_line"
# The benchmark's own table: everything after its "== summary" line.
sed -n '/^== summary/,$p' "$out/bench_gpu.txt"
[[ $bench_rc -ne 0 ]] && echo "bench_gpu exited with $bench_rc"
echo "wall time $(( $(date +%s) - t0 )) s; status $status; log: $log"
exit "$status"
