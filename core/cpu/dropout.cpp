// The dropout mask on the CPU: the counter-based draw of core/philox.h, shared with CUDA.
#include "core/cpu/kernels.h"
#include "core/cpu/loops.h"
#include "core/philox.h"

namespace mantissa::cpu {

// out: contiguous [n] (any shape), floating.
void dropout_mask(const Tensor& out, double p, uint64_t seed) {
  dispatch_floating(out.dtype(), "dropout", [&]<typename T>() {
    const math::DropoutKeep keep{seed, float(1.0 - p)};
    const T scale = cast_to<T>(1.0 / (1.0 - p)), zero = cast_to<T>(0.0);
    T* y = static_cast<T*>(out.raw_data());
    parallel_for(0, out.numel(), kParallelGrain / 8, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = keep(uint64_t(i)) ? scale : zero;
    });
  });
}

}  // namespace mantissa::cpu
