#!/usr/bin/env bash
# Builds the CPU kernel tests for a CPU without AVX-512 (-march=x86-64-v3: AVX2, FMA, F16C) and
# runs them here: the portable paths of core/cpu/ that an AVX-512 build never executes (the
# build machine's CPU changes between sessions; CI builds with -march=native). Run it after a
# change to a kernel with an AVX-512 path.
#   bash tools/portable-check.sh [BUILD_DIR]   # default /tmp/mantissa-x86-64-v3; ~25 min the first time on 2 cores
set -euo pipefail
dir=${1:-/tmp/mantissa-x86-64-v3}
root=$(cd "$(dirname "$0")/.." && pwd)
tests=(test_softmax_kernels test_vector_math test_random test_norm_extra test_reduce_columns test_reference_ops
  test_amp test_nn_reference test_new_ops test_attention test_op_edges test_gradcheck test_onednn test_tensor
  test_embedding_grad test_matmul_k_major test_tile_gemm test_elementwise_views test_conv_extra test_nn)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMANTISSA_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 \
  -DMANTISSA_CUDA=OFF -DMANTISSA_DIST=OFF -DMANTISSA_ONNX=OFF -DMANTISSA_BUILD_BENCH=OFF \
  -DMANTISSA_BUILD_EXAMPLES=OFF "${launcher[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)" --target "${tests[@]}"
fail=0
for t in "${tests[@]}"; do
  bin=$(find "$dir" -name "$t" -type f -executable | head -1)
  if (cd "$root" && "$bin" >"$dir/$t.log" 2>&1); then
    echo "pass $t"
  else
    echo "FAIL $t (see $dir/$t.log)"
    fail=1
  fi
done
exit $fail
