#include "core/backend.h"

#include "core/cpu/kernels.h"
#include "core/error.h"

namespace mantissa {

#ifdef MANTISSA_WITH_CUDA
const Backend* cuda_backend();  // cuda/backend.cpp
#endif

const Backend& cpu_backend() {
  static const Backend table{cpu::copy,   cpu::fill,    cpu::unary,        cpu::binary,
                             cpu::where,  cpu::reduce,  cpu::var_mean,     cpu::softmax,
                             cpu::matmul, cpu::index_select, cpu::gather, cpu::scatter_add,
                             cpu::accumulate_grad};
  return table;
}

const Backend& backend_for(Device d) {
  if (d.is_cpu()) return cpu_backend();
#ifdef MANTISSA_WITH_CUDA
  MT_CHECK(d.index < cuda_device_count(), "dispatch", "device ", d.str(), " is not available (",
           cuda_device_count(), " CUDA devices found)");
  const Backend* b = cuda_backend();
  MT_CHECK(b != nullptr, "dispatch", "no CUDA kernels are registered for ", d.str());
  return *b;
#else
  MT_FAIL("dispatch", "device ", d.str(), " is not available: mantissa was built without CUDA");
#endif
}

}  // namespace mantissa
