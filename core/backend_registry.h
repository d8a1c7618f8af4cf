// The device backends. The CPU's kernels are built into core; every other device library
// (cuda/) fills one DeviceBackend and registers it at load through the list of backends that
// CMake generates for the build (cmake/backends.cpp.in), so core names no device symbol.
#pragma once
#include <cstdint>

#include "core/device.h"
#include "core/profiler.h"

namespace mantissa {

struct Backend;
struct NnKernels;
class Allocator;
class Tensor;

struct DeviceBackend {
  const Backend* kernels = nullptr;  // the op table (core/backend.h)
  const NnKernels* nn = nullptr;     // the nn kernel table (core/nn_kernels.h)
  int (*device_count)() = nullptr;   // devices present at run time (0: no device or driver)
  Allocator* (*allocator)(int index) = nullptr;
  Allocator* (*pinned_host_allocator)() = nullptr;  // page-locked host memory, or nullptr
  profiler::Hooks ranges;                           // where profiler ranges go by default (NVTX), if anywhere
  profiler::GpuTimer gpu_timer;                     // device time of ops for profiler::Profile, if available
  // Waits for the current stream of device `index` (Tensor::to with non_blocking = false).
  void (*sync_stream)(int index) = nullptr;
  // launch::check_index_range on the device (core/index_check.h): queues the check of
  // index (int64, contiguous) against [0, bound) (or == ignore when has_ignore), recording
  // `code` in the device's sticky error record.
  void (*check_index)(const Tensor& index, int64_t bound, bool has_ignore, int64_t ignore, int32_t code) = nullptr;
};

// Makes `backend` the one for `type`; called by the generated list before main().
void register_backend(DeviceType type, const DeviceBackend& backend);
// The backend registered for `type`, or nullptr when this build has none.
const DeviceBackend* find_backend(DeviceType type);

}  // namespace mantissa
