#include "core/nn_kernels.h"

#include <array>
#include <atomic>

#include "core/cpu/nn_kernels.h"
#include "core/error.h"

namespace mantissa {

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
                               cpu::cross_entropy_backward};
  return &table;
}

std::array<std::atomic<const NnKernels*>, kNumDeviceTypes>& registry() {
  static std::array<std::atomic<const NnKernels*>, kNumDeviceTypes> r{};
  return r;
}

}  // namespace

void register_nn_kernels(DeviceType type, const NnKernels* kernels) { registry()[size_t(type)].store(kernels); }

const NnKernels& nn_kernels_for(Device device, const char* op) {
  if (device.is_cpu()) return *cpu_nn_kernels();
  const NnKernels* k = registry()[size_t(device.type)].load();
  MT_CHECK(k != nullptr, op, "no kernels for ", device.str(), " are registered (the op runs on the CPU only)");
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
