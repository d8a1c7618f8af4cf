// Dropout on the GPU: the counter-based draw of core/philox.h, the same function the CPU loop
// calls, so one seed gives one mask on every device; x * mask in one pass.
#include "core/philox.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

namespace {
// x (optional), y: contiguous [n]; m = keep(i) ? scale : 0, y[i] = x ? x[i] * m (in Acc) : m, and
// bit i % 32 of word i / 32 of bits (optional) = keep(i), one warp ballot per word (grid-stride in
// whole warps: blockDim is a multiple of 32).
template <typename T>
__global__ void dropout_kernel(int64_t n, math::DropoutKeep keep, T scale, const T* x, T* y, uint32_t* bits) {
  using Acc = acc_t<T>;
  const int lane = int(threadIdx.x % 32);
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t w0 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x - lane; w0 < n; w0 += step) {
    const int64_t i = w0 + lane;
    const bool k = i < n && keep(uint64_t(i));
    const uint32_t ballot = __ballot_sync(0xFFFFFFFFu, k);
    if (bits && lane == 0) bits[w0 / 32] = ballot;
    if (i < n) {
      const T m = k ? scale : cast_to<T>(0.0f);
      y[i] = x ? cast_to<T>(cast_to<Acc>(x[i]) * cast_to<Acc>(m)) : m;
    }
  }
}

// g, y: contiguous [n]; y[i] = g[i] * (bit i of bits ? scale : 0), in Acc.
template <typename T>
__global__ void dropout_backward_kernel(int64_t n, const uint8_t* bits, T scale, const T* g, T* y) {
  using Acc = acc_t<T>;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const T m = (bits[i >> 3] >> (i & 7)) & 1 ? scale : cast_to<T>(0.0f);
    y[i] = cast_to<T>(cast_to<Acc>(g[i]) * cast_to<Acc>(m));
  }
}
}  // namespace

void dropout(const Tensor& x, const Tensor& out, const Tensor& keep_bits, double p, uint64_t seed) {
  const int64_t n = out.numel();
  if (n == 0) return;
  MT_CHECK(out.is_contiguous() && (!x.defined() || x.is_contiguous()), "dropout",
           "internal: the input and output must be contiguous");
  static_assert(kBlock % 32 == 0, "the keep bits are written a warp at a time");
  const int dev = out.device().index;
  DeviceGuard g(dev);
  dispatch_floating(out.dtype(), "dropout", [&]<typename T>() {
    const math::DropoutKeep keep{seed, float(1.0 - p)};
    const T scale = cast_to<T>(1.0 / (1.0 - p));
    dropout_kernel<T><<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(
        n, keep, scale, x.defined() ? dptr<const T>(x) : nullptr, dptr<T>(out),
        keep_bits.defined() ? dptr<uint32_t>(keep_bits) : nullptr);
    MT_CUDA_CHECK_LAUNCH();
  });
}

void dropout_backward(const Tensor& g, const Tensor& keep_bits, const Tensor& out, double p) {
  const int64_t n = out.numel();
  if (n == 0) return;
  MT_CHECK(out.is_contiguous() && g.is_contiguous(), "dropout", "internal: the gradients must be contiguous");
  const int dev = out.device().index;
  DeviceGuard guard(dev);
  dispatch_floating(out.dtype(), "dropout", [&]<typename T>() {
    const T scale = cast_to<T>(1.0 / (1.0 - p));
    dropout_backward_kernel<T><<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(
        n, dptr<const uint8_t>(keep_bits), scale, dptr<const T>(g), dptr<T>(out));
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mantissa::cuda
