#include "core/nn_kernels.h"

#include <utility>

#include "core/backend.h"
#include "core/backend_registry.h"
#include "core/cpu/nn_kernels.h"
#include "core/error.h"
#include "core/profile_op.h"

namespace mantissa {

namespace {

const NnKernels* cpu_nn_kernels() {
  static const NnKernels table{
      .conv2d_forward = cpu::conv2d_forward,
      .conv2d_backward = cpu::conv2d_backward,
      .im2col = cpu::im2col,
      .col2im = cpu::col2im,
      .max_pool2d = cpu::max_pool2d,
      .max_pool2d_backward = cpu::max_pool2d_backward,
      .avg_pool2d = cpu::avg_pool2d,
      .avg_pool2d_backward = cpu::avg_pool2d_backward,
      .adaptive_avg_pool2d = cpu::adaptive_avg_pool2d,
      .adaptive_avg_pool2d_backward = cpu::adaptive_avg_pool2d_backward,
      .layer_norm = cpu::layer_norm,
      .layer_norm_backward = cpu::layer_norm_backward,
      .batch_norm_stats = cpu::batch_norm_stats,
      .batch_norm_apply = cpu::batch_norm_apply,
      .batch_norm_backward = cpu::batch_norm_backward,
      .cross_entropy = cpu::cross_entropy,
      .cross_entropy_backward = cpu::cross_entropy_backward,
      .attention_forward = cpu::attention_forward,
      .attention_backward = cpu::attention_backward,
      .triangle = cpu::triangle,
  };
  return &table;
}

const NnKernels& cpu_table() { return *cpu_nn_kernels(); }
const NnKernels& cuda_table() { return *find_backend(DeviceType::CUDA)->nn; }

// The profiled twin of the table Inner() returns (core/profile_op.h).
template <const NnKernels& (*Inner)()>
const NnKernels& profiled() {
#define MT_ENTRY(entry) MT_PROFILED_ENTRY(NnKernels, Inner, entry, #entry)
  static const NnKernels t{
      MT_ENTRY(conv2d_forward),
      MT_ENTRY(conv2d_backward),
      MT_ENTRY(im2col),
      MT_ENTRY(col2im),
      MT_ENTRY(max_pool2d),
      MT_ENTRY(max_pool2d_backward),
      MT_ENTRY(avg_pool2d),
      MT_ENTRY(avg_pool2d_backward),
      MT_ENTRY(adaptive_avg_pool2d),
      MT_ENTRY(adaptive_avg_pool2d_backward),
      MT_ENTRY(layer_norm),
      MT_ENTRY(layer_norm_backward),
      MT_ENTRY(batch_norm_stats),
      MT_ENTRY(batch_norm_apply),
      MT_ENTRY(batch_norm_backward),
      MT_ENTRY(cross_entropy),
      MT_ENTRY(cross_entropy_backward),
      MT_ENTRY(attention_forward),
      MT_ENTRY(attention_backward),
      MT_ENTRY(triangle),
  };
#undef MT_ENTRY
  return t;
}

}  // namespace

const NnKernels& nn_kernels_for(Device device, const char* op) {
  if (device.is_cpu()) return profiler::enabled() ? profiled<cpu_table>() : *cpu_nn_kernels();
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
