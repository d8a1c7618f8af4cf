// The CUDA caching allocators (device memory per device, and pinned host memory), and
// the stream bookkeeping that makes reuse of a freed block safe. Internal to cuda/.
//
// Reuse rule: a block is allocated on the current stream of its device and, once freed,
// is handed out again only to an allocation on that same stream: work on one stream runs
// in order, so the new owner's kernels start after the old owner's finished. A block
// that was also used on other streams (record_stream) waits, after being freed, until
// events recorded on those streams, each on its own device, have completed
// (core/block_reuse.h keeps that bookkeeping).
#pragma once
#include <cuda_runtime.h>

#include "core/allocator.h"

namespace mantissa::cuda {

// The caching allocator of `device` (also returned by allocator_for(Device::cuda(device))).
Allocator* device_allocator(int device);

// Marks the live device block at `ptr` as used by work queued on `stream`.
void record_stream(int device, void* ptr, cudaStream_t stream);

// Page-locked host memory (cudaHostAlloc), cached like device memory. Copies from or to
// it can be asynchronous; record_pinned_use() then keeps a freed block from being reused
// before the copy queued on `stream` of `device` has completed.
Allocator* pinned_allocator();
void record_pinned_use(void* ptr, int device, cudaStream_t stream);

}  // namespace mantissa::cuda
