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

namespace cuda {
namespace {
const NnKernels kNnKernels{MT_NN_KERNELS(MT_NN_TABLE_ENTRY)};
}  // namespace
}  // namespace cuda

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

// Header-only NVTX 3: with no profiler attached, each call checks an injection pointer.
void nvtx_push(const char* name) { nvtxRangePushA(name); }
void nvtx_pop() { nvtxRangePop(); }

}  // namespace

void register_cuda_backend() {
  register_backend(DeviceType::CUDA, DeviceBackend{
                                         .kernels = &kKernels,
                                         .nn = &cuda::kNnKernels,
                                         .device_count = cuda::runtime_device_count,
                                         .allocator = cuda::device_allocator,
                                         .pinned_host_allocator = cuda::pinned_allocator,
                                         .ranges = {.push = nvtx_push, .pop = nvtx_pop},
                                         .gpu_timer = cuda::gpu_timer(),
                                         .sync_stream = cuda::sync_stream,
                                         .check_index = cuda::check_index,
                                     });
}

}  // namespace mantissa
