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
const Backend kKernels{MT_BACKEND_KERNELS(MT_BACKEND_TABLE_ENTRY)};
const NnKernels kNnKernels{MT_NN_KERNELS(MT_NN_TABLE_ENTRY)};
}  // namespace
}  // namespace cuda

namespace {

// Header-only NVTX 3: with no profiler attached, each call checks an injection pointer.
void nvtx_push(const char* name) { nvtxRangePushA(name); }
void nvtx_pop() { nvtxRangePop(); }

}  // namespace

void register_cuda_backend() {
  register_backend(DeviceType::CUDA, DeviceBackend{
                                         .kernels = &cuda::kKernels,
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
