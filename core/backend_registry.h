// The device backends. The CPU's kernels are built into core; every other device library
// (cuda/) fills one DeviceBackend and registers it at load through the list of backends that
// CMake generates for the build (cmake/backends.cpp.in), so core names no device symbol.
#pragma once
#include "core/device.h"
#include "core/profiler.h"

namespace mantissa {

struct Backend;
struct NnKernels;
class Allocator;

struct DeviceBackend {
  const Backend* kernels = nullptr;  // the op table (core/backend.h)
  const NnKernels* nn = nullptr;     // the nn kernel table (core/nn_kernels.h)
  int (*device_count)() = nullptr;   // devices present at run time (0: no device or driver)
  Allocator* (*allocator)(int index) = nullptr;
  Allocator* (*pinned_host_allocator)() = nullptr;  // page-locked host memory, or nullptr
  profiler::Hooks ranges;                           // where profiler ranges go by default (NVTX), if anywhere
  profiler::GpuTimer gpu_timer;                     // device time of ops for profiler::Profile, if available
};

// Makes `backend` the one for `type`; called by the generated list before main().
void register_backend(DeviceType type, const DeviceBackend& backend);
// The backend registered for `type`, or nullptr when this build has none.
const DeviceBackend* find_backend(DeviceType type);

}  // namespace mantissa
