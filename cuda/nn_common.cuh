// Launch helpers shared by the nn kernels (cuda/nn_*.cu): grid-stride loops, warp and
// block reductions in the accumulation type, and the row-team split of the row kernels (a
// warp per row for short rows, a block per row for long ones, as cuda/reduce.cu does).
#pragma once
#include <algorithm>

#include "cuda/loops.cuh"

namespace mantissa::cuda::nn {

constexpr unsigned kFullMask = 0xffffffffu;

// Grid-stride loop over [0, n).
#define MT_GRID_LOOP(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

struct SumOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};
// As std::max: a NaN never replaces the running max (the CPU's reduction keeps the same rule).
struct MaxOp {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a < b ? b : a;
  }
};

// Butterfly reduction: every lane gets the warp's result.
template <typename A, typename Op>
__device__ __forceinline__ A warp_reduce(A v, Op op) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) v = op(v, __shfl_xor_sync(kFullMask, v, m));
  return v;
}

// Every thread of the block gets the block's result. All threads must call it; blockDim.x is
// a multiple of 32; `identity` fills the lanes of absent warps.
template <typename A, typename Op>
__device__ A block_reduce(A v, Op op, A identity) {
  __shared__ A shared[32];
  const int lane = threadIdx.x % 32, wid = threadIdx.x / 32, nw = blockDim.x / 32;
  v = warp_reduce(v, op);
  __syncthreads();  // an earlier call's readers are done with `shared`
  if (lane == 0) shared[wid] = v;
  __syncthreads();
  v = lane < nw ? shared[lane] : identity;
  return warp_reduce(v, op);
}

template <typename A>
__device__ A block_sum(A v) {
  return block_reduce(v, SumOp{}, A(0));
}

// Which rows a thread works on, and with which lanes. `warp` is uniform across the block.
struct RowTeam {
  bool warp;
  __device__ int64_t first() const {
    return warp ? (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32 : int64_t(blockIdx.x);
  }
  __device__ int64_t step() const { return warp ? int64_t(gridDim.x) * blockDim.x / 32 : int64_t(gridDim.x); }
  __device__ int lane() const { return warp ? int(threadIdx.x % 32) : int(threadIdx.x); }
  __device__ int width() const { return warp ? 32 : int(blockDim.x); }
  template <typename A>
  __device__ A sum(A v) const {
    return warp ? warp_reduce(v, SumOp{}) : block_reduce(v, SumOp{}, A(0));
  }
  template <typename A>
  __device__ A max(A v) const {
    return warp ? warp_reduce(v, MaxOp{}) : block_reduce(v, MaxOp{}, -A(INFINITY));
  }
};

struct RowLaunch {
  RowTeam team;
  unsigned grid, block;
};

// Rows of up to 256 elements get a warp each (8 rows per block), longer rows a block each;
// at most 16 blocks per SM, the rest is grid-stride.
inline RowLaunch plan_row_launch(int64_t rows, int64_t n, int dev) {
  const int64_t cap = int64_t(device_properties(dev).multiProcessorCount) * 16;
  if (n <= 256) {
    const int64_t blocks = (rows + kBlock / 32 - 1) / (kBlock / 32);
    return {{true}, unsigned(std::max<int64_t>(1, std::min(blocks, cap))), unsigned(kBlock)};
  }
  return {{false}, unsigned(std::max<int64_t>(1, std::min(rows, cap))), n >= 4096 ? 512u : unsigned(kBlock)};
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
