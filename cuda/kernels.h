// The CUDA row of the dispatch table (contracts in core/backend.h). Plain C++: the
// launchers behind these declarations live in the .cu files of cuda/.
#pragma once
#include "core/backend.h"

namespace mantissa::cuda {
// The table's kernels (generated from the list in core/backend.h). copy: any direction
// (host->device, device->host, device->device on the same or another GPU); fused_optimizer_step
// and update_scale live in cuda/amp_step.cu.
MT_BACKEND_KERNELS(MT_BACKEND_DECLARATION)
// Waits for the current stream of `device` (counted, core/host_sync.h).
void sync_stream(int device);
// src and dst on the same GPU; converts dtype, broadcasts src, any strides.
void copy_same_device(const Tensor& src, const Tensor& dst);
}  // namespace mantissa::cuda
