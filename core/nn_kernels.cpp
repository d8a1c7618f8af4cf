#include "core/nn_kernels.h"

#include <array>
#include <atomic>
#include <utility>

#include "core/backend.h"
#include "core/cpu/nn_kernels.h"
#include "core/error.h"
#include "core/profile_op.h"

namespace mantissa {

#ifdef MANTISSA_WITH_CUDA
const Backend* cuda_backend();  // cuda/backend.cpp
#endif

namespace {

const NnKernels* cpu_nn_kernels() {
  static const NnKernels table{cpu::conv2d_forward,
                               cpu::conv2d_backward,
                               cpu::im2col,
                               cpu::col2im,
                               cpu::max_pool2d,
                               cpu::avg_pool2d,
                               cpu::avg_pool2d_backward,
                               cpu::adaptive_avg_pool2d,
                               cpu::adaptive_avg_pool2d_backward,
                               cpu::layer_norm,
                               cpu::layer_norm_backward,
                               cpu::batch_norm_stats,
                               cpu::batch_norm_apply,
                               cpu::batch_norm_backward,
                               cpu::cross_entropy,
                               cpu::cross_entropy_backward,
                               cpu::attention_forward,
                               cpu::attention_backward,
                               cpu::triangle};
  return &table;
}

std::array<std::atomic<const NnKernels*>, kNumDeviceTypes>& registry() {
  static std::array<std::atomic<const NnKernels*>, kNumDeviceTypes> r{};
  return r;
}

const NnKernels& cpu_table() { return *cpu_nn_kernels(); }
const NnKernels& cuda_table() { return *registry()[size_t(DeviceType::CUDA)].load(); }

// While profiling is on, nn_kernels_for() hands out this twin of a table: each entry opens
// a range named after the kernel, then calls the real one (see core/backend.cpp).
template <const NnKernels& (*Inner)()>
struct Profiled {
  template <auto Member, typename... Args>
  static void call(const char* name, Args&&... args) {
    profiler::OpRange r(name, args...);
    (Inner().*Member)(std::forward<Args>(args)...);
  }
  // Each entry: a lambda with the entry's signature that forwards through call<>().
#define MT_PROFILED_ENTRY(entry)                                                        \
  .entry = [](auto... args) { call<&NnKernels::entry>(#entry, args...); }
  static const NnKernels& table() {
    static const NnKernels t{
        MT_PROFILED_ENTRY(conv2d_forward),
        MT_PROFILED_ENTRY(conv2d_backward),
        MT_PROFILED_ENTRY(im2col),
        MT_PROFILED_ENTRY(col2im),
        MT_PROFILED_ENTRY(max_pool2d),
        MT_PROFILED_ENTRY(avg_pool2d),
        MT_PROFILED_ENTRY(avg_pool2d_backward),
        MT_PROFILED_ENTRY(adaptive_avg_pool2d),
        MT_PROFILED_ENTRY(adaptive_avg_pool2d_backward),
        MT_PROFILED_ENTRY(layer_norm),
        MT_PROFILED_ENTRY(layer_norm_backward),
        MT_PROFILED_ENTRY(batch_norm_stats),
        MT_PROFILED_ENTRY(batch_norm_apply),
        MT_PROFILED_ENTRY(batch_norm_backward),
        MT_PROFILED_ENTRY(cross_entropy),
        MT_PROFILED_ENTRY(cross_entropy_backward),
        MT_PROFILED_ENTRY(attention_forward),
        MT_PROFILED_ENTRY(attention_backward),
        MT_PROFILED_ENTRY(triangle),
    };
    return t;
  }
#undef MT_PROFILED_ENTRY
};

}  // namespace

void register_nn_kernels(DeviceType type, const NnKernels* kernels) { registry()[size_t(type)].store(kernels); }

const NnKernels& nn_kernels_for(Device device, const char* op) {
  if (device.is_cpu()) return profiler::enabled() ? Profiled<cpu_table>::table() : *cpu_nn_kernels();
  (void)backend_for(device);  // throws when the device is not available
#ifdef MANTISSA_WITH_CUDA
  if (device.is_cuda()) (void)cuda_backend();  // loading the CUDA backend registers its row
#endif
  const NnKernels* k = registry()[size_t(device.type)].load();
  MT_CHECK(k != nullptr, op, "no kernels for ", device.str(), " are registered (the op runs on the CPU only)");
  if (device.type == DeviceType::CUDA && profiler::enabled()) return Profiled<cuda_table>::table();
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
