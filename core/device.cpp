#include "core/device.h"

#include "core/backend_registry.h"
#include "core/error.h"
#include "core/profiler.h"

namespace mantissa {

int cuda_device_count() {
  static const int n = [] {
    const DeviceBackend* cuda = find_backend(DeviceType::CUDA);
    const int count = cuda ? cuda->device_count() : 0;
    // Profiler ranges are on by default when there is a GPU to profile (core/profiler.h).
    if (count > 0) profiler::set_default(true);
    return count;
  }();
  return n;
}

Device Device::best() { return cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu(); }

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    try {
      size_t used = 0;
      int i = std::stoi(s.substr(5), &used);
      if (used == s.size() - 5 && i >= 0) return cuda(i);
    } catch (const std::exception&) {
    }
  }
  MT_FAIL("Device", "cannot parse device '", s, "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

}  // namespace mantissa
