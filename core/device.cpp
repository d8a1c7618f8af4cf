#include "core/device.h"

#include <cstdlib>

#include "core/backend_registry.h"
#include "core/error.h"
#include "core/profiler.h"

namespace mantissa {

int cuda_device_count() {
  static const int n = [] {
    const DeviceBackend* cuda = find_backend(DeviceType::CUDA);
    const int count = cuda ? cuda->device_count() : 0;
    // NVTX ranges (and the per-op work behind them) are on by default only when a GPU is
    // there and an NVTX tool is attached: nsys and ncu load theirs through
    // NVTX_INJECTION64_PATH (core/profiler.h).
    const char* tool = std::getenv("NVTX_INJECTION64_PATH");
    if (count > 0 && tool != nullptr && *tool != '\0') profiler::set_default(true);
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
