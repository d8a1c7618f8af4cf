// Inclusive scans (cumsum, cumprod and cumsum's backward; cumprod's first-order backward at the
// end) along the middle dim of a contiguous [outer, n, inner] block, accumulated in fp32 (fp64
// for fp64, wrapping uint64 for int64), as PyTorch's CUDA kernel accumulates. Rows (inner == 1):
// one warp per row, 32 elements per step, a shuffle scan within the step and the running value
// carried on from lane 31. Columns (inner > 1): one thread per column walking down n, adjacent
// threads on adjacent columns (coalesced).
#include "cuda/kernels.h"
#include "cuda/loops.cuh"
#include "cuda/rows.cuh"

namespace mantissa::cuda {

namespace {

template <typename T, bool kProduct>
struct ScanStep {
  using Acc = std::conditional_t<std::is_integral_v<T>, unsigned long long, acc_t<T>>;
  static __device__ Acc identity() { return Acc(kProduct ? 1 : 0); }
  static __device__ Acc load(T v) { return Acc(cast_to<acc_t<T>>(v)); }
  static __device__ Acc combine(Acc a, Acc b) { return kProduct ? a * b : a + b; }
  static __device__ T out(Acc acc) {
    if constexpr (std::is_integral_v<T>)
      return T(acc);
    else
      return cast_to<T>(acc);
  }
};

// x, y: [rows, n]; one warp per row, position i = s or n - 1 - s when reverse.
//   y[r][i] = x[r][0] (+) .. (+) x[r][i]   (or x[r][i] (+) .. (+) x[r][n - 1])
template <typename T, bool kProduct>
__global__ void scan_rows_kernel(const T* x, T* y, int64_t rows, int64_t n, bool reverse) {
  using S = ScanStep<T, kProduct>;
  const int lane = int(threadIdx.x & 31);
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  // r is the same for a warp's 32 lanes, so every shuffle below has the whole warp.
  for (int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    typename S::Acc carry = S::identity();
    for (int64_t s0 = 0; s0 < n; s0 += 32) {
      const int64_t s = s0 + lane, i = reverse ? n - 1 - s : s;
      typename S::Acc v = s < n ? S::load(xr[i]) : S::identity();
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const typename S::Acc u = __shfl_up_sync(kFullMask, v, d);
        if (lane >= d) v = S::combine(u, v);
      }
      v = S::combine(carry, v);
      if (s < n) yr[i] = S::out(v);
      carry = __shfl_sync(kFullMask, v, 31);
    }
  }
}

// x, y: [outer, n, inner]; one thread per (outer, column).
//   y[o][i][c] = x[o][0][c] (+) .. (+) x[o][i][c]   (or from the end)
template <typename T, bool kProduct>
__global__ void scan_columns_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool reverse) {
  using S = ScanStep<T, kProduct>;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < outer * inner;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = p / inner, at = o * n * inner + (p - o * inner);
    typename S::Acc acc = S::identity();
    for (int64_t s = 0; s < n; ++s) {
      const int64_t i = reverse ? n - 1 - s : s;
      acc = S::combine(acc, S::load(x[at + i * inner]));
      y[at + i * inner] = S::out(acc);
    }
  }
}

// x, g, gx: [outer, n, inner]; one thread per (outer, column): cumprod's gradient (core/backend.h),
// as core/cpu/scan.cpp's: a forward pass to the first zero z (the outputs before it in gx, and
// A = sum_{k >= z} g_k x_{z+1} .. x_k), then the reverse sums, in the accumulation type.
template <typename T>
__global__ void cumprod_backward_kernel(const T* x, const T* g, T* gx, int64_t outer, int64_t n, int64_t inner) {
  using A = acc_t<T>;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < outer * inner;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = p / inner, at = o * n * inner + (p - o * inner);
    A y = A(1), e = A(0), a = A(0), prod = A(1);
    int64_t z = n;
    for (int64_t i = 0; i < n; ++i) {
      const A xi = cast_to<A>(x[at + i * inner]), gi = cast_to<A>(g[at + i * inner]);
      if (z < n) {
        prod *= xi;
        a += gi * prod;
      } else if (xi == A(0)) {
        z = i;
        e = y;
        a = gi;
      } else {
        y *= xi;
        gx[at + i * inner] = cast_to<T>(y);
      }
    }
    A s = A(0);
    for (int64_t i = n - 1; i >= 0; --i) {
      A v = A(0);
      if (i == z) {
        v = e * a;
      } else if (i < z) {
        s += cast_to<A>(g[at + i * inner]) * cast_to<A>(gx[at + i * inner]);
        v = s / cast_to<A>(x[at + i * inner]);
      }
      gx[at + i * inner] = cast_to<T>(v);
    }
  }
}

}  // namespace

void cumprod_backward(const Tensor& x, const Tensor& g, const Tensor& gx) {
  MT_CHECK(x.is_contiguous() && g.is_contiguous() && gx.is_contiguous(), "cumprod",
           "the CUDA kernel expects contiguous tensors");
  const int64_t outer = x.size(0), n = x.size(1), inner = x.size(2);
  if (x.numel() == 0) return;
  const int dev = gx.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(x.dtype(), "cumprod", [&]<typename T>() {
    cumprod_backward_kernel<T><<<grid_for(outer * inner, dev), kBlock, 0, current_stream(dev)>>>(
        dptr<const T>(x), dptr<const T>(g), dptr<T>(gx), outer, n, inner);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void scan(const Tensor& in, const Tensor& out, bool product, bool reverse) {
  MT_CHECK(in.is_contiguous() && out.is_contiguous(), "scan", "the CUDA kernel expects contiguous tensors");
  const int64_t outer = in.size(0), n = in.size(1), inner = in.size(2);
  if (in.numel() == 0) return;
  const int dev = out.device().index;
  DeviceGuard g(dev);
  dispatch_all(in.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, int64_t>) {
      MT_FAIL("scan", "expected a floating-point or int64 tensor, got ", dtype_name(in.dtype()));
    } else {
      auto run = [&]<bool kProduct>() {
        if (inner == 1)
          scan_rows_kernel<T, kProduct><<<grid_for(outer * 32, dev), kBlock, 0, current_stream(dev)>>>(
              dptr<const T>(in), dptr<T>(out), outer, n, reverse);
        else
          scan_columns_kernel<T, kProduct><<<grid_for(outer * inner, dev), kBlock, 0, current_stream(dev)>>>(
              dptr<const T>(in), dptr<T>(out), outer, n, inner, reverse);
        MT_CUDA_CHECK_LAUNCH();
      };
      if (product)
        run.template operator()<true>();
      else
        run.template operator()<false>();
    }
  });
}

}  // namespace mantissa::cuda
