#!/usr/bin/env bash
# The GPU check (docs/design.md §6): configures a CUDA build for the GPU at hand, builds the library,
# the CUDA tests, bench_gpu and the transformer example, runs the tests, trains the example a
# few hundred steps on the GPU (fp32, fp16 and bf16 AMP), runs the benchmark and prints one
# summary table (GEMM vs cuBLAS, elementwise vs a D2D copy, training-step times and AMP
# speedups, each next to its goal). Sized for < 8 min on one H200 (builds with all cores,
# short benchmark times).
#
#   tools/gpu-check.sh [build-dir]           # default build dir: build-gpu
#   OUT=/some/dir tools/gpu-check.sh         # log, test XML, benchmark JSON go to $OUT (default: <build-dir>/gpu-check)
#   GPU_CHECK_SANITIZER=1 tools/gpu-check.sh # also run the tests under compute-sanitizer (slow)
#   BENCH_MIN_TIME=0.5 tools/gpu-check.sh    # seconds per benchmark (default 0.1)
#   GPU_CHECK_TIMEOUT=300 tools/gpu-check.sh # seconds each test binary may run before it counts as hung
#   tools/gpu-check.sh --self-check          # no GPU needed: checks the plan below against the
#                                            # test sources and lists what a run would do (CTest
#                                            # runs this: tools.gpu_check_self_check)
#
# Building on a machine without a GPU, running on one that lacks the build's dependencies:
#   GPU_CHECK_ARCH=90 tools/gpu-check.sh --build-only [build-dir]
#       builds everything the check runs (for that architecture; default 90) and copies into
#       <build-dir>/lib the shared libraries the binaries need except glibc's and the large
#       CUDA ones (cuBLAS, cuDNN, NCCL, the driver), which the GPU machine must have;
#   tools/gpu-check.sh --prebuilt [build-dir]
#       runs the check on those binaries without configuring or building; libraries the loader
#       cannot find are looked up under /usr/local, /opt and /usr/lib (a CUDA toolkit, a Python
#       environment's nvidia-* packages) and added to LD_LIBRARY_PATH.
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
  CudaHostSync.NoSynchronisationWithUnscaleClippingAndGemmAttention
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
  echo "gpu-check plan: build ${gpu_tests[*]} bench_gpu transformer; run each test binary;"
  echo "  compute-sanitizer --tool memcheck on: ${memcheck_cases[*]}"
  echo "  required GPU cases: ${host_path_cases[*]}"
  echo "  then the transformer example on the GPU (fp32, fp16, bf16 AMP; the loss must fall), bench_gpu and the summary table"
  [[ $rc -eq 0 ]] && echo "self-check: OK"
  exit $rc
fi

mode=check
case "${1:-}" in
  --build-only) mode=build; shift ;;
  --prebuilt) mode=prebuilt; shift ;;
esac
build=$(realpath -m "${1:-$root/build-gpu}")
jobs=${JOBS:-$(nproc)}
example_bin="$build/examples/transformer/transformer"

# configure_and_build ARCH: the CUDA build of the binaries the check runs.
configure_and_build() {
  local arch_flag=()
  [[ "$1" =~ ^[0-9]+$ ]] && arch_flag=(-DCMAKE_CUDA_ARCHITECTURES="$1")
  echo "== configure (CUDA architectures: ${1:-default})"
  mkdir -p "$out"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMANTISSA_CUDA=ON -DMANTISSA_BUILD_EXAMPLES=ON \
    -DMANTISSA_BUILD_BENCH=ON "${arch_flag[@]}" ${GPU_CHECK_CMAKE_ARGS:-} >"$out/configure.log" 2>&1 ||
    { cat "$out/configure.log"; exit 1; }
  tail -n 5 "$out/configure.log"
  echo "== build (-j$jobs)"
  local start
  start=$(date +%s)
  cmake --build "$build" -j"$jobs" $(printf -- '--target %s ' "${gpu_tests[@]}") --target bench_gpu --target transformer \
    >"$out/build.log" 2>&1 || { tail -n 60 "$out/build.log"; exit 1; }
  echo "built in $(( $(date +%s) - start )) s"
}

