// The dropout mask on the GPU: the counter-based draw of core/philox.h, the same function
// the CPU loop calls, so one seed gives one mask on every device.
#include "core/philox.h"
#include "cuda/kernels.h"
#include "cuda/loops.cuh"

namespace mantissa::cuda {

namespace {
// y: contiguous [n]; y[i] = keep(i) ? scale : 0 (grid-stride).
template <typename T>
__global__ void dropout_mask_kernel(int64_t n, math::DropoutKeep keep, T scale, T* y) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    y[i] = keep(uint64_t(i)) ? scale : cast_to<T>(0.0f);
}
}  // namespace

void dropout_mask(const Tensor& out, double p, uint64_t seed) {
  const int64_t n = out.numel();
  if (n == 0) return;
  MT_CHECK(out.is_contiguous(), "dropout", "internal: the mask must be contiguous");
  const int dev = out.device().index;
  DeviceGuard g(dev);
  dispatch_floating(out.dtype(), "dropout", [&]<typename T>() {
    const math::DropoutKeep keep{seed, float(1.0 - p)};
    const T scale = cast_to<T>(1.0 / (1.0 - p));
    dropout_mask_kernel<T><<<grid_for(n, dev), kBlock, 0, current_stream(dev)>>>(n, keep, scale, dptr<T>(out));
    MT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace mantissa::cuda
