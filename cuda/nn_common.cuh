// Launch helpers shared by the nn kernels (cuda/nn_*.cu): grid-stride loops and per-channel
// block sums. Row teams, warp/block reductions and the row launch plan are cuda/rows.cuh's.
#pragma once
#include <algorithm>

#include "cuda/loops.cuh"
#include "cuda/rows.cuh"

namespace mantissa::cuda::nn {

// Grid-stride loop over [0, n).
#define MT_GRID_LOOP(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

template <typename A>
__device__ A block_sum(A v) {
  return block_allreduce(SumOp<A>{}, v);
}

// One block per channel of x viewed as [N, C, S] (grid-stride over channels).
inline unsigned channel_grid(int64_t C, int dev) {
  const int64_t cap = int64_t(device_properties(dev).multiProcessorCount) * 16;
  return unsigned(std::max<int64_t>(1, std::min(C, cap)));
}

// Sum of f(offset) over the N * S elements of channel c of [N, C, S], by the whole block.
template <typename A, typename F>
__device__ A channel_block_sum(int64_t c, int64_t N, int64_t C, int64_t S, F f) {
  A acc = 0;
  const int64_t count = N * S;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const int64_t n = i / S;
    acc += f((n * C + c) * S + (i - n * S));
  }
  return block_sum(acc);
}

template <typename T>
const T* opt_ptr(const Tensor& t) {
  return t.defined() ? dptr<const T>(t) : nullptr;
}
template <typename T>
T* opt_mut_ptr(const Tensor& t) {
  return t.defined() ? dptr<T>(t) : nullptr;
}

}  // namespace mantissa::cuda::nn