binaries() {
  local t
  for t in "${gpu_tests[@]}"; do echo "$build/tests/$t"; done
  echo "$build/bench/bench_gpu"
  [[ -x $example_bin ]] && echo "$example_bin"
  return 0
}

# Shared libraries a GPU machine is expected to provide itself: glibc's, the driver's and the
# large CUDA libraries (hundreds of MB, installed with the toolkit or with a framework).
provided_by_gpu_machine() {
  [[ $1 =~ ^(libc|libm|libmvec|libdl|libpthread|librt|ld-linux|libcuda|libcublas|libcublasLt|libcudnn|libnccl|linux-vdso)[.-] ]]
}

if [[ $mode == build ]]; then
  out=${OUT:-$build/gpu-check}
  configure_and_build "${GPU_CHECK_ARCH:-90}"
  mkdir -p "$build/lib"
  ldd $(binaries) | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    provided_by_gpu_machine "$name" || cp -L "$path" "$build/lib/$name"
  done
  echo "== copied into $build/lib: $(ls "$build/lib" | tr '\n' ' ')"
  echo "run the check there with: tools/gpu-check.sh --prebuilt $build"
  exit 0
fi

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "gpu-check: no NVIDIA GPU on this machine; nothing to run (tools/gpu-check.sh --self-check checks the plan)"
  exit 0
fi
out=${OUT:-$build/gpu-check}
mkdir -p "$out"
log="$out/gpu-check.log"
exec > >(tee "$log") 2>&1
t0=$(date +%s)

echo "== gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) in $root"
git -C "$root" rev-parse --short HEAD 2>/dev/null || true
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv || true

# Compile for the GPU at hand only (halves nvcc time); fall back to the project default.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .' || true)
if [[ $mode == prebuilt ]]; then
  echo "== prebuilt binaries in $build (no configure, no build)"
  [[ -d "$build/lib" ]] && export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for so in $(ldd $(binaries) 2>/dev/null | awk '/not found/ {print $1}' | sort -u); do
    found=$(find /usr/local /opt /usr/lib /usr/lib64 -name "$so" -print -quit 2>/dev/null || true)
    if [[ -n $found ]]; then
      echo "library $so: $found"
      export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$found")"
    else
      echo "library $so: not found on this machine"
    fi
  done
else
  configure_and_build "$arch"
fi

status=0
tests_line=""
for t in "${gpu_tests[@]}"; do
  echo "== $t"
  rc=0
  timeout "${GPU_CHECK_TIMEOUT:-300}" "$build/tests/$t" --gtest_brief=1 --gtest_output="xml:$out/$t.xml" || rc=$?
  [[ $rc -eq 124 ]] && echo "FAIL: $t ran past ${GPU_CHECK_TIMEOUT:-300} s"
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
  timeout "${GPU_CHECK_TIMEOUT:-300}" "$sanitizer" --tool memcheck --error-exitcode 9 "$build/tests/$bin" --gtest_brief=1 --gtest_filter="$filter" || rc=$?
  [[ $rc -ne 0 ]] && status=1
  memcheck_line+="$(printf 'memcheck %-40s exit %s' "$bin $filter" "$rc")"$'\n'
done

if [[ "${GPU_CHECK_SANITIZER:-0}" != 0 ]] && [[ -x "$sanitizer" ]]; then
  echo "== compute-sanitizer (memcheck)"
  for t in test_cuda test_cuda_amp; do
    compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/$t" --gtest_brief=1 || status=$?
  done
fi

