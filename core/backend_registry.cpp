#include "core/backend_registry.h"

#include <array>
#include <atomic>

namespace mantissa {

// Defined in the file CMake generates from cmake/backends.cpp.in: calls register_backend for
// each device library compiled into this build (none in a CPU-only build).
void register_builtin_backends();

namespace {

std::array<std::atomic<const DeviceBackend*>, kNumDeviceTypes> g_backends{};

void ensure_registered() {
  static const bool once = (register_builtin_backends(), true);
  (void)once;
}
// Before main(), so that the default profiler hooks are in place before a program installs its own.
[[maybe_unused]] const bool g_registered_at_load = (ensure_registered(), true);

}  // namespace

void register_backend(DeviceType type, const DeviceBackend& backend) {
  g_backends[size_t(type)].store(new DeviceBackend(backend));  // lives as long as the process
  if (backend.ranges.push != nullptr) profiler::install_default_hooks(backend.ranges);
  if (backend.gpu_timer.start != nullptr) profiler::set_gpu_timer(backend.gpu_timer);
}

const DeviceBackend* find_backend(DeviceType type) {
  ensure_registered();
  return g_backends[size_t(type)].load();
}

}  // namespace mantissa
