// The row machinery of every row kernel (reductions, var_mean and softmax in cuda/reduce.cu;
// layer norm, cross-entropy and attention in cuda/nn_*.cu, cuda/attention.cu): warp and block
// all-reductions over a combine op, the team that owns a row (a warp or a block), and the
// launch plan that picks between them.
//
// An op for the all-reductions: State identity(), State combine(State, State) (symmetric),
// State shfl(State, int lane_mask).
#pragma once
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "cuda/loops.cuh"

namespace mantissa::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

template <typename T>
__device__ __forceinline__ T shfl_xor(T v, int lane_mask) {
  if constexpr (std::is_integral_v<T> && sizeof(T) < 4)
    return T(__shfl_xor_sync(kFullMask, int(v), lane_mask));
  else
    return __shfl_xor_sync(kFullMask, v, lane_mask);
}

template <typename Acc>
struct SumOp {
  using State = Acc;
  __device__ State identity() const { return Acc(0); }
  __device__ State load(Acc v, int64_t) const { return v; }
  __device__ State combine(State a, State b) const { return a + b; }
  __device__ State shfl(State s, int m) const { return shfl_xor(s, m); }
  template <typename Out>
  __device__ Out finish(State s) const {
    return cast_to<Out>(s);
  }
};

template <typename Acc>
struct MaxValueOp {  // plain max for softmax: like std::max, a NaN never replaces the running max
  using State = Acc;
  __device__ State identity() const { return Acc(-INFINITY); }
  __device__ State combine(State a, State b) const { return a < b ? b : a; }
  __device__ State shfl(State s, int m) const { return shfl_xor(s, m); }
};

// Butterfly reduction: every lane ends with the warp's result.
template <typename Op, typename S>
__device__ __forceinline__ S warp_allreduce(const Op& op, S s) {
#pragma unroll
  for (int m = 16; m > 0; m >>= 1) s = op.combine(s, op.shfl(s, m));
  return s;
}

// Every thread of the block ends with the block's result. All threads must call it.
template <typename Op, typename S>
__device__ S block_allreduce(const Op& op, S s) {
  static_assert(sizeof(S) <= 16, "state too large for the shared buffer");
  __shared__ alignas(16) unsigned char raw[32 * 16];
  S* shared = reinterpret_cast<S*>(raw);
  const int lane = threadIdx.x % 32, wid = threadIdx.x / 32, nw = blockDim.x / 32;
  s = warp_allreduce(op, s);
  __syncthreads();  // the previous call's readers are done with `shared`
  if (lane == 0) shared[wid] = s;
  __syncthreads();
  s = lane < nw ? shared[lane] : op.identity();
  return warp_allreduce(op, s);
}

// A row is processed by one warp (warp == true) or by one block. A runtime flag rather
// than a template parameter: it is uniform across the block, and halves the kernel count.
struct Rows {
  bool warp;
  __device__ int64_t first() const {
    return warp ? (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32 : int64_t(blockIdx.x);
  }
  __device__ int64_t step() const { return warp ? int64_t(gridDim.x) * blockDim.x / 32 : int64_t(gridDim.x); }
  __device__ int lane() const { return warp ? int(threadIdx.x % 32) : int(threadIdx.x); }
  __device__ int width() const { return warp ? 32 : int(blockDim.x); }
  template <typename Op, typename S>
  __device__ S allreduce(const Op& op, S s) const {
    return warp ? warp_allreduce(op, s) : block_allreduce(op, s);
  }
  template <typename A>
  __device__ A sum(A v) const {
    return allreduce(SumOp<A>{}, v);
  }
  template <typename A>
  __device__ A max(A v) const {
    return allreduce(MaxValueOp<A>{}, v);
  }
};

// Sources of states: a row of x, a chunk of a row of x, or partial states of pass 1.

struct RowPlan {
  Rows team;
  unsigned grid, block;
};

// Rows of up to 256 elements get a warp each (8 rows per block), longer rows a block each;
// at most 16 blocks per SM, the rest is grid-stride.
inline RowPlan plan_rows(int64_t rows, int64_t n, int dev) {
  const int64_t cap = int64_t(device_properties(dev).multiProcessorCount) * 16;
  if (n <= 256) {
    const int64_t blocks = (rows + kBlock / 32 - 1) / (kBlock / 32);
    return {{true}, unsigned(std::max<int64_t>(1, std::min(blocks, cap))), unsigned(kBlock)};
  }
  return {{false}, unsigned(std::max<int64_t>(1, std::min(rows, cap))), n >= 4096 ? 512u : unsigned(kBlock)};
}

}  // namespace mantissa::cuda