# The transformer example as a user runs it, on the GPU: a character GPT trained on this
# repository's documentation, in fp32 and under both AMP modes; the loss must fall. Where a
# python3 with a CUDA PyTorch is at hand, its twin (tools/train_gpt_torch.py: same model,
# batches, optimizer, schedule and clipping) trains the same steps right after, for the ratio.
example_line=""
if [[ -x $example_bin ]]; then
  text="$out/example-text.txt"
  cat "$root"/README.md "$root"/docs/*.md >"$text"
  shared=(--text "$text" --layers 4 --heads 8 --d-model 256 --context 128 --batch-size 32 --warmup 30
    --lr 3e-3 --clip 1.0 --weight-decay 0.1 --eval-every 0 --eval-batches 4)
  torch_ok=0
  declare -A secs verdict loss
  python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && torch_ok=1
  for amp in off fp16 bf16; do
    # Attention through its row kernels (the default), then through batched GEMMs
    # (MANTISSA_ATTENTION_SCORE_MEMORY, core/attention_plan.h).
    for attn in rows gemm; do
      echo "== example transformer --device cuda --amp $amp (attention: $attn)"
      rc=0
      memory=0
      [[ $attn == gemm ]] && memory=$((256 << 20))
      res=$(MANTISSA_ATTENTION_SCORE_MEMORY=$memory timeout "${GPU_CHECK_TIMEOUT:-300}" "$example_bin" "${shared[@]}" \
        --steps 300 --device cuda --amp "$amp" --dropout 0 --sample 120 --prompt "The " --seed 1 2>&1) || rc=$?
      echo "$res" | tr '\r' '\n' | grep -v '^step [0-9]*/' || true
      final=$(echo "$res" | grep '^final:' || true)
      first=$(echo "$final" | sed -n 's/.* first_loss=\([0-9.]*\).*/\1/p')
      last=$(echo "$final" | sed -n 's/.* train_loss=\([0-9.]*\).*/\1/p')
      secs[$attn]=$(echo "$final" | sed -n 's/.* time=\([0-9.]*\)s.*/\1/p')
      verdict[$attn]=ok
      if [[ $rc -ne 0 || -z $first || -z $last ]] || ! awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }'; then
        verdict[$attn]=FAILED
        status=1
      fi
      loss[$attn]="${first:-?} -> ${last:-?} (exit $rc)"
    done
    tsecs=""
    if [[ $torch_ok == 1 ]]; then
      echo "== its PyTorch twin --amp $amp"
      tres=$(PYTHONWARNINGS=ignore timeout "${GPU_CHECK_TIMEOUT:-300}" python3 "$root/tools/train_gpt_torch.py" "${shared[@]}" \
        --steps 300 --device cuda --amp "$amp" 2>&1 || true)
      echo "$tres" | tail -n 2
      tsecs=$(echo "$tres" | sed -n 's/^step 300: .*(\([0-9.]*\) s)$/\1/p')
    fi
    for attn in rows gemm; do
      ratio=""
      [[ -n $tsecs && -n ${secs[$attn]} ]] &&
        ratio="$(awk -v a="${secs[$attn]}" -v b="$tsecs" 'BEGIN { printf "; PyTorch %s s, ratio %.2f", b, a / b }')"
      example_line+="$(printf 'example transformer amp %-4s attention %-4s loss %s, %s s for 300 steps%s %s' "$amp" \
        "$attn" "${loss[$attn]}" "${secs[$attn]:-?}" "$ratio" "${verdict[$attn]}")"$'\n'
    done
  done
  # Where the step's GPU time goes on each attention path: the profiler's op table (GPU ms per
  # op) of 5 bf16 steps after 30.
  for attn in rows gemm; do
    memory=0
    [[ $attn == gemm ]] && memory=$((256 << 20))
    echo "== example profile, bf16, attention: $attn"
    MANTISSA_ATTENTION_SCORE_MEMORY=$memory timeout "${GPU_CHECK_TIMEOUT:-300}" "$example_bin" "${shared[@]}" \
      --steps 40 --device cuda --amp bf16 --dropout 0 --sample 0 --profile "$out/profile-$attn.json" --profile-warmup 30 \
      --profile-steps 5 2>&1 | tr '\r' '\n' | grep -E '^(ops over|op |attention|matmul|copy)|time in ops' || true
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
printf '%s' "$example_line"
# The benchmark's own table: everything after its "== summary" line.
sed -n '/^== summary/,$p' "$out/bench_gpu.txt"
[[ $bench_rc -ne 0 ]] && echo "bench_gpu exited with $bench_rc"
echo "wall time $(( $(date +%s) - t0 )) s; status $status; log: $log"
exit "$status"
