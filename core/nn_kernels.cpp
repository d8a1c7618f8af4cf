#include "core/nn_kernels.h"

#include <utility>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/error.h"
#include "core/profile_op.h"
#include "core/trace.h"

namespace mantissa {

namespace cpu {
namespace {
const NnKernels kNnKernels{MT_NN_KERNELS(MT_NN_TABLE_ENTRY)};
}  // namespace
}  // namespace cpu

namespace {

const NnKernels& cpu_table() { return cpu::kNnKernels; }
const NnKernels& cuda_table() { return *find_backend(DeviceType::CUDA)->nn; }

// The profiled twin of the table Inner() returns (core/profile_op.h).
template <const NnKernels& (*Inner)()>
const NnKernels& profiled() {
#define MT_ENTRY(name, params) MT_PROFILED_ENTRY(NnKernels, Inner, name, #name),
  static const NnKernels t{MT_NN_KERNELS(MT_ENTRY)};
#undef MT_ENTRY
  return t;
}

}  // namespace

const NnKernels& nn_kernels_for(Device device, const char* op) {
  if (device.is_cpu()) {
    if (trace::Tracer* t = trace::current()) [[unlikely]]
      return t->nn_kernels();  // an exporter records this thread's ops (core/trace.h)
    return profiler::enabled() ? profiled<cpu_table>() : cpu::kNnKernels;
  }
  (void)backend_for(device);  // throws when the device is not available
  const NnKernels* k = find_backend(device.type)->nn;
  MT_CHECK(k != nullptr, op, "no kernels for ", device.str(), " are registered (the op runs on the CPU only)");
  if (device.type == DeviceType::CUDA && profiler::enabled()) return profiled<cuda_table>();
  return *k;
}

int64_t window_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode) {
  const int64_t span = dilation * (kernel - 1) + 1;
  const int64_t room = in + 2 * pad - span;
  if (room < 0) return 0;
  int64_t out = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
  // With ceil_mode the last window must start inside the input or the left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace mantissa
