// The CUDA backend as core sees it: both kernel tables, the device count, the allocators, the
// NVTX range hooks and the profiler's GPU timer (cuda/profiler.cpp), registered once at load through the generated list
// of backends (cmake/backends.cpp.in).
#include <nvtx3/nvToolsExt.h>

#include "core/backend_registry.h"
#include "cuda/allocator.h"
#include "cuda/device.h"
#include "cuda/kernels.h"
#include "cuda/nn_kernels.h"

namespace mantissa {

namespace {

const Backend kKernels{
    .copy = cuda::copy,
    .fill = cuda::fill,
    .unary = cuda::unary,
    .binary = cuda::binary,
    .where = cuda::where,
    .reduce = cuda::reduce,
    .var_mean = cuda::var_mean,
    .softmax = cuda::softmax,
    .matmul = cuda::matmul,
    .index_select = cuda::index_select,
    .gather = cuda::gather,
    .scatter_add = cuda::scatter_add,
    .accumulate_grad = cuda::accumulate_grad,
    .fused_optimizer_step = cuda::fused_optimizer_step,
    .update_scale = cuda::update_scale,
    .dropout_mask = cuda::dropout_mask,
};

const NnKernels kNnKernels{
    .conv2d_forward = cuda::conv2d_forward,
    .conv2d_backward = cuda::conv2d_backward,
    .im2col = cuda::im2col,
    .col2im = cuda::col2im,
    .max_pool2d = cuda::max_pool2d,
    .max_pool2d_backward = cuda::max_pool2d_backward,
    .avg_pool2d = cuda::avg_pool2d,
    .avg_pool2d_backward = cuda::avg_pool2d_backward,
    .adaptive_avg_pool2d = cuda::adaptive_avg_pool2d,
    .adaptive_avg_pool2d_backward = cuda::adaptive_avg_pool2d_backward,
    .layer_norm = cuda::layer_norm,
    .layer_norm_backward = cuda::layer_norm_backward,
    .batch_norm_stats = cuda::batch_norm_stats,
    .batch_norm_apply = cuda::batch_norm_apply,
    .batch_norm_backward = cuda::batch_norm_backward,
    .cross_entropy = cuda::cross_entropy,
    .cross_entropy_backward = cuda::cross_entropy_backward,
    .attention_forward = cuda::attention_forward,
    .attention_backward = cuda::attention_backward,
    .triangle = cuda::triangle,
};

// Header-only NVTX 3: with no profiler attached, each call checks an injection pointer.
void nvtx_push(const char* name) { nvtxRangePushA(name); }
void nvtx_pop() { nvtxRangePop(); }

}  // namespace

void register_cuda_backend() {
  register_backend(DeviceType::CUDA, DeviceBackend{
                                         .kernels = &kKernels,
                                         .nn = &kNnKernels,
                                         .device_count = cuda::runtime_device_count,
                                         .allocator = cuda::device_allocator,
                                         .pinned_host_allocator = cuda::pinned_allocator,
                                         .ranges = {.push = nvtx_push, .pop = nvtx_pop},
                                         .gpu_timer = cuda::gpu_timer(),
                                     });
}

}  // namespace mantissa
